public import TraceCore
import TraceLog

/// A run as the exporters read it — the mirror of `ImportedRun`: its start, its decisions (each
/// with the conversation it was asked with, and the results given back before the next one), its
/// calls with their attempts, its verdicts and approvals, its stop and its totals. Folded once
/// from the log's events (`init(log:keepsConversation:)`), so that the OTLP and ATIF exporters
/// read a run the same way and neither folds a log of its own.
struct ExportedRun {
    /// One message of the conversation a decision was asked with.
    enum Message {
        case user(String)
        /// What the agent said to the user (a conversation's answer or question, which the next
        /// user turn answers).
        case assistant(String)
        case calls([ToolCall])
        /// A result given back: the response the model saw for the call.
        case result(callId: String, response: JSONValue)

        var callId: String? {
            if case .result(let id, _) = self { return id }
            return nil
        }
    }

    struct Decision {
        /// `decision:<sequence>`: what names its span.
        var key: String
        var event: Event
        var made: DecisionMade
        /// When the model was asked: the decision's time less its latency (never before the run
        /// began, nor after the decision), else the event before it.
        var startUs: Int
        /// The model that made it (a fork names the one it went on with).
        var model: ModelIdentity
        /// The conversation before it: the goal, every earlier reply's calls and every result
        /// given back; nil unless the conversation is kept (`keepsConversation`).
        var input: [Message]?
        /// The calls it proposed.
        var callIds: Set<String> = []
        /// The results of its calls that came before the next decision, the last attempt of each
        /// standing (in the order their last attempt ended).
        var results: [ToolCompleted] = []
    }

    struct Call {
        var id: String
        var tool: String
        var arguments: JSONValue
        /// The key of the decision that proposed it.
        var decisionKey: String
        var firstIntentUs: Int?
        var lastUs: Int?
        /// Every attempt's result, with its time.
        var attempts: [(result: ToolCompleted, timeUs: Int)] = []
        var last: ToolCompleted?
    }

    /// A policy verdict or a person's approval, each with its event and the index in `calls` of
    /// the call it is about when that call had been proposed by then.
    enum Judgement {
        case verdict(VerdictGiven, event: Event, callIndex: Int?)
        case approval(ApprovalRecorded, event: Event, callIndex: Int?)
    }

    let runId: String
    let started: RunStarted
    /// When the run began (its first event).
    let startUs: Int
    private(set) var decisions: [Decision] = []
    private(set) var calls: [Call] = []
    /// The verdicts and approvals, in the log's order.
    private(set) var judgements: [Judgement] = []
    private(set) var stop: (stopped: RunStopped, timeUs: Int)?
    /// The tokens of every decision.
    private(set) var usage = TokenUsage(input: 0, output: 0)
    /// The cost of every decision that has one; nil when none has.
    private(set) var costUSD: Double?
    /// The agent's instructions: the stored prompt of the first context built, when stored as text.
    private(set) var instructions: String?
    private(set) var forked: RunForked?
    /// A conversation's user turns, the first (whose text is the goal) too, each with its event.
    private(set) var userTurns: [(turn: UserTurn, event: Event)] = []
    /// Its turns after the first.
    var laterTurns: [(turn: UserTurn, event: Event)] { userTurns.filter { $0.turn.turn > 1 } }
    /// The time of the log's last event.
    private(set) var lastUs: Int
    /// Stored contents, by hash, as the log holds them (their bytes decoded only when asked for).
    private(set) var contents: [String: ContentStored] = [:]

    /// The run in the log at `path`; an error naming the log when it cannot be read or holds no run.
    init(log path: String, keepsConversation: Bool) throws(ImportError) {
        let events: [Event]
        do {
            events = try LogReader(path: path).readAll().events.map(\.event)
        } catch let error as any Diagnostic {
            throw ImportError(.unreadableLog, "cannot read \(path): \(error.message)", location: SourceLocation(path: path), cause: error)
        } catch {
            throw ImportError(.unreadableLog, "cannot read \(path): \(error)", location: SourceLocation(path: path))
        }
        guard let first = events.first, case .runStarted(let started) = first.payload else {
            throw ImportError(.unreadableLog, "\(path) holds no run_started event", location: SourceLocation(path: path))
        }
        self.init(events: events, first: first, started: started, keepsConversation: keepsConversation)
    }

