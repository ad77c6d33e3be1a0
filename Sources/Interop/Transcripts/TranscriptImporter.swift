import Foundation
import TraceCore

/// Turns a message transcript (OpenAI chat messages or Anthropic messages) into a run: one step
/// per assistant message; its tool calls paired with the tool results that follow.
///
/// Pairing: a result names its call by id (`tool_call_id`, `tool_use_id`) and goes to the oldest
/// unanswered call with that id; a result without a known id goes to the oldest unanswered
/// call. A call id used again by a later call gets a suffix in the log (`call_1#2`) and a
/// warning, so every call keeps its own result.
///
/// A transcript that ends on a user turn (a user message after the last assistant message or
/// tool result) was cut off before the agent answered: the run is unfinished, and a note says so.
struct TranscriptImporter {
    enum Dialect: String {
        case openAI = "openai.messages"
        case anthropic = "anthropic.messages"

        /// The `decision_made.format` of an assistant message of this dialect.
        var messageFormat: String { self == .openAI ? "openai.chat" : "anthropic.messages" }
        var provider: String { self == .openAI ? "openai" : "anthropic" }
    }

    let file: SourceFile
    let episode: Episode

    /// Anthropic when any message has content blocks of Anthropic's kinds; OpenAI otherwise
    /// (plain string contents read the same in both).
    static func dialect(of messages: [JSONValue]) -> Dialect {
        for message in messages {
            if message["tool_calls"] != nil || message["role"]?.stringValue == "tool" || message["function_call"] != nil { return .openAI }
            for block in message["content"]?.arrayValue ?? [] {
                // `tool_use` and `tool_result`, and the calls the API runs itself (`server_tool_use`,
                // `mcp_tool_use`) with their results (`web_search_tool_result`, `mcp_tool_result`…).
                if let type = block["type"]?.stringValue, type.hasSuffix("tool_use") || type.hasSuffix("tool_result") {
                    return .anthropic
                }
            }
        }
        return .openAI
    }

    /// A pending call: proposed, not yet answered.
    private struct Pending {
        var step: Int
        var index: Int
        var sourceId: String
    }

