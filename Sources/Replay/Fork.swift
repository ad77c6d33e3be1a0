public import AgentRuntime
import Foundation
public import TraceCore
public import TraceLog

/// What if: a run forked at a step, with edits, and continued live (`agent-eval fork`,
/// docs/replay.md "What if").
///
/// The parent's log is read whole and checked (a torn or damaged parent is refused); its events
/// up to the fork point are copied into the new log as they are, a `run_forked` event records
/// the parent, the step, the parent's chain head there and the edits, and the runtime's one loop
/// continues from the state they fold to (`AgentRuntime.fork`). Nothing of the prefix runs
/// again: no tool is called twice.
public enum Fork {
    /// The fork asked for.
    public struct Request: Sendable {
        /// The parent's log.
        public var parent: String
        /// The parent's step to continue after; nil to take it from the edits.
        public var at: Int?
        public var edits: [ForkEdit]
        /// Whether a replaced result may be of a call whose result comes after the fork point (a
        /// recorded run's fork, which edits what the program sends back on its way to the model).
        public var resultsMayFollow: Bool
        /// The user turn of a conversation a `say` edit replaces (`fork --turn N --say TEXT`): the
        /// edit's step is that turn's.
        public var turn: Int?

        public init(parent: String, at: Int?, edits: [ForkEdit], resultsMayFollow: Bool = false, turn: Int? = nil) {
            self.parent = parent
            self.at = at
            self.edits = edits
            self.resultsMayFollow = resultsMayFollow
            self.turn = turn
        }
    }

    /// The parent's events the fork starts with, and how it continues.
    public struct Plan: Sendable {
        public var prefix: [Event]
        public var forked: RunForked
        /// The decisions for calls waiting for approval at the fork point.
        public var approvals: [ApprovalRecorded]
        /// The parent's approvals after the fork point, each with the call it decided, given
        /// again when the fork stops to ask for the same call: the same id, tool and arguments.
        public var laterApprovals: [(approval: ApprovalRecorded, call: ToolCallRecord)]
        /// The number of the decision the `decision` edit answers (the first one after the prefix).
        public var givenDecision: (index: Int, raw: String)?
        /// The tools that answer from a fixture from the fork on, and the file's responses.
        public var fixtures: [(tool: String, value: JSONValue)]
        /// What a conversation's user says first in the fork (a `say` edit), recorded right after
        /// `run_forked`.
        public var say: UserTurn?
    }

    /// A finished fork.
    public struct Report: Sendable {
        public var parent: String
        public var log: String
        public var forked: RunForked
        /// Events copied from the parent.
        public var copiedEvents: Int
        public var outcome: RunOutcome
        /// The parent (left) against the fork (right).
        public var diff: TrajectoryDiff
    }

