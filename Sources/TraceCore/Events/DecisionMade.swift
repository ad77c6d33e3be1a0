/// One tool call the model proposed.
public struct ToolCall: JSONRepresentable, JSONObjectEncodable, Hashable {
    /// Unique within the run; verdicts, intents and results name the call by it.
    public var id: String
    public var name: String
    /// The arguments object as the model gave it, held as its canonical JSON: a reader copies
    /// it from the line, and the state and its digest write it again, without a tree.
    public var argumentsText: JSONText
    /// The arguments object as the model gave it (parsed from `argumentsText` on each use).
    public var arguments: JSONValue {
        get { argumentsText.value }
        set { argumentsText = JSONText(newValue) }
    }

    public init(id: String, name: String, arguments: JSONValue) {
        self.init(id: id, name: name, argumentsText: JSONText(arguments))
    }

    public init(id: String, name: String, argumentsText: JSONText) {
        self.id = id
        self.name = name
        self.argumentsText = argumentsText
    }

    public init(from scanner: inout JSONScanner) throws {
        var id: String?
        var name: String?
        var arguments: JSONText?
        try scanner.readObject(known: toolCallNames) { scanner, key in
            switch key {
            case "id": id = try scanner.read()
            case "name": name = try scanner.read()
            case "arguments": arguments = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.id = try required(id, "id")
        self.name = try required(name, "name")
        self.argumentsText = try required(arguments, "arguments")
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("arguments", argumentsText)
        object.set("id", id)
        object.set("name", name)
    }
}

/// A model response, parsed: what the model proposes the runtime do next.
public enum Decision: JSONRepresentable, JSONObjectEncodable, Hashable {
    /// A final answer for the user.
    case answer(String)
    /// One or more tool calls, independent of each other.
    case toolCalls([ToolCall])
    /// A question for a human before going on.
    case askHuman(String)
    /// The model gives up or declares the task done without an answer.
    case stop(reason: String)

    public init(from scanner: inout JSONScanner) throws {
        var type: String?
        var text: String?
        var calls: [ToolCall]?
        var question: String?
        var reason: String?
        try scanner.readObject(known: decisionNames) { scanner, key in
            switch key {
            case "type": type = try scanner.read()
            case "text": text = try scanner.read()
            case "calls": calls = try scanner.read()
            case "question": question = try scanner.read()
            case "reason": reason = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        switch try required(type, "type") {
        case "answer": self = .answer(try required(text, "text"))
        case "tool_calls": self = .toolCalls(try required(calls, "calls"))
        case "ask_human": self = .askHuman(try required(question, "question"))
        case "stop": self = .stop(reason: try required(reason, "reason"))
        case let other:
            throw TraceCoreError(
                .invalidField, "is \"\(other)\", which is not one of \"answer\", \"tool_calls\", \"ask_human\", \"stop\"",
                fieldPath: "type")
        }
    }

    public func members(into object: inout some JSONMemberSink) {
        switch self {
        case .answer(let text):
            object.set("text", text)
            object.set("type", "answer")
        case .toolCalls(let calls):
            object.set("calls", calls)
            object.set("type", "tool_calls")
        case .askHuman(let question):
            object.set("question", question)
            object.set("type", "ask_human")
        case .stop(let reason):
            object.set("reason", reason)
            object.set("type", "stop")
        }
    }
}

/// What made a model response unusable.
public enum InvalidDecisionKind: String, JSONEnum {
    /// Not parseable as any decision.
    case unparseable
    /// Names a tool that was not offered.
    case unknownTool = "unknown_tool"
    /// Arguments that fail the tool's input schema.
    case invalidArguments = "invalid_arguments"
    /// No answer, no call, nothing.
    case empty
    /// Parts that cannot all hold (an answer and tool calls, two calls with one id).
    case contradictory
}

/// A model response the runtime rejected, and why.
public struct InvalidDecision: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var kind: InvalidDecisionKind
    /// The parse or validation error, as the model will be told it.
    public var message: String

    public init(kind: InvalidDecisionKind, message: String) {
        self.kind = kind
        self.message = message
    }

    public init(from scanner: inout JSONScanner) throws {
        var kind: InvalidDecisionKind?
        var message: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "kind": kind = try scanner.read()
            case "message": message = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.kind = try required(kind, "kind")
        self.message = try required(message, "message")
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("kind", kind)
        object.set("message", message)
    }
}

/// Tokens a model call used, as the model reported them.
public struct TokenUsage: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var input: Int
    public var output: Int

    public init(input: Int, output: Int) {
        self.input = input
        self.output = output
    }

    public var total: Int { input.addingSaturating(output) }

    public init(from scanner: inout JSONScanner) throws {
        var input: Int?
        var output: Int?
        try scanner.readObject(known: tokenUsageNames) { scanner, key in
            switch key {
            case "input": input = try scanner.readMeasure()
            case "output": output = try scanner.readMeasure()
            default: try scanner.skipValue()
            }
        }
        self.input = try required(input, "input")
        self.output = try required(output, "output")
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("input", input)
        object.set("output", output)
    }
}

/// One request to a model's server that did not give the reply: why, and how long the
/// client waited before the next try. Recorded in `decision_made.attempts`, oldest first.
public struct ModelAttempt: JSONRepresentable, JSONObjectEncodable, Hashable {
    /// The HTTP status, when the server answered.
    public var status: Int?
    /// What went wrong, as the provider or the transport said it (never a secret).
    public var error: String
    /// What the server asked the client to wait (`retry-after` / `retry-after-ms`).
    public var retryAfterMs: Int?
    /// What the client waited before the next attempt.
    public var waitedMs: Int
    /// A streamed reply cut off after it carried content: the `sha256:` of the `content_stored`
    /// that holds the message its events had assembled (what the agent was passed), so the
    /// failure keeps the answer the agent read, not only why it failed.
    public var partialReply: String?

    public init(status: Int?, error: String, retryAfterMs: Int? = nil, waitedMs: Int, partialReply: String? = nil) {
        self.status = status
        self.error = error
        self.retryAfterMs = retryAfterMs
        self.waitedMs = waitedMs
        self.partialReply = partialReply
    }

    public init(from scanner: inout JSONScanner) throws {
        var status: Int?
        var error: String?
        var retryAfterMs: Int?
        var waitedMs: Int?
        var partialReply: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "status": status = try scanner.readOptional()
            case "error": error = try scanner.read()
            case "partial_reply": partialReply = try scanner.readOptional()
            case "retry_after_ms": retryAfterMs = try scanner.readOptional()
            case "waited_ms": waitedMs = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.status = status
        self.error = try required(error, "error")
        self.retryAfterMs = retryAfterMs
        self.waitedMs = try required(waitedMs, "waited_ms")
        self.partialReply = partialReply
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("error", error)
        object.set("partial_reply", partialReply)
        object.set("retry_after_ms", retryAfterMs)
        object.set("status", status)
        object.set("waited_ms", waitedMs)
    }

    /// One line for messages: `HTTP 429: slow down (waited 20 ms)`.
    public var summary: String {
        (status.map { "HTTP \($0): " } ?? "") + error + " (waited \(waitedMs) ms)"
            + (partialReply.map { "; the part of the reply passed on is stored as \($0)" } ?? "")
    }
}

/// `decision_made`: the model's raw output and what the runtime made of it.
public struct DecisionMade: JSONRepresentable, JSONObjectEncodable, Hashable {
    /// Either a decision or the reason there is none.
    public enum Outcome: Hashable, Sendable {
        case valid(Decision)
        case invalid(InvalidDecision)
    }

    /// The model output exactly as received: a decision object's text, or for a provider's
    /// reply (`format` set) the provider's assembled message as JSON.
    public var raw: String
    /// How `raw` is read: nil for agent-eval's decision object, `openai.chat` or
    /// `anthropic.messages` for a provider's message (docs/models.md has the mapping).
    public var format: String?
    public var outcome: Outcome
    public var usage: TokenUsage?
    public var latencyUs: Int?
    /// From sending the request to the first streamed content, when the reply streamed.
    public var timeToFirstTokenUs: Int?
    public var costUSD: Double?
    /// Requests before the one that answered, which failed and were retried; oldest first.
    public var attempts: [ModelAttempt]
    /// A recorded program's conversation with a simulated user: the reply came in a model
    /// conversation that is not the agent's talk with the user (a summary, a classifier, a
    /// sub-agent it did not hand the user's words), so an answer in it was not said to the user.
    public var isAside = false

    public init(
        raw: String, format: String? = nil, outcome: Outcome, usage: TokenUsage? = nil, latencyUs: Int? = nil,
        timeToFirstTokenUs: Int? = nil, costUSD: Double? = nil, attempts: [ModelAttempt] = [], isAside: Bool = false
    ) {
        self.isAside = isAside
        self.raw = raw
        self.format = format
        self.outcome = outcome
        self.usage = usage
        self.latencyUs = latencyUs
        self.timeToFirstTokenUs = timeToFirstTokenUs
        self.costUSD = costUSD
        self.attempts = attempts
    }

    /// The parsed decision, if the output was valid.
    public var decision: Decision? {
        if case .valid(let decision) = outcome { return decision }
        return nil
    }

    public init(from scanner: inout JSONScanner) throws {
        var raw: String?
        var format: String?
        var decision: Decision?
        var invalid: InvalidDecision?
        var usage: TokenUsage?
        var latencyUs: Int?
        var timeToFirstTokenUs: Int?
        var costUSD: Double?
        var attempts: [ModelAttempt]?
        var isAside: Bool?
        try scanner.readObject(known: decisionMadeNames) { scanner, key in
            switch key {
            case "aside": isAside = try scanner.readOptional()
            case "raw": raw = try scanner.read()
            case "format": format = try scanner.readOptional()
            case "decision": decision = try scanner.readOptional()
            case "invalid": invalid = try scanner.readOptional()
            case "usage": usage = try scanner.readOptional()
            case "latency_us": latencyUs = try scanner.readOptionalMeasure()
            case "ttft_us": timeToFirstTokenUs = try scanner.readOptionalMeasure()
            case "cost_usd": costUSD = try scanner.readOptional()
            case "attempts": attempts = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.raw = try required(raw, "raw")
        self.format = format
        switch (decision, invalid) {
        case (let decision?, nil): outcome = .valid(decision)
        case (nil, let invalid?): outcome = .invalid(invalid)
        default:
            throw TraceCoreError(.invalidField, "must have exactly one of \"decision\" and \"invalid\"", fieldPath: "")
        }
        self.usage = usage
        self.latencyUs = latencyUs
        self.timeToFirstTokenUs = timeToFirstTokenUs
        self.costUSD = costUSD
        self.attempts = attempts ?? []
        self.isAside = isAside ?? false
    }

    public func members(into object: inout some JSONMemberSink) {
        if isAside { object.set("aside", true) }
        if !attempts.isEmpty { object.set("attempts", attempts) }
        object.set("cost_usd", costUSD)
        if case .valid(let decision) = outcome { object.set("decision", decision) }
        object.set("format", format)
        if case .invalid(let invalid) = outcome { object.set("invalid", invalid) }
        object.set("latency_us", latencyUs)
        object.set("raw", raw)
        object.set("ttft_us", timeToFirstTokenUs)
        object.set("usage", usage)
    }
}

/// The member names `ToolCall`'s reader knows, in the order the writer writes them.
private let toolCallNames = MemberNames(["arguments", "id", "name"])

/// The member names `Decision`'s reader knows, in the order the writer writes them.
private let decisionNames = MemberNames(["calls", "question", "reason", "text", "type"])

/// The member names `TokenUsage`'s reader knows, in the order the writer writes them.
private let tokenUsageNames = MemberNames(["input", "output"])

/// The member names `DecisionMade`'s reader knows, in the order the writer writes them.
private let decisionMadeNames = MemberNames([
    "aside", "attempts", "cost_usd", "decision", "format", "invalid", "latency_us", "raw", "ttft_us", "usage",
])
