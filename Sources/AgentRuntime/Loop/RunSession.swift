import TraceCore
import TraceLog

/// One run in progress: the recorder (log + live fold), the agent, and stored contents.
/// Everything the loop knows about the run it reads from `state`, the fold of what it wrote.
final class RunSession {
    let agent: Agent
    let environment: RuntimeEnvironment
    let recorder: RunRecorder
    let context: ContextBuilder
    let parser: DecisionParser
    /// Stored content by hash, for outputs kept out of events.
    var contents: [String: [UInt8]]
    /// Time spent in the run before this session (a resumed run keeps its clock).
    let priorActiveUs: Int
    let sessionStartUs: Int
    /// This session's time on the run's clock, for the run's deadline while the model answers
    /// (reading it takes no timestamp: `now` is read only for what is recorded).
    let sessionTime: @Sendable () -> Duration
    var promptHash: String?
    var contextCache = ContextBuilder.Cache()
    /// The conversation this run is, with the user who speaks in it; nil for a run on one input.
    let conversation: Conversation?

    init(
        agent: Agent, environment: RuntimeEnvironment, recorder: RunRecorder, contents: [String: [UInt8]],
        conversation: Conversation? = nil
    ) {
        self.agent = agent
        self.conversation = conversation
        self.environment = environment
        self.recorder = recorder
        self.contents = contents
        self.context = ContextBuilder(
            instructions: agent.instructions, tools: agent.tools, policy: agent.policy, settings: agent.context, memory: agent.memory,
            evidence: agent.evidence)
        self.parser = DecisionParser(tools: agent.tools)
        self.priorActiveUs = recorder.state.elapsedUs
        self.sessionStartUs = environment.now()
        self.sessionTime = environment.stopwatch()
        // The hash the log keeps the instructions under: of their text redacted, when the writer
        // redacts it (a resumed run names the prompt its first session stored).
        let prompt = ContentStored(text: agent.instructions)
        self.promptHash = agent.instructions.isEmpty ? nil : (recorder.writer.keptContent(prompt) ?? prompt).hash
    }

    var state: RunState { recorder.state }

    // MARK: Driving

    /// Runs `body`, closes the log, and makes sure the run ends with a stop event: an error
    /// that escapes the loop (not a log error: the log cannot take more) is recorded as the
    /// run's stop before the writer closes.
    func drive(path: String, _ body: () async throws -> Void) async throws(RuntimeError) -> RunOutcome {
        do {
            try await body()
            if state.stop == nil {
                try recorder.record(.runStopped(RunStopped(reason: .blocked, error: "the runtime ended the loop without a stop reason")))
            }
            try recorder.writer.close()
        } catch let error as LogError where error.code == .eventTooLarge {
            // The writer refused an event too large for a reader to read back, and wrote none of
            // it: the log is whole, and the run stops there, saying why.
            do {
                if state.stop == nil {
                    try recorder.record(
                        .runStopped(RunStopped(reason: .blocked, error: "the run could not be recorded further: \(error.message)")))
                }
                try recorder.writer.close()
            } catch let logError as LogError {
                throw RuntimeError(logError)
            } catch {
                throw RuntimeError(.log, "cannot record the end of the run: \(error)", path: path)
            }
        } catch let error as LogError {
            try? recorder.writer.close()
            throw RuntimeError(error)
        } catch {
            do {
                if state.stop == nil {
                    let why = error is CancellationError || Task.isCancelled ? interruption : "the runtime failed: \(error)"
                    try recorder.record(.runStopped(RunStopped(reason: .blocked, error: why)))
                }
                try recorder.writer.close()
            } catch let logError as LogError {
                throw RuntimeError(logError)
            } catch {
                throw RuntimeError(.log, "cannot record the end of the run: \(error)", path: path)
            }
        }
        return RunOutcome(logPath: path, state: state)
    }

    func start(goal: String, actor: String?, route: String?, firstTurn: UserTurn? = nil) throws {
        try recorder.record(
            .runStarted(
                RunStarted(
                    goal: goal, agent: agent.identity, model: agent.model.identity, policy: agent.policy.identity,
                    tools: agent.tools.specs, limits: agent.limits, actor: actor, route: route,
                    toolServers: agent.toolServerIdentities)))
        try storeInstructions()
        if let firstTurn { try recorder.record(.userTurn(firstTurn)) }
        try recorder.endStep()
    }

