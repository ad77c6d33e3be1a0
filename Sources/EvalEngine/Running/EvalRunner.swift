public import AgentRuntime
import ConfigFile
import Foundation
import Synchronization
import TraceCore
public import TraceLog

/// How a suite is run.
public struct EvalOptions: Sendable {
    /// Runs checked or executed at the same time (default: the core count).
    public var jobs: Int
    /// Repeats of each live case.
    public var repeats: Int
    /// `--repeat auto`: each live case runs again only while its verdict is undecided, up to
    /// `maxRepeats` attempts (`repeats` is then unused for live cases).
    public var adaptive: AdaptiveRepeats?
    /// The agent for cases that name none.
    public var defaultAgent: String?
    /// Where live runs write their logs.
    public var outputDirectory: String
    /// Makes `toolsNotCalled` fail on denied attempts too, in every case.
    public var countsDeniedAttempts: Bool
    /// Time and ids for live runs (tests inject a deterministic one).
    public var environment: RuntimeEnvironment
    /// How agent files get HTTP models (the CLI's factory) and the command line's overrides.
    public var models = ModelOptions()
    /// What starts the MCP servers agent files declare (the CLI's `MCPServers`); nil refuses them.
    public var toolServers: (any ToolServerConnector)?
    /// Where recorded logs' facts come from: read every time, or a cache (the catalog's).
    public var facts: any LogFactSource = LogFactReader()
    /// The judge of rubrics that name none (`--judge-model`); judges served over HTTP are made
    /// by `models.factory`.
    public var judgeModel: ModelSource?
    /// The model options for a case that names a cassette directory (`cassette:` in its file):
    /// `models` with that cassette (the CLI's, with `--record`). Nil: such a case cannot run.
    public var cassetteModels: (@Sendable (_ directory: String) throws -> ModelOptions)?
    /// What starts the MCP servers of a case that names a cassette directory: through that
    /// cassette (the CLI's `MCPServers`, with `--record`); nil: `toolServers`.
    public var cassetteToolServers: (@Sendable (_ directory: String) -> any ToolServerConnector)?
    /// What runs `command:` cases through the recording model gateway (the CLI's); nil: such a
    /// case cannot run.
    public var commands: (any CommandCaseRecorder)?
    /// What is done with the run logs a live case writes (the CLI's: index them in the catalog):
    /// called with each live run's logs (a pipeline's child runs) as soon as the run has closed
    /// them, before they are graded, once each. The catalog's index makes a log's facts in the
    /// read it makes anyway, so the grading that follows takes them from the catalog: a freshly
    /// written log is folded once.
    public var finishedLogs: (any FinishedLogSink)?
    /// How conversation cases' model-played users speak (`--user`): asked (`strict`, through the
    /// case's cassette), or `frozen` — their recorded turns replayed whatever the agent says now.
    public var userMode: UserMode = .strict

    /// `--user`: how a conversation's model-played user speaks.
    public enum UserMode: String, Sendable, CaseIterable {
        /// Its model is asked each turn (from the cassette when it replays): a request the
        /// cassette does not hold is a miss.
        case strict
        /// The turns its model gave when the cassette was recorded are said again, whatever the
        /// agent says; the first turn recorded after another conversation is noted.
        case frozen
    }

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

