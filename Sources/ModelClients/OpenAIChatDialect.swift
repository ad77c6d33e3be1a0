import AgentRuntime
import TraceCore

/// OpenAI Chat Completions (`POST {base}/chat/completions`), as OpenAI and the servers that
/// copy it (vLLM, llama.cpp server, Ollama's `/v1`, LM Studio) speak it.
struct OpenAIChatDialect: ProviderDialect {
    var format: ReplyFormat { .openAIChat }
    var path: String { "/chat/completions" }

    func headers(apiKey: String?) -> [HTTPHeader] {
        apiKey.map { [HTTPHeader(name: "authorization", value: "Bearer \($0)")] } ?? []
    }

    func body(for request: ModelRequest, settings: ModelSettings) -> JSONValue {
        let conversation = Conversation(request)
        var messages: [JSONValue] = []
        if !conversation.system.isEmpty { messages.append(["role": "system", "content": .string(conversation.system)]) }
        for turn in conversation.turns {
            switch turn {
            case .user(let text):
                messages.append(["role": "user", "content": .string(text)])
            case .agent(let text):
                messages.append(["role": "assistant", "content": .string(text)])
            case .calls(let observations):
                let calls: [JSONValue] = observations.map { observation in
                    [
                        "id": .string(observation.callId), "type": "function",
                        "function": [
                            "name": .string(observation.tool), "arguments": .string(JSONWriter.encodeString(observation.arguments)),
                        ],
                    ]
                }
                messages.append(["role": "assistant", "content": .null, "tool_calls": .array(calls)])
                for observation in observations {
                    messages.append(
                        [
                            "role": "tool", "tool_call_id": .string(observation.callId),
                            "content": .string(Conversation.resultText(observation)),
                        ])
                }
            }
        }
        var body = ObjectBuilder()
        body.set("model", settings.name)
        body.set("messages", JSONValue.array(messages))
        if !request.tools.isEmpty {
            let tools: [JSONValue] = request.tools.map { tool in
                [
                    "type": "function",
                    "function": ["name": .string(tool.name), "description": .string(tool.description), "parameters": tool.inputSchema],
                ]
            }
            body.set("tools", JSONValue.array(tools))
        }
        body.set("temperature", settings.temperature)
        body.set("max_tokens", settings.maxTokens)
        body.set("seed", settings.seed)
        body.set("stream", settings.stream)
        if settings.stream { body.set("stream_options", ["include_usage": true] as JSONValue) }
        return body.json
    }

    func makeAssembler() -> any ReplyAssembler { OpenAIChatAssembler() }
}

/// Assembles Chat Completions chunks: text and refusal deltas appended, tool-call deltas
/// merged by `index` (the id and name come once, the arguments in pieces), the finish reason
/// from the choice, usage from the last chunk (`stream_options.include_usage`), `[DONE]` last.
struct OpenAIChatAssembler: ReplyAssembler {
    struct PendingCall {
        var id = ""
        var name = ""
        var arguments = ""
    }

    var text: String?
    var refusal: String?
    var textSoFar: String { text ?? "" }
    /// By the index the server gave, in order of first appearance.
    var calls: [(index: Int, call: PendingCall)] = []
    var finishReason: String?
    var usage: TokenUsage?
    private(set) var hasContent = false
    private(set) var isComplete = false
    var hasSaidItsEnd: Bool { isComplete || finishReason != nil }

    /// Whether chunks are read by `ChunkScanner` first (the tests turn it off to compare).
    var usesChunkScanner = true

    mutating func consume(_ event: ServerSentEvent) throws(StreamProblem) {
        if event.data == "[DONE]" {
            isComplete = true
            return
        }
        // Most chunks are read straight from their bytes; what the scanner cannot vouch for is
        // parsed whole, with the same outcome.
        if usesChunkScanner, let chunk = ChunkScanner.scan(event.data) {
            try apply(chunk)
            return
        }
        try apply(Self.chunk(of: try parseEventJSON(event, provider: "openai")))
    }

    /// The members of a parsed chunk that a reply needs, as the scanner reads them.
    static func chunk(of value: JSONValue) -> ChunkScanner.Chunk {
        var chunk = ChunkScanner.Chunk()
        if let error = value["error"], error != .null { chunk.error = error }
        if let usage = value["usage"], usage != .null { chunk.usage = usage }
        guard let choice = firstChoice(value["choices"]) else { return chunk }
        chunk.hasChoice = true
        let delta = choice["delta"] ?? .null
        chunk.content = delta["content"]?.stringValue
        chunk.refusal = delta["refusal"]?.stringValue
        chunk.toolCalls = (delta["tool_calls"]?.arrayValue ?? []).map { call in
            let function = call["function"] ?? .null
            return ChunkScanner.Chunk.CallDelta(
                index: call["index"]?.intValue, id: call["id"]?.stringValue, name: function["name"]?.stringValue,
                arguments: function["arguments"]?.stringValue)
        }
        chunk.finishReason = choice["finish_reason"]?.stringValue
        return chunk
    }