    /// Starts a conversation: the user's first turn is the run's goal, and is recorded as turn 1
    /// at step 0. A user that cannot open it ends the run there, as a simulator fault.
    func startConversation(_ conversation: Conversation, actor: String?, route: String?) async throws {
        var opening: UserTurn
        do {
            opening = try await userReply(conversation, turn: 1)
            opening.turn = 1
            if let ending = opening.ends {
                throw SimulatorFault(
                    "the user ended the conversation (\(ending.rawValue)) in its first turn, before the agent answered anything")
            }
        } catch let fault as SimulatorFault {
            try start(goal: "", actor: actor, route: route)
            try stop(.blocked, error: "\(RunStopped.simulatorFaultPrefix) \(fault.message)")
            return
        } catch {
            // Cancelled while the user opened: the run is recorded as started, and `drive` records why it stopped.
            try start(goal: "", actor: actor, route: route)
            if error is CancellationError || Task.isCancelled { throw error }
            // Any other failure of the user is the simulator's, never the agent's.
            try stop(.blocked, error: "\(RunStopped.simulatorFaultPrefix) the user failed at turn 1: \(error)")
            return
        }
        try start(goal: opening.text, actor: actor, route: route, firstTurn: opening)
    }

    /// The user's turn `turn`, within what is left of the run's time. Cancelled from outside:
    /// throws `CancellationError`; a user that cannot answer in time is a simulator fault.
    func userReply(_ conversation: Conversation, turn: Int) async throws -> UserTurn {
        let user = conversation.user
        var state = self.state
        // Before run_started (the opening) the fold has no run id yet: the user draws from the run's.
        state.runId = state.runId ?? recorder.writer.runId
        let seen = state
        guard let reply = try await withinRunTime({ try await user.reply(turn: turn, after: seen) }) else {
            throw SimulatorFault("the user was still answering turn \(turn) when the run's time ran out: \(limitMessage(.timeout))")
        }
        return reply
    }

    /// After the agent said `text` to the user (an answer, or a question): the user's next turn,
    /// or the conversation's end — `max_turns`, the user's stop, or a simulator fault.
    func converse(_ conversation: Conversation, afterAgentSaid text: String) async throws {
        let turns = state.userTurns.count
        // The agent's limits first: a run out of time is the agent's, not a user left no time to answer.
        if let limit = limitReachedBeforeStep(), limit != .maxSteps {
            try stop(.budgetExhausted, limit: limit, answer: text, error: limitMessage(limit))
            return
        }
        guard turns < conversation.maxTurns else {
            try stop(
                .maxTurns, answer: text,
                error: "the conversation reached its \(conversation.maxTurns) user turns (maxTurns) with the user not done")
            return
        }
        let reply: UserTurn
        do {
            reply = try await userReply(conversation, turn: turns + 1)
        } catch let fault as SimulatorFault where !Task.isCancelled {
            try stop(.blocked, answer: text, error: "\(RunStopped.simulatorFaultPrefix) \(fault.message)")
            return
        } catch {
            if error is CancellationError || Task.isCancelled {
                try stop(.blocked, error: interruption)
                return
            }
            try stop(.blocked, answer: text, error: "\(RunStopped.simulatorFaultPrefix) the user failed at turn \(turns + 1): \(error)")
            return
        }
        var said = reply
        said.turn = turns + 1  // numbered by the runtime, whatever a user says
        try recorder.record(.userTurn(said))
        if let ending = said.ends { try stop(ending.stopReason, answer: text) }
    }

    /// Stores the agent's instructions once, for the packets' `prompt_hash` to name (a fork
    /// whose agent has other instructions than its parent stores them when it goes on, and a
    /// resumed run whose writer redacts them otherwise — another redaction key — too).
    func storeInstructions() throws {
        // Known by the hash the log keeps it under (of the text redacted as this writer redacts).
        guard !agent.instructions.isEmpty else { return }
        promptHash = try storeContent(ContentStored(text: agent.instructions))
    }

    /// Records the run's stop. A conversation's answer is what the agent said last to the user,
    /// however the conversation ended (a limit, the policy, a failed tool or model): given here
    /// when the stop gives none.
    func stop(_ reason: StopReason, limit: LimitKind? = nil, answer: String? = nil, error: String? = nil) throws {
        let answer = answer ?? (state.isConversation ? state.agentMessages.last : nil)
        try recorder.record(.runStopped(RunStopped(reason: reason, limit: limit, answer: answer, error: error)))
    }

