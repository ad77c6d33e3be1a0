public import TraceCore

/// Everything a policy may look at to judge one proposed call.
public struct PolicyQuery: Sendable {
    public var call: ToolCall
    public var tool: ToolSpec
    /// Who the run acts for, and the entry point it came through.
    public var actor: String?
    public var route: String?
    /// The run so far: approvals already given, budget used.
    public var state: RunState
    public var limits: RunLimits
    /// Calls judged before this one that have not run yet but may: the allowed (or held for
    /// approval) calls of the same decision before it, a proxy's calls in flight. They count
    /// against `max_tool_calls` as the calls run do, so that calls in one decision cannot
    /// each see the budget before any of them.
    public var callsUnderWay: Int

    public init(
        call: ToolCall, tool: ToolSpec, actor: String?, route: String?, state: RunState, limits: RunLimits, callsUnderWay: Int = 0
    ) {
        self.call = call
        self.tool = tool
        self.actor = actor
        self.route = route
        self.state = state
        self.limits = limits
        self.callsUnderWay = callsUnderWay
    }

    /// Tool calls left under `max_tool_calls`, if it is set: less the calls run and those under way.
    public var toolCallsLeft: Int? {
        limits.maxToolCalls.map { $0.subtractingSaturating(state.counters.executedCalls.addingSaturating(callsUnderWay)) }
    }

    /// Tokens left under `token_budget`, if it is set.
    public var tokensLeft: Int? {
        limits.tokenBudget.map { $0.subtractingSaturating(state.usage.totalTokens) }
    }

    /// Whether a human has already approved a call of this tool in this run, and refused none:
    /// one refusal (a call of the tool answered no, whenever) asks again for every later call,
    /// so an approval of a small refund does not let through the large one the approver just
    /// refused, proposed again with another amount.
    public var isToolApproved: Bool {
        var isApproved = false
        for call in state.calls where call.tool == tool.name {
            guard let approval = call.approval else { continue }
            if !approval.isGranted { return false }
            isApproved = true
        }
        return isApproved
    }
}

/// A verdict with its reason and the rule that gave it.
public struct PolicyDecision: Sendable, Hashable {
    public var verdict: Verdict
    public var reason: String?
    public var rule: String?

    public init(_ verdict: Verdict, reason: String? = nil, rule: String? = nil) {
        self.verdict = verdict
        self.reason = reason
        self.rule = rule
    }
}

/// Decides, per proposed call, allow / deny / approval required. Policy lives in code (conform
/// to this) or in the agent file's rules (`RulePolicy`); never in a prompt.
public protocol Policy: Sendable {
    /// Recorded in `run_started`.
    var identity: PolicyIdentity { get }
    /// The verdict for one call. Must be a pure function of the query, so a re-run with the
    /// same log gives the same verdicts.
    func decide(_ query: PolicyQuery) -> PolicyDecision
    /// Whether to show `tool` to the model at all, and if not, why. Hiding is a courtesy to
    /// the model; every call still gets a verdict from `decide`.
    func discloses(_ tool: ToolSpec, actor: String?, route: String?) -> (isDisclosed: Bool, reason: String?)
}

extension Policy {
    public func discloses(_ tool: ToolSpec, actor: String?, route: String?) -> (isDisclosed: Bool, reason: String?) {
        (true, nil)
    }
}

/// Allows every call. For tests and trusted tools only.
public struct AllowAllPolicy: Policy {
    public init() {}
    public var identity: PolicyIdentity { PolicyIdentity(name: "allow-all") }
    public func decide(_ query: PolicyQuery) -> PolicyDecision { PolicyDecision(.allow, rule: "allow-all") }
}