    /// Reads the parent and checks the request against it: the fork point, and each edit
    /// against the state there. Writes nothing.
    public static func plan(_ request: Request) throws -> Plan {
        let path = request.parent
        let recorded: [RecordedEvent]
        do {
            var options = LogReader.Options(resolvesContextPackets: true)
            options.isStrict = true
            // `parent_head` names the last copied line by its hash, in a log of any version.
            options.hashesLines = true
            recorded = try LogReader(path: path, options: options).readAll().events
        } catch let error as LogError {
            throw ForkError(
                .unreadableParent, "cannot fork \(path): \(error.message)", path: path,
                hint: error.code == .tornTail
                    ? "the parent was cut mid-write: seal it first (agent-eval log repair LOG), then fork it" : error.hint,
                cause: error)
        }
        guard let first = recorded.first, case .runStarted = first.event.payload else {
            throw ForkError(
                .unreadableParent, "cannot fork \(path): it holds no run (its first event is not run_started)", path: path,
                hint: "a pipeline run forks at a task: agent-eval pipeline fork DIR --at TASK")
        }
        let events = recorded.map(\.event)
        let endedSteps = events.filter { if case .stepEnded = $0.payload { return true } else { return false } }.map(\.step)
        let lastStep = events.last?.step ?? 0
        let parentState = RunState(folding: events)
        func call(_ id: String?, _ flag: String) throws -> ToolCallRecord {
            guard let id, let found = parentState.call(id: id) else {
                let known = parentState.calls.map { "\($0.id) (\($0.tool), step \($0.step))" }
                throw ForkError(
                    .noSuchCall, "\(flag) \(id ?? ""): the parent has no call \"\(id ?? "")\"", path: path,
                    hint: known.isEmpty ? "the parent made no tool call" : "its calls: " + known.joined(separator: ", "))
            }
            return found
        }

        // One edit per target: a second would silently win over the first.
        var targets = Set<String>()
        for edit in request.edits {
            let target: String
            switch edit.kind {
            case .result, .error: target = "the result of \(edit.callId ?? "")"
            case .approve, .deny: target = "the approval of \(edit.callId ?? "")"
            case .decision: target = "the model's reply"
            case .input: target = "the goal"
            case .toolFixture: target = "the fixture of \(edit.tool ?? "")"
            case .say: target = "what the user says"
            }
            guard targets.insert(target).inserted else {
                throw ForkError(.editDoesNotApply, "two edits change \(target): give one", path: path)
            }
        }

        // The fork point each edit implies: a step it must be (a given reply, a human's
        // decision), or a step it must not be before (a replaced result).
        var exact: [(step: Int, why: String)] = []
        var atLeast: [(step: Int, why: String)] = []
        var approvals: [ApprovalRecorded] = []
        var cutsAtPause = false
        var edits = request.edits
        var say: UserTurn?
        for index in edits.indices where edits[index].kind == .say {
            guard parentState.isConversation else {
                throw ForkError(
                    .editDoesNotApply, "--say: the parent is no conversation (it recorded no user turn)", path: path,
                    hint: "to restate a run's input, give --input")
            }
            let count = parentState.userTurns.count
            let turn = request.turn ?? count
            guard turn >= 2, let record = parentState.userTurns.first(where: { $0.turn.turn == turn }) else {
                throw ForkError(
                    .editDoesNotApply,
                    turn < 2
                        ? "--turn \(turn): turn 1 opens the conversation (the run's goal); a fork says something else from turn 2"
                        : "--turn \(turn): the parent has \(count) user turns", path: path,
                    hint: "give --turn 2 to \(count)")
            }
            edits[index].step = record.step
            let text = edits[index].text ?? ""
            guard text.utf8.count <= UserTurn.maxTextBytes else {
                throw ForkError(
                    .editDoesNotApply, "--say is \(text.utf8.count) bytes, more than the \(UserTurn.maxTextBytes) a user turn may hold",
                    path: path)
            }
            say = UserTurn(turn: turn, parsing: text, source: .given)
        }
        for edit in edits {
            switch edit.kind {
            case .result, .error:
                let record = try call(edit.callId, "--\(edit.kind.rawValue)")
                atLeast.append((record.step, "--\(edit.kind.rawValue) \(record.id) (a call of step \(record.step))"))
            case .approve, .deny:
                let flag = "--\(edit.kind.rawValue)"
                let record = try call(edit.callId, flag)
                guard record.verdict?.verdict == .approvalRequired else {
                    throw ForkError(
                        .editDoesNotApply,
                        "\(flag) \(record.id): the policy's verdict on it was \(record.verdict?.verdict.rawValue ?? "none"), so no human was asked",
                        path: path,
                        hint: "a fork decides only calls that waited for approval; to change what the model proposed, give --decision")
                }
                cutsAtPause = true
                exact.append((record.step, "\(flag) \(record.id) (a call of step \(record.step))"))
                approvals.append(
                    ApprovalRecorded(
                        callId: record.id, isGranted: edit.kind == .approve, approver: "agent-eval fork", reason: "\(flag) \(record.id)"))
            case .decision:
                let step = edit.step ?? 0
                guard step >= 1 else {
                    throw ForkError(
                        .noSuchStep, "--decision \(step): step 0 is the run's start; decisions are made from step 1", path: path)
                }
                exact.append((step - 1, "--decision \(step) (the fork continues after step \(step - 1))"))
            case .say:
                let step = edit.step ?? 0
                exact.append((step - 1, "--say (the user's turn at step \(step): the fork continues after step \(step - 1))"))
            case .input, .toolFixture:
                break
            }
        }
        guard let at = request.at ?? exact.first?.step ?? atLeast.map(\.step).max() else {
            throw ForkError(.noForkPoint, "say where to fork: --at STEP (or an edit that names a call or a step)", path: path)
        }
        for point in exact where point.step != at {
            throw ForkError(
                .editDoesNotApply, "\(point.why) needs the fork at step \(point.step), not at step \(at)", path: path,
                hint: "edits that decide a step (--decision, --approve, --deny) fork there: one fork point per command")
        }
        for point in atLeast where point.step > at {
            throw ForkError(
                .editDoesNotApply, "\(point.why) comes after the fork point, step \(at)", path: path,
                hint: "fork at step \(point.step) or later")
        }
        guard at >= 0, at <= lastStep else {
            let asked = request.at == nil ? (exact.first ?? atLeast.first).map { "\($0.why) needs the fork after step \(at)" } : nil
            throw ForkError(.noSuchStep, "\(asked ?? "--at \(at)"): the parent has steps 0 to \(lastStep)", path: path)
        }

        // The prefix: through the step's end, or (a human's decision) up to its pause for approval.
        let end: Int
        if cutsAtPause {
            guard
                let pause = events.firstIndex(where: { event in
                    guard event.step == at, case .runStopped(let stop) = event.payload else { return false }
                    return stop.reason == .approvalRequired
                })
            else {
                throw ForkError(.noSuchStep, "step \(at) of the parent never paused for approval", path: path)
            }
            end = pause - 1
            let waiting = RunState(folding: Array(events[..<pause])).callsAwaitingApproval.map(\.id)
            let decided = Set(approvals.map(\.callId))
            // Calls of that pause the command leaves undecided keep the parent's decision.
            for id in waiting where !decided.contains(id) {
                let parents = events[pause...].compactMap { event -> ApprovalRecorded? in
                    if case .approvalRecorded(let approval) = event.payload, approval.callId == id { return approval }
                    return nil
                }
                guard let parent = parents.first else {
                    throw ForkError(
                        .editDoesNotApply, "call \(id) also waits for approval at step \(at), and the parent never decided it", path: path,
                        hint: "decide it too: --approve \(id) or --deny \(id)")
                }
                approvals.append(parent)
            }
        } else {
            guard
                let ended = events.lastIndex(where: { event in
                    if case .stepEnded = event.payload { return event.step == at } else { return false }
                })
            else {
                let before = endedSteps.last { $0 < at }
                // With no edit, a fork where the model ended the run has nothing to continue.
                let ends =
                    before.map { step in
                        events.contains { event in
                            guard event.step == step, case .decisionMade(let made) = event.payload else { return false }
                            if case .valid(.toolCalls) = made.outcome { return false }
                            if case .invalid = made.outcome { return false }
                            return true
                        }
                    } ?? false
                throw ForkError(
                    .noSuchStep, "step \(at) of the parent never ended (it holds \(describe(events.filter { $0.step == at })))",
                    path: path,
                    hint: before.map { step in
                        ends && request.edits.isEmpty
                            ? "step \(step), the last step before it that ended, is where the model ended the run: fork there with an edit, or earlier"
                            : "fork at step \(step), the last step before it that ended"
                    })
            }
            // A parent that is a fork itself may have forked right there: its edits are part of
            // the state at that step's end.
            var last = ended
            // (A signature may stand between: it is not copied, and does not end the search.)
            var next = last + 1
            while next < events.count, events[next].step == at {
                if case .runForked = events[next].payload {
                    last = next
                } else if case .unknown(let kind, _) = events[next].payload, kind == LogSigner.kind {
                } else {
                    break
                }
                next += 1
            }
            end = last
            // The model ended the run at that step (an answer, a question, a stop): with no edit,
            // going on would ask it for a decision after its last.
            let ending = events[...last].last { event in
                guard event.step == at, case .decisionMade(let made) = event.payload else { return false }
                if case .valid(.toolCalls) = made.outcome { return false }
                if case .invalid = made.outcome { return false }
                return true
            }
            if request.edits.isEmpty, ending != nil {
                throw ForkError(
                    .nothingToContinue, "the model ended the parent's run at step \(at): a fork there with no edit has nothing to continue",
                    path: path, hint: "fork at an earlier step, or give an edit")
            }
        }
        let prefix = Array(events[...end])
        // The state at the fork point is the one the parent's digests recorded, or there is no
        // fork: every digest of the parent is checked, not only the prefix's, since an edit
        // before the fork point may be covered only by a digest after it (a pause for approval
        // cuts the prefix before its step's end).
        let (folded, prefixMismatch) = StateDigester.foldChecking(prefix)
        if let event = prefixMismatch ?? StateDigester.foldChecking(events).mismatch {
            throw ForkError(
                .unreadableParent,
                "cannot fork \(path): its state digest at step \(event.step) (seq \(event.sequence)) does not match the state its events fold to, so the state at the fork point is not the one the run had",
                path: path, hint: "agent-eval replay \(path) shows where")
        }
        // A conversation's agent that has just spoken to the user waits for the user: going on
        // without a user turn would ask it to answer its own message.
        if say == nil, folded.isConversation, let last = folded.decisions.last, last.step == at {
            switch last.outcome {
            case .valid(.answer), .valid(.askHuman):
                throw ForkError(
                    .nothingToContinue, "the agent spoke to the user at step \(at): what comes next is the user's turn", path: path,
                    hint: "give --turn N --say TEXT for what the user says, or fork at an earlier step")
            default: break
            }
        }
        let head = recorded[end].hash
        for edit in request.edits where edit.kind == .result || edit.kind == .error {
            // A recorded run's result comes back with the next request, after the fork point: the
            // fork edits it on its way to the model (`RecordedFork`).
            if request.resultsMayFollow, let record = folded.call(id: edit.callId ?? ""), record.isExecuted { continue }
            guard let record = folded.call(id: edit.callId ?? ""), !record.results.isEmpty else {
                let verdict = parentState.call(id: edit.callId ?? "")?.verdict?.verdict
                throw ForkError(
                    .editDoesNotApply,
                    "--\(edit.kind.rawValue) \(edit.callId ?? ""): the call has not run by the fork point (\(verdict?.rawValue ?? "no verdict")), so it has no result to replace",
                    path: path, hint: verdict == .approvalRequired ? "decide it instead: --approve \(edit.callId ?? "")" : nil)
            }
        }
        var laterApprovals: [(approval: ApprovalRecorded, call: ToolCallRecord)] = []
        for event in events[(end + 1)...] {
            if case .approvalRecorded(let approval) = event.payload, !approvals.contains(where: { $0.callId == approval.callId }),
                let call = parentState.call(id: approval.callId)
            {
                laterApprovals.append((approval, call))
            }
        }
        var given: (Int, String)?
        var fixtures: [(String, JSONValue)] = []
        for edit in request.edits {
            if edit.kind == .decision { given = (folded.decisions.count, edit.text ?? "") }
            if edit.kind == .toolFixture, let tool = edit.tool { fixtures.append((tool, edit.value ?? .null)) }
        }
        let forked = RunForked(parentRunId: first.event.runId, parentHead: head, step: at, parentLog: path, edits: edits)
        return Plan(
            prefix: prefix, forked: forked, approvals: approvals, laterApprovals: laterApprovals, givenDecision: given,
            fixtures: fixtures, say: say)
    }

