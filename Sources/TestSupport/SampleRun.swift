import Synchronization
public import TraceCore
public import TraceLog

/// A deterministic clock for recordings: starts at a fixed instant and advances a fixed
/// amount per reading.
public final class SteppingClock: Sendable {
    private let current: Mutex<Int>
    private let increment: Int

    public init(startUs: Int = 1_795_000_000_000_000, incrementUs: Int = 1_250) {
        current = Mutex(startUs)
        increment = incrementUs
    }

    public func now() -> Int {
        current.withLock { value in
            defer { value += increment }
            return value
        }
    }
}

/// Realistic example runs written through the real writer, covering every event kind.
public enum SampleRun {
    /// The tools of the example support agent.
    public static let supportTools: [ToolSpec] = [
        ToolSpec(
            name: "lookup_order", description: "Finds an order by its id.",
            inputSchema: ["type": "object", "required": ["order_id"], "properties": ["order_id": ["type": "string"]]],
            sideEffect: .read),
        ToolSpec(
            name: "refund_order", description: "Refunds an order, fully or partly.",
            inputSchema: [
                "type": "object", "required": ["order_id", "amount_cents"],
                "properties": ["order_id": ["type": "string"], "amount_cents": ["type": "integer", "minimum": 1]],
            ],
            sideEffect: .write),
        ToolSpec(
            name: "delete_customer", description: "Deletes a customer account.",
            inputSchema: ["type": "object", "required": ["customer_id"]], sideEffect: .write),
    ]

    public static func supportStart(goal: String = "Order A-1042 arrived broken. I want my money back.") -> RunStarted {
        RunStarted(
            goal: goal,
            agent: AgentIdentity(name: "support-agent", version: "1.0", configDigest: ContentHash.sha256(Array("support-agent v1".utf8))),
            model: ModelIdentity(provider: "scripted", name: "support-script"),
            policy: PolicyIdentity(name: "support-policy", digest: ContentHash.sha256(Array("rules v1".utf8))),
            tools: supportTools,
            limits: RunLimits(maxSteps: 8, maxToolCalls: 6, timeoutMs: 60_000, tokenBudget: 20_000),
            actor: "customer:c-77", route: "chat")
    }

    /// Records a support run: a lookup, a refund that needs approval, a denied delete, an
    /// approval, the refund, and an answer. Every event kind appears, plus one unknown kind.
    public static func recordSupportRun(
        into writer: LogWriter, clock: SteppingClock = SteppingClock(), refundCents: Int = 4999
    ) throws -> RunState {
        let recorder = RunRecorder(writer: writer, clock: { clock.now() })
        try recorder.record(.runStarted(supportStart()))
        try recorder.endStep()

        let prompt = ContentStored(text: "You are a support agent. Be brief. Ünïcödé: 注文 📦", mediaType: "text/plain; charset=utf-8")
        try recorder.record(.contentStored(prompt))
        try recorder.record(
            .contextBuilt(
                ContextBuilt(
                    goal: "Order A-1042 arrived broken. I want my money back.", stateSummary: "No observations yet.",
                    toolsDisclosed: ["lookup_order", "refund_order"],
                    memory: [ItemReference(id: "mem-customer-c-77", summary: "Gold tier since 2021")],
                    omitted: [OmittedItem(id: "tool:delete_customer", reason: .policy, detail: "write tools hidden from chat")],
                    tokenEstimate: 412, promptHash: prompt.hash)))
        let lookup = ToolCall(id: "call-1", name: "lookup_order", arguments: ["order_id": "A-1042"])
        try recorder.record(
            .decisionMade(
                DecisionMade(
                    raw: #"{"tool_calls":[{"name":"lookup_order","arguments":{"order_id":"A-1042"}}]}"#,
                    outcome: .valid(.toolCalls([lookup])), usage: TokenUsage(input: 412, output: 31), latencyUs: 820_000,
                    costUSD: 0.0021)))
        try recorder.record(.verdictGiven(VerdictGiven(callId: "call-1", tool: "lookup_order", verdict: .allow, rule: "reads-allowed")))
        try recorder.record(.toolIntended(ToolIntended(callId: "call-1", tool: "lookup_order", arguments: lookup.arguments, attempt: 1)))
        try recorder.record(
            .toolCompleted(
                ToolCompleted(
                    callId: "call-1", tool: "lookup_order", attempt: 1, status: .ok,
                    output: ["order_id": "A-1042", "total_cents": 4999, "status": "delivered", "note": "Lieferung beschädigt"],
                    durationUs: 1_800)))
        try recorder.endStep()

        try recorder.record(
            .contextBuilt(
                ContextBuilt(
                    goal: "Order A-1042 arrived broken. I want my money back.", stateSummary: "Order A-1042: delivered, 49.99.",
                    observations: [ItemReference(id: "call-1", summary: "order A-1042 delivered, total 4999")],
                    toolsDisclosed: ["lookup_order", "refund_order"], tokenEstimate: 498)))
        let refund = ToolCall(id: "call-2", name: "refund_order", arguments: ["order_id": "A-1042", "amount_cents": .int(refundCents)])
        let delete = ToolCall(id: "call-3", name: "delete_customer", arguments: ["customer_id": "c-77"])
        try recorder.record(
            .decisionMade(
                DecisionMade(
                    raw: "refund + delete", outcome: .valid(.toolCalls([refund, delete])),
                    usage: TokenUsage(input: 498, output: 44), latencyUs: 910_000)))
        try recorder.record(
            .verdictGiven(
                VerdictGiven(
                    callId: "call-2", tool: "refund_order", verdict: .approvalRequired, reason: "refunds need a human",
                    rule: "refund-approval")))
        try recorder.record(
            .verdictGiven(
                VerdictGiven(
                    callId: "call-3", tool: "delete_customer", verdict: .deny, reason: "deleting customers is forbidden", rule: "no-deletes"
                )))
        try recorder.record(
            .unknown(kind: "annotation_added", data: ["note": "written by a newer agent-eval", "tags": ["x", 1, 2.5, nil, true]]))
        try recorder.record(.runStopped(RunStopped(reason: .approvalRequired)))

        try recorder.record(.approvalRecorded(ApprovalRecorded(callId: "call-2", isGranted: true, approver: "agent:maria")))
        try recorder.record(.toolIntended(ToolIntended(callId: "call-2", tool: "refund_order", arguments: refund.arguments, attempt: 1)))
        try recorder.record(
            .toolCompleted(
                ToolCompleted(
                    callId: "call-2", tool: "refund_order", attempt: 1, status: .error, error: "payment service timed out",
                    isRetryable: true, durationUs: 5_000_000)))
        try recorder.record(.toolIntended(ToolIntended(callId: "call-2", tool: "refund_order", arguments: refund.arguments, attempt: 2)))
        let receipt = ContentStored(bytes: [0x52, 0x43, 0x50, 0x54, 0xFF, 0xFE, 0x00, 0xC3, 0x28], mediaType: "application/octet-stream")
        try recorder.record(.contentStored(receipt))
        try recorder.record(
            .toolCompleted(
                ToolCompleted(
                    callId: "call-2", tool: "refund_order", attempt: 2, status: .ok, output: ["refund_id": "rf-9"],
                    contentHash: receipt.hash, durationUs: 240_000)))
        try recorder.endStep()

        try recorder.record(
            .contextBuilt(
                ContextBuilt(
                    goal: "Order A-1042 arrived broken. I want my money back.", stateSummary: "Refund rf-9 issued.",
                    tokenEstimate: 530)))
        try recorder.record(
            .decisionMade(
                DecisionMade(
                    raw: "not json at all", outcome: .invalid(InvalidDecision(kind: .unparseable, message: "expected a JSON object")),
                    usage: TokenUsage(input: 530, output: 5))))
        try recorder.record(
            .decisionMade(
                DecisionMade(
                    raw: #"{"answer":"Refunded 49.99 €."}"#, outcome: .valid(.answer("Refunded 49.99 €.")),
                    usage: TokenUsage(input: 560, output: 12))))
        try recorder.endStep()
        try recorder.record(.runStopped(RunStopped(reason: .success, answer: "Refunded 49.99 €.")))
        return recorder.state
    }

