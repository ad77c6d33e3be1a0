public import TraceCore

/// The counters of a run state: what replay shows as "the state" at a step's end, and what
/// the step index keeps per step so that showing step N does not need the whole log.
public struct StateSummary: Sendable, Hashable {
    public var eventCount = 0
    public var step = 0
    public var stepsCompleted = 0
    public var contextPackets = 0
    public var decisions = 0
    public var invalidDecisions = 0
    /// Calls proposed, executed (started at least once), denied or refused, awaiting approval.
    public var calls = 0
    public var executedCalls = 0
    public var deniedCalls = 0
    public var awaitingApproval = 0
    public var toolAttempts = 0
    /// Finished attempts whose status was not `ok`.
    public var failedAttempts = 0
    public var inputTokens = 0
    public var outputTokens = 0
    /// Cost in millionths of a dollar (exact in an integer).
    public var costMicroUSD = 0
    public var modelLatencyUs = 0
    public var toolTimeUs = 0
    public var contents = 0
    public var anomalies = 0
    public var resumes = 0
    public var stopReason: StopReason?
    public var limit: LimitKind?

    public init() {}

    /// Dollars as whole micro-dollars, rounded; a cost no `Int` holds (a hostile log's `1e300`,
    /// or a sum of such that reached infinity) is the largest (or smallest) there is: a summary
    /// never traps on what a log says.
    static func microUSD(_ dollars: Double) -> Int { Int(saturating: (dollars * 1_000_000).rounded()) }

    /// The summary of `state`, in constant time: every count is one the fold keeps.
    public init(_ state: RunState) {
        eventCount = state.eventCount
        step = state.step
        stepsCompleted = state.stepsCompleted
        contextPackets = state.contextPacketCount
        decisions = state.decisions.count
        invalidDecisions = state.counters.invalidDecisions
        calls = state.calls.count
        executedCalls = state.counters.executedCalls
        deniedCalls = state.counters.deniedCalls
        awaitingApproval = state.counters.callsAwaitingApproval
        toolAttempts = state.usage.toolAttempts
        failedAttempts = state.counters.failedAttempts
        inputTokens = state.usage.inputTokens
        outputTokens = state.usage.outputTokens
        costMicroUSD = Self.microUSD(state.usage.costUSD)
        modelLatencyUs = state.usage.modelLatencyUs
        toolTimeUs = state.usage.toolTimeUs
        contents = state.contents.count
        anomalies = state.anomalies.count
        resumes = state.resumeCount
        stopReason = state.stopReason
        limit = state.limitFired
    }

    /// The summary of a whole run from the open part a settling fold holds (`state`) and what it
    /// dropped (`settled`).
    public init(_ state: RunState, settled: SettledRun) {
        self.init(state)
        decisions += settled.decisions
        calls += settled.calls
        contents += settled.contents
        anomalies += settled.anomalies
    }

    public var totalTokens: Int { inputTokens.addingSaturating(outputTokens) }

    /// The summary as JSON (replay's `--json`).
    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("event_count", eventCount)
        object.set("step", step)
        object.set("steps_completed", stepsCompleted)
        object.set("context_packets", contextPackets)
        object.set("decisions", decisions)
        object.set("invalid_decisions", invalidDecisions)
        object.set("calls", calls)
        object.set("executed_calls", executedCalls)
        object.set("denied_calls", deniedCalls)
        object.set("awaiting_approval", awaitingApproval)
        object.set("tool_attempts", toolAttempts)
        object.set("failed_attempts", failedAttempts)
        object.set("input_tokens", inputTokens)
        object.set("output_tokens", outputTokens)
        object.set("cost_usd", Double(costMicroUSD) / 1_000_000)
        object.set("model_latency_us", modelLatencyUs)
        object.set("tool_time_us", toolTimeUs)
        object.set("contents", contents)
        object.set("anomalies", anomalies)
        object.set("resumes", resumes)
        object.set("stop_reason", stopReason)
        object.set("limit", limit)
        return object.json
    }

    /// The summary read back from `json` (a stored step record); nil when a count is missing
    /// or a value is of another kind.
    public init?(json: JSONValue) {
        func int(_ key: String) -> Int? { if case .int(let value)? = json[key] { value } else { nil } }
        let counts: [WritableKeyPath<StateSummary, Int>: String] = [
            \.eventCount: "event_count", \.step: "step", \.stepsCompleted: "steps_completed", \.contextPackets: "context_packets",
            \.decisions: "decisions", \.invalidDecisions: "invalid_decisions", \.calls: "calls", \.executedCalls: "executed_calls",
            \.deniedCalls: "denied_calls", \.awaitingApproval: "awaiting_approval", \.toolAttempts: "tool_attempts",
            \.failedAttempts: "failed_attempts", \.inputTokens: "input_tokens", \.outputTokens: "output_tokens",
            \.modelLatencyUs: "model_latency_us", \.toolTimeUs: "tool_time_us", \.contents: "contents", \.anomalies: "anomalies",
            \.resumes: "resumes",
        ]
        for (path, key) in counts {
            guard let value = int(key) else { return nil }
            self[keyPath: path] = value
        }
        switch json["cost_usd"] {
        case .int(let dollars)?: costMicroUSD = Self.microUSD(Double(dollars))
        case .double(let dollars)?: costMicroUSD = Self.microUSD(dollars)
        default: return nil
        }
        func value<E: RawRepresentable<String>>(_ key: String) -> E?? {
            switch json[key] {
            case .null?, nil: return .some(nil)
            case .string(let raw)?: return E(rawValue: raw).map { .some($0) }
            default: return nil
            }
        }
        guard let stop: StopReason? = value("stop_reason"), let limit: LimitKind? = value("limit") else { return nil }
        stopReason = stop
        self.limit = limit
    }

    /// What changed from `before` to this summary, as short phrases.
    public func changes(since before: StateSummary) -> [String] {
        var phrases: [String] = []
        func count(_ delta: Int, _ noun: String, _ plural: String? = nil) {
            guard delta != 0 else { return }
            phrases.append("\(delta > 0 ? "+" : "")\(delta) \(delta == 1 || delta == -1 ? noun : (plural ?? noun + "s"))")
        }
        count(decisions - before.decisions, "decision")
        count(invalidDecisions - before.invalidDecisions, "rejected reply", "rejected replies")
        count(calls - before.calls, "call proposed", "calls proposed")
        count(executedCalls - before.executedCalls, "call executed", "calls executed")
        count(deniedCalls - before.deniedCalls, "denied", "denied")
        count(toolAttempts - before.toolAttempts, "attempt")
        count(failedAttempts - before.failedAttempts, "failed attempt")
        count(contents - before.contents, "content stored", "contents stored")
        count(anomalies - before.anomalies, "anomaly", "anomalies")
        if totalTokens != before.totalTokens {
            phrases.append("tokens \(before.totalTokens) → \(totalTokens)")
        }
        if awaitingApproval != before.awaitingApproval { phrases.append("\(awaitingApproval) awaiting approval") }
        if resumes != before.resumes { phrases.append("resumed") }
        if stopReason != before.stopReason {
            phrases.append(stopReason.map { "stopped: \($0.rawValue)" + (limit.map { " (\($0.rawValue))" } ?? "") } ?? "running again")
        }
        return phrases
    }
}