    /// Forks as `request` says with `agent` (its model and tools run live after the fork point),
    /// writing the new log at `output`, and compares the fork with its parent.
    public static func run(
        _ request: Request, agent: Agent, output: String, runId: String? = nil, environment: RuntimeEnvironment = .live,
        finishedLogs: (any FinishedLogSink)? = nil
    ) async throws -> Report {
        let plan = try plan(request)
        // A fork goes on with the agent that ran (its file as it is now, changed or not): another
        // agent would run its own tools and policy under the parent's run_started, which lists
        // the parent's.
        var parentAgent: AgentIdentity?
        for event in plan.prefix {
            switch event.payload {
            case .runStarted(let started): parentAgent = started.agent
            case .runForked(let earlier): parentAgent = earlier.agent ?? parentAgent
            default: break
            }
        }
        if let parentAgent, parentAgent.name != agent.name {
            throw ForkError(
                .anotherAgent, "the parent run is agent \"\(parentAgent.name)\"'s, and the agent file given is \"\(agent.name)\"'s",
                path: request.parent,
                hint: "fork with the parent's agent file (as it is now, edited or not); to run another agent, exec it")
        }
        var forkAgent = agent
        if let (index, raw) = plan.givenDecision {
            forkAgent.model = GivenReplyModel(base: agent.model, decisionIndex: index, reply: ModelReply(raw: raw))
        }
        for (tool, value) in plan.fixtures {
            guard var found = forkAgent.tools[tool] else {
                throw ForkError(
                    .editDoesNotApply, "--tool-fixture \(tool): the agent has no tool \"\(tool)\"", path: request.parent,
                    hint: "its tools: " + forkAgent.tools.specs.map(\.name).joined(separator: ", "))
            }
            found.host = FixtureToolHost(responses: try AgentFile.fixtureResponses(value, tool: tool))
            forkAgent.tools.register(found)
        }
        // The fork goes on on the parent's clock: its first event comes right after the last one
        // copied, so the run's time and its timeout count the time it worked, not the time
        // between the parent and the fork.
        var shifted = environment
        let offset = environment.now() - (plan.prefix.last?.timeUs ?? environment.now())
        let now = environment.now
        shifted.now = { now() - offset }
        let runtime = AgentRuntime(agent: forkAgent, environment: shifted, finishedLogs: finishedLogs)
        // The log says who went on: the copied run_started names the parent's agent and model.
        var forked = plan.forked
        forked.agent = forkAgent.identity
        forked.model = forkAgent.model.identity
        let first = try await runtime.fork(
            prefix: plan.prefix, forked: forked, log: output, runId: runId, approvals: plan.approvals, say: plan.say)
        // A human's decision is given again only for the very call it decided: the fork's ids are
        // numbered as the parent's, so the same id may be another call.
        var pending = plan.laterApprovals
        let outcome = try await runtime.resumeWhileDecided(first) { waiting in
            var given: [ApprovalRecorded] = []
            for call in waiting {
                guard let index = pending.firstIndex(where: { $0.call.id == call.id }) else { return nil }
                let parent = pending[index].call
                guard parent.tool == call.tool, parent.argumentsText == call.argumentsText else { return nil }
                given.append(pending.remove(at: index).approval)
            }
            return given
        }
        return try report(request, forked: forked, copiedEvents: plan.prefix.count, outcome: outcome)
    }

