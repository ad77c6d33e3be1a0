public import AgentRuntime
import ConfigFile
import Foundation
import Synchronization
import TraceCore
import TraceLog

/// How a suite is run.
public struct EvalOptions: Sendable {
    /// Runs checked or executed at the same time (default: the core count).
    public var jobs: Int
    /// Repeats of each live case.
    public var repeats: Int
    /// The agent for cases that name none.
    public var defaultAgent: String?
    /// Where live runs write their logs.
    public var outputDirectory: String
    /// Makes `toolsNotCalled` fail on denied attempts too, in every case.
    public var countsDeniedAttempts: Bool
    /// Time and ids for live runs (tests inject a deterministic one).
    public var environment: RuntimeEnvironment

    public init(
        jobs: Int? = nil, repeats: Int = 1, defaultAgent: String? = nil,
        outputDirectory: String = "runs/eval", countsDeniedAttempts: Bool = false, environment: RuntimeEnvironment = .live
    ) {
        self.jobs = max(1, jobs ?? ProcessInfo.processInfo.activeProcessorCount)
        self.repeats = max(1, repeats)
        self.defaultAgent = defaultAgent
        self.outputDirectory = outputDirectory
        self.countsDeniedAttempts = countsDeniedAttempts
        self.environment = environment
    }
}

/// Runs eval cases: checks recorded logs offline and runs live cases through the runtime,
/// `jobs` at a time, and reports each case as it finishes.
public struct EvalRunner: Sendable {
    public var options: EvalOptions

    public init(options: EvalOptions) {
        self.options = options
    }

    /// One unit of work: a recorded log, or one repeat of a live case.
    enum Work: Sendable {
        case recorded(caseIndex: Int, log: String)
        case live(caseIndex: Int, agent: String, repeatIndex: Int)
        /// The case could not be expanded into runs.
        case broken(caseIndex: Int, error: DiagnosticRecord)
    }

    /// Runs `cases`; `progress` is called once per finished case, in completion order. The
    /// result lists cases in the order given.
    public func run(
        _ cases: [EvalCase], progress: @Sendable (_ index: Int, CaseResult, _ done: Int, _ total: Int) -> Void = { _, _, _, _ in }
    ) async
        -> [CaseResult]
    {
        var work: [Work] = []
        var expected = [Int](repeating: 0, count: cases.count)
        for (index, evalCase) in cases.enumerated() {
            switch evalCase.source {
            case .recorded(let patterns):
                var logs: [String] = []
                var missing: [String] = []
                for pattern in patterns {
                    let found = EvalSuite.expand(pattern)
                    if found.isEmpty { missing.append(pattern) }
                    logs.append(contentsOf: found)
                }
                if !missing.isEmpty {
                    work.append(
                        .broken(
                            caseIndex: index,
                            error: DiagnosticRecord(
                                EvalError(.missingPath, "no log matches \(missing.joined(separator: ", "))", location: evalCase.location))))
                } else {
                    work.append(contentsOf: logs.map { .recorded(caseIndex: index, log: $0) })
                }
            case .live(let agent, _, _):
                work.append(contentsOf: (1...options.repeats).map { .live(caseIndex: index, agent: agent, repeatIndex: $0) })
            case .defaultAgent:
                if let agent = options.defaultAgent {
                    work.append(contentsOf: (1...options.repeats).map { .live(caseIndex: index, agent: agent, repeatIndex: $0) })
                } else {
                    work.append(
                        .broken(
                            caseIndex: index,
                            error: DiagnosticRecord(
                                EvalError(
                                    .badCase, "case \"\(evalCase.id)\" names no agent and no logs", location: evalCase.location,
                                    hint: "add agent: or logs: to it, or give the runner a default agent"))))
                }
            }
        }
        for item in work {
            switch item {
            case .recorded(let index, _), .live(let index, _, _), .broken(let index, _): expected[index] += 1
            }
        }

        var results = cases.map { CaseResult(evalCase: $0, runs: []) }
        var received = [Int](repeating: 0, count: cases.count)
        var finished = 0
        let agents = AgentCache()
        await withTaskGroup(of: (Int, RunResult?, DiagnosticRecord?).self) { group in
            var next = 0
            func startNext() {
                guard next < work.count else { return }
                let item = work[next]
                next += 1
                group.addTask { [options] in
                    switch item {
                    case .broken(let index, let error): return (index, nil, error)
                    case .recorded(let index, let log): return (index, Self.check(log: log, case: cases[index], options: options), nil)
                    case .live(let index, let agent, let repeatIndex):
                        return (
                            index,
                            await Self.runLive(cases[index], agentPath: agent, repeatIndex: repeatIndex, agents: agents, options: options),
                            nil
                        )
                    }
                }
            }
            for _ in 0..<options.jobs { startNext() }
            for await (index, run, error) in group {
                if let run { results[index].runs.append(run) }
                if let error { results[index].error = error }
                received[index] += 1
                if received[index] == expected[index] {
                    results[index].runs.sort { ($0.repeatIndex, $0.logPath) < ($1.repeatIndex, $1.logPath) }
                    finished += 1
                    progress(index, results[index], finished, cases.count)
                }
                startNext()
            }
        }
        return results
    }