    func run() throws(ImportError) -> ImportedRun {
        guard !episode.messages.isEmpty else {
            let what = episode.id.map { "episode \($0) (\(episode.place))" } ?? episode.place
            throw ImportError(
                .badRun, "\(file.path): \(what) has no messages: there is no run to import", location: SourceLocation(path: file.path))
        }
        let dialect = Self.dialect(of: episode.messages)
        var warnings: [String] = []
        var preamble: [JSONValue] = []
        if let system = episode.system { preamble.append(["role": "system", "content": system]) }
        var steps: [ImportedStep] = []
        var pending: [Pending] = []
        var ids = CallIds()
        var goal: String?
        var lastFinish: String?
        /// The user message after the last assistant message or tool result, if any.
        var userTurn: Int?
        /// Every user message's text, with the step it comes before: a conversation's turns.
        var userMessages: [(beforeStep: Int, text: String)] = []

        func describe(_ index: Int) -> String { "message \(index + 1)" + (episode.id.map { " of episode \($0)" } ?? "") }

        /// The log id of a call, and the id its result will name (its own when the source has none).
        func logId(for sourceId: String?, message: Int) -> (String, String) {
            let (id, isReused) = ids.next(sourceId)
            if isReused, let sourceId {
                warnings.append(
                    "\(describe(message)): call id \"\(sourceId)\" is used again; results pair with the oldest unanswered call of that id, "
                        + "and the log names this call \"\(id)\"")
            }
            return (id, sourceId.flatMap { $0.isEmpty ? nil : $0 } ?? id)
        }

        func attach(_ result: ImportedResult, toId sourceId: String?, record: JSONValue, message: Int) {
            var slot = pending.firstIndex { $0.sourceId == sourceId && sourceId != nil }
            if slot == nil, let sourceId {
                // It names a call: never another call's result, whatever its place.
                warnings.append(
                    "\(describe(message)): a result for call id \"\(sourceId)\", which no unanswered call has: kept as a record only")
                if !steps.isEmpty { steps[steps.count - 1].records.append(record) } else { preamble.append(record) }
                return
            }
            if slot == nil, !pending.isEmpty {
                slot = pending.indices.first
                warnings.append(
                    "\(describe(message)): a tool result that names no call (no tool_call_id): paired with the oldest unanswered call, "
                        + "\"\(pending[0].sourceId)\"")
            }
            guard let slot else {
                warnings.append("\(describe(message)): a tool result with no call before it; kept as a record only")
                if !steps.isEmpty { steps[steps.count - 1].records.append(record) } else { preamble.append(record) }
                return
            }
            let target = pending.remove(at: slot)
            guard case .calls(var calls) = steps[target.step].decision else { return }
            calls[target.index].result = result
            steps[target.step].decision = .calls(calls)
            steps[target.step].records.append(record)
        }

        for (index, message) in episode.messages.enumerated() {
            let role = message["role"]?.stringValue ?? ""
            switch (dialect, role) {
            case (_, "assistant"), (_, "model"):
                userTurn = nil
                var calls: [ImportedCall] = []
                /// Results of the calls the API ran itself, in the message that made them.
                var inlineResults: [JSONValue] = []
                var text = ""
                var refusal: String?
                switch dialect {
                case .openAI:
                    text = Self.text(of: message["content"])
                    refusal = message["refusal"]?.stringValue
                    if let listed = message["tool_calls"], listed != .null, listed.arrayValue == nil {
                        // Calls this importer cannot read: an error, never a message without them.
                        throw ImportError(
                            .wrongFormat, "\(file.path): \(describe(index)): tool_calls is no list",
                            location: SourceLocation(path: file.path), hint: "OpenAI's messages give an assistant's tool calls as a list")
                    }
                    var proposed = message["tool_calls"]?.arrayValue ?? []
                    if let function = message["function_call"], function != .null { proposed.append(["function": function]) }
                    for call in proposed {
                        let function = call["function"] ?? call
                        let name = function["name"]?.stringValue ?? ""
                        let (id, sourceId) = logId(for: call["id"].flatMap(EpisodeFinder.scalarText), message: index)
                        let arguments = Self.arguments(function["arguments"], call: sourceId, at: describe(index), warnings: &warnings)
                        calls.append(ImportedCall(call: ToolCall(id: id, name: name, arguments: arguments)))
                        pending.append(Pending(step: steps.count, index: calls.count - 1, sourceId: sourceId))
                    }
                case .anthropic:
                    if let blocks = message["content"]?.arrayValue {
                        for block in blocks {
                            let type = block["type"]?.stringValue ?? ""
                            switch type {
                            case "text": text += block["text"]?.stringValue ?? ""
                            case "tool_use", "server_tool_use", "mcp_tool_use":
                                // A call the API runs itself (a web search, an MCP connector's tool)
                                // is a call all the same: its result comes in the same message.
                                let (id, sourceId) = logId(for: block["id"]?.stringValue, message: index)
                                let arguments = Self.arguments(block["input"], call: sourceId, at: describe(index), warnings: &warnings)
                                calls.append(
                                    ImportedCall(call: ToolCall(id: id, name: block["name"]?.stringValue ?? "", arguments: arguments)))
                                pending.append(Pending(step: steps.count, index: calls.count - 1, sourceId: sourceId))
                            case _ where type.hasSuffix("_tool_result"):
                                inlineResults.append(block)
                            case _ where type.hasSuffix("tool_use") || type.hasSuffix("tool_result"):
                                warnings.append("\(describe(index)): a \(type) block, which this importer does not read, is left out")
                            default: continue
                            }
                        }
                    } else {
                        text = Self.text(of: message["content"])
                    }
                }
                if let unnamed = calls.first(where: { $0.call.name.isEmpty }) {
                    warnings.append("\(describe(index)): call \"\(unnamed.call.id)\" names no tool")
                }
                lastFinish = message["finish_reason"]?.stringValue ?? message["stop_reason"]?.stringValue
                let decision: ImportedStep.Decision
                if !calls.isEmpty {
                    decision = .calls(calls)
                } else if let refusal, !refusal.isEmpty {
                    decision = .invalid(InvalidDecision(kind: .empty, message: "the model refused: \(refusal)"))
                } else if text.isEmpty {
                    decision = .invalid(InvalidDecision(kind: .empty, message: "the assistant message has no text and no tool calls"))
                } else {
                    decision = .answer(text)
                }
                steps.append(
                    ImportedStep(
                        decision: decision, raw: message, format: dialect.messageFormat, records: [message],
                        usage: Self.usage(message["usage"]),
                        timeUs: Self.timeUs(message)))
                // The API ran every call of the message itself and wrote its answer after their
                // results: the calls are a step, and the answer the step after it.
                let answersAfterItsCalls =
                    !calls.isEmpty && !text.isEmpty
                    && calls.allSatisfy { call in inlineResults.contains { $0["tool_use_id"]?.stringValue == call.call.id } }
                for block in inlineResults {
                    let content = block["content"]
                    var output = Self.text(of: content)
                    if output.isEmpty, let content, content != .null { output = JSONWriter.encodeString(content) }
                    let failed =
                        block["is_error"]?.boolValue == true || content?["type"]?.stringValue?.hasSuffix("_error") == true
                    let result = ImportedResult.fromContent(output, isError: failed, timeUs: Self.timeUs(message))
                    attach(
                        result, toId: block["tool_use_id"]?.stringValue, record: ["role": "assistant", "content": [block]], message: index)
                }
                if answersAfterItsCalls {
                    steps.append(
                        ImportedStep(
                            decision: .answer(text), raw: message, format: dialect.messageFormat, records: [], usage: nil,
                            timeUs: Self.timeUs(message)))
                }
            case (.openAI, "tool"), (.openAI, "function"):
                // Inspect marks a failed call with `error: {type, message}` beside the content.
                let error = message["error"].flatMap { $0 == .null ? nil : ($0["message"]?.stringValue ?? $0.stringValue ?? "error") }
                var result = ImportedResult.fromContent(
                    Self.text(of: message["content"]), isError: error != nil, timeUs: Self.timeUs(message))
                if let error { result.error = error }
                attach(result, toId: message["tool_call_id"].flatMap(EpisodeFinder.scalarText), record: message, message: index)
                userTurn = nil
            case (.anthropic, "user")
            where message["content"]?.arrayValue?.contains(where: { $0["type"]?.stringValue == "tool_result" }) == true:
                userTurn = nil
                var other: [JSONValue] = []
                for block in message["content"]?.arrayValue ?? [] {
                    guard block["type"]?.stringValue == "tool_result" else {
                        other.append(block)
                        continue
                    }
                    let result = ImportedResult.fromContent(
                        Self.text(of: block["content"]), isError: block["is_error"]?.boolValue == true, timeUs: Self.timeUs(message))
                    attach(result, toId: block["tool_use_id"]?.stringValue, record: ["role": "user", "content": [block]], message: index)
                }
                if !other.isEmpty {
                    let record: JSONValue = ["role": "user", "content": .array(other)]
                    if steps.isEmpty { preamble.append(record) } else { steps[steps.count - 1].records.append(record) }
                }
            default:
                if role == "user" {
                    let text = Self.text(of: message["content"])
                    if goal == nil { goal = text }
                    userTurn = index
                    userMessages.append((steps.count, text))
                }
                if steps.isEmpty { preamble.append(message) } else { steps[steps.count - 1].records.append(message) }
            }
        }
        for call in pending {
            warnings.append(
                "call \"\(steps[call.step].calls[call.index].call.id)\" has no result in the transcript: it counts as proposed, not run")
        }
        let mapped = Self.stop(after: steps, finish: lastFinish)
        var stop: RunStopped? = mapped.stopped
        var sourceStop = lastFinish ?? mapped.source
        // More than one user message: a conversation, each message a user turn. One that ends it
        // (a simulated user's stop token, τ-bench's ###STOP###) is how the run ended.
        let userTurns = Self.userTurns(userMessages, steps: steps.count, warnings: &warnings)
        if let last = userTurns.last, let userTurn, !steps.isEmpty, let ending = last.turn.ends {
            let answer: String? = if case .answer(let text) = steps[steps.count - 1].decision { text } else { nil }
            stop = RunStopped(reason: ending.stopReason, answer: answer)
            sourceStop = "the user's \(ending.rawValue) (\(describe(userTurn)))"
        } else if let userTurn, !steps.isEmpty {
            // The agent was cut off: what it would have done next is not in the transcript, so the
            // run did not finish (no run_stopped), whatever its last reply was.
            stop = nil
            sourceStop = Self.userTurnStop
            warnings.append(
                "\(Self.userTurnNote) (\(describe(userTurn))), which the agent never answered: "
                    + "the run is imported unfinished (no run_stopped), not as ending on its last reply")
        }
        return ImportedRun(
            source: RunSource(
                format: dialect.rawValue, file: file.path, id: episode.id, importer: ImportWriter.importer, stop: sourceStop,
                metadata: episode.metadata),
            goal: goal ?? "", agentName: Self.agentName(file.path),
            model: ModelIdentity(provider: dialect.provider, name: episode.model ?? "unknown"),
            tools: ImportedRun.tools(declaredBy: episode.tools),
            preamble: preamble, steps: steps, stop: stop, startUs: file.modifiedUs, warnings: warnings, userTurns: userTurns)
    }