    /// The fork's log against its parent's: the trajectories from the fork point, and the outputs
    /// of what the edits replaced — a replaced result is a difference even when the model goes
    /// on the same way.
    static func report(_ request: Request, forked: RunForked, copiedEvents: Int, outcome: RunOutcome) throws -> Report {
        let edited = Set(request.edits.filter { $0.kind == .result || $0.kind == .error }.compactMap(\.callId))
        let fixtures = Set(request.edits.filter { $0.kind == .toolFixture }.compactMap(\.tool))
        let diff = try TrajectoryDiff.compare(left: request.parent, right: outcome.logPath, outputsOf: edited, outputsOfTools: fixtures)
        return Report(
            parent: request.parent, log: outcome.logPath, forked: forked, copiedEvents: copiedEvents, outcome: outcome, diff: diff)
    }

    /// The report of a fork whose log was written elsewhere — a recorded run's, which the
    /// recording gateway forks (`RecordedFork`) — read back from `log` and compared with its parent.
    public static func report(_ request: Request, plan: Plan, log: String) throws -> Report {
        var events: [Event] = []
        _ = try LogReader(path: log).forEachEvent { events.append($0.event) }
        let state = RunState(folding: events)
        return try report(
            request, forked: state.forked ?? plan.forked, copiedEvents: plan.prefix.count, outcome: RunOutcome(logPath: log, state: state))
    }

