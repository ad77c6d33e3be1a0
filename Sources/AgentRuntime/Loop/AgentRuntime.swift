public import TraceCore
public import TraceLog

/// The controlled agent loop: build context → ask the model → validate → policy → execute
/// allowed work → record observations → check stop conditions, recording every step in an
/// append-only log.
///
/// The live state is the fold of the events the runtime writes (through `RunRecorder`), so a
/// replay of the log rebuilds exactly the state the run had; a digest of it is recorded at
/// every step end. Every run ends with exactly one `run_stopped`.
///
/// ```swift
/// let runtime = AgentRuntime(agent: agent)
/// let outcome = try await runtime.run(goal: "Refund order A-1042", log: "runs/a.jsonl.gz")
/// print(outcome.state.stopReason ?? .blocked)
/// ```
public struct AgentRuntime: Sendable {
    public var agent: Agent
    public var environment: RuntimeEnvironment
    /// Signs the logs this runtime writes (docs/log-format.md, "Signed logs"); nil for none.
    public var signer: LogSigner?
    /// Given each log this runtime closes, after `run` or `resume` returns its outcome (the CLI's
    /// `exec`: index it in the catalog, send its trace to a collector); nil for nothing.
    public var finishedLogs: (any FinishedLogSink)?
    /// The conversation this runtime's runs are (`converse`), whose user a resumed or forked
    /// conversation goes on with; nil for runs on one input.
    public var conversation: Conversation?
    /// How this runtime's logs are written.
    public var logOptions: LogWriter.Options {
        LogWriter.Options(
            durability: agent.durability, signer: signer, redactor: redactor, writesContextDeltas: agent.writesContextDeltas,
            formatVersion: agent.logFormatVersion)
    }

    /// What keeps secrets out of this runtime's logs: the agent's (`Agent.redactor`).
    var redactor: Redactor { agent.redactor }

    public init(
        agent: Agent, environment: RuntimeEnvironment = .live, signer: LogSigner? = nil, finishedLogs: (any FinishedLogSink)? = nil
    ) {
        self.agent = agent
        self.environment = environment
        self.signer = signer
        self.finishedLogs = finishedLogs
    }

    /// Runs the agent on `goal`, writing a new log at `path`, until it stops. The agent's tool
    /// servers are started first and stopped at the end; when one cannot start, no log is written.
    public func run(
        goal: String, log path: String, runId: String? = nil, actor: String? = nil, route: String? = nil
    ) async throws(RuntimeError) -> RunOutcome {
        let outcome = try await withToolServers { runtime throws(RuntimeError) in
            try await runtime.runConnected(goal: goal, log: path, runId: runId, actor: actor, route: route)
        }
        await finishedLogs?.logsFinished([outcome.logPath])
        return outcome
    }

    /// Starts the agent's tool servers, gives `body` a runtime whose agent has their tools, and
    /// stops the servers when it returns or throws.
    func withToolServers(_ body: (AgentRuntime) async throws(RuntimeError) -> RunOutcome) async throws(RuntimeError) -> RunOutcome {
        guard !agent.toolServers.isEmpty || !agent.toolReferences.isEmpty else { return try await body(self) }
        var connected = self
        let connections: [any ToolServerConnection]
        do {
            (connected.agent, connections) = try await agent.connectingToolServers()
        } catch {
            // A server's last words on stderr are in the message: they may echo what it was given.
            throw RuntimeError(.toolServer, redactor.redactText(error.message), path: "", hint: error.hint, location: error.location)
        }
        do {
            let outcome = try await body(connected)
            for connection in connections { await connection.close() }
            return outcome
        } catch {
            for connection in connections { await connection.close() }
            throw error
        }
    }

    /// Runs the agent in a conversation with `conversation.user`, writing a new log at `path`:
    /// the user's first turn is the run's goal, each answer of the agent goes to the user, and
    /// each user turn is recorded (`user_turn`) and answered in the same run, until the user
    /// ends it, the agent stops, `maxTurns` is reached, or a limit or the policy stops the run.
    public func converse(
        _ conversation: Conversation, log path: String, runId: String? = nil, actor: String? = nil, route: String? = nil
    ) async throws(RuntimeError) -> RunOutcome {
        var runtime = self
        runtime.conversation = conversation
        guard agent.logFormatVersion >= Event.memberChainVersion else {
            throw RuntimeError(
                .log, "a conversation's log is version 3 with version 4 lines, and this agent writes version \(agent.logFormatVersion)",
                path: path, hint: "drop log_version from the agent file")
        }
        let outcome = try await runtime.withToolServers { runtime throws(RuntimeError) in
            try await runtime.runConnected(goal: nil, log: path, runId: runId, actor: actor, route: route)
        }
        await finishedLogs?.logsFinished([outcome.logPath])
        return outcome
    }

