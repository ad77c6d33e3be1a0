public import AgentRuntime
public import TraceCore

/// The model APIs whose replies this module reads, known by the end of the request's path.
public enum ModelAPI: String, Sendable, CaseIterable {
    /// `POST …/chat/completions`: OpenAI Chat Completions and the servers that copy it.
    case openAIChat = "openai.chat"
    /// `POST …/responses`: the OpenAI Responses API.
    case openAIResponses = "openai.responses"
    /// `POST …/messages`: Anthropic Messages.
    case anthropicMessages = "anthropic.messages"

    /// The API a request path is for (its query left out), or nil.
    public init?(path: String) {
        let path = path.split(separator: "?", maxSplits: 1).first.map(String.init) ?? path
        if path.hasSuffix("/chat/completions") {
            self = .openAIChat
        } else if path.hasSuffix("/responses") {
            self = .openAIResponses
        } else if path.hasSuffix("/messages") {
            self = .anthropicMessages
        } else {
            return nil
        }
    }

    /// `openai` or `anthropic`.
    public var provider: String { self == .anthropicMessages ? "anthropic" : "openai" }

    /// The shape the assembled reply is in: Responses replies are given in the Chat shape.
    public var replyFormat: ReplyFormat { self == .anthropicMessages ? .anthropicMessages : .openAIChat }

    func makeAssembler() -> any ReplyAssembler {
        switch self {
        case .openAIChat: OpenAIChatAssembler()
        case .openAIResponses: OpenAIResponsesAssembler()
        case .anthropicMessages: AnthropicMessagesAssembler()
        }
    }
}

/// Reads a model's reply as it passes by (a gateway forwarding it to an agent): takes the parts
/// of the HTTP response one by one, never fails, and at the end says what the reply was — the
/// assembled message in `ReplyFormat`, with usage — or what went wrong, in a sentence.
///
/// It uses the same assemblers as the model clients, so a stream is read one way everywhere.
/// Memory is bounded: a streamed line or event past `limits.maxLineBytes`, or a whole body past
/// `limits.maxReplyBytes`, stops the reading (the reply is then `problem`), not the forwarding.
public struct ReplyReader: Sendable {
    public let api: ModelAPI
    private let limits: RequestLimits
    private var assembler: any ReplyAssembler
    private var parser: ServerSentEventParser
    public private(set) var status = 0
    public private(set) var headers: [HTTPHeader] = []
    private var isStream = false
    /// A whole body, or the start of an error body.
    private var body: [UInt8] = []
    private var received = 0
    private var problem: String?
    /// Whether a 200 body without `text/event-stream` has been looked at for an event stream.
    private var isSniffed = false

    public init(api: ModelAPI, limits: RequestLimits = RequestLimits()) {
        self.api = api
        self.limits = limits
        assembler = api.makeAssembler()
        parser = ServerSentEventParser(maxLineBytes: limits.maxLineBytes)
    }

    /// What the reply was.
    public struct Reply: Sendable {
        public var status: Int
        /// The message in `format`, when the reply was a whole, well-formed answer.
        public var raw: JSONValue?
        public var format: ReplyFormat
        public var usage: TokenUsage?
        /// Why there is no message: an error status with the start of its body, a stream that
        /// ended early, bytes that are not what the API sends.
        public var problem: String?
        /// The server's wait hint on an error (`retry-after-ms`, `retry-after`), in ms.
        public var retryAfterMs: Int?
        /// The reply came as a stream of events.
        public var isStream: Bool
        /// A streamed 200 reply that did not come whole: the message in `format` assembled from
        /// the events that did come (the text and calls the agent was passed before the cut);
        /// nil when none carried content.
        public var partial: JSONValue?
    }

    /// A streamed reply read whole, up to its protocol's end marker (`[DONE]`, `message_stop`,
    /// `response.completed`): the answer is complete whatever the connection does afterwards.
    public var isComplete: Bool { status == 200 && isStream && problem == nil && assembler.isComplete }

    /// Content (text or a tool call) has arrived in the stream: the time to first token is now.
    public var hasContent: Bool { isStream && assembler.hasContent }