    /// Reads and folds one recorded log and checks it.
    static func check(log: String, case evalCase: EvalCase, options: EvalOptions) -> RunResult {
        var state = RunState()
        do {
            let summary = try LogReader(path: log).forEachEvent { RunState.reduce(into: &state, $0.event) }
            return evaluate(state, log: log, repeatIndex: 0, case: evalCase, options: options, tear: summary.tear.map { "\($0)" })
        } catch {
            return RunResult(logPath: log, repeatIndex: 0, failures: [], notes: [], error: record(error), summary: RunSummary(state))
        }
    }

    static func evaluate(_ state: RunState, log: String, repeatIndex: Int, case evalCase: EvalCase, options: EvalOptions, tear: String?)
        -> RunResult
    {
        var expected = evalCase.expected
        if options.countsDeniedAttempts { expected.countsDeniedAttempts = true }
        var (failures, notes) = TrajectoryCheck.check(expected, against: state)
        if let tear { notes.append(CheckNote(message: "the log is torn: \(tear)", step: state.step)) }
        var summary = RunSummary(state)
        summary.tear = tear
        return RunResult(logPath: log, repeatIndex: repeatIndex, failures: failures, notes: notes, error: nil, summary: summary)
    }

    /// Runs a live case once (resuming it with the case's approvals when it stops for one)
    /// and checks the log it wrote.
    static func runLive(_ evalCase: EvalCase, agentPath: String, repeatIndex: Int, agents: AgentCache, options: EvalOptions) async
        -> RunResult
    {
        let log = "\(options.outputDirectory)/\(evalCase.id)-\(repeatIndex).jsonl.gz"
        let agent: Agent
        do {
            agent = try agents.agent(at: agentPath)
        } catch {
            return RunResult(logPath: log, repeatIndex: repeatIndex, failures: [], notes: [], error: record(error), summary: RunSummary())
        }
        var approve: [String] = []
        var deny: [String] = []
        switch evalCase.source {
        case .live(_, let yes, let no), .defaultAgent(let yes, let no):
            approve = yes
            deny = no
        case .recorded: break
        }
        do {
            try? FileManager.default.removeItem(atPath: log)
            let runtime = AgentRuntime(agent: agent, environment: options.environment)
            let outcome = try await runtime.resumeWhileDecided(try await runtime.run(goal: evalCase.input ?? "", log: log)) { waiting in
                guard waiting.allSatisfy({ approve.contains($0.id) || deny.contains($0.id) }) else { return nil }
                return waiting.map { ApprovalRecorded(callId: $0.id, isGranted: approve.contains($0.id), approver: "agent-eval run") }
            }
            return evaluate(outcome.state, log: log, repeatIndex: repeatIndex, case: evalCase, options: options, tear: nil)
        } catch {
            return RunResult(logPath: log, repeatIndex: repeatIndex, failures: [], notes: [], error: record(error), summary: RunSummary())
        }
    }
}

/// Agent files loaded once per run of the suite, shared by the cases that use them.
final class AgentCache: Sendable {
    // Guarded by the mutex: loaded agents, or the error loading gave.
    private let loaded = Mutex<[String: Result<Agent, ConfigError>]>([:])

    func agent(at path: String) throws(ConfigError) -> Agent {
        if let cached = loaded.withLock({ $0[path] }) { return try cached.get() }
        let result = Result { () throws(ConfigError) in try AgentFile.load(path: path) }
        loaded.withLock { $0[path] = result }
        return try result.get()
    }
}

/// Any error as a diagnostic record: ours keep their code, place and hint; others (from the
/// system) their sentence.
func record(_ error: any Error) -> DiagnosticRecord {
    if let diagnostic = error as? any Diagnostic { return DiagnosticRecord(diagnostic) }
    return DiagnosticRecord(code: "system.error", message: (error as NSError).localizedDescription)
}
