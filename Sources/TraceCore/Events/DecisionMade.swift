/// One tool call the model proposed.
public struct ToolCall: JSONRepresentable, Hashable {
    /// Unique within the run; verdicts, intents and results name the call by it.
    public var id: String
    public var name: String
    /// The arguments object as the model gave it.
    public var arguments: JSONValue

    public init(id: String, name: String, arguments: JSONValue) {
        self.id = id
        self.name = name
        self.arguments = arguments
    }

    public init(from scanner: inout JSONScanner) throws {
        var id: String?
        var name: String?
        var arguments: JSONValue?
        try scanner.readObject { scanner, key in
            switch key {
            case "id": id = try scanner.read()
            case "name": name = try scanner.read()
            case "arguments": arguments = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.id = try required(id, "id")
        self.name = try required(name, "name")
        self.arguments = try required(arguments, "arguments")
    }

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("id", id)
        object.set("name", name)
        object.set("arguments", arguments)
        return object.json
    }
}

/// A model response, parsed: what the model proposes the runtime do next.
public enum Decision: JSONRepresentable, Hashable {
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
        try scanner.readObject { scanner, key in
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

    public var json: JSONValue {
        var object = ObjectBuilder()
        switch self {
        case .answer(let text):
            object.set("type", "answer")
            object.set("text", text)
        case .toolCalls(let calls):
            object.set("type", "tool_calls")
            object.set("calls", calls)
        case .askHuman(let question):
            object.set("type", "ask_human")
            object.set("question", question)
        case .stop(let reason):
            object.set("type", "stop")
            object.set("reason", reason)
        }
        return object.json
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
public struct InvalidDecision: JSONRepresentable, Hashable {
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

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("kind", kind)
        object.set("message", message)
        return object.json
    }
}

/// Tokens a model call used, as the model reported them.
public struct TokenUsage: JSONRepresentable, Hashable {
    public var input: Int
    public var output: Int

    public init(input: Int, output: Int) {
        self.input = input
        self.output = output
    }

    public var total: Int { input + output }

    public init(from scanner: inout JSONScanner) throws {
        var input: Int?
        var output: Int?
        try scanner.readObject { scanner, key in
            switch key {
            case "input": input = try scanner.read()
            case "output": output = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.input = try required(input, "input")
        self.output = try required(output, "output")
    }

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("input", input)
        object.set("output", output)
        return object.json
    }
}

/// `decision_made`: the model's raw output and what the runtime made of it.
public struct DecisionMade: JSONRepresentable, Hashable {
    /// Either a decision or the reason there is none.
    public enum Outcome: Hashable, Sendable {
        case valid(Decision)
        case invalid(InvalidDecision)
    }

    /// The model output exactly as received.
    public var raw: String
    public var outcome: Outcome
    public var usage: TokenUsage?
    public var latencyUs: Int?
    public var costUSD: Double?

    public init(raw: String, outcome: Outcome, usage: TokenUsage? = nil, latencyUs: Int? = nil, costUSD: Double? = nil) {
        self.raw = raw
        self.outcome = outcome
        self.usage = usage
        self.latencyUs = latencyUs
        self.costUSD = costUSD
    }

    /// The parsed decision, if the output was valid.
    public var decision: Decision? {
        if case .valid(let decision) = outcome { return decision }
        return nil
    }

    public init(from scanner: inout JSONScanner) throws {
        var raw: String?
        var decision: Decision?
        var invalid: InvalidDecision?
        var usage: TokenUsage?
        var latencyUs: Int?
        var costUSD: Double?
        try scanner.readObject { scanner, key in
            switch key {
            case "raw": raw = try scanner.read()
            case "decision": decision = try scanner.readOptional()
            case "invalid": invalid = try scanner.readOptional()
            case "usage": usage = try scanner.readOptional()
            case "latency_us": latencyUs = try scanner.readOptional()
            case "cost_usd": costUSD = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.raw = try required(raw, "raw")
        switch (decision, invalid) {
        case (let decision?, nil): outcome = .valid(decision)
        case (nil, let invalid?): outcome = .invalid(invalid)
        default:
            throw TraceCoreError(.invalidField, "must have exactly one of \"decision\" and \"invalid\"", fieldPath: "")
        }
        self.usage = usage
        self.latencyUs = latencyUs
        self.costUSD = costUSD
    }

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("raw", raw)
        switch outcome {
        case .valid(let decision): object.set("decision", decision)
        case .invalid(let invalid): object.set("invalid", invalid)
        }
        object.set("usage", usage)
        object.set("latency_us", latencyUs)
        object.set("cost_usd", costUSD)
        return object.json
    }
}