    /// One unit of work: a batch of a case's recorded logs (each judged again in each repeat
    /// when the case has rubrics), or one repeat of a live or pipeline case.
    enum Work: Sendable {
        /// Recorded logs of one case, checked one after another in one task: a check answered
        /// from the fact cache takes microseconds, less than a task of its own costs.
        case recorded(caseIndex: Int, logs: [(log: String, repeatIndex: Int)])
        case live(caseIndex: Int, agent: String, repeatIndex: Int)
        /// One repeat of a pipeline case.
        case pipeline(caseIndex: Int, file: String, repeatIndex: Int)
        /// One repeat of a command case.
        case command(caseIndex: Int, command: ExternalCommand, repeatIndex: Int)
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
        // Cases that share a log pattern list its folder once.
        var expanded: [String: [String]] = [:]
        for (index, evalCase) in cases.enumerated() {
            switch evalCase.source {
            case .recorded(let patterns):
                var logs: [String] = []
                var missing: [String] = []
                // A file named twice (patterns that overlap, a link to a log also named) is one run,
                // checked once: counted twice, it made a pass rate of 1 in 2 read 2 in 3. A file is
                // known by its identity, from one stat (resolving each path's links walked every
                // folder on it, 2-3% of checking a suite of small logs); one gone since it was
                // listed by its path, to fail once, as itself.
                var files = Set<FileIdentity>()
                var gone = Set<String>()
                for pattern in patterns {
                    let found = expanded[pattern] ?? EvalSuite.expand(pattern)
                    expanded[pattern] = found
                    if found.isEmpty { missing.append(pattern) }
                    logs.append(
                        contentsOf: found.filter { path in
                            FileIdentity(path: path).map { files.insert($0).inserted } ?? gone.insert(path).inserted
                        })
                }
                if !missing.isEmpty {
                    work.append(
                        .broken(
                            caseIndex: index,
                            error: DiagnosticRecord(
                                EvalError(
                                    .missingPath, "no log matches \(missing.joined(separator: ", "))",
                                    location: evalCase.location(ofKey: "logs"), hint: EvalSuite.missingLogsHint))))
                } else {
                    // A log's trajectory is the same every time; its judges' verdicts may not be.
                    let repeats = evalCase.expected.allRubrics.isEmpty || options.repeats == 1 ? [0] : Array(1...options.repeats)
                    let checks = logs.flatMap { log in repeats.map { (log: log, repeatIndex: $0) } }
                    // Batches small enough that every job gets several (a few big logs still spread
                    // over the jobs), and at most 16 logs.
                    let batch = min(16, max(1, checks.count / (options.jobs * 8)))
                    for start in stride(from: 0, to: checks.count, by: batch) {
                        work.append(.recorded(caseIndex: index, logs: Array(checks[start..<min(start + batch, checks.count)])))
                    }
                }
            case .live, .pipeline, .command, .defaultAgent:
                // Adaptive repeats start with one attempt and add one while the verdict is open.
                let first = options.adaptive == nil ? options.repeats : 1
                let attempts = (1...first).compactMap { attempt(of: evalCase, index: index, repeatIndex: $0) }
                if !attempts.isEmpty {
                    work.append(contentsOf: attempts)
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
        var uses: [String: Int] = [:]
        for item in work {
            switch item {
            case .recorded(let index, let logs):
                expected[index] += logs.count
                for (log, _) in logs { uses[log, default: 0] += 1 }
            case .live(let index, _, _), .pipeline(let index, _, _), .command(let index, _, _), .broken(let index, _):
                expected[index] += 1
            }
        }
        // A log that several cases check is read once.
        var options = options
        options.facts = SharedLogFacts(base: options.facts, uses: uses)

        // What a cache keeps check results under: one key per case with recorded logs. A judged
        // result is never kept: the judge is asked every time.
        let cached = cases.map { evalCase in
            if case .recorded = evalCase.source { return evalCase.expected.allRubrics.isEmpty }
            return false
        }
        let keys = zip(CheckKey.keys(for: cases, options: options), cached).map { key, isCached in isCached ? key : nil }
        var results = cases.map { CaseResult(evalCase: $0, runs: []) }
        var received = [Int](repeating: 0, count: cases.count)
        var finished = 0
        let agents = AgentCache(
            models: options.models, toolServers: options.toolServers, cassetteModels: options.cassetteModels,
            cassetteToolServers: options.cassetteToolServers, frozenUsers: options.userMode == .frozen ? FrozenUserLedger() : nil)
        let judge = RubricJudge(factory: options.models.factory, defaultModel: options.judgeModel)
        await withTaskGroup(of: (Int, [RunResult], DiagnosticRecord?).self) { group in
            var next = 0
            func startNext() {
                // Cancelled (Ctrl-C, SIGTERM): what runs stops at its next step and nothing new
                // starts; the cases left are reported as interrupted.
                guard next < work.count, !Task.isCancelled else { return }
                let item = work[next]
                next += 1
                group.addTask { [options] in
                    switch item {
                    case .broken(let index, let error): return (index, [], error)
                    case .recorded(let index, let logs):
                        var runs: [RunResult] = []
                        runs.reserveCapacity(logs.count)
                        for (log, repeatIndex) in logs {
                            runs.append(
                                await Self.check(
                                    log: log, repeatIndex: repeatIndex, case: cases[index], key: keys[index], options: options, judge: judge
                                ))
                        }
                        return (index, runs, nil)
                    case .live(let index, let agent, let repeatIndex):
                        return (
                            index,
                            [
                                await Self.runLive(
                                    cases[index], agentPath: agent, repeatIndex: repeatIndex, agents: agents, options: options, judge: judge
                                )
                            ],
                            nil
                        )
                    case .command(let index, let command, let repeatIndex):
                        return (
                            index,
                            [
                                await Self.runCommand(
                                    cases[index], command: command, repeatIndex: repeatIndex, agents: agents, options: options,
                                    judge: judge)
                            ],
                            nil
                        )
                    case .pipeline(let index, let file, let repeatIndex):
                        return (
                            index,
                            [
                                await Self.runPipeline(
                                    cases[index], file: file, repeatIndex: repeatIndex, agents: agents, options: options, judge: judge)
                            ],
                            nil
                        )
                    }
                }
            }
            for _ in 0..<options.jobs { startNext() }
            for await (index, runs, error) in group {
                results[index].runs.append(contentsOf: runs)
                if let error { results[index].error = error }
                received[index] += max(1, runs.count)
                if received[index] == expected[index], let adaptive = options.adaptive, !Task.isCancelled,
                    results[index].evalCase.isLive, !adaptive.isDecided(results[index]),
                    let next = attempt(of: cases[index], index: index, repeatIndex: results[index].runs.count + 1)
                {
                    work.append(next)
                    expected[index] += 1
                }
                if received[index] == expected[index] {
                    results[index].runs.sort { ($0.repeatIndex, $0.logPath) < ($1.repeatIndex, $1.logPath) }
                    if results[index].error == nil {
                        results[index].error = Self.sameRunTwice(in: results[index]) ?? Self.unknownTool(in: results[index])
                    }
                    finished += 1
                    progress(index, results[index], finished, cases.count)
                }
                startNext()
            }
        }
        for index in results.indices where received[index] < expected[index] && results[index].error == nil {
            results[index].error = DiagnosticRecord(
                EvalError(
                    .interrupted,
                    "the suite was interrupted before this case's runs were done (\(received[index]) of \(counted(expected[index], "run")))",
                    location: cases[index].location))
        }
        options.facts.flush()
        return results
    }

    /// Attempt `repeatIndex` of a live case (an agent, a pipeline, a command); nil for a recorded
    /// case, or a case without an agent when the runner has no default one.
    func attempt(of evalCase: EvalCase, index: Int, repeatIndex: Int) -> Work? {
        switch evalCase.source {
        case .live(let agent, _, _): return .live(caseIndex: index, agent: agent, repeatIndex: repeatIndex)
        case .pipeline(let file): return .pipeline(caseIndex: index, file: file, repeatIndex: repeatIndex)
        case .command(let command): return .command(caseIndex: index, command: command, repeatIndex: repeatIndex)
        case .defaultAgent: return options.defaultAgent.map { .live(caseIndex: index, agent: $0, repeatIndex: repeatIndex) }
        case .recorded: return nil
        }
    }

    /// Reads and folds one log, checking every recorded state digest on the way, and checks
    /// the case against it. A run whose record cannot be trusted — its digests do not match,
    /// the fold found anomalies, or it did not finish (unless the case allows that) — is a
    /// harness error ("could not run"), never a pass.
    static func check(
        log: String, repeatIndex: Int = 0, case evalCase: EvalCase, key: CheckKey? = nil, options: EvalOptions, judge: RubricJudge
    ) async -> RunResult {
        let clock = ContinuousClock()
        let started = clock.now
        var result = await checkRecord(log: log, repeatIndex: repeatIndex, case: evalCase, key: key, options: options, judge: judge)
        let elapsed = started.duration(to: clock.now)
        result.checkDurationUs = Int(elapsed.components.seconds) * 1_000_000 + Int(elapsed.components.attoseconds / 1_000_000_000_000)
        return result
    }

    /// Asks the fact source where it may wait: on one of `factThreads` when it waits on a
    /// network (`waitsOnNetwork`), else here.
    private static func askingFacts<T: Sendable>(_ options: EvalOptions, _ body: @escaping @Sendable () throws -> T) async throws -> T {
        guard options.facts.waitsOnNetwork else { return try body() }
        return try await factThreads.run(body)
    }

    /// The threads a catalog on a server is asked from (`askingFacts`).
    static let factThreads = JobThreads(
        count: max(2, ProcessInfo.processInfo.activeProcessorCount), name: "agent-eval catalog lookups", stackSize: 1 << 20)

    private static func checkRecord(
        log: String, repeatIndex: Int, case evalCase: EvalCase, key: CheckKey?, options: EvalOptions, judge: RubricJudge
    ) async -> RunResult {
        if let pipeline = evalCase.expected.pipeline {
            return await checkPipeline(pipeline, log: log, repeatIndex: repeatIndex, case: evalCase, options: options, judge: judge)
        }
        do {
            guard !evalCase.expected.rubrics.isEmpty else {
                return try await askingFacts(options) {
                    try options.facts.result(for: log, key: key) { facts in
                        check(facts, log: log, repeatIndex: repeatIndex, case: evalCase, options: options)
                    }
                }
            }
            // The trajectory first; the judges only grade a run whose record can be trusted.
            let facts = try await askingFacts(options) { try options.facts.facts(for: log) }
            var result = check(facts, log: log, repeatIndex: repeatIndex, case: evalCase, options: options)
            guard result.error == nil else { return result }
            let grade = await judge.grade(evalCase.expected, state: facts.state, round: repeatIndex)
            result.failures += grade.failures
            result.judgements = grade.judgements
            result.error = grade.error
            return result
        } catch {
            return RunResult(
                logPath: log, repeatIndex: repeatIndex, failures: [], notes: [], error: DiagnosticRecord(describing: error),
                summary: RunSummary())
        }
    }

    /// Checks a case against the facts of one log.
    private static func check(_ facts: LogFacts, log: String, repeatIndex: Int, case evalCase: EvalCase, options: EvalOptions)
        -> RunResult
    {
        let state = facts.state
        let evidence = Evidence.of(facts, log: log, case: evalCase)
        if let error = evidence.cannotRun {
            var summary = RunSummary(state)
            summary.tear = facts.tear.map { "\($0)" }
            return RunResult(logPath: log, repeatIndex: repeatIndex, failures: [], notes: [], error: error, summary: summary)
        }
        // Reused call ids, when the case accepts them, are reported instead of failing the record.
        let reused = evalCase.allowsReusedCallIds ? state.anomalies.compactMap(\.reusedCallId) : []
        var result = evaluate(state, log: log, repeatIndex: repeatIndex, case: evalCase, options: options, tear: facts.tear.map { "\($0)" })
        if !reused.isEmpty {
            var counts: [String: Int] = [:]
            for id in reused { counts[id, default: 1] += 1 }
            let listed = counts.keys.sorted().prefix(10).map { "\"\($0)\" (\(counts[$0] ?? 2) calls)" }.joined(separator: ", ")
            result.notes.append(
                CheckNote(
                    message: "call ids used again, accepted by allowReusedCallIds: \(listed)\(counts.count > 10 ? ", …" : ""); "
                        + "a later result pairs with the newest call of its id",
                    step: nil))
        }
        result.failures = evidence.gaps + result.failures
        result.notes += evidence.notes
        return result
    }

    static func evaluate(_ state: RunState, log: String, repeatIndex: Int, case evalCase: EvalCase, options: EvalOptions, tear: String?)
        -> RunResult
    {
        var expected = evalCase.expected
        if options.countsDeniedAttempts { expected.countsDeniedAttempts = true }
        var checked = state
        var audit: String?
        if let policy = evalCase.policy {
            // The audit folds the log again: the facts hold the final state, and each call is
            // judged on the state as it stood when the call was proposed.
            do {
                checked = PolicyAudit.assumingVerdicts(of: try PolicyAudit.audit(log: log, policy: policy.file), in: state)
                audit = policy.path
            } catch {
                return RunResult(
                    logPath: log, repeatIndex: repeatIndex, failures: [], notes: [], error: DiagnosticRecord(describing: error),
                    summary: RunSummary(state))
            }
        }
        let (failures, notes) = TrajectoryCheck.check(expected, against: checked, auditedBy: audit)
        var summary = RunSummary(state)
        summary.tear = tear
        return RunResult(logPath: log, repeatIndex: repeatIndex, failures: failures, notes: notes, error: nil, summary: summary)
    }

    /// Two logs of a recorded case that hold the same run (a copy of a log, or of part of it,
    /// under another name: the same run id and start time, and the same `run_started` event):
    /// counted as two attempts, one run made a pass rate of 1 in 2 read 2 in 3. Paths are
    /// de-duplicated before the check; this is the copy. (Two runs that only share an id and a
    /// start time — imports of two files of one name and time — are two runs: their starts name
    /// their sources.)
    static func sameRunTwice(in result: CaseResult) -> DiagnosticRecord? {
        guard case .recorded = result.evalCase.source else { return nil }
        var first: [String: String] = [:]
        for run in result.runs {
            guard let runId = run.summary.runId, let started = run.summary.startedAtUs else { continue }
            let key = "\(run.repeatIndex) \(started) \(runId)"
            guard let other = first[key] else {
                first[key] = run.logPath
                continue
            }
            guard other != run.logPath else { continue }
            // Only such a pair is read again, for its first event.
            guard let start = try? LogReader(path: other).firstEvent()?.event,
                start == (try? LogReader(path: run.logPath).firstEvent()?.event)
            else { continue }
            return DiagnosticRecord(
                EvalError(
                    .duplicateRun,
                    "\(other) and \(run.logPath) hold the same run \"\(runId)\" (one is a copy of the other, or of part of it): "
                        + "counted twice, one run would be two attempts",
                    location: result.evalCase.location(ofKey: "logs"),
                    hint: "keep one of the two files, or narrow the case's logs: to one of them"))
        }
        return nil
    }

    /// A tool the case names that none of its checked runs had: a typo that would make
    /// `toolsNotCalled` pass vacuously. Runs that could not be read do not count.
    static func unknownTool(in result: CaseResult) -> DiagnosticRecord? {
        // A command's tools are known from its model requests: one that stopped before its
        // first request shows none, and says nothing of their names.
        var isCommand = false
        if case .command = result.evalCase.source { isCommand = true }
        let runs = result.runs.filter { $0.error == nil && !(isCommand && $0.summary.availableTools.isEmpty) }
        // One whose model answered requests that declared no tool (a text-only agent), and that
        // called none, shows no tool at all: a tool the case forbids could never be seen called,
        // so forbidding it proves nothing (it passed on any name, a misspelt one too).
        let toolless = result.runs.filter {
            $0.error == nil && $0.summary.steps > 0 && $0.summary.availableTools.isEmpty && $0.summary.tools.isEmpty
                && $0.summary.attempted.isEmpty && $0.summary.availableServers.isEmpty
        }
        if isCommand, runs.isEmpty, !toolless.isEmpty, let forbidden = result.evalCase.expected.toolsNotCalled.first {
            return DiagnosticRecord(
                EvalError(
                    .unknownTool,
                    "case \"\(result.id)\" forbids the tool \"\(forbidden)\", but its program declared no tool in its model requests "
                        + "and called none: a call of it could never be seen",
                    location: result.evalCase.location(ofName: forbidden),
                    hint: "a command's tools are the ones it declares to the model in its requests (or calls through an MCP upstream)"))
        }
        guard !runs.isEmpty else { return nil }
        // A command declares its tools request by request (an orchestrator before its sub-agents):
        // `run_started` holds the first request's, so the tools its runs called count too.
        let available = Set(runs.flatMap { $0.summary.availableTools + (isCommand ? $0.summary.tools + $0.summary.attempted : []) })
        let known = runs.first?.summary.availableTools ?? []
        // The case's policy file too: a misspelt rule never fires, and its verdicts would all be allow.
        let servers = Array(Set(runs.flatMap(\.summary.availableServers))).sorted()
        if let policy = result.evalCase.policy,
            let problem = policy.file.misspeltTools(among: Array(available).sorted()).errors.first
                ?? policy.file.misspeltServers(among: servers).errors.first
        {
            return DiagnosticRecord(
                EvalError(
                    .unknownTool, "case \"\(result.id)\" audits its runs with \(policy.path): \(problem.message)",
                    location: problem.location, hint: problem.hint ?? "check the tool names against the runs' tools"))
        }
        for tool in result.evalCase.expected.toolNames where !available.contains(tool) {
            let suggestion = ConfigNode.suggestion(for: tool, among: Array(available).sorted())
            return DiagnosticRecord(
                EvalError(
                    .unknownTool,
                    "case \"\(result.id)\" names the tool \"\(tool)\", which none of its runs has (they have: \(known.joined(separator: ", ")))",
                    location: result.evalCase.location(ofName: tool),
                    hint: suggestion.map { "did you mean \"\($0)\"?" }
                        ?? (isCommand
                            ? "a command's tools are the ones it declares to the model in its requests"
                            : "check the tool names against the agent file")))
        }
        return nil
    }

    /// Runs a live case once (resuming it with the case's approvals when it stops for one),
    /// then grades it from the log it wrote — read back, digests checked — not from memory.
    static func runLive(
        _ evalCase: EvalCase, agentPath: String, repeatIndex: Int, agents: AgentCache, options: EvalOptions, judge: RubricJudge
    ) async -> RunResult {
        let log = "\(options.outputDirectory)/\(evalCase.id)-\(repeatIndex).jsonl.gz"
        let agent: Agent
        do {
            agent = try agents.agent(at: agentPath, cassette: evalCase.cassette)
        } catch {
            return RunResult(
                logPath: log, repeatIndex: repeatIndex, failures: [], notes: [], error: DiagnosticRecord(describing: error),
                summary: RunSummary())
        }
        if FileManager.default.fileExists(atPath: log) {
            // Never overwrite a log, and never grade a run from memory: a log that is there
            // already belongs to another run (or another process).
            return RunResult(
                logPath: log, repeatIndex: repeatIndex, failures: [], notes: [],
                error: DiagnosticRecord(
                    EvalError(
                        .logExists, "the log for this live run exists already: \(log)", location: SourceLocation(path: log),
                        hint: "write live runs to a new output directory")), summary: RunSummary())
        }
        var approve: [String] = []
        var deny: [String] = []
        switch evalCase.source {
        case .live(_, let yes, let no), .defaultAgent(let yes, let no):
            approve = yes
            deny = no
        case .recorded, .pipeline, .command: break
        }
        let conversation: Conversation?
        do {
            conversation = try agents.conversation(of: evalCase)
        } catch {
            return RunResult(
                logPath: log, repeatIndex: repeatIndex, failures: [], notes: [], error: DiagnosticRecord(describing: error),
                summary: RunSummary())
        }
        do {
            var runtime = AgentRuntime(agent: agent, environment: options.environment)
            runtime.conversation = conversation
            let first =
                if let conversation { try await runtime.converse(conversation, log: log) } else {
                    try await runtime.run(goal: evalCase.input ?? "", log: log)
                }
            _ = try await runtime.resumeWhileDecided(first) { waiting in
                guard waiting.allSatisfy({ approve.contains($0.id) || deny.contains($0.id) }) else { return nil }
                return waiting.map { ApprovalRecorded(callId: $0.id, isGranted: approve.contains($0.id), approver: "agent-eval run") }
            }
        } catch {
            await closed([log], options: options)
            return RunResult(
                logPath: log, repeatIndex: repeatIndex, failures: [], notes: [], error: DiagnosticRecord(describing: error),
                summary: RunSummary())
        }
        await closed([log], options: options)
        return await checkLive(log: log, repeatIndex: repeatIndex, case: evalCase, agents: agents, options: options, judge: judge)
    }

    /// Grades a live run (an agent file's or a command's) from the log it closed: its
    /// trajectory, then what only a live run has — a frozen user's warning, the review of the
    /// user's turns, the environment's final state.
    static func checkLive(
        log: String, repeatIndex: Int, case evalCase: EvalCase, agents: AgentCache, options: EvalOptions, judge: RubricJudge
    ) async -> RunResult {
        // A case that names a cassette replays its judges from it too, as its agent's and its
        // user's models (docs/conversations.md): its rubrics and its user's review ask through it.
        var judge = judge
        if evalCase.cassette != nil {
            do {
                let models = try agents.modelOptions(cassette: evalCase.cassette, for: evalCase.location.path)
                judge = RubricJudge(factory: models.factory, defaultModel: options.judgeModel)
            } catch {
                return RunResult(
                    logPath: log, repeatIndex: repeatIndex, failures: [], notes: [], error: DiagnosticRecord(describing: error),
                    summary: RunSummary())
            }
        }
        var result = await check(log: log, repeatIndex: repeatIndex, case: evalCase, options: options, judge: judge)
        let runId = (try? LogReader(path: log).firstEvent())??.event.runId ?? ""
        result = noteFrozenUser(result, runId: runId, agents: agents)
        result = await reviewUser(result, case: evalCase, log: log, repeatIndex: repeatIndex, judge: judge)
        return await checkState(result, case: evalCase, log: log, runId: runId, repeatIndex: repeatIndex)
    }

    /// Under `--user frozen`: the turn from which the user's recorded turns were given after
    /// another conversation than this one (the agent now says something else), as a warning the
    /// result shows even when it passes.
    static func noteFrozenUser(_ result: RunResult, runId: String, agents: AgentCache) -> RunResult {
        guard let ledger = agents.frozenUsers, let divergence = ledger.take(runId: runId) else { return result }
        var result = result
        func quoted(_ text: String?) -> String {
            guard let text else { return "nothing" }
            return "\"" + (text.count > 80 ? String(text.prefix(79)) + "…" : text) + "\""
        }
        result.notes.append(
            CheckNote(
                message: "--user frozen: from user turn \(divergence.turn) on, the user's recorded turns answer another conversation: "
                    + "they were recorded after \(divergence.isAgents ? "the agent" : "the user") said \(quoted(divergence.recorded)), "
                    + "and \(divergence.isAgents ? "it" : "the user") now says \(quoted(divergence.now)) (\(divergence.file)); "
                    + "record the user again (--record new) to see what it would say now",
                step: nil, isWarning: true))
        return result
    }

    /// A conversation's `user.review`: a judge reads the turns the user's model gave; turns that
    /// break the user's part (invented facts, a stated `unknown`, an early stop, the agent's
    /// voice) make the attempt a simulator fault — could not run, never the agent's failure. A
    /// conversation whose turns were all the case's own (opening, script) has nothing to review.
    static func reviewUser(_ result: RunResult, case evalCase: EvalCase, log: String, repeatIndex: Int, judge: RubricJudge) async
        -> RunResult
    {
        guard let spec = evalCase.user, let rubric = spec.review, result.error == nil else { return result }
        var result = result
        let state: RunState
        do {
            state = RunState(folding: try LogReader(path: log).readAll().events.map(\.event))
        } catch {
            result.failures = []
            result.error = DiagnosticRecord(describing: error)
            return result
        }
        // The model's words: said in this run, or replayed from its recording (`--user frozen`:
        // given, naming the model).
        guard state.userTurns.contains(where: { $0.turn.source == .model || $0.turn.source == .given && $0.turn.model != nil }) else {
            return result
        }
        let grade = await judge.reviewUser(state, persona: spec.persona, rubric: rubric, round: repeatIndex)
        result.judgements += grade.judgements
        if let error = grade.error {
            result.failures = []
            result.error = error
        } else if let failure = grade.failures.first {
            result.failures = []
            result.error = DiagnosticRecord(
                EvalError(
                    .simulatorFault,
                    "case \"\(evalCase.id)\": the user's turns failed their review (user.review), so the attempt shows the simulator, "
                        + "not the agent: \(failure.actual)", location: SourceLocation(path: log),
                    hint: "read the conversation: agent-eval view \(ShellWords.quoted(log)); sharpen user.persona and user.scenario, "
                        + "then record the user again (--record new)"))
        }
        return result
    }

    /// A live run's `state:` (`StateExpectation`): the command that prints the environment's
    /// final state runs once the run has ended, and a state that is not as expected fails the run.
    /// A state the command could not show makes the run "could not run", whatever else passed.
    static func checkState(_ result: RunResult, case evalCase: EvalCase, log: String, runId: String, repeatIndex: Int) async -> RunResult {
        guard let state = evalCase.expected.state, result.error == nil else { return result }
        var result = result
        switch await state.check(log: log, runId: runId, caseId: evalCase.id, repeatIndex: repeatIndex) {
        case .success(nil):
            break
        case .success(let failure?):
            result.failures.append(failure)
        case .failure(var error):
            error.location = evalCase.location(ofKey: "expected")
            result.failures = []
            result.error = DiagnosticRecord(
                EvalError(error.code, "case \"\(evalCase.id)\": \(error.message)", location: error.location, hint: error.hint))
        }
        return result
    }

    /// Hands the logs a live run has just closed to `finishedLogs`, before they are graded (see
    /// `EvalOptions.finishedLogs`); a log the run never made is left out.
    static func closed(_ logs: [String], options: EvalOptions) async {
        let present = logs.filter { FileManager.default.fileExists(atPath: $0) }
        if let sink = options.finishedLogs, !present.isEmpty { await sink.logsFinished(present) }
    }
}

/// Agent files loaded once per run of the suite (and per cassette a case names), shared by the
/// cases that use them.
final class AgentCache: Sendable {
    private struct Key: Hashable {
        var path: String
        var cassette: String?
    }

    // Guarded by the mutex: loaded agents, or the error loading gave.
    private let loaded = Mutex<[Key: Result<Agent, ConfigError>]>([:])
    // Guarded by the mutex: the model options of each cassette directory, made once.
    private let cassettes = Mutex<[String: Result<ModelOptions, ConfigError>]>([:])
    let models: ModelOptions
    let toolServers: (any ToolServerConnector)?
    let cassetteModels: (@Sendable (String) throws -> ModelOptions)?
    let cassetteToolServers: (@Sendable (String) -> any ToolServerConnector)?
    /// Under `--user frozen`: where the frozen users note the turn their recordings stop fitting.
    let frozenUsers: FrozenUserLedger?

    init(
        models: ModelOptions, toolServers: (any ToolServerConnector)? = nil,
        cassetteModels: (@Sendable (String) throws -> ModelOptions)? = nil,
        cassetteToolServers: (@Sendable (String) -> any ToolServerConnector)? = nil, frozenUsers: FrozenUserLedger? = nil
    ) {
        self.models = models
        self.toolServers = toolServers
        self.cassetteModels = cassetteModels
        self.cassetteToolServers = cassetteToolServers
        self.frozenUsers = frozenUsers
    }

    /// The agent at `path`, its HTTP models (and MCP servers) served through `cassette` when a
    /// case names one.
    func agent(at path: String, cassette: String? = nil) throws(ConfigError) -> Agent {
        let key = Key(path: path, cassette: cassette)
        if let cached = loaded.withLock({ $0[key] }) { return try cached.get() }
        let result = Result { () throws(ConfigError) in
            let models =
                try cassette.map { directory throws(ConfigError) in try self.models(cassette: directory, for: path) } ?? self.models
            let servers = toolServers.map { servers in cassette.flatMap { cassetteToolServers?($0) } ?? servers }
            return try AgentFile.load(path: path, models: models, servers: servers)
        }
        loaded.withLock { $0[key] = result }
        return try result.get()
    }

    /// The model options a case's other models (its conversation's user) are made with: the
    /// runner's, served through `cassette` when the case names one — the agent's cassette, so
    /// one directory replays the whole conversation.
    /// The conversation a case's `user:` declares, its user's model calls through the case's
    /// cassette; nil for a case on one input.
    func conversation(of evalCase: EvalCase) throws(ConfigError) -> Conversation? {
        guard let spec = evalCase.user else { return nil }
        let models = try modelOptions(cassette: evalCase.cassette, for: evalCase.location.path)
        return Conversation(user: try spec.user(factory: models.factory, frozen: frozenUsers), maxTurns: spec.maxTurns)
    }

    func modelOptions(cassette: String?, for path: String) throws(ConfigError) -> ModelOptions {
        try cassette.map { directory throws(ConfigError) in try models(cassette: directory, for: path) } ?? models
    }

    private func models(cassette directory: String, for path: String) throws(ConfigError) -> ModelOptions {
        let result =
            cassettes.withLock { $0[directory] }
            ?? Result { () throws(ConfigError) in
                guard let cassetteModels else {
                    throw ConfigError(
                        .invalidValue, "the case names the cassette \(directory), and this runner has no model clients for cassettes",
                        at: SourceLocation(path: path), hint: "run it with agent-eval run, which serves cassettes")
                }
                do {
                    return try cassetteModels(directory)
                } catch {
                    let message = (error as? any Diagnostic)?.message ?? "\(error)"
                    throw ConfigError(
                        .unreadable, "the cassette \(directory) cannot be used: \(message)", at: SourceLocation(path: directory),
                        hint: (error as? any Diagnostic)?.hint)
                }
            }
        cassettes.withLock { if $0[directory] == nil { $0[directory] = result } }
        return try result.get()
    }
}

extension DiagnosticRecord {
    /// Any error as a diagnostic record: ours keep their code, place and hint; others (from
    /// the system) their sentence.
    init(describing error: any Error) {
        if let diagnostic = error as? any Diagnostic {
            self.init(diagnostic)
        } else {
            self.init(code: "system.error", message: (error as NSError).localizedDescription)
        }
    }
}