    /// Takes the next part of the response.
    public mutating func take(_ part: TransportPart) {
        switch part {
        case .head(let code, let fields):
            status = code
            headers = fields
            let type = fields.first { $0.name.lowercased() == "content-type" }?.value.lowercased() ?? ""
            isStream = type.hasPrefix("text/event-stream")
        case .chunk(let bytes):
            received += bytes.count
            guard problem == nil else { return }
            if status != 200 || !isStream {
                if body.count + bytes.count > limits.maxReplyBytes {
                    problem = "the reply is larger than \(limits.maxReplyBytes) bytes; it was passed on but not read"
                    body = []
                    return
                }
                body += bytes
                // An event stream under another content type (a proxy that relabels it, a server
                // that sends `application/json` for `"stream": true`): read as what it is, which
                // is what the agent's SDK does, not as a body that is no JSON.
                guard status == 200, !isSniffed else { return }
                switch Self.sniff(body) {
                case nil: return
                case false?: isSniffed = true
                case true?:
                    isSniffed = true
                    isStream = true
                    let seen = body
                    body = []
                    feed(seen)
                }
                return
            }
            feed(bytes)
        }
    }

    /// Whether a body that came without `text/event-stream` is an event stream: true when it
    /// begins (after white space) with a field of one (`data:`, `event:`, `id:`, `retry:`) or a
    /// comment (`:`), false when it begins otherwise (a JSON body), nil while too little came.
    static func sniff(_ body: [UInt8]) -> Bool? {
        guard let start = body.firstIndex(where: { ![0x20, 0x0A, 0x0D, 0x09].contains($0) }) else { return nil }
        let rest = body[start...]
        if rest.first == UInt8(ascii: ":") { return true }
        for field in ["data:", "event:", "id:", "retry:"] {
            let bytes = Array(field.utf8)
            if rest.starts(with: bytes) { return true }
            if rest.count < bytes.count, bytes.starts(with: rest) { return nil }
        }
        return false
    }

    /// Feeds streamed bytes to the event parser and the assembler.
    private mutating func feed(_ bytes: [UInt8]) {
        do {
            for event in try parser.feed(bytes) { try assembler.consume(event) }
        } catch let tooLong as ServerSentEventParser.LineTooLong {
            problem = "a streamed line is longer than \(tooLong.limit) bytes; the stream was passed on but not read"
        } catch let stream as StreamProblem {
            problem = stream.message
        } catch {
            problem = "\(error)"
        }
    }

    /// The message the events of a 200 stream assembled so far, when they carried content.
    private func partialMessage() -> JSONValue? {
        guard status == 200, isStream, assembler.hasContent else { return nil }
        return assembler.reply().raw
    }

    /// What the reply was, once the response has ended (or been cut off).
    public func finish() -> Reply {
        var reply = Reply(
            status: status, raw: nil, format: api.replyFormat, usage: nil, problem: problem,
            retryAfterMs: HTTPModelClient.retryAfter(headers), isStream: isStream)
        if status == 0 {
            reply.problem = reply.problem ?? "no answer came"
            return reply
        }
        if status != 200 {
            reply.problem =
                "HTTP \(status)\(HTTPModelClient.redirectNote(status: status, headers: headers)): \(HTTPModelClient.preview(body))"
            return reply
        }
        if problem != nil {
            reply.partial = partialMessage()
            return reply
        }
        var assembler = self.assembler
        if !isStream {
            do {
                try assembler.consume(whole: try JSONParser.parse(body))
            } catch let stream as StreamProblem {
                reply.problem = stream.message
                return reply
            } catch {
                reply.problem = "the reply is not JSON (\(error)): \(HTTPModelClient.preview(body))"
                return reply
            }
        } else if !assembler.hasSaidItsEnd {
            // A stream that ends cleanly after its finish reason is whole to the SDKs (the
            // agent got it): only one that ends before saying how the reply ended is cut short.
            reply.problem = "the stream ended before the reply was complete (\(received) bytes came)"
            reply.partial = partialMessage()
            return reply
        }
        let (raw, usage) = assembler.reply()
        reply.raw = raw
        reply.usage = usage
        return reply
    }
}
