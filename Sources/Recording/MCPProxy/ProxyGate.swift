import AgentRuntime
import ConfigFile
import Interop
import TraceCore
import TraceLog

/// What the MCP proxy records of its calls, on a run's recorder: the events of the gate, defined
/// once for the proxy's own log (`LocalProxyLog`) and for the run `agent-eval record` writes,
/// where the recorder's gateway applies them for the proxy (`ExchangeRecorder+Proxy`).
///
/// Steps: a call's proposal and verdict open a step that its intent ends (an allowed call) or
/// that ends at once (denied, or waiting for a person); an answer from a person, a result, each
/// end a step of their own. Every step end is a durability point of the log.
struct ProxyGate: Sendable {
    var policy: PolicyFile
    var actor: String?
    var route: String?
    var maxToolCalls: Int?
    /// Input and output tokens the run may use (`record --max-tokens`), for rules' `tokens_left_below`.
    var tokenBudget: Int?
    /// Tools whose approval-required calls are approved without asking (`--pre-approve`).
    var preApproved: [Glob]
    var serverName: String
    /// The server's tools as last listed.
    var tools: [ServedTool] = []

    /// What the gate makes of a call.
    enum Judgement: String, Sendable {
        /// Allowed (or approved on the command line): the intent comes next, then the call.
        case forward
        /// Denied: never forwarded.
        case deny
        /// Waits for a person.
        case ask
    }

    func spec(_ name: String) -> ToolSpec {
        let served = tools.first { $0.name == name }
        return ToolSpec(
            name: name, description: served?.description ?? "", inputSchema: served?.inputSchema ?? ["type": "object"],
            sideEffect: policy.sideEffect(of: name, annotated: served?.sideEffect), server: serverName)
    }

    /// Records the call's proposal — unless the run has it already (`isProposed`: the model
    /// proposed it, and the gateway recorded that) — and the policy's verdict. `waiting` calls
    /// wait for approval: they count against `maxToolCalls`, since approved they would run.
    /// `refusal` is a denial the proxy itself gives (a continuation of no call that waits for
    /// input): recorded as the verdict instead of the policy's.
    func judge(
        callId: String, name: String, arguments: JSONValue, params: JSONValue, isProposed: Bool, waiting: Int,
        refusal: PolicyDecision? = nil, on recorder: RunRecorder
    ) throws -> (Judgement, PolicyDecision) {
        let call = ToolCall(id: callId, name: name, arguments: arguments)
        if !isProposed {
            try recorder.record(
                .decisionMade(
                    DecisionMade(raw: JSONWriter.encodeString(params), format: "mcp.tools_call", outcome: .valid(.toolCalls([call])))))
        }
        let decision: PolicyDecision
        if let refusal {
            decision = refusal
        } else if let max = maxToolCalls, recorder.state.counters.executedCalls.addingSaturating(waiting) >= max {
            decision = PolicyDecision(
                .deny, reason: "the \(max) tool calls allowed (--max-tool-calls) are used up", rule: "limits.max_tool_calls")
        } else {
            let limits = RunLimits(maxToolCalls: maxToolCalls, tokenBudget: tokenBudget)
            decision = policy.policy.decide(
                PolicyQuery(
                    call: call, tool: spec(name), actor: actor, route: route, state: recorder.state, limits: limits, callsUnderWay: waiting)
            )
        }
        try recorder.record(
            .verdictGiven(VerdictGiven(callId: callId, tool: name, verdict: decision.verdict, reason: decision.reason, rule: decision.rule))
        )
        switch decision.verdict {
        case .allow:
            return (.forward, decision)
        case .deny:
            try recorder.endStep()
            return (.deny, decision)
        case .approvalRequired:
            if preApproved.contains(where: { $0.matches(name) }) {
                try recorder.record(
                    .approvalRecorded(
                        ApprovalRecorded(callId: callId, isGranted: true, approver: "--pre-approve", reason: "approved on the command line")
                    ))
                return (.forward, decision)
            }
            try recorder.endStep()
            return (.ask, decision)
        }
    }

    /// The intent, and the end of its step: a durability point, so it is in the file (fsynced
    /// when the log's policy says so) before the server sees the call.
    func intend(callId: String, tool: String, arguments: JSONValue, on recorder: RunRecorder) throws {
        try recorder.record(.toolIntended(ToolIntended(callId: callId, tool: tool, arguments: arguments, attempt: 1)))
        try recorder.endStep()
    }

