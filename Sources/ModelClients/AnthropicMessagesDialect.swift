import AgentRuntime
import TraceCore

/// Anthropic Messages (`POST {base}/messages`, `anthropic-version: 2023-06-01`).
struct AnthropicMessagesDialect: ProviderDialect {
    /// Messages requires `max_tokens`; this is used when the agent file gives none.
    static let defaultMaxTokens = 4096

    var format: ReplyFormat { .anthropicMessages }
    var path: String { "/messages" }

    func headers(apiKey: String?) -> [HTTPHeader] {
        [HTTPHeader(name: "anthropic-version", value: "2023-06-01")] + (apiKey.map { [HTTPHeader(name: "x-api-key", value: $0)] } ?? [])
    }

    func body(for request: ModelRequest, settings: ModelSettings) -> JSONValue {
        let conversation = Conversation(request)
        var messages: [JSONValue] = []
        for turn in conversation.turns {
            switch turn {
            case .user(let text):
                messages.append(["role": "user", "content": [["type": "text", "text": .string(text)]]])
            case .agent(let text):
                messages.append(["role": "assistant", "content": [["type": "text", "text": .string(text)]]])
            case .calls(let observations):
                let uses: [JSONValue] = observations.map { observation in
                    [
                        "type": "tool_use", "id": .string(observation.callId), "name": .string(observation.tool),
                        "input": observation.arguments,
                    ]
                }
                messages.append(["role": "assistant", "content": .array(uses)])
                let results: [JSONValue] = observations.map { observation in
                    [
                        "type": "tool_result", "tool_use_id": .string(observation.callId),
                        "content": .string(Conversation.resultText(observation)), "is_error": .bool(observation.status != "ok"),
                    ]
                }
                messages.append(["role": "user", "content": .array(results)])
            }
        }
        // Messages alternate: feedback after tool results joins their user turn.
        var merged: [JSONValue] = []
        for message in messages {
            if let last = merged.last, last["role"] == "user", message["role"] == "user",
                let earlier = last["content"]?.arrayValue, let later = message["content"]?.arrayValue
            {
                merged[merged.count - 1] = ["role": "user", "content": .array(earlier + later)]
            } else {
                merged.append(message)
            }
        }
        var body = ObjectBuilder()
        body.set("model", settings.name)
        body.set("max_tokens", settings.maxTokens ?? Self.defaultMaxTokens)
        if !conversation.system.isEmpty { body.set("system", conversation.system) }
        body.set("messages", JSONValue.array(merged))
        if !request.tools.isEmpty {
            let tools: [JSONValue] = request.tools.map { tool in
                ["name": .string(tool.name), "description": .string(tool.description), "input_schema": tool.inputSchema]
            }
            body.set("tools", JSONValue.array(tools))
        }
        body.set("temperature", settings.temperature)
        body.set("stream", settings.stream)
        return body.json
    }

    func makeAssembler() -> any ReplyAssembler { AnthropicMessagesAssembler() }
}

/// Assembles Messages stream events: `message_start` (input usage), `content_block_start`,
/// `content_block_delta` (`text_delta`, `input_json_delta`), `content_block_stop`,
/// `message_delta` (stop reason, output usage), `message_stop`; `ping` is ignored and
/// `error` ends the attempt.
struct AnthropicMessagesAssembler: ReplyAssembler {
    struct Block {
        var type: String
        var text = ""
        var id = ""
        var name = ""
        var inputJSON = ""
        /// A whole (non-streamed) tool_use input.
        var input: JSONValue?
    }

    /// By the index the server gave, in order of first appearance.
    var blocks: [(index: Int, block: Block)] = []

    var textSoFar: String {
        blocks.count == 1 ? blocks[0].block.text : blocks.reduce(into: "") { $0 += $1.block.type == "text" ? $1.block.text : "" }
    }
    var stopReason: String?
    var inputTokens = 0
    var outputTokens = 0
    var hasUsage = false
    private(set) var hasContent = false
    private(set) var isComplete = false
    var hasSaidItsEnd: Bool { isComplete || stopReason != nil }

    /// Whether `content_block_delta` events are read by `ChunkScanner` first (the tests turn it
    /// off to compare).
    var usesChunkScanner = true