    // MARK: The loop

    /// Why a run that was cancelled from outside (Ctrl-C, SIGTERM, an embedding program)
    /// stopped.
    var interruption: String { "\(RunStopped.interruptionPrefix) the run was stopped from outside at step \(recorder.step)" }

    func loop() async throws {
        while state.stop == nil {
            // Cancelled from outside: stop here, recorded, with the log closed by `drive`.
            if Task.isCancelled {
                try stop(.blocked, error: interruption)
                return
            }
            if let limit = limitReachedBeforeStep() {
                try stop(.budgetExhausted, limit: limit, error: limitMessage(limit))
                return
            }
            try await takeStep()
        }
    }

    /// Limits checked before a step starts: the loop runs because budget allows it.
    func limitReachedBeforeStep() -> LimitKind? {
        let limits = state.start?.limits ?? agent.limits
        if let maxSteps = limits.maxSteps, recorder.step > maxSteps { return .maxSteps }
        if let timeoutMs = limits.timeoutMs, activeUs() >= timeoutMs.multipliedSaturating(by: 1000) { return .timeout }
        if let budget = limits.tokenBudget, state.usage.totalTokens >= budget { return .tokenBudget }
        return nil
    }

    /// The model's reply to `request`, within what is left of the run's `timeout_ms`: a reply
    /// that is still streaming in when the run's time is up is cut off (nil), however often the
    /// server sends. Without a timeout the model answers in its own time (its client has its
    /// own per-attempt limits).
    func modelReply(to request: ModelRequest, observing streamed: (@Sendable (String) -> Void)?) async throws -> ModelReply? {
        let model = agent.model
        return try await withinRunTime { try await ModelTextObserver.with(streamed) { try await model.reply(to: request) } }
    }

    /// What `ask` gives, within what is left of the run's `timeout_ms`; nil when the time ran
    /// out first. Without a timeout, `ask` takes its own time.
    func withinRunTime<T: Sendable>(_ ask: @escaping @Sendable () async throws -> T) async throws -> T? {
        guard let left = runTimeLeft() else { return try await ask() }
        let (result, timedOut) = await Deadline.run(within: max(.zero, left), on: environment.clock) {
            () async -> Result<T, any Error> in
            do {
                return .success(try await ask())
            } catch {
                return .failure(error)
            }
        }
        return timedOut ? nil : try result.get()
    }

    /// What is left of the run's `timeout_ms` (negative once it is past); nil without one. Read
    /// from the session's time: it takes no timestamp (`now` is read only for what is recorded,
    /// so that a recorded run's times do not depend on how often this is asked).
    func runTimeLeft() -> Duration? {
        guard let timeoutMs = (state.start?.limits ?? agent.limits).timeoutMs else { return nil }
        return .milliseconds(timeoutMs) - .microseconds(priorActiveUs) - sessionTime()
    }

    func activeUs() -> Int { priorActiveUs + (environment.now() - sessionStartUs) }

    func limitMessage(_ limit: LimitKind) -> String {
        let limits = state.start?.limits ?? agent.limits
        switch limit {
        case .maxSteps: return "reached max_steps (\(limits.maxSteps ?? 0)) before step \(recorder.step)"
        case .maxToolCalls:
            return "the decision would exceed max_tool_calls (\(limits.maxToolCalls ?? 0)); \(counted(state.toolCallCount, "call")) made"
        case .timeout: return "ran for \(activeUs() / 1000) ms of its \(limits.timeoutMs ?? 0) ms timeout"
        case .tokenBudget: return "used \(state.usage.totalTokens) tokens of its budget of \(limits.tokenBudget ?? 0)"
        }
    }