    /// A person's answer. A refusal ends the step; a grant leaves it open for the intent.
    func settle(callId: String, isGranted: Bool, approver: String?, reason: String?, on recorder: RunRecorder) throws {
        try recorder.record(.approvalRecorded(ApprovalRecorded(callId: callId, isGranted: isGranted, approver: approver, reason: reason)))
        if !isGranted { try recorder.endStep() }
    }

    /// How a forwarded call ended, in a step of its own (outputs too large to hold inline are
    /// stored as content and referenced, as imports do).
    func complete(
        callId: String, tool: String, status: ToolStatus, output: JSONValue?, error: String?, durationUs: Int, on recorder: RunRecorder
    ) throws {
        let (inline, content) = ImportWriter.recordable(output: output)
        // Named by the hash the log keeps it under (`RunRecorder.store`).
        let contentHash = try content.map { try recorder.store($0) { _ in false }.hash }
        try recorder.record(
            .toolCompleted(
                ToolCompleted(
                    callId: callId, tool: tool, attempt: 1, status: status, output: inline, contentHash: contentHash, error: error,
                    durationUs: durationUs)))
        try recorder.endStep()
    }

    /// `content_stored`'s media type for a request the server sent the client.
    static let serverRequestMediaType = "application/vnd.mcp.server-request+json"
    /// `content_stored`'s media type for the client's answer to a request the server sent it
    /// (`serverRequestMediaType`), as it came.
    static let clientAnswerMediaType = "application/vnd.mcp.client-answer+json"
    /// `content_stored`'s media type for the proxy's refusal of a server's request to the client
    /// (the JSON-RPC error it answered the server with; `input_requests` of the policy file),
    /// and of a client's message it could not judge (`clientRefusedMediaType`).
    static let refusalMediaType = "application/vnd.agent-eval.mcp-refusal+json"
    /// A line of the server's that is not JSON, kept as it came.
    static let unreadableMediaType = "application/vnd.agent-eval.mcp-unreadable-line"
    /// What the client sent that the proxy refused before its gate, kept as it came: a line
    /// that is not JSON, a message that is not an object, a request inside a batch. The error
    /// the client was answered with follows it (`refusalMediaType`).
    static let clientRefusedMediaType = "application/vnd.agent-eval.mcp-client-refused"
    /// `content_stored`'s media type for one round of a multi-round call (`MCPRound`).
    static let roundMediaType = "application/vnd.agent-eval.mcp-round+json"
    /// `content_stored`'s media type for what `--bridge` translates between (`MCPBridge.note`):
    /// the versions of the client and of the server, stored at the first thing recorded once the
    /// bridge is set up.
    static let bridgeMediaType = "application/vnd.agent-eval.mcp-bridge+json"

    /// What the proxy keeps of an exchange as it came: a request the server sent the client
    /// (sampling, elicitation, roots, ping; `serverRequestMediaType`), or a round of a
    /// multi-round call (`roundMediaType`). A round ends a step: it is durable before the client
    /// sees the server's question, or the server the client's retry.
    func store(_ bytes: [UInt8], mediaType: String, on recorder: RunRecorder) throws {
        // Every round and question is kept (each is the record of a moment, even when it repeats).
        try recorder.store(ContentStored(bytes: bytes, mediaType: mediaType)) { _ in false }
        if mediaType == Self.roundMediaType { try recorder.endStep() }
    }
}

extension ServedTool {
    /// The tool as the proxy tells the recorder's gateway of it.
    var proxyJSON: JSONValue {
        var object = ObjectBuilder()
        object.set("name", name)
        object.set("description", description)
        object.set("input_schema", inputSchema)
        object.set("side_effect", sideEffect)
        return object.json
    }

    init?(proxyJSON value: JSONValue) {
        guard let name = value["name"]?.stringValue else { return nil }
        self.init(
            name: name, description: value["description"]?.stringValue ?? "", inputSchema: value["input_schema"] ?? ["type": "object"],
            sideEffect: value["side_effect"]?.stringValue.flatMap(SideEffect.init(rawValue:)))
    }
}
