public import AgentRuntime
import Foundation
public import TraceCore
import TraceLog

/// Drives the current runtime with what a log recorded — the model's replies and the tools'
/// results — and finds the first event where the new run differs from the recorded one.
///
/// Nothing goes live: the model is a `ReplayModel` over the log's decisions and every tool a
/// `RecordedToolHost` over its results (an MCP server's tools are the ones `run_started`
/// lists, and no server is started); a request the log cannot answer is refused and
/// reported. Approvals recorded in the log are given again when the new run stops for them.
/// Times are not compared (`time_us`, `prev`, state digests, durations are set aside): the
/// re-run happens now, and a state digest covers the run's times. Nor are the agent's and the
/// policy's configuration in `run_started` (digests, tool specs, limits): the configuration is
/// what a re-run changes, and its effects show in the events after it.
public enum Rerun {
    /// Where two runs part.
    public struct Divergence: Sendable, Hashable {
        public var step: Int
        public var sequence: Int
        /// The recorded event's kind (or the new one's, when the recorded run ended first).
        public var kind: String
        /// The first field that differs, such as `data.verdict` or `kind`.
        public var fieldPath: String
        public var recorded: String
        public var new: String
        /// Why, when it can tell: a rule that now denies, a schema that now rejects, a context
        /// that now omits an item, a limit that now fires, a request the log cannot answer.
        public var cause: String?
    }

    /// How the recorded run is driven (docs/replay.md, "Modes").
    public enum Mode: String, Sendable, CaseIterable {
        /// Everything from the log; a request the log cannot answer is refused, and a divergence.
        case strict
        /// The log's replies and results while the run asks what the log's run asked; live (the
        /// agent file's model and tools) from the first request that differs on, with the
        /// recorded rest as the baseline of the diff.
        case prefix
    }

    public struct Report: Sendable {
        public var mode: Mode = .strict
        /// Prefix mode: where the run went live, if it did.
        public var wentLive: LiveSwitch.Point?
        /// Prefix mode: the recorded run (left) against the new one (right).
        public var diff: TrajectoryDiff?
        public var recordedEvents: Int
        public var newEvents: Int
        public var newLog: String
        public var divergence: Divergence?
        public var unanswered: [UnansweredRequest]
        public var newStop: RunStopped?
        public var recordedStop: RunStopped?
    }