    mutating func consume(_ event: ServerSentEvent) throws(StreamProblem) {
        // The delta events, most of a long reply, are read straight from their bytes; the
        // others, and any the scanner cannot vouch for, are parsed whole with the same outcome.
        if usesChunkScanner, let delta = ChunkScanner.scanBlockDelta(event.data) {
            try append(index: delta.index ?? -1, type: delta.deltaType, text: delta.text, partialJSON: delta.partialJSON)
            return
        }
        let value = try parseEventJSON(event, provider: "anthropic")
        let type = value["type"]?.stringValue ?? event.name
        switch type {
        case "ping":
            return
        case "error":
            throw Self.problem(value["error"] ?? value)
        case "message_start":
            let usage = value["message"]?["usage"] ?? .null
            inputTokens = Self.inputTokens(usage) ?? 0
            outputTokens = usage["output_tokens"]?.intValue ?? 0
            hasUsage = usage != .null
        case "content_block_start":
            let block = value["content_block"] ?? .null
            let index = value["index"]?.intValue ?? blocks.count
            var started = Block(type: block["type"]?.stringValue ?? "")
            started.text = block["text"]?.stringValue ?? ""
            started.id = block["id"]?.stringValue ?? ""
            started.name = block["name"]?.stringValue ?? ""
            blocks.append((index, started))
            if started.type == "tool_use" || !started.text.isEmpty { hasContent = true }
        case "content_block_delta":
            let delta = value["delta"] ?? .null
            try append(
                index: value["index"]?.intValue ?? -1, type: delta["type"]?.stringValue, text: delta["text"]?.stringValue,
                partialJSON: delta["partial_json"]?.stringValue)
        case "message_delta":
            if let stop = value["delta"]?["stop_reason"]?.stringValue { stopReason = stop }
            if let output = value["usage"]?["output_tokens"]?.intValue {
                outputTokens = output
                hasUsage = true
            }
            // The API's newer `message_delta` carries the input's counts too, as they end.
            if let input = Self.inputTokens(value["usage"] ?? .null) { inputTokens = input }
        case "message_stop":
            isComplete = true
        default:
            // content_block_stop, and kinds a newer API adds.
            return
        }
    }

    /// The input tokens a `usage` object counts: `input_tokens` and the prompt cache's tokens
    /// read and written (`cache_read_input_tokens`, `cache_creation_input_tokens`), which the API
    /// counts apart but the model processed all the same; nil when it has none of them.
    static func inputTokens(_ usage: JSONValue) -> Int? {
        let counts = ["input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"].compactMap { usage[$0]?.intValue }
        guard !counts.isEmpty else { return nil }
        return counts.reduce(0) { $0.addingSaturating(max($1, 0)) }
    }

    /// A `content_block_delta`: text or a piece of a tool call's input, for a started block.
    private mutating func append(index: Int, type: String?, text: String?, partialJSON: String?) throws(StreamProblem) {
        guard let slot = blocks.firstIndex(where: { $0.index == index }) else {
            throw StreamProblem(message: "the anthropic stream sent a delta for block \(index), which never started", isRetryable: false)
        }
        switch type {
        case "text_delta": blocks[slot].block.text += text ?? ""
        case "input_json_delta": blocks[slot].block.inputJSON += partialJSON ?? ""
        default: break
        }
        hasContent = true
    }

    mutating func consume(whole body: JSONValue) throws(StreamProblem) {
        if body["type"]?.stringValue == "error" { throw Self.problem(body["error"] ?? body) }
        for (index, block) in (body["content"]?.arrayValue ?? []).enumerated() {
            var whole = Block(type: block["type"]?.stringValue ?? "")
            whole.text = block["text"]?.stringValue ?? ""
            whole.id = block["id"]?.stringValue ?? ""
            whole.name = block["name"]?.stringValue ?? ""
            whole.input = block["input"]
            blocks.append((index, whole))
        }
        stopReason = body["stop_reason"]?.stringValue
        if let usage = body["usage"] {
            inputTokens = Self.inputTokens(usage) ?? 0
            outputTokens = usage["output_tokens"]?.intValue ?? 0
            hasUsage = true
        }
        hasContent = true
        isComplete = true
    }

    func reply() -> (raw: JSONValue, usage: TokenUsage?) {
        var content: [JSONValue] = []
        for (_, block) in blocks {
            switch block.type {
            case "text":
                content.append(["type": "text", "text": .string(block.text)])
            case "tool_use":
                var use = ObjectBuilder()
                use.set("type", "tool_use")
                use.set("id", block.id)
                use.set("name", block.name)
                if let input = block.input {
                    use.set("input", input)
                } else if block.inputJSON.allSatisfy(\.isWhitespace) {
                    use.set("input", JSONValue.object(JSONObject()))
                } else if let input = try? JSONParser.parse(Array(block.inputJSON.utf8)) {
                    use.set("input", input)
                } else {
                    use.set("input_json", block.inputJSON)
                }
                content.append(use.json)
            default:
                continue
            }
        }
        var raw = ObjectBuilder()
        raw.set("content", JSONValue.array(content))
        raw.set("stop_reason", stopReason.map(JSONValue.string) ?? .null)
        return (raw.json, hasUsage ? TokenUsage(input: inputTokens, output: outputTokens) : nil)
    }

    /// `{"type": "overloaded_error", "message": …}`: overloaded and api errors are worth
    /// another attempt, the rest (invalid request, authentication, …) are not.
    static func problem(_ error: JSONValue) -> StreamProblem {
        let type = error["type"]?.stringValue
        let message = error["message"]?.stringValue ?? JSONWriter.encodeString(error)
        let retryable = ["overloaded_error", "api_error", "rate_limit_error", "timeout_error"].contains(type ?? "")
        return StreamProblem(
            message: "the server sent an error mid-stream" + (type.map { " (\($0))" } ?? "") + ": \(message)", isRetryable: retryable)
    }
}