    init(events: [Event], first: Event, started: RunStarted, keepsConversation: Bool) {
        runId = first.runId
        self.started = started
        startUs = first.timeUs
        lastUs = first.timeUs
        var callIndex: [String: Int] = [:]
        var previousUs = startUs
        // The conversation as the log records it: the goal, every reply's calls, every result given back.
        var history: [Message] = [.user(started.goal)]
        var givenBack: [(callId: String, response: JSONValue)] = []
        var model = started.model
        for event in events {
            switch event.payload {
            case .contentStored(let content):
                contents[content.hash] = content
            case .contextBuilt(let built):
                if instructions == nil, let hash = built.promptHash { instructions = text(stored: hash) }
            case .decisionMade(let made):
                let key = "decision:\(event.sequence)"
                let start = made.latencyUs.map { event.timeUs - $0 } ?? previousUs
                var decision = Decision(
                    key: key, event: event, made: made, startUs: max(startUs, min(start, event.timeUs)), model: model)
                // The conversation is content: kept only when it is exported (each decision's copy
                // of it makes a long run's export quadratic, as the conventions' input messages are).
                if keepsConversation {
                    history += givenBack.map { Message.result(callId: $0.callId, response: $0.response) }
                    givenBack = []
                    decision.input = history
                    switch made.outcome {
                    case .valid(.toolCalls(let proposed)): history.append(.calls(proposed))
                    case .valid(.answer(let text)), .valid(.askHuman(let text)): history.append(.assistant(text))
                    default: break
                    }
                }
                if let used = made.usage { usage = TokenUsage(input: usage.input + used.input, output: usage.output + used.output) }
                if let cost = made.costUSD { costUSD = (costUSD ?? 0) + cost }
                if case .valid(.toolCalls(let proposed)) = made.outcome {
                    for call in proposed {
                        callIndex[call.id] = calls.count
                        decision.callIds.insert(call.id)
                        calls.append(Call(id: call.id, tool: call.name, arguments: call.arguments, decisionKey: key))
                    }
                }
                decisions.append(decision)
            case .verdictGiven(let verdict):
                judgements.append(.verdict(verdict, event: event, callIndex: callIndex[verdict.callId]))
            case .approvalRecorded(let approval):
                judgements.append(.approval(approval, event: event, callIndex: callIndex[approval.callId]))
            case .toolIntended(let intent):
                if let index = callIndex[intent.callId], calls[index].firstIntentUs == nil { calls[index].firstIntentUs = event.timeUs }
            case .toolCompleted(let result):
                // A result of the latest decision's calls is given back with it (the last attempt stands).
                if let latest = decisions.indices.last, decisions[latest].callIds.contains(result.callId) {
                    decisions[latest].results.removeAll { $0.callId == result.callId }
                    decisions[latest].results.append(result)
                }
                guard let index = callIndex[result.callId] else { break }
                calls[index].lastUs = event.timeUs
                calls[index].last = result
                calls[index].attempts.append((result, event.timeUs))
                if keepsConversation {
                    if let given = givenBack.firstIndex(where: { $0.callId == result.callId }) {
                        givenBack[given].response = response(result)
                    } else {
                        givenBack.append((result.callId, response(result)))
                    }
                }
            case .userTurn(let turn):
                userTurns.append((turn, event))
                // The first turn is the goal, which the history starts with.
                guard turn.turn > 1 else { break }
                if keepsConversation, !turn.text.isEmpty {
                    history += givenBack.map { Message.result(callId: $0.callId, response: $0.response) }
                    givenBack = []
                    history.append(.user(turn.text))
                }
            case .runStopped(let stopped):
                stop = (stopped, event.timeUs)
            case .runForked(let fork):
                // What the fork's model saw from here on: the edited results, the restated goal.
                forked = fork
                model = fork.model ?? model
                for edit in fork.edits {
                    switch edit.kind {
                    case .result, .error:
                        let edited: JSONValue = edit.kind == .result ? edit.value ?? .null : .string(edit.text ?? "")
                        if let given = givenBack.firstIndex(where: { $0.callId == edit.callId }) {
                            givenBack[given].response = edited
                        } else if let index = history.lastIndex(where: { $0.callId == edit.callId }) {
                            history[index] = .result(callId: edit.callId ?? "", response: edited)
                        }
                    case .input:
                        if let text = edit.text, !history.isEmpty { history[0] = .user(text) }
                    case .decision, .approve, .deny, .toolFixture, .say:
                        break
                    }
                }
            default: break
            }
            previousUs = event.timeUs
        }
        lastUs = previousUs
    }

    /// Every verdict, in the log's order.
    var verdicts: [VerdictGiven] {
        judgements.compactMap { if case .verdict(let verdict, _, _) = $0 { verdict } else { nil } }
    }

    /// The content stored under `hash` when it was stored as UTF-8 text.
    private func text(stored hash: String) -> String? {
        guard let content = contents[hash], content.encoding == .utf8 else { return nil }
        return content.body
    }

    /// What the model was given back for a call: its output (kept as content or not), or its error.
    func response(_ result: ToolCompleted) -> JSONValue {
        if let output = result.output { return output }
        if let hash = result.contentHash, let text = text(stored: hash) {
            return (try? JSONParser.parse(Array(text.utf8))) ?? .string(text)
        }
        return .string(result.error ?? result.status.rawValue)
    }

    /// A result as text: its output (a string as it is, else its JSON), its stored content, else
    /// its error.
    func text(of result: ToolCompleted) -> String {
        if let output = result.output { return output.stringValue ?? JSONWriter.encodeString(output) }
        if let hash = result.contentHash, let bytes = contents[hash]?.bytes { return String(decoding: bytes, as: UTF8.self) }
        return result.error ?? ""
    }
}
