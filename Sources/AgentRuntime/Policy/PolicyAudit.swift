public import TraceCore
public import TraceLog

/// What a policy would have said of every call of a run that was not gated by it: a run
/// recorded through the gateway, imported from another tool, or gated by another policy
/// (`agent-eval audit --policy FILE LOG…`, a case's `policy:` key; docs/mcp.md, "Auditing runs").
///
/// The log is folded event by event, and each proposed call is judged by `Policy.decide` on the
/// state as it stood when the call was proposed — the calls run and approvals granted before it,
/// the tokens used — exactly as the runtime's gate would have judged it. A tool's side effect is
/// the policy file's (`side_effects:`) where a pattern names it, else what the run recorded.
public struct PolicyAudit: Sendable {
    /// One call and the policy's verdict on it.
    public struct Finding: Sendable, Hashable {
        public var callId: String
        public var step: Int
        public var tool: String
        public var arguments: JSONValue
        /// What the policy says.
        public var decision: PolicyDecision
        /// The verdict the run itself recorded, when it was gated.
        public var recorded: VerdictGiven?
        /// Whether the call ran (an intent was recorded), and whether a person approved it.
        public var isExecuted = false
        public var isApproved = false

        /// The call ran although this policy would not have let it: it denies it, or it needs an
        /// approval the run did not record.
        public var isViolation: Bool {
            isExecuted && (decision.verdict == .deny || (decision.verdict == .approvalRequired && !isApproved))
        }

        /// The finding as `agent-eval audit --json` prints it.
        public var json: JSONValue {
            var entry = ObjectBuilder()
            entry.set("call_id", callId)
            entry.set("step", step)
            entry.set("tool", tool)
            entry.set("arguments", arguments)
            entry.set("verdict", decision.verdict)
            entry.set("rule", decision.rule)
            entry.set("reason", decision.reason)
            entry.set("recorded_verdict", recorded?.verdict)
            entry.set("executed", isExecuted)
            entry.set("approved", isApproved)
            entry.set("violation", isViolation)
            return entry.json
        }

        /// The verdict as the event that would have recorded it.
        public var verdict: VerdictGiven {
            VerdictGiven(callId: callId, tool: tool, verdict: decision.verdict, reason: decision.reason, rule: decision.rule)
        }
    }

    public let policy: PolicyFile
    /// Who the run acted for and its entry point; nil takes what `run_started` recorded.
    public var actor: String?
    public var route: String?
    private var state = RunState()
    private var findings: [Finding] = []

    public init(policy: PolicyFile, actor: String? = nil, route: String? = nil) {
        self.policy = policy
        self.actor = actor
        self.route = route
    }

    /// Folds one event; judges the calls a decision proposes.
    public mutating func fold(_ event: Event) {
        RunState.reduce(into: &state, event)
        guard case .decisionMade(let made) = event.payload, case .valid(.toolCalls(let proposed)) = made.outcome else { return }
        let limits = state.start?.limits ?? RunLimits()
        // As the gate judges them: each call with the ones before it in the decision under way.
        var underWay = 0
        for call in proposed {
            let recorded = state.start?.tools.first { $0.name == call.name }
            let annotated = recorded?.sideEffect
            let spec = ToolSpec(
                name: call.name, description: recorded?.description ?? "", inputSchema: recorded?.inputSchema ?? ["type": "object"],
                sideEffect: policy.sideEffect(of: call.name, annotated: annotated),
                server: recorded?.server)
            let decision = policy.policy.decide(
                PolicyQuery(
                    call: call, tool: spec, actor: actor ?? state.start?.actor, route: route ?? state.start?.route, state: state,
                    limits: limits, callsUnderWay: underWay))
            if decision.verdict != .deny { underWay += 1 }
            findings.append(Finding(callId: call.id, step: event.step, tool: call.name, arguments: call.arguments, decision: decision))
        }
    }

    /// The findings, in the order the calls were proposed, with what became of each call.
    public var result: [Finding] {
        var position: [String: Int] = [:]
        for (index, call) in state.calls.enumerated() { position[call.id] = index }
        return findings.map { finding in
            var finding = finding
            if let index = position[finding.callId] {
                let call = state.calls[index]
                finding.recorded = call.verdict
                finding.isExecuted = call.isExecuted
                finding.isApproved = call.approval?.isGranted == true
            }
            return finding
        }
    }

    /// Audits the log at `path` (a torn log: the events before the tear). Throws the reader's
    /// error for a log that cannot be read, and `LogError.noEvent` for one that holds no event.
    public static func audit(log path: String, policy: PolicyFile, actor: String? = nil, route: String? = nil) throws -> [Finding] {
        try auditReadingTear(log: path, policy: policy, actor: actor, route: route).findings
    }

    /// `audit`, where the log was cut when it is torn (the calls after the tear were never
    /// seen, so "all allowed" cannot be said of the run), and the run's tools: those its
    /// `run_started` lists and those its decisions call, for `PolicyFile.unknownTools(among:)`,
    /// and the MCP servers its tools came from, for `PolicyFile.misspeltServers(among:)`.
    public static func auditReadingTear(log path: String, policy: PolicyFile, actor: String? = nil, route: String? = nil) throws
        -> (findings: [Finding], tear: LogTear?, tools: [String], servers: [String])
    {
        var audit = PolicyAudit(policy: policy, actor: actor, route: route)
        let read = try LogReader(path: path, options: .init(keepsPacketText: false)).forEachEvent { audit.fold($0.event) }
        if read.eventCount == 0 { throw LogError.noEvent(in: path, tear: read.tear) }
        return (audit.result, read.tear, audit.toolNames, audit.serverNames)
    }

    /// The MCP servers the run's declared tools came from, each once, in the order declared.
    public var serverNames: [String] {
        var seen = Set<String>()
        return (state.start?.tools ?? []).compactMap(\.server).filter { seen.insert($0).inserted }
    }

    /// The tools of the run folded so far: its declared tools, then any other its calls name.
    public var toolNames: [String] {
        var names = state.start?.tools.map(\.name) ?? []
        var seen = Set(names)
        for call in state.calls where seen.insert(call.tool).inserted { names.append(call.tool) }
        return names
    }

    /// `state` with each call that recorded no verdict given the policy's (`RunState.assumeVerdict`):
    /// what a case's verdict expectations check when it names a `policy:`.
    public static func assumingVerdicts(of findings: [Finding], in state: RunState) -> RunState {
        var state = state
        var position: [String: Int] = [:]
        for (index, call) in state.calls.enumerated() { position[call.id] = index }
        for finding in findings {
            if let index = position[finding.callId] { state.assumeVerdict(finding.verdict, forCallAt: index) }
        }
        return state
    }
}
