import Foundation
public import TraceCore

/// Whether a case's repeats agree.
public enum Stability: String, Sendable {
    case stablePass = "stable_pass"
    case flaky
    case stableFail = "stable_fail"
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

    public var passed: Bool { harnessError == nil && !runs.isEmpty && runs.allSatisfy(\.passed) }

    public var passCount: Int { runs.filter(\.passed).count }

    public var passRate: Double { runs.isEmpty ? 0 : Double(passCount) / Double(runs.count) }

    public var stability: Stability {
        switch passCount {
        case runs.count where !runs.isEmpty: return .stablePass
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

    /// Probability that at least one of k runs drawn without replacement passes.
    public func passAtK(_ k: Int) -> Double { PassEstimator.passAtK(n: runs.count, c: passCount, k: k) }

    /// Probability that all of k runs drawn without replacement pass (tau-bench's pass^k).
    public func passHatK(_ k: Int) -> Double { PassEstimator.passHatK(n: runs.count, c: passCount, k: k) }
}