    func runConnected(
        goal: String?, log path: String, runId: String?, actor: String?, route: String?
    ) async throws(RuntimeError) -> RunOutcome {
        let id = runId ?? environment.makeRunId()
        let writer: LogWriter
        do {
            writer = try LogWriter.create(at: path, runId: id, options: logOptions)
        } catch let error as LogError {
            throw RuntimeError(error)
        } catch {
            throw RuntimeError(.log, "cannot create the log: \(error)", path: path)
        }
        let session = RunSession(
            agent: agent, environment: environment,
            recorder: RunRecorder(writer: writer, clock: environment.now, observe: environment.eventObserver),
            contents: [:], conversation: goal == nil ? conversation : nil)
        return try await Self.onLoopThread { () async throws(RuntimeError) -> RunOutcome in
            try await session.drive(path: path) {
                if let goal {
                    try session.start(goal: goal, actor: actor ?? agent.actor, route: route ?? agent.route)
                } else if let conversation = session.conversation {
                    try await session.startConversation(conversation, actor: actor ?? agent.actor, route: route ?? agent.route)
                }
                try await session.loop()
            }
        }
    }

    /// Resumes a run that stopped with `approval_required`: records each approval, runs the
    /// approved calls (refused ones become observations) and continues the loop in the same log.
    public func resume(log path: String, approvals: [ApprovalRecorded]) async throws(RuntimeError) -> RunOutcome {
        let outcome = try await withToolServers { runtime throws(RuntimeError) in
            try await runtime.resumeConnected(log: path, approvals: approvals)
        }
        await finishedLogs?.logsFinished([outcome.logPath])
        return outcome
    }

    func resumeConnected(log path: String, approvals: [ApprovalRecorded]) async throws(RuntimeError) -> RunOutcome {
        let writer: LogWriter
        var state = RunState()
        var contents: [String: [UInt8]] = [:]
        do {
            writer = try LogWriter.open(at: path, options: logOptions).0
            _ = try LogReader(path: path).forEachEvent { recorded in
                RunState.reduce(into: &state, recorded.event)
                if case .contentStored(let stored) = recorded.event.payload, let bytes = stored.bytes { contents[stored.hash] = bytes }
            }
        } catch let error as LogError {
            throw RuntimeError(error)
        } catch {
            throw RuntimeError(.log, "cannot open the log: \(error)", path: path)
        }
        guard let start = state.start else {
            throw RuntimeError(.cannotResume, "the log has no run_started event", path: path)
        }
        // A fork goes on with the agent its run_forked names; the copied start names the parent's.
        guard (state.forked?.agent ?? start.agent).configDigest == agent.configDigest else {
            throw RuntimeError(
                .agentMismatch, "the run was recorded with another configuration of agent \"\(start.agent.name)\"", path: path,
                hint: "resume with the agent file the run was started with")
        }
        guard state.stop?.reason == .approvalRequired else {
            let how = state.stop.map { "stopped with \($0.reason.rawValue)" } ?? "has not stopped"
            throw RuntimeError(.cannotResume, "the run \(how); only a run stopped for approval can be resumed", path: path)
        }
        let waiting = state.callsAwaitingApproval.map(\.id)
        for approval in approvals where !waiting.contains(approval.callId) {
            throw RuntimeError(
                .cannotResume, "call \"\(approval.callId)\" does not await approval (waiting: \(waiting.joined(separator: ", ")))",
                path: path)
        }
        let missing = waiting.filter { id in !approvals.contains { $0.callId == id } }
        guard missing.isEmpty else {
            throw RuntimeError(
                .undecidedCalls, "calls waiting for approval were not decided: \(missing.joined(separator: ", "))", path: path,
                hint: "give an approval or a refusal for each waiting call")
        }
        guard !state.isConversation || conversation != nil else {
            throw RuntimeError(
                .cannotResume, "the run is a conversation, and this runtime has no user to go on with", path: path,
                hint: "resume it with its case (agent-eval run), which gives the user")
        }
        let session = RunSession(
            agent: agent, environment: environment,
            recorder: RunRecorder(writer: writer, state: state, clock: environment.now, observe: environment.eventObserver),
            contents: contents, conversation: state.isConversation ? conversation : nil)
        return try await Self.onLoopThread { () async throws(RuntimeError) -> RunOutcome in
            try await session.drive(path: path) {
                try session.storeInstructions()
                try await session.resume(approvals: approvals)
                try await session.loop()
            }
        }
    }