    /// A conversation's user turns from its user messages, each with the step it comes before:
    /// none for one message (a run on one input), else one per message, a stop token in it taken
    /// as the user's ending (`UserTurn.Ending.parse`) — only in the last message, after the
    /// agent's last step (of `steps`): a turn that ends the conversation is followed by the run's
    /// stop (docs/log-format.md), so one the agent answered, or one another message follows,
    /// keeps its token as text, with a warning. A message whose ending agent-eval's own export
    /// recorded (`trusted`, by index) ends the conversation wherever it stands: the run it came
    /// from ended so, whatever the agent did after (a recorded program's last requests).
    static func userTurns(
        _ messages: [(beforeStep: Int, text: String)], steps: Int, trusted: Set<Int> = [], warnings: inout [String]
    ) -> [(beforeStep: Int, turn: UserTurn)] {
        guard messages.count > 1 else { return [] }
        return messages.enumerated().map { number, message in
            let turn = UserTurn(turn: number + 1, parsing: message.text, source: .given)
            guard let ending = turn.ends, !trusted.contains(number) else { return (message.beforeStep, turn) }
            let why: String
            if message.beforeStep < steps {
                why = "the agent went on after it"
            } else if number < messages.count - 1 {
                why = "user turn \(number + 2) follows it"
            } else {
                return (message.beforeStep, turn)
            }
            warnings.append(
                "user turn \(number + 1) holds the stop token of a \(ending.rawValue), but \(why): "
                    + "kept as what the user said, not as the conversation's end")
            return (message.beforeStep, UserTurn(turn: number + 1, text: message.text, source: .given))
        }
    }

