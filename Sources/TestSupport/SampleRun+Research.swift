public import TraceCore
public import TraceLog

extension SampleRun {
    public static let researchTools: [ToolSpec] = [
        ToolSpec(
            name: "web_search", description: "Searches an index of papers; flaky.",
            inputSchema: ["type": "object", "required": ["query"], "properties": ["query": ["type": "string"]]],
            sideEffect: .read),
        ToolSpec(
            name: "fetch_paper", description: "Fetches a paper's abstract by id.",
            inputSchema: ["type": "object", "required": ["paper_id"]], sideEffect: .read),
    ]

    /// Records a research run: a search that fails once and succeeds on retry, a fetch whose
    /// long abstract is stored as content, and a token budget that runs out.
    public static func recordResearchRun(into writer: LogWriter, clock: SteppingClock = SteppingClock()) throws -> RunState {
        let recorder = RunRecorder(writer: writer, clock: { clock.now() })
        let goal = "Summarise recent work on speculative decoding, with citations."
        try recorder.record(
            .runStarted(
                RunStarted(
                    goal: goal,
                    agent: AgentIdentity(
                        name: "research-agent", version: "0.3", configDigest: ContentHash.sha256(Array("research v0.3".utf8))),
                    model: ModelIdentity(provider: "scripted", name: "research-script"),
                    policy: PolicyIdentity(name: "read-only"),
                    tools: researchTools, limits: RunLimits(maxSteps: 10, tokenBudget: 3_000))))
        try recorder.endStep()

        try recorder.record(
            .contextBuilt(
                ContextBuilt(
                    goal: goal, stateSummary: "Nothing found yet.", toolsDisclosed: ["web_search", "fetch_paper"], tokenEstimate: 610)))
        let search = ToolCall(id: "s-1", name: "web_search", arguments: ["query": "speculative decoding 2025"])
        try recorder.record(
            .decisionMade(DecisionMade(raw: "search", outcome: .valid(.toolCalls([search])), usage: TokenUsage(input: 610, output: 40))))
        try recorder.record(.verdictGiven(VerdictGiven(callId: "s-1", tool: "web_search", verdict: .allow, rule: "default-allow-read")))
        try recorder.record(.toolIntended(ToolIntended(callId: "s-1", tool: "web_search", arguments: search.arguments, attempt: 1)))
        try recorder.record(
            .toolCompleted(
                ToolCompleted(
                    callId: "s-1", tool: "web_search", attempt: 1, status: .error, error: "HTTP 503 from index", isRetryable: true,
                    durationUs: 120_000)))
        try recorder.record(.toolIntended(ToolIntended(callId: "s-1", tool: "web_search", arguments: search.arguments, attempt: 2)))
        try recorder.record(
            .toolCompleted(
                ToolCompleted(
                    callId: "s-1", tool: "web_search", attempt: 2, status: .ok,
                    output: [
                        "results": [
                            ["id": "arXiv:2501.00001", "title": "Faster Drafts"], ["id": "arXiv:2502.00002", "title": "Tree Speculation"],
                        ]
                    ],
                    durationUs: 340_000)))
        try recorder.endStep()

        let abstract = ContentStored(
            text: String(repeating: "We propose a draft-and-verify scheme that accepts several tokens per step. ", count: 12),
            mediaType: "text/plain; charset=utf-8")
        try recorder.record(
            .contextBuilt(
                ContextBuilt(
                    goal: goal, stateSummary: "2 search results.",
                    observations: [ItemReference(id: "s-1", summary: "2 papers: Faster Drafts, Tree Speculation")],
                    toolsDisclosed: ["web_search", "fetch_paper"], tokenEstimate: 1_020)))
        let fetchA = ToolCall(id: "f-1", name: "fetch_paper", arguments: ["paper_id": "arXiv:2501.00001"])
        let fetchB = ToolCall(id: "f-2", name: "fetch_paper", arguments: ["paper_id": "arXiv:2502.00002"])
        try recorder.record(
            .decisionMade(
                DecisionMade(raw: "fetch both", outcome: .valid(.toolCalls([fetchA, fetchB])), usage: TokenUsage(input: 1_020, output: 55)))
        )
        try recorder.record(.verdictGiven(VerdictGiven(callId: "f-1", tool: "fetch_paper", verdict: .allow, rule: "default-allow-read")))
        try recorder.record(.verdictGiven(VerdictGiven(callId: "f-2", tool: "fetch_paper", verdict: .allow, rule: "default-allow-read")))
        try recorder.record(.toolIntended(ToolIntended(callId: "f-1", tool: "fetch_paper", arguments: fetchA.arguments, attempt: 1)))
        try recorder.record(.toolIntended(ToolIntended(callId: "f-2", tool: "fetch_paper", arguments: fetchB.arguments, attempt: 1)))
        try recorder.record(.contentStored(abstract))
        try recorder.record(
            .toolCompleted(
                ToolCompleted(callId: "f-1", tool: "fetch_paper", attempt: 1, status: .ok, contentHash: abstract.hash, durationUs: 90_000)))
        try recorder.record(
            .toolCompleted(
                ToolCompleted(callId: "f-2", tool: "fetch_paper", attempt: 1, status: .refused, error: "paywalled", durationUs: 30_000)))
        try recorder.endStep()

        try recorder.record(
            .contextBuilt(
                ContextBuilt(
                    goal: goal, stateSummary: "1 abstract, 1 paywalled.",
                    observations: [ItemReference(id: "f-1", summary: "abstract of Faster Drafts", contentHash: abstract.hash)],
                    toolsDisclosed: ["web_search", "fetch_paper"],
                    omitted: [OmittedItem(id: "s-1", reason: .budget, detail: "search results dropped to fit the budget")],
                    tokenEstimate: 1_210)))
        try recorder.record(
            .decisionMade(
                DecisionMade(
                    raw: "search again",
                    outcome: .valid(
                        .toolCalls([ToolCall(id: "s-2", name: "web_search", arguments: ["query": "tree speculation open access"])])),
                    usage: TokenUsage(input: 1_210, output: 70))))
        try recorder.endStep()
        try recorder.record(.runStopped(RunStopped(reason: .budgetExhausted, limit: .tokenBudget)))
        return recorder.state
    }
}