    func takeStep() async throws {
        let built = context.build(state: state, step: recorder.step, promptHash: promptHash, cache: &contextCache) { [contents] hash in
            contents[hash].flatMap { try? JSONParser.parse($0) }
        }
        try recorder.record(.contextBuilt(built.packet))

        var feedback: String?
        var rejected = 0
        let decision: Decision
        while true {
            var request = ModelRequest(
                instructions: agent.instructions, packet: built.packet, tools: built.disclosedTools, observations: built.observations,
                feedback: feedback, decisionIndex: state.decisions.count, step: recorder.step)
            request.runId = state.runId ?? ""
            if conversation != nil { request.dialogue = state.dialogue }
            let elapsed = environment.stopwatch()
            let reply: ModelReply
            do {
                let streamed = environment.observe.map { observe in
                    let redactor = agent.redactor
                    return { @Sendable (text: String) in observe(.modelText(redactor.redactText(text))) }
                }
                guard let answer = try await modelReply(to: request, observing: streamed) else {
                    let why =
                        "\(RunStopped.modelFailurePrefix) the model was still answering at step \(recorder.step) and was cut off: "
                        + limitMessage(.timeout)
                    try recorder.endStep()
                    try stop(.budgetExhausted, limit: .timeout, error: why)
                    return
                }
                reply = answer
            } catch {
                // Cancelled from outside while the model answered: an interruption, not a model failure.
                let cancelled = error is CancellationError || Task.isCancelled
                let why =
                    cancelled ? interruption : "\(RunStopped.modelFailurePrefix) the model client failed at step \(recorder.step): \(error)"
                try recorder.endStep()
                try stop(.blocked, error: why)
                return
            }
            let latency = reply.latencyUs ?? environment.recordedDuration(elapsed())
            let outcome = parser.parse(reply.raw, format: reply.format, nextCallNumber: state.calls.count + 1)
            try recorder.record(
                .decisionMade(
                    DecisionMade(
                        raw: reply.raw, format: reply.format, outcome: outcome, usage: reply.usage, latencyUs: latency,
                        timeToFirstTokenUs: reply.timeToFirstTokenUs, costUSD: reply.costUSD, attempts: reply.attempts)))
            switch outcome {
            case .valid(let valid):
                decision = valid
            case .invalid(let invalid):
                rejected += 1
                if rejected > agent.handling.invalidDecisionRetries {
                    try recorder.endStep()
                    try stop(
                        .invalidDecision,
                        error:
                            "the model's reply was rejected \(rejected) time\(rejected == 1 ? "" : "s") in a row; last: \(invalid.message)")
                    return
                }
                if let limit = limitReachedBeforeStep(), limit != .maxSteps {
                    try recorder.endStep()
                    try stop(.budgetExhausted, limit: limit, error: limitMessage(limit))
                    return
                }
                feedback = "Your reply was rejected (\(invalid.kind.rawValue)): \(invalid.message)"
                continue
            }
            break
        }

        switch decision {
        case .answer(let text) where conversation != nil, .askHuman(let text) where conversation != nil:
            // In a conversation, what the agent says (or asks) goes to the user, who answers.
            try recorder.endStep()
            if let conversation { try await converse(conversation, afterAgentSaid: text) }
        case .stop(let reason) where conversation != nil:
            try recorder.endStep()
            try stop(.agentStop, answer: state.agentMessages.last, error: "the agent ended the conversation: \(reason)")
        case .answer(let answer):
            try recorder.endStep()
            try stop(.success, answer: answer)
        case .askHuman(let question):
            try recorder.endStep()
            try stop(.blocked, error: "the agent asked a human: \(question)")
        case .stop(let reason):
            try recorder.endStep()
            try stop(.blocked, error: "the agent stopped: \(reason)")
        case .toolCalls(let calls):
            // Spent as `limitReachedBeforeStep` says it is: a budget used to the last token leaves
            // none for what the calls' results would be read with.
            if let budget = state.start?.limits.tokenBudget, state.usage.totalTokens >= budget {
                try recorder.endStep()
                try stop(.budgetExhausted, limit: .tokenBudget, error: limitMessage(.tokenBudget))
                return
            }
            if let maxCalls = state.start?.limits.maxToolCalls, state.toolCallCount + calls.count > maxCalls {
                try recorder.endStep()
                try stop(.budgetExhausted, limit: .maxToolCalls, error: limitMessage(.maxToolCalls))
                return
            }
            try await handle(calls)
        }
    }

