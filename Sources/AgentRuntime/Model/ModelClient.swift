public import TraceCore

/// What the model is asked with: the context packet, the instructions, the tools it may
/// call and the observations the packet includes, in full.
public struct ModelRequest: Sendable {
    public var instructions: String
    public var packet: ContextBuilt
    /// The disclosed tools, in the agent's order.
    public var tools: [ToolSpec]
    /// The observations the packet includes, oldest first, with their full results.
    public var observations: [Observation]
    /// Why the previous reply was rejected, when the model is asked again after one.
    public var feedback: String?
    /// Decisions already made in this run (valid or not): the index of this one.
    public var decisionIndex: Int
    public var step: Int
    /// The run the request is for (empty outside a run, as for a judge): what a scripted rule's
    /// `chance` draws from, so each run draws anew and one run always draws the same.
    public var runId = ""
    /// A conversation's messages so far (`RunState.dialogue`), oldest first; empty for a run that
    /// is no conversation. Providers' requests interleave them with the calls by step.
    public var dialogue: [DialogueLine] = []

    public init(
        instructions: String, packet: ContextBuilt, tools: [ToolSpec], observations: [Observation], feedback: String?,
        decisionIndex: Int, step: Int
    ) {
        self.instructions = instructions
        self.packet = packet
        self.tools = tools
        self.observations = observations
        self.feedback = feedback
        self.decisionIndex = decisionIndex
        self.step = step
    }

    /// The newest observation, which scripted rules look at: in a conversation, only one made
    /// since the user last spoke (a call of an earlier turn is no news to this one).
    public var lastObservation: Observation? {
        guard let last = observations.last else { return nil }
        if let spoke = dialogue.last(where: { $0.speaker == .user })?.step, last.step < spoke { return nil }
        return last
    }

    /// What the user said last: the newest user line of a conversation, or the goal.
    public var lastUserText: String { dialogue.last(where: { $0.speaker == .user })?.text ?? packet.goal }
}

/// The result of one tool call as the model sees it.
public struct Observation: JSONObjectEncodable, Hashable {
    public var callId: String
    public var tool: String
    public var step: Int
    public var arguments: JSONValue
    /// `ok`, `error` or `refused`, or `denied` when policy or a human refused the call.
    public var status: String
    /// The output (from the log or its stored content), when there is one, as the canonical
    /// JSON text the result holds (`ToolCompleted.outputText`).
    public var outputText: JSONText?
    public var error: String?

    public init(callId: String, tool: String, step: Int, arguments: JSONValue, status: String, output: JSONValue?, error: String?) {
        self.init(
            callId: callId, tool: tool, step: step, arguments: arguments, status: status, outputText: output.map(JSONText.init),
            error: error)
    }

    public init(callId: String, tool: String, step: Int, arguments: JSONValue, status: String, outputText: JSONText?, error: String?) {
        self.callId = callId
        self.tool = tool
        self.step = step
        self.arguments = arguments
        self.status = status
        self.outputText = outputText
        self.error = error
    }

    /// The output, when there is one (made from `outputText` on each use).
    public var output: JSONValue? { outputText?.value }

    /// The observation as the model is shown it.
    public func members(into object: inout some JSONMemberSink) {
        object.set("arguments", arguments)
        object.set("call_id", callId)
        object.set("error", error)
        object.set("output", outputText)
        object.set("status", status)
        object.set("tool", tool)
    }
}

/// A model's answer to one request: the raw text, parsed by the runtime, and what it cost.
public struct ModelReply: Sendable, Hashable {
    public var raw: String
    /// How `raw` is read (`DecisionMade.format`): nil for a decision object, or a
    /// `ReplyFormat` raw value for a provider's assembled message.
    public var format: String?
    public var usage: TokenUsage?
    /// When the client knows it better than the runtime's measurement.
    public var latencyUs: Int?
    /// From sending the request to the first streamed content.
    public var timeToFirstTokenUs: Int?
    public var costUSD: Double?
    /// Requests that failed and were retried before this reply came.
    public var attempts: [ModelAttempt]

    public init(
        raw: String, format: String? = nil, usage: TokenUsage? = nil, latencyUs: Int? = nil, timeToFirstTokenUs: Int? = nil,
        costUSD: Double? = nil, attempts: [ModelAttempt] = []
    ) {
        self.raw = raw
        self.format = format
        self.usage = usage
        self.latencyUs = latencyUs
        self.timeToFirstTokenUs = timeToFirstTokenUs
        self.costUSD = costUSD
        self.attempts = attempts
    }

    /// A reply carrying a decision object such as `{"answer": "…"}`, as JSON text.
    public init(decision: JSONValue, usage: TokenUsage? = nil) {
        self.init(raw: JSONWriter.encodeString(decision), usage: usage)
    }
}

/// Something that turns a request into a reply: a scripted model, a replay of a log, or (in
/// a later module) an HTTP client. The runtime only sees this protocol.
///
/// Clients own their transport concerns: an HTTP client streams, retries transient failures
/// and respects rate limits inside `reply(to:)`, and throws only when it gives up. A thrown
/// error ends the run with `blocked` and the error recorded.
public protocol ModelClient: Sendable {
    /// Recorded in `run_started`.
    var identity: ModelIdentity { get }
    /// The sampling settings each request is sent (a simulated user's turns record them); nil
    /// for a model that samples nothing (a script, a replay).
    var sampling: SamplingSettings? { get }
    func reply(to request: ModelRequest) async throws -> ModelReply
}

extension ModelClient {
    public var sampling: SamplingSettings? { nil }
}

/// A model client that cannot answer: the message says why.
public struct ModelError: Diagnostic, Hashable {
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var diagnosticCode: String { "model.error" }
    public var place: SourceLocation? { nil }
}
