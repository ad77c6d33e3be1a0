import AgentRuntime
import TraceCore

/// Assembles an OpenAI Responses API reply (`POST {base}/responses`), streamed or whole, into
/// the Chat Completions shape (`ReplyFormat.openAIChat`), so one reader of decisions serves both
/// OpenAI APIs:
/// - output items of type `message` give the text (their `output_text` parts) or a refusal;
/// - items of type `function_call` give the tool calls (`call_id`, `name`, `arguments`);
/// - the finish reason is `tool_calls` when there are calls, `length` when the response is
///   `incomplete` for `max_output_tokens`, `content_filter` for `content_filter`, else `stop`.
///
/// Streamed, the text deltas (`response.output_text.delta`) are shown as they come; the items
/// are taken when each is done (`response.output_item.done`), and `response.completed` (or
/// `response.incomplete`) carries the whole response, which wins.
struct OpenAIResponsesAssembler: ReplyAssembler {
    private var text: String?
    private var refusal: String?
    private var calls: [(id: String, name: String, arguments: String)] = []
    private var finishReason: String?
    private var usage: TokenUsage?
    private var streamedText = ""
    private(set) var hasContent = false
    private(set) var isComplete = false

    var textSoFar: String { text ?? streamedText }

    mutating func consume(_ event: ServerSentEvent) throws(StreamProblem) {
        if event.data == "[DONE]" {
            isComplete = true
            return
        }
        let value = try parseEventJSON(event, provider: "openai responses")
        let type = value["type"]?.stringValue ?? event.name
        switch type {
        case "response.output_text.delta":
            streamedText += value["delta"]?.stringValue ?? ""
            hasContent = true
        case "response.refusal.delta", "response.function_call_arguments.delta":
            hasContent = true
        case "response.output_item.done":
            if let item = value["item"] { take(item) }
        case "response.completed", "response.incomplete":
            try consume(whole: value["response"] ?? .null)
        case "response.failed":
            throw Self.problem(value["response"]?["error"] ?? value["error"] ?? value)
        case "error":
            throw Self.problem(value["error"] ?? value)
        default:
            break
        }
    }

    mutating func consume(whole body: JSONValue) throws(StreamProblem) {
        if let error = body["error"], error != .null { throw Self.problem(error) }
        guard let output = body["output"]?.arrayValue else {
            throw StreamProblem(message: "the openai response has no output", isRetryable: false)
        }
        text = nil
        refusal = nil
        calls = []
        for item in output { take(item) }
        if let usage = body["usage"], usage != .null {
            self.usage = TokenUsage(input: usage["input_tokens"]?.intValue ?? 0, output: usage["output_tokens"]?.intValue ?? 0)
        }
        switch body["incomplete_details"]?["reason"]?.stringValue {
        case "max_output_tokens"?: finishReason = "length"
        case "content_filter"?: finishReason = "content_filter"
        default: finishReason = calls.isEmpty ? "stop" : "tool_calls"
        }
        hasContent = true
        isComplete = true
    }

    /// One output item: a message's text or refusal, or a function call.
    private mutating func take(_ item: JSONValue) {
        switch item["type"]?.stringValue {
        case "message":
            for part in item["content"]?.arrayValue ?? [] {
                switch part["type"]?.stringValue {
                case "output_text": text = (text ?? "") + (part["text"]?.stringValue ?? "")
                case "refusal": refusal = (refusal ?? "") + (part["refusal"]?.stringValue ?? "")
                default: continue
                }
            }
        case "function_call":
            let id = item["call_id"]?.stringValue ?? item["id"]?.stringValue ?? ""
            guard !calls.contains(where: { $0.id == id && !id.isEmpty }) else { return }
            calls.append((id, item["name"]?.stringValue ?? "", item["arguments"]?.stringValue ?? ""))
        default:
            return
        }
        hasContent = true
    }

    func reply() -> (raw: JSONValue, usage: TokenUsage?) {
        let pending = calls.map { OpenAIChatAssembler.PendingCall(id: $0.id, name: $0.name, arguments: $0.arguments) }
        let finish = finishReason ?? (calls.isEmpty ? "stop" : "tool_calls")
        return (OpenAIChatAssembler.choice(text: text, refusal: refusal, calls: pending, finishReason: finish), usage)
    }

    static func problem(_ error: JSONValue) -> StreamProblem {
        let message = error["message"]?.stringValue ?? JSONWriter.encodeString(error)
        let code = error["code"]?.stringValue ?? error["type"]?.stringValue
        let retryable = ["server_error", "rate_limit_exceeded", "overloaded"].contains(code ?? "")
        return StreamProblem(message: "the response failed" + (code.map { " (\($0))" } ?? "") + ": \(message)", isRetryable: retryable)
    }
}