    private mutating func apply(_ chunk: ChunkScanner.Chunk) throws(StreamProblem) {
        if let error = chunk.error { throw Self.problem(error) }
        if let usage = chunk.usage { self.usage = Self.usage(usage) }
        guard chunk.hasChoice else { return }
        // Appended in place: a long reply comes in thousands of pieces.
        if let piece = chunk.content {
            if text == nil { text = "" }
            text?.append(piece)
            if !piece.isEmpty { hasContent = true }
        }
        if let piece = chunk.refusal {
            if refusal == nil { refusal = "" }
            refusal?.append(piece)
            hasContent = true
        }
        for (position, call) in chunk.toolCalls.enumerated() {
            hasContent = true
            let index = call.index ?? position
            let slot: Int
            if let found = calls.firstIndex(where: { $0.index == index }) {
                slot = found
            } else {
                calls.append((index, PendingCall()))
                slot = calls.count - 1
            }
            if let id = call.id, !id.isEmpty { calls[slot].call.id = id }
            if let name = call.name { calls[slot].call.name += name }
            if let arguments = call.arguments { calls[slot].call.arguments += arguments }
        }
        if let finish = chunk.finishReason { finishReason = finish }
    }

    /// Choice 0 of `choices` (`index` 0, or the object at place 0 when it has no `index`): a
    /// request with `n` above 1 gets several, and its reply is the first's.
    static func firstChoice(_ choices: JSONValue?) -> JSONValue? {
        choices?.arrayValue?.enumerated().first { $0.element.objectValue != nil && ($0.element["index"]?.intValue ?? $0.offset) == 0 }?
            .element
    }

    mutating func consume(whole body: JSONValue) throws(StreamProblem) {
        if let error = body["error"], error != .null { throw Self.problem(error) }
        guard let choice = Self.firstChoice(body["choices"]) else {
            throw StreamProblem(message: "the openai response has no choices", isRetryable: false)
        }
        let message = choice["message"] ?? .null
        text = message["content"]?.stringValue
        refusal = message["refusal"]?.stringValue
        for (index, call) in (message["tool_calls"]?.arrayValue ?? []).enumerated() {
            let function = call["function"] ?? .null
            calls.append(
                (
                    index,
                    PendingCall(
                        id: call["id"]?.stringValue ?? "", name: function["name"]?.stringValue ?? "",
                        arguments: function["arguments"]?.stringValue ?? "")
                ))
        }
        finishReason = choice["finish_reason"]?.stringValue
        if let usage = body["usage"], usage != .null { self.usage = Self.usage(usage) }
        hasContent = true
        isComplete = true
    }

    func reply() -> (raw: JSONValue, usage: TokenUsage?) {
        (Self.choice(text: text, refusal: refusal, calls: calls.map(\.call), finishReason: finishReason), usage)
    }

    /// A Chat Completions choice as the log records it (`ReplyFormat.openAIChat`): the message
    /// with its text, refusal and tool calls, and the finish reason.
    static func choice(text: String?, refusal: String?, calls: [PendingCall], finishReason: String?) -> JSONValue {
        var message = ObjectBuilder()
        message.set("role", "assistant")
        message.set("content", text.map(JSONValue.string) ?? .null)
        message.set("refusal", refusal)
        if !calls.isEmpty {
            let list: [JSONValue] = calls.map { call in
                [
                    "id": .string(call.id), "type": "function",
                    "function": ["name": .string(call.name), "arguments": .string(call.arguments)],
                ]
            }
            message.set("tool_calls", JSONValue.array(list))
        }
        var raw = ObjectBuilder()
        raw.set("message", message.json)
        raw.set("finish_reason", finishReason.map(JSONValue.string) ?? .null)
        return raw.json
    }

    static func usage(_ value: JSONValue) -> TokenUsage {
        TokenUsage(input: value["prompt_tokens"]?.intValue ?? 0, output: value["completion_tokens"]?.intValue ?? 0)
    }

    /// An error object in the stream: servers send `{"error": {"message", "type", "code"}}`.
    static func problem(_ error: JSONValue) -> StreamProblem {
        let message = error["message"]?.stringValue ?? JSONWriter.encodeString(error)
        let type = error["type"]?.stringValue ?? error["code"]?.stringValue
        let retryable = ["server_error", "rate_limit_exceeded", "overloaded", "timeout"].contains(type ?? "")
        return StreamProblem(
            message: "the server sent an error mid-stream" + (type.map { " (\($0))" } ?? "") + ": \(message)", isRetryable: retryable)
    }
}