    /// Gives every call its verdict, runs the allowed ones, and ends the step — or stops the
    /// run when a denial, a failure or a pending approval says so.
    func handle(_ calls: [ToolCall]) async throws {
        let start = state.start
        // The calls of this decision judged to run (or to wait for approval) so far: none has run
        // when the next is judged, and each counts against what is left.
        var underWay = 0
        for call in calls {
            guard let tool = agent.tools[call.name] else { continue }
            let query = PolicyQuery(
                call: call, tool: tool.spec, actor: start?.actor, route: start?.route, state: state, limits: start?.limits ?? agent.limits,
                callsUnderWay: underWay)
            let decision = agent.policy.decide(query)
            if decision.verdict != .deny { underWay += 1 }
            try recorder.record(
                .verdictGiven(
                    VerdictGiven(callId: call.id, tool: call.name, verdict: decision.verdict, reason: decision.reason, rule: decision.rule))
            )
        }
        let verdicts = calls.compactMap { state.call(id: $0.id) }
        if agent.handling.policyDenied == .stop, let denied = verdicts.first(where: { $0.verdict?.verdict == .deny }) {
            try recorder.endStep()
            try stop(.policyDenied, error: Self.denialMessage(denied))
            return
        }
        let allowed = calls.filter { state.call(id: $0.id)?.verdict?.verdict == .allow }
        try await execute(allowed)
        try await finishStep(after: calls)
    }

    /// After the calls of a decision ran: stop for a tool failure or a pending approval, or
    /// end the step.
    func finishStep(after calls: [ToolCall]) async throws {
        if agent.handling.toolFailure == .stop {
            for call in calls {
                guard let record = state.call(id: call.id), let last = record.lastResult, last.status != .ok else { continue }
                try recorder.endStep()
                try stop(
                    .toolFailure,
                    error: "\(record.tool) (\(record.id)) failed after \(record.attempts) attempt\(record.attempts == 1 ? "" : "s"): "
                        + (last.error ?? last.status.rawValue))
                return
            }
        }
        // The fold counts waiting calls: a long run does not look through every call each step.
        let awaiting = state.counters.callsAwaitingApproval > 0 ? state.callsAwaitingApproval : []
        if !awaiting.isEmpty {
            let names = awaiting.map { "\($0.tool) (\($0.id))" }.joined(separator: ", ")
            try stop(.approvalRequired, error: "waiting for a human to approve \(names)")
            return
        }
        if agent.handling.policyDenied == .stop, let refused = calls.compactMap({ state.call(id: $0.id) }).first(where: \.isDenied) {
            try recorder.endStep()
            try stop(.policyDenied, error: Self.denialMessage(refused))
            return
        }
        try recorder.endStep()
    }

    static func denialMessage(_ call: ToolCallRecord) -> String {
        if let approval = call.approval, !approval.isGranted {
            return "\(call.tool) (\(call.id)) was refused by \(approval.approver ?? "a human")" + (approval.reason.map { ": \($0)" } ?? "")
        }
        let rule = call.verdict?.rule.map { " by rule \($0)" } ?? ""
        return "\(call.tool) (\(call.id)) was denied\(rule)" + (call.verdict?.reason.map { ": \($0)" } ?? "")
    }

    // MARK: Resuming

    func resume(approvals: [ApprovalRecorded]) async throws {
        for approval in approvals { try recorder.record(.approvalRecorded(approval)) }
        // The calls of the decision that stopped for approval: run the approved ones now.
        let step = state.step
        let pending = state.calls.filter { $0.step == step }
        let approved = pending.filter { $0.approval?.isGranted == true && !$0.isExecuted }
        // The calls are rebuilt from the log, which keeps a secret in their arguments as its
        // placeholder: run so, a call would do something else than what the model proposed and
        // the person approved (set a password to "[redacted:…]"). It is not run.
        if let redacted = approved.first(where: { Redactor.holdsPlaceholder($0.arguments) }) {
            try recorder.endStep()
            try stop(
                .blocked,
                error: "\(redacted.tool) (\(redacted.id)) was approved, but the log keeps its arguments redacted (a secret in them is "
                    + "written as [redacted:…]): run from the log, it would not be the call the model proposed, so it is not run; "
                    + "run the agent again, or keep such values out of the tool's arguments (a tool reads a secret from its env:)")
            return
        }
        try await execute(approved.map { ToolCall(id: $0.id, name: $0.tool, arguments: $0.arguments) })
        try await finishStep(after: pending.map { ToolCall(id: $0.id, name: $0.tool, arguments: $0.arguments) })
    }
}
