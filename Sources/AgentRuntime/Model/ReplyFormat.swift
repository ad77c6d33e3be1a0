public import TraceCore

/// The shapes a model's raw reply can be recorded in, and how each maps onto a decision.
///
/// A provider's reply is recorded as the provider's own assembled message (what its
/// non-streaming API would have returned), so the log keeps what the model said; the
/// mapping below turns it into the decision object the runtime validates. The mapping is
/// pure: replay and re-run apply it to the recorded text and get the same decision.
/// `docs/models.md` documents it.
/// What a recorded reply maps to: a decision object to validate, or the reason there is none.
public enum MappedReply: Sendable, Hashable {
    case decision(JSONValue)
    case rejected(InvalidDecision)
}

public enum ReplyFormat: String, Sendable, CaseIterable {
    /// `{"message": {"content", "refusal", "tool_calls": [{"id", "function": {"name",
    /// "arguments"}}]}, "finish_reason"}`: an OpenAI Chat Completions choice.
    case openAIChat = "openai.chat"
    /// `{"content": [{"type": "text", "text"} | {"type": "tool_use", "id", "name", "input"}],
    /// "stop_reason"}`: an Anthropic Messages reply. A `tool_use` whose streamed input was not
    /// JSON keeps the text as `input_json` instead of `input`.
    case anthropicMessages = "anthropic.messages"

    /// The decision object (`{"answer": …}` or `{"tool_calls": […]}`) that `raw` says, or
    /// why it says none.
    public func decisionObject(from raw: String) -> MappedReply {
        let value: JSONValue
        do {
            value = try JSONParser.parse(Array(raw.utf8))
        } catch {
            return .rejected(InvalidDecision(kind: .unparseable, message: "the recorded \(rawValue) reply is not JSON (\(error))"))
        }
        switch self {
        case .openAIChat: return Self.openAIDecision(value)
        case .anthropicMessages: return Self.anthropicDecision(value)
        }
    }

    private static func openAIDecision(_ value: JSONValue) -> MappedReply {
        let message = value["message"] ?? .null
        let finish = value["finish_reason"]?.stringValue
        if let refusal = message["refusal"]?.stringValue, !refusal.allSatisfy(\.isWhitespace) {
            return .rejected(InvalidDecision(kind: .empty, message: "the model refused: \(refusal)"))
        }
        if let cut = cutOff(finish, lengthReason: "length", filterReason: "content_filter") { return .rejected(cut) }
        var calls: [JSONValue] = []
        for (index, call) in (message["tool_calls"]?.arrayValue ?? []).enumerated() {
            let function = call["function"] ?? .null
            let name = function["name"]?.stringValue ?? ""
            switch arguments(fromText: function["arguments"]?.stringValue ?? "", place: "tool_calls[\(index)] (\(name))") {
            case .decision(let arguments): calls.append(["name": .string(name), "arguments": arguments])
            case .rejected(let invalid): return .rejected(invalid)
            }
        }
        let text = message["content"]?.stringValue ?? ""
        return mappedDecision(calls: calls, text: text, finish: finish.map { "finish_reason \"\($0)\"" })
    }

    private static func anthropicDecision(_ value: JSONValue) -> MappedReply {
        let stop = value["stop_reason"]?.stringValue
        var calls: [JSONValue] = []
        var text = ""
        for (index, block) in (value["content"]?.arrayValue ?? []).enumerated() {
            switch block["type"]?.stringValue {
            case "text":
                text += block["text"]?.stringValue ?? ""
            case "tool_use":
                let name = block["name"]?.stringValue ?? ""
                if let input = block["input"] {
                    calls.append(["name": .string(name), "arguments": input])
                } else {
                    switch arguments(fromText: block["input_json"]?.stringValue ?? "", place: "content[\(index)] (\(name))") {
                    case .decision(let arguments): calls.append(["name": .string(name), "arguments": arguments])
                    case .rejected(let invalid): return .rejected(invalid)
                    }
                }
            default:
                continue
            }
        }
        if stop == "refusal" {
            return .rejected(
                InvalidDecision(kind: .empty, message: "the model refused (stop_reason \"refusal\")" + (text.isEmpty ? "" : ": \(text)")))
        }
        if let cut = cutOff(stop, lengthReason: "max_tokens", filterReason: nil) { return .rejected(cut) }
        return mappedDecision(calls: calls, text: text, finish: stop.map { "stop_reason \"\($0)\"" })
    }

    /// A reply cut at the token limit is not a decision: its text or its arguments may be
    /// incomplete.
    private static func cutOff(_ reason: String?, lengthReason: String, filterReason: String?) -> InvalidDecision? {
        if reason == lengthReason {
            return InvalidDecision(
                kind: .unparseable, message: "the reply was cut off at the token limit (\"\(lengthReason)\"); raise max_tokens")
        }
        if let filterReason, reason == filterReason {
            return InvalidDecision(kind: .empty, message: "the provider filtered the reply (\"\(filterReason)\")")
        }
        return nil
    }

    /// Tool calls win over text beside them (the text is the model thinking aloud; it stays
    /// in `raw`); text alone is the answer.
    private static func mappedDecision(calls: [JSONValue], text: String, finish: String?) -> MappedReply {
        if !calls.isEmpty { return .decision(["tool_calls": .array(calls)]) }
        if !text.allSatisfy(\.isWhitespace) { return .decision(["answer": .string(text)]) }
        return .rejected(
            InvalidDecision(kind: .empty, message: "the reply has no text and no tool calls" + (finish.map { " (\($0))" } ?? "")))
    }

    /// Arguments streamed as JSON text: empty text is `{}`, anything else must parse.
    private static func arguments(fromText text: String, place: String) -> MappedReply {
        if text.allSatisfy(\.isWhitespace) { return .decision(.object(JSONObject())) }
        do {
            return .decision(try JSONParser.parse(Array(text.utf8)))
        } catch {
            let preview = text.count > 60 ? String(text.prefix(60)) + "…" : text
            return .rejected(
                InvalidDecision(kind: .invalidArguments, message: "\(place): the arguments are not JSON (\(error)): \"\(preview)\""))
        }
    }
}