    /// Continues a fork of another run (`agent-eval fork`, docs/replay.md "What if"): writes a
    /// new log at `path` holding `prefix` — the parent's events up to the fork point, the same
    /// payloads, steps and times under this run's id, each step's digest that of this run's
    /// state (which holds its id), the parent's signatures left out —
    /// and `forked`, then runs the same loop live from the state they fold to, with nothing of
    /// the prefix executed again. Calls waiting for approval at the fork point are decided by
    /// `approvals` as `resume` decides them. `run_forked` is recorded in the step the prefix ends
    /// in; a prefix that ends with a step's end continues with the next step, one that ends
    /// inside a step (a pause for approval) continues that step.
    ///
    /// A conversation's fork goes on with `conversation`'s user; without one, until the agent has
    /// answered the user's last turn (`max_turns`), and `say` (a `say` edit) is that turn, recorded
    /// right after `run_forked`.
    public func fork(
        prefix: [Event], forked: RunForked, log path: String, runId: String? = nil, approvals: [ApprovalRecorded] = [],
        say: UserTurn? = nil
    ) async throws(RuntimeError) -> RunOutcome {
        let outcome = try await withToolServers { runtime throws(RuntimeError) in
            try await runtime.forkConnected(prefix: prefix, forked: forked, log: path, runId: runId, approvals: approvals, say: say)
        }
        await finishedLogs?.logsFinished([outcome.logPath])
        return outcome
    }

    func forkConnected(
        prefix: [Event], forked: RunForked, log path: String, runId: String?, approvals: [ApprovalRecorded], say: UserTurn?
    ) async throws(RuntimeError) -> RunOutcome {
        let id = runId ?? environment.makeRunId()
        var contents: [String: [UInt8]] = [:]
        for event in prefix {
            if case .contentStored(let stored) = event.payload, let bytes = stored.bytes { contents[stored.hash] = bytes }
        }
        // `run_forked` belongs to the step the prefix ends in (its edits change that step's
        // state, as a diff shows); a step that ended is followed by the next.
        let recorder: RunRecorder
        do {
            let writer = try LogWriter.create(at: path, runId: id, options: logOptions)
            recorder = try RunRecorder.copying(prefix, into: writer, clock: environment.now, observe: environment.eventObserver)
        } catch let error as LogError {
            throw RuntimeError(error)
        } catch {
            throw RuntimeError(.log, "cannot write the fork's log: \(error)", path: path)
        }
        let turns = prefix.count { if case .userTurn = $0.payload { true } else { false } }
        // A conversation with no user to go on with ends once the agent answered its last turn.
        let goesOn = turns == 0 ? nil : conversation ?? Conversation(user: CaseUser(), maxTurns: say?.turn ?? turns)
        let session = RunSession(agent: agent, environment: environment, recorder: recorder, contents: contents, conversation: goesOn)
        return try await Self.onLoopThread { () async throws(RuntimeError) -> RunOutcome in
            try await session.drive(path: path) {
                try recorder.record(.runForked(forked))
                let lastStep = prefix.last?.step
                if prefix.contains(where: { if case .stepEnded = $0.payload { $0.step == lastStep } else { false } }) { recorder.step += 1 }
                try session.storeInstructions()
                if let say {
                    try recorder.record(.userTurn(say))
                    // A turn that ends the conversation (a stop token) leaves nothing to answer.
                    if let ending = say.ends { try session.stop(ending.stopReason, answer: session.state.agentMessages.last) }
                }
                if !approvals.isEmpty { try await session.resume(approvals: approvals) }
                try await session.loop()
            }
        }
    }

    /// Runs a session's loop on a thread of its own (`ExecutorThread`), with the tasks it
    /// starts for tool attempts: each attempt starts and ends without waking another thread.
    /// The loop waits for its model, tools and log most of the time; the work of several runs
    /// still spreads over the cores, a thread each.
    static func onLoopThread(_ body: () async throws(RuntimeError) -> RunOutcome) async throws(RuntimeError) -> RunOutcome {
        let thread = ExecutorThread(name: "agent-eval run loop")
        defer { thread.stop() }
        return try await thread.run(body)
    }
}

extension AgentRuntime {
    /// Resumes `outcome` for as long as it stops with `approval_required` and `decide` answers
    /// every waiting call (nil, or an answer missing a call, leaves the run stopped): how
    /// `agent-eval run` gives a case's approvals and a re-run gives the log's.
    public func resumeWhileDecided(
        _ outcome: RunOutcome, decide: ([ToolCallRecord]) -> [ApprovalRecorded]?
    ) async throws(RuntimeError) -> RunOutcome {
        var outcome = outcome
        while outcome.stop.reason == .approvalRequired {
            let waiting = outcome.state.callsAwaitingApproval
            guard !waiting.isEmpty, let approvals = decide(waiting),
                Set(approvals.map(\.callId)) == Set(waiting.map(\.id))
            else { break }
            outcome = try await resume(log: outcome.logPath, approvals: approvals)
        }
        return outcome
    }
}

/// A finished (or paused) run.
public struct RunOutcome: Sendable {
    public var logPath: String
    /// The live state at the end: equal to the fold of the log.
    public var state: RunState

    public init(logPath: String, state: RunState) {
        self.logPath = logPath
        self.state = state
    }

    public var runId: String { state.runId ?? "" }
    /// The run's stop event; every outcome has one.
    public var stop: RunStopped { state.stop ?? RunStopped(reason: .blocked, error: "no stop recorded") }
    /// Decision steps taken (step 0 records the start; step n holds the n-th step's decisions).
    public var steps: Int { state.decisions.last?.step ?? 0 }
}