    static func describe(_ events: [Event]) -> String {
        events.isEmpty ? "no event" : events.map(\.kind).joined(separator: ", ")
    }
}

/// Why a fork cannot be made: nothing is written.
public struct ForkError: Diagnostic {
    public enum Code: String, Sendable {
        case unreadableParent = "unreadable_parent"
        case noSuchStep = "no_such_step"
        case noSuchCall = "no_such_call"
        case editDoesNotApply = "edit_does_not_apply"
        case noForkPoint = "no_fork_point"
        case nothingToContinue = "nothing_to_continue"
        case anotherAgent = "another_agent"
    }

    public var code: Code
    public var message: String
    public var path: String
    public var hint: String?
    public var cause: (any Diagnostic)?

    public init(_ code: Code, _ message: String, path: String, hint: String? = nil, cause: (any Diagnostic)? = nil) {
        self.code = code
        self.message = message
        self.path = path
        self.hint = hint
        self.cause = cause
    }

    public var diagnosticCode: String { "fork.\(code.rawValue)" }
    public var place: SourceLocation? { SourceLocation(path: path) }
}

extension Fork.Report {
    /// `agent-eval fork --json`: the fork, how it ended, and the diff against its parent.
    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("copied_events", copiedEvents)
        object.set("diff", diff.json(left: parent, right: log))
        object.set("forked", forked)
        object.set("log", log)
        object.set("parent", parent)
        object.set("run_id", outcome.runId)
        object.set("same_trajectory", diff.isSame)
        object.set("stop", outcome.stop)
        return object.json
    }
}