    /// Re-runs `log` with `agent` (as it is now), writing the new run to `output`.
    public static func run(log: String, agent: Agent, output: String, mode: Mode = .strict, runId: String? = nil) async throws -> Report {
        let read = try LogReader(path: log, options: LogReader.Options(resolvesContextPackets: true)).readAll()
        let recorded = read.events.map(\.event)
        // A torn log lacks the run's end: a strict re-run, which compares with all of it, would
        // call the re-run's own end a divergence from a run that only stopped being written.
        if mode == .strict, let tear = read.summary.tear {
            throw RerunError(
                message: "cannot re-run \(log) strictly: it is torn (\(tear)), so the recorded run's end is not in it",
                path: log,
                hint: "re-run what it holds with --mode prefix, or seal it first (agent-eval log repair \(ShellWords.quoted(log)))")
        }
        guard
            let started = recorded.first.flatMap({ event -> RunStarted? in
                if case .runStarted(let value) = event.payload { return value }
                return nil
            })
        else {
            throw LogError(.invalidEvent, "the log does not start with run_started, so there is no run to re-drive", path: log, sequence: 0)
        }
        // A log that does not check out is no record to re-drive: "identical" to it would say
        // nothing, and a prefix re-run would write a clean new log from a tampered one. As `run`
        // and `fork` refuse it, so does this.
        let (folded, mismatch) = StateDigester.foldChecking(recorded)
        if let event = mismatch {
            throw RerunError(
                message:
                    "cannot re-run \(log): its state digest at step \(event.step) (seq \(event.sequence)) does not match the state its events fold to (the log was edited, or written by another fold)",
                path: log, hint: "agent-eval replay \(ShellWords.quoted(log)) shows where")
        }
        if let anomaly = folded.anomalies.first(where: { $0.reusedCallId == nil }) {
            throw RerunError(
                message: "cannot re-run \(log): it does not fit together (\(anomaly.message))", path: log,
                hint: "agent-eval replay \(ShellWords.quoted(log)) lists every event that does not fit")
        }
        // A fork's run went on from edits the re-run cannot make: its events would part from the
        // re-run's at the fork, whatever the code does.
        if let forked = recorded.first(where: { if case .runForked = $0.payload { true } else { false } }) {
            throw RerunError(
                message:
                    "\(log) is a fork (run_forked at step \(forked.step)): a re-run drives a run from its start and cannot make the fork's edits",
                path: log, hint: "re-run its parent, or fork the parent again with the current agent file")
        }

        // The tools' recorded results, by call id and attempt.
        var contents: [String: [UInt8]] = [:]
        var arguments: [String: (String, JSONValue)] = [:]
        var entries: [RecordedToolHost.Key: RecordedToolHost.Entry] = [:]
        var decisions: [DecisionMade] = []
        var approvals: [ApprovalRecorded] = []
        // The packet each recorded decision was asked with (prefix mode compares the new ones).
        var packets: [JSONValue] = []
        var packet: JSONValue = .null
        // A conversation's user turns, said again by the re-run's user as they were recorded.
        var userTurns: [UserTurn] = []
        var recordedStop: RunStopped?
        for event in recorded {
            switch event.payload {
            case .userTurn(let turn): userTurns.append(turn)
            case .runStopped(let stopped): recordedStop = stopped
            case .contentStored(let stored): contents[stored.hash] = stored.bytes
            case .contextBuilt(let built): packet = normalizedPacket(built)
            case .decisionMade(let made):
                decisions.append(made)
                packets.append(packet)
                if case .valid(.toolCalls(let calls)) = made.outcome {
                    for call in calls { arguments[call.id] = (call.name, call.arguments) }
                }
            case .toolCompleted(let result):
                let (tool, args) = arguments[result.callId] ?? (result.tool, .null)
                entries[RecordedToolHost.Key(callId: result.callId, attempt: result.attempt)] = RecordedToolHost.Entry(
                    tool: tool, arguments: args, result: result, content: result.contentHash.flatMap { contents[$0] })
            case .approvalRecorded(let approval): approvals.append(approval)
            default: break
            }
        }
        let unanswered = UnansweredRequests()
        let liveSwitch = LiveSwitch()
        var replayAgent = agent
        switch mode {
        case .strict:
            replayAgent.model = ReplayModel(identity: agent.model.identity, recorded: decisions, source: log)
        case .prefix:
            let recordedPackets = packets
            let recordedTools = Dictionary(started.tools.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
            replayAgent.model = PrefixReplayModel(recorded: decisions, live: agent.model, liveSwitch: liveSwitch) { request in
                // A tool shown to the model as it is now, not as it was: another request, whatever the packet says.
                for tool in request.tools {
                    guard let then = recordedTools[tool.name], then != tool else { continue }
                    return
                        "the tool \(tool.name) shown to the model at decision \(request.decisionIndex + 1) (step \(request.step)) changed"
                }
                let now = normalizedPacket(request.packet)
                let then = recordedPackets[request.decisionIndex]
                guard now != then else { return nil }
                let difference = then.firstDifference(from: now, keyPriority: fieldPriority)
                return "the context packet for decision \(request.decisionIndex + 1) (step \(request.step)) differs"
                    + (difference.map {
                        " at \($0.path): recorded \(JSONWriter.encodeString($0.leftOrAbsent)), now \(JSONWriter.encodeString($0.rightOrAbsent))"
                    } ?? "")
            }
        }
        var tools = ToolRegistry()
        for tool in agent.tools.tools {
            var replayed = tool
            let recordedHost = RecordedToolHost(entries: entries, unanswered: unanswered)
            replayed.host = mode == .prefix ? PrefixToolHost(recorded: recordedHost, live: tool.host, liveSwitch: liveSwitch) : recordedHost
            tools.register(replayed)
        }
        // The MCP servers' tools are the ones the log lists: no server is started.
        let servers = Set(agent.toolServers.map(\.name))
        for spec in started.tools where spec.server.map(servers.contains) ?? false && tools[spec.name] == nil {
            var served = spec
            if let setting = agent.toolServers.first(where: { $0.name == spec.server }), let sideEffect = setting.sideEffect {
                served.sideEffect = sideEffect
            }
            let host = RecordedToolHost(entries: entries, unanswered: unanswered)
            if let tool = try? Tool(spec: served, host: host, unknownKeywords: .ignore) { tools.register(tool) }
        }
        replayAgent.toolServerIdentities = started.toolServers.filter { servers.contains($0.name) }
        replayAgent.toolServers = []
        replayAgent.tools = tools
        // Strict mode's run is the log's run again, with no waits; prefix mode's goes live, as
        // a run of its own, waiting as a live run waits.
        let id = mode == .strict ? recorded.first?.runId ?? "rerun" : runId ?? RuntimeEnvironment.live.makeRunId()
        var environment = RuntimeEnvironment.live
        if mode == .strict { environment.sleep = { _ in } }
        environment.makeRunId = { id }
        var runtime = AgentRuntime(agent: replayAgent, environment: environment)
        // Strict mode writes to a scratch file of its own; prefix mode keeps its run, and never
        // writes over a file that is there (the writer refuses it).
        if mode == .strict { try? FileManager.default.removeItem(atPath: output) }
        let first: RunOutcome
        // A log whose user failed (in its first turn, too, before any turn was recorded) is a
        // conversation whose user fails there again.
        let fault = recordedStop.flatMap { stop -> String? in
            guard stop.isSimulatorFault, let error = stop.error else { return nil }
            return String(error.dropFirst(RunStopped.simulatorFaultPrefix.count).drop { $0 == " " })
        }
        if userTurns.isEmpty && fault == nil {
            first = try await runtime.run(goal: started.goal, log: output, runId: id, actor: started.actor, route: started.route)
        } else {
            // A conversation: its user says the log's turns again. As many turns as the log's,
            // one more unless the log stopped at its turn limit: a re-run that asks the user for
            // more than was said has parted from the recording there (the user says so).
            let maxTurns = userTurns.count + (recordedStop?.reason == .maxTurns ? 0 : 1)
            let conversation = Conversation(user: LoggedUser(turns: userTurns, fault: fault), maxTurns: maxTurns)
            // The runtime keeps its user: a conversation that pauses for approval goes on with it.
            runtime.conversation = conversation
            first = try await runtime.converse(conversation, log: output, runId: id, actor: started.actor, route: started.route)
        }
        var pending = approvals
        let outcome = try await runtime.resumeWhileDecided(first) { waiting in
            // Live, a call is not the log's call of that id: no recorded approval applies.
            guard !liveSwitch.isLive else { return nil }
            let ids = Set(waiting.map(\.id))
            let given = pending.filter { ids.contains($0.callId) }
            pending.removeAll { ids.contains($0.callId) }
            return given
        }
        let fresh = try LogReader(path: output, options: LogReader.Options(resolvesContextPackets: true)).readAll().events.map(\.event)
        var divergence = compare(recorded: recorded, new: fresh, unanswered: unanswered)
        if let found = divergence, let change = schemaChange(recorded: recorded.first, new: fresh.first) {
            // A changed schema shows first where it is shown to the model (the packet's size) or
            // where it rejects the arguments.
            divergence?.cause = found.cause.map { "\(change); \($0)" } ?? change
        }
        var report = Report(
            recordedEvents: recorded.count, newEvents: fresh.count, newLog: output, divergence: divergence, unanswered: unanswered.all,
            newStop: outcome.state.stop, recordedStop: RunState(folding: recorded).stop)
        report.mode = mode
        if mode == .prefix {
            report.wentLive = liveSwitch.wentLive
            report.diff = try TrajectoryDiff.compare(left: log, right: output)
        }
        return report
    }

    /// The first event where the runs differ, or nil when they are the same run.
    static func compare(recorded: [Event], new: [Event], unanswered: UnansweredRequests) -> Divergence? {
        for index in 0..<max(recorded.count, new.count) {
            guard index < recorded.count else {
                let event = new[index]
                return Divergence(
                    step: event.step, sequence: event.sequence, kind: event.kind, fieldPath: "(event)", recorded: "the recorded run ended",
                    new: "\(event.kind): \(event.payload.summary)", cause: cause(recorded: nil, new: event, unanswered: unanswered))
            }
            guard index < new.count else {
                let event = recorded[index]
                return Divergence(
                    step: event.step, sequence: event.sequence, kind: event.kind, fieldPath: "(event)",
                    recorded: "\(event.kind): \(event.payload.summary)",
                    new: "the new run ended", cause: cause(recorded: event, new: nil, unanswered: unanswered))
            }
            let a = normalized(recorded[index])
            let b = normalized(new[index])
            if a != b {
                let difference = a.firstDifference(from: b, keyPriority: fieldPriority) ?? JSONDifference(path: "", left: a, right: b)
                return Divergence(
                    step: recorded[index].step, sequence: recorded[index].sequence, kind: recorded[index].kind, fieldPath: difference.path,
                    recorded: JSONWriter.encodeString(difference.leftOrAbsent), new: JSONWriter.encodeString(difference.rightOrAbsent),
                    cause: cause(recorded: recorded[index], new: new[index], unanswered: unanswered))
            }
        }
        return nil
    }

    /// A context packet as compared: what was left out and why, not the words of the detail
    /// (its wording changed between versions: an older log's details are not a different run).
    static func normalizedPacket(_ packet: ContextBuilt) -> JSONValue {
        var data = packet.json.objectValue ?? JSONObject()
        if case .array(let items)? = data["omitted"] {
            data["omitted"] = .array(
                items.map { item in
                    guard var object = item.objectValue else { return item }
                    object["detail"] = nil
                    return .object(object)
                })
        }
        return .object(data)
    }

    /// An event without what depends on when it ran.
    static func normalized(_ event: Event) -> JSONValue {
        var data = event.payload.data.objectValue ?? JSONObject()
        switch event.payload {
        case .stepEnded: data["state_digest"] = nil
        case .toolCompleted: data["duration_us"] = nil
        case .contextBuilt(let packet):
            data = normalizedPacket(packet).objectValue ?? data
        case .decisionMade:
            // Timing and transport retries depend on the network, not on what the model said.
            data["latency_us"] = nil
            data["ttft_us"] = nil
            data["attempts"] = nil
        case .runStarted:
            // The configuration is what the re-run changes on purpose; what it does is compared.
            if var agent = data["agent"]?.objectValue {
                agent["config_digest"] = nil
                data["agent"] = .object(agent)
            }
            if var policy = data["policy"]?.objectValue {
                policy["digest"] = nil
                data["policy"] = .object(policy)
            }
            data["tools"] = nil
            data["limits"] = nil
        default: break
        }
        return ["kind": .string(event.kind), "step": .int(event.step), "data": .object(data)]
    }

    /// The fields of an event that say what happened come before the ones that explain it.
    static let fieldPriority = ["kind", "step", "verdict", "decision", "invalid", "status", "reason", "limit", "tool", "name", "arguments"]

    /// Which tool's input schema changed between the two runs' `run_started`, and where.
    static func schemaChange(recorded: Event?, new: Event?) -> String? {
        guard case .runStarted(let before)? = recorded?.payload, case .runStarted(let after)? = new?.payload else { return nil }
        for tool in after.tools {
            guard let old = before.tools.first(where: { $0.name == tool.name }), old.inputSchema != tool.inputSchema else { continue }
            let change =
                old.inputSchema.firstDifference(from: tool.inputSchema).map { difference in
                    " (\(difference.path): \(JSONWriter.encodeString(difference.leftOrAbsent)) → \(JSONWriter.encodeString(difference.rightOrAbsent)))"
                } ?? ""
            return "the input schema of \(tool.name) changed\(change)"
        }
        return nil
    }

    /// Why the runs part, read off the two events (and the requests the log refused).
    static func cause(recorded: Event?, new: Event?, unanswered: UnansweredRequests) -> String? {
        switch (recorded?.payload, new?.payload) {
        case (.verdictGiven(let before)?, .verdictGiven(let after)?) where before.verdict != after.verdict:
            return "policy: rule \(after.rule ?? "default") now gives \(after.verdict.rawValue) for \(after.tool) (\(after.callId))"
                + (after.reason.map { " — \($0)" } ?? "") + "; it was \(before.verdict.rawValue)"
                + (before.rule.map { " by rule \($0)" } ?? "")
        case (.decisionMade(let before)?, .decisionMade(let after)?):
            switch (before.outcome, after.outcome) {
            case (.valid, .invalid(let invalid)) where invalid.kind == .invalidArguments:
                return "a tool's input schema now rejects the arguments: \(invalid.message)"
            case (.valid, .invalid(let invalid)) where invalid.kind == .unknownTool:
                return "the agent no longer has the tool: \(invalid.message)"
            case (.valid, .invalid(let invalid)):
                return "the reply is now rejected (\(invalid.kind.rawValue)): \(invalid.message)"
            case (.invalid, .valid):
                return "a reply that was rejected is now accepted"
            default:
                return nil
            }
        case (.contextBuilt(let before)?, .contextBuilt(let after)?):
            let newlyOmitted = after.omitted.filter { item in !before.omitted.contains { $0.id == item.id } }
            if let item = newlyOmitted.first {
                return "the context packet now omits \(item.id) (\(item.reason.rawValue)\(item.detail.map { ": \($0)" } ?? ""))"
            }
            let nowIncluded = before.omitted.filter { item in !after.omitted.contains { $0.id == item.id } }
            if let item = nowIncluded.first {
                return "the context packet now includes \(item.id), which it left out (\(item.reason.rawValue))"
            }
            if before.toolsDisclosed != after.toolsDisclosed {
                return
                    "the tools shown to the model changed: \(before.toolsDisclosed.joined(separator: ", ")) → \(after.toolsDisclosed.joined(separator: ", "))"
            }
            if before.tokenEstimate != after.tokenEstimate {
                return
                    "the packet's token estimate changed (\(before.tokenEstimate) → \(after.tokenEstimate)): the instructions or the tools shown changed"
            }
            return nil
        case (_, .runStopped(let stop)?) where stop.limit != nil:
            return "a limit now fires: \(stop.limit?.rawValue ?? "")" + (stop.error.map { " (\($0))" } ?? "")
        case (.runStopped(let stop)?, _) where stop.limit != nil:
            return "the \(stop.limit?.rawValue ?? "") limit that fired in the recorded run no longer does"
        case (_, .toolCompleted(let result)?) where result.status == .refused:
            guard let request = unanswered.request(callId: result.callId, attempt: result.attempt) else { return nil }
            return "the log cannot answer this request: \(request.message)"
        case (_, .runStopped(let stop)?):
            return "the new run stops here: \(stop.reason.rawValue)" + (stop.error.map { " — \($0)" } ?? "")
        default:
            return nil
        }
    }
}

/// A log `rerun` cannot drive (a fork's): nothing is run.
public struct RerunError: Diagnostic {
    public var message: String
    public var path: String
    public var hint: String?

    public var diagnosticCode: String { "rerun.fork_log" }
    public var place: SourceLocation? { SourceLocation(path: path) }
}
