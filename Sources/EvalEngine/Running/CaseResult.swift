import Foundation
public import TraceCore

/// Whether a case's repeats agree.
public enum Stability: String, Sendable {
    case stablePass = "stable_pass"
    case flaky
    case stableFail = "stable_fail"
}

/// What a case's attempts add up to (docs/eval-cases.md, "Attempts and outcomes"): every
/// attempt passed, none did, or some did — then the case's `minPassRate` (every attempt, unless
/// the case says less) decides whether the gate takes it as passed. A case whose attempt could
/// not run is `error`, apart from every quality outcome.
public enum CaseOutcome: String, Sendable, CaseIterable {
    case pass
    /// Some attempts failed, but the pass rate reached the case's `minPassRate`: the gate passes
    /// it, and every report shows it as flaky.
    case flakyPass = "flaky_pass"
    /// Some attempts passed, too few for the case's `minPassRate`: a failure.
    case flakyFail = "flaky_fail"
    case fail
    /// The case, or one of its attempts, could not run (a harness problem, not a quality one).
    case error

    /// Whether the gate takes the case as passed.
    public var passes: Bool { self == .pass || self == .flakyPass }

    /// Reads a report's `outcome`; nil for an unknown word.
    public init?(reported: String) { self.init(rawValue: reported) }
}

/// Everything one case produced.
public struct CaseResult: Sendable {
    public var evalCase: EvalCase
    public var runs: [RunResult]
    /// Why the case could not run at all (no log matched, the agent file is broken).
    public var error: DiagnosticRecord?

    public init(evalCase: EvalCase, runs: [RunResult], error: DiagnosticRecord? = nil) {
        self.evalCase = evalCase
        self.runs = runs
        self.error = error
    }

    public var id: String { evalCase.id }

    /// The run logs a live case wrote, in order: each run's log, and for a live pipeline the
    /// child run log of each agent attempt (the pipeline log itself is not a run log). Empty for
    /// a case over recorded logs.
    public var writtenRunLogs: [String] {
        guard evalCase.isLive else { return [] }
        return runs.flatMap { run in evalCase.expected.pipeline == nil ? [run.logPath] : Self.childRunLogs(ofPipelineLog: run.logPath) }
    }

    /// The child run logs a pipeline run wrote beside its log (`tasks/*.jsonl.gz`), by name.
    public static func childRunLogs(ofPipelineLog path: String) -> [String] {
        let tasks = (path as NSString).deletingLastPathComponent + "/tasks"
        let children = (try? FileManager.default.contentsOfDirectory(atPath: tasks)) ?? []
        return children.filter { $0.hasSuffix(".jsonl.gz") }.sorted().map { "\(tasks)/\($0)" }
    }

    /// A harness problem in the case or any of its runs.
    public var harnessError: DiagnosticRecord? { error ?? runs.first(where: { $0.error != nil })?.error }

    /// Whether the gate takes the case as passed: `pass` or `flaky_pass`.
    public var passed: Bool { outcome.passes }

    /// The attempts are repeats of one run (a live case, or logs recorded as repeats — a
    /// recorded case with `minPassRate`): a mix of passes and failures is flakiness. Any other
    /// recorded case's runs are different logs, each of which must pass.
    public var attemptsAreRepeats: Bool { evalCase.isLive || evalCase.logsAreRepeats }

    public var outcome: CaseOutcome {
        if harnessError != nil || runs.isEmpty { return .error }
        return Self.outcome(of: counts, minPassRate: evalCase.minPassRate, repeats: attemptsAreRepeats)
    }

    /// The documented rule: every attempt passed is `pass`, none is `fail`; a mix is
    /// `flaky_pass` when the attempts are repeats and the rate reached `minPassRate`, else
    /// `flaky_fail` (repeats) or `fail` (different logs).
    static func outcome(of counts: PassCounts, minPassRate: Double, repeats: Bool) -> CaseOutcome {
        if counts.attempts == 0 { return .error }
        if counts.passes == counts.attempts { return .pass }
        if counts.passes == 0 { return .fail }
        guard repeats else { return .fail }
        return counts.rate >= minPassRate - 1e-12 ? .flakyPass : .flakyFail
    }

    /// The runs that passed; none when the case itself could not be checked (`error`: a tool it
    /// names that no run has, say), whatever its runs' own checks said.
    public var passCount: Int { error == nil ? runs.filter(\.passed).count : 0 }

    /// Passes out of the attempts that ran: an attempt that could not run is a harness problem
    /// and counts in neither, and so does every attempt of a case that could not be checked.
    public var counts: PassCounts {
        PassCounts(passes: passCount, attempts: error == nil ? runs.filter { $0.error == nil }.count : 0)
    }

    public var passRate: Double { counts.rate }

    /// Over the attempts that ran, as `counts`: an attempt that could not run is no failure
    /// of the agent's, so it makes no case flaky.
    public var stability: Stability {
        let counts = counts
        switch counts.passes {
        case counts.attempts where counts.attempts > 0: return .stablePass
        case 0: return .stableFail
        default: return .flaky
        }
    }

    /// Where the judge gave different verdicts on the same thing across the rounds a recorded
    /// log was judged in (`--repeat`): per log, expectation and call, in the order first asked.
    public var judgeDisagreements: [JudgeDisagreement] {
        var order: [String] = []
        var tallies: [String: JudgeDisagreement] = [:]
        for run in runs {
            for judgement in run.judgements {
                guard let passed = judgement.passed else { continue }
                let key = "\(run.logPath)\n\(judgement.expectation)\n\(judgement.callId ?? "")"
                if tallies[key] == nil {
                    order.append(key)
                    tallies[key] = JudgeDisagreement(
                        log: run.logPath, expectation: judgement.expectation, callId: judgement.callId, passed: 0, rounds: 0)
                }
                tallies[key]?.rounds += 1
                if passed { tallies[key]?.passed += 1 }
            }
        }
        return order.compactMap { tallies[$0] }.filter { $0.passed > 0 && $0.passed < $0.rounds }
    }

    /// Probability that at least one of k runs drawn without replacement passes, over the
    /// attempts that ran (`counts`), as the pass rate is.
    public func passAtK(_ k: Int) -> Double { PassEstimator.passAtK(n: counts.attempts, c: counts.passes, k: k) }

    /// Probability that all of k runs drawn without replacement pass (tau-bench's pass^k), over
    /// the attempts that ran.
    public func passHatK(_ k: Int) -> Double { PassEstimator.passHatK(n: counts.attempts, c: counts.passes, k: k) }
}