    /// `run_started.source.stop` of a transcript that ends on a user turn.
    static let userTurnStop = "ends on a user turn"
    /// How the import's note on such a transcript starts.
    static let userTurnNote = "the transcript ends on a user turn"

    /// How a transcript ended (docs/interop.md, "Stop reasons"); a transcript that ends on a user
    /// turn is unfinished whatever this says (`run()`).
    static func stop(after steps: [ImportedStep], finish: String?) -> (stopped: RunStopped, source: String) {
        switch finish {
        case "length", "max_tokens":
            return (
                RunStopped(reason: .budgetExhausted, limit: .tokenBudget, error: "the model hit its output limit (\(finish ?? ""))"),
                finish ?? ""
            )
        case "content_filter", "refusal":
            return (RunStopped(reason: .blocked, error: "the provider stopped the reply (\(finish ?? ""))"), finish ?? "")
        default: break
        }
        guard let last = steps.last else {
            return (RunStopped(reason: .blocked, error: "the transcript has no assistant message"), "no assistant message")
        }
        switch last.decision {
        case .answer(let text): return (RunStopped(reason: .success, answer: text), "final answer")
        case .invalid(let invalid): return (RunStopped(reason: .invalidDecision, error: invalid.message), "invalid last message")
        case .calls:
            return (
                RunStopped(reason: .blocked, error: "the transcript ends after tool calls, without a final answer"),
                "ends after tool calls"
            )
        }
    }

    /// Arguments as an object: a JSON string is parsed; text that is not JSON is kept as a string
    /// (and reported), so a matcher sees what the model really sent.
    static func arguments(_ value: JSONValue?, call: String, at place: String, warnings: inout [String]) -> JSONValue {
        switch value {
        case nil, .null?: return .object(JSONObject())
        case .string(let text)?:
            if text.trimmingCharacters(in: .whitespaces).isEmpty { return .object(JSONObject()) }
            if let parsed = try? JSONParser.parse(Array(text.utf8)) { return parsed }
            let cut =
                TraceImporter.endsTooEarly(text)
                ? " (they end too early, at \(text.count) characters: cut by the model's token limit or an exporter's attribute length limit?)"
                : ""
            warnings.append("\(place): the arguments of call \"\(call)\" are not valid JSON\(cut); kept as the string as it was recorded")
            return .string(text)
        case let other?: return other
        }
    }

    /// The text of a content value (`MessageText.of`).
    static func text(of content: JSONValue?) -> String { MessageText.of(content) }

    static func usage(_ value: JSONValue?) -> TokenUsage? {
        guard let value else { return nil }
        let input = value["input_tokens"]?.intValue ?? value["prompt_tokens"]?.intValue
        let output = value["output_tokens"]?.intValue ?? value["completion_tokens"]?.intValue
        guard input != nil || output != nil else { return nil }
        return TokenUsage(input: input ?? 0, output: output ?? 0)
    }

    /// A message's own time, when it has a numeric `timestamp` or `created` (seconds or ms).
    static func timeUs(_ message: JSONValue) -> Int? {
        guard let number = (message["timestamp"] ?? message["created"] ?? message["created_at"])?.doubleValue else { return nil }
        // Saturating: a number no time is (`1e300`) becomes one the log writer refuses, naming
        // the event, instead of a trap here.
        switch number {
        case ..<1e11: return Int(saturating: number * 1_000_000)
        case ..<1e14: return Int(saturating: number * 1_000)
        default: return Int(saturating: number)
        }
    }

    static func agentName(_ path: String) -> String {
        let name = path.split(separator: "/").last.map(String.init) ?? path
        return name.split(separator: ".").first.map(String.init) ?? name
    }
}