    /// Markup planted wherever a log carries text from a model, a tool or a user: the viewer
    /// must show all of it as text and run none of it.
    public static let plantedMarkup = "</script><script>window.__pwned=1</script><img src=x onerror=\"window.__pwned=2\">"

    /// A run whose goal, arguments, outputs, errors, stored content and answer all carry
    /// `plantedMarkup`.
    public static func recordHostileRun(into writer: LogWriter, clock: SteppingClock = SteppingClock()) throws -> RunState {
        let recorder = RunRecorder(writer: writer, clock: { clock.now() })
        let planted = plantedMarkup
        try recorder.record(.runStarted(supportStart(goal: "<script>window.__pwned=3</script> " + planted)))
        try recorder.endStep()
        let stored = ContentStored(text: "<html><body onload=\"window.__pwned=4\">" + planted, mediaType: "text/html")
        try recorder.record(.contentStored(stored))
        try recorder.record(
            .contextBuilt(
                ContextBuilt(
                    goal: planted, stateSummary: planted,
                    observations: [ItemReference(id: planted, summary: planted, contentHash: stored.hash)],
                    toolsDisclosed: ["lookup_order"], omitted: [OmittedItem(id: planted, reason: .policy, detail: planted)],
                    tokenEstimate: 10, promptHash: stored.hash)))
        let call = ToolCall(id: "call-1", name: "lookup_order", arguments: ["order_id": .string(planted), planted: "key"])
        try recorder.record(
            .decisionMade(DecisionMade(raw: planted, outcome: .valid(.toolCalls([call])), usage: TokenUsage(input: 10, output: 5))))
        try recorder.record(
            .verdictGiven(VerdictGiven(callId: "call-1", tool: "lookup_order", verdict: .allow, reason: planted, rule: planted)))
        try recorder.record(.toolIntended(ToolIntended(callId: "call-1", tool: "lookup_order", arguments: call.arguments, attempt: 1)))
        try recorder.record(
            .toolCompleted(
                ToolCompleted(
                    callId: "call-1", tool: "lookup_order", attempt: 1, status: .error, output: ["html": .string(planted)],
                    error: planted, stderr: planted, durationUs: 1_000)))
        try recorder.endStep()
        try recorder.record(.runStopped(RunStopped(reason: .success, answer: planted)))
        return recorder.state
    }
}
