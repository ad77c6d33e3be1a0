/// The canonical encoding of the state, and its digest.
extension RunState {
    /// The state as JSON: every field, in a fixed documented order of keys (byte order),
    /// lists in fold order. Two states are equal exactly when their JSON is.
    public var json: JSONValue {
        var lists = PlainLists()
        return canonicalJSON(&lists)
    }

    /// What `step_ended` records: `sha256:<hex>` of the canonical JSON of the state's digest
    /// view. The view is `json` with each list (`decisions`, `calls`, `contents`, `anomalies`)
    /// replaced by `{"count": n, "chain": c}`, where `c` chains the SHA-256 of each element's
    /// canonical JSON (`c_i = hex(sha256(c_{i-1} + "\n" + json(e_i)))`, `c_0` = 64 zeros),
    /// and `start` by the `sha256:` of its canonical JSON. So a digest changes with any field of
    /// the state, yet a long-lived `StateDigester` updates it in time proportional to what
    /// changed. This computes it from scratch.
    public var digest: String {
        var digester = StateDigester()
        return digester.digest(of: self)
    }

    /// The one list of the state's members and their keys, for both `json` and the digest
    /// view: `lists` writes the members the digest view abbreviates (the start and the lists).
    /// `counters` are derived from the lists and so are not a member.
    func canonicalJSON(_ lists: inout some StateListEncoder) -> JSONValue {
        var object = ObjectBuilder()
        canonicalMembers(into: &object, &lists)
        return object.json
    }

    /// The members of `canonicalJSON`, in key byte order, for a tree or straight to bytes.
    func canonicalMembers(into object: inout some JSONMemberSink, _ lists: inout some StateListEncoder) {
        object.set("anomalies", lists.anomalies(anomalies))
        object.set("calls", lists.calls(calls))
        object.set("contents", lists.contents(contents))
        object.set("context_packet_count", contextPacketCount)
        object.set("decisions", lists.decisions(decisions))
        object.set("event_count", eventCount)
        object.set("forked", forked)
        object.set("last_event_at_us", lastEventAtUs)
        object.set("last_state_digest", lastStateDigest)
        object.set("last_token_estimate", lastTokenEstimate)
        object.set("resume_count", resumeCount)
        object.set("run_id", runId)
        object.set("start", lists.unchangedStart() ?? start.map { lists.start($0) })
        object.set("started_at_us", startedAtUs)
        object.set("step", step)
        object.set("steps_completed", stepsCompleted)
        object.set("stop", stop)
        object.set("unknown_event_count", unknownEventCount)
        object.set("usage", usage)
        // Only a conversation has the member: every other run's state (and digest) is as before.
        if !userTurns.isEmpty { object.set("user_turns", lists.userTurns(userTurns)) }
    }
}

/// How the canonical form writes the start and the lists: in full (`RunState.json`) or as
/// hashes and chains (the digest view). `start` is given the start in full; the state form and
/// the digest view use its state form, a snapshot keeps it whole.
protocol StateListEncoder {
    associatedtype Start: JSONEncodable
    associatedtype List: JSONEncodable
    mutating func start(_ start: RunStarted) -> Start
    /// What `start` gave last time, when the encoder knows the start has not changed since
    /// (so the state's start need not be handed over); nil when it does not know.
    mutating func unchangedStart() -> Start?
    mutating func decisions(_ decisions: [DecisionRecord]) -> List
    mutating func calls(_ calls: [ToolCallRecord]) -> List
    mutating func contents(_ contents: [ContentReference]) -> List
    mutating func anomalies(_ anomalies: [Anomaly]) -> List
    mutating func userTurns(_ turns: [UserTurnRecord]) -> List
}

extension StateListEncoder {
    mutating func unchangedStart() -> Start? { nil }
}

/// Every member in full.
struct PlainLists: StateListEncoder {
    /// The start with its tool servers (a snapshot), instead of its state form (`json`).
    var startInFull = false

    func start(_ start: RunStarted) -> JSONValue { startInFull ? start.json : start.stateForm.json }
    func decisions(_ decisions: [DecisionRecord]) -> JSONValue { .array(decisions.map(\.json)) }
    func calls(_ calls: [ToolCallRecord]) -> JSONValue { .array(calls.map(\.json)) }
    func contents(_ contents: [ContentReference]) -> JSONValue { .array(contents.map(\.json)) }
    func anomalies(_ anomalies: [Anomaly]) -> JSONValue { .array(anomalies.map(\.json)) }
    func userTurns(_ turns: [UserTurnRecord]) -> JSONValue { .array(turns.map(\.json)) }
}

extension DecisionRecord: JSONObjectEncodable {
    public func members(into object: inout some JSONMemberSink) {
        // Only a decision aside has the member: every other state (and digest) is as before.
        if isAside { object.set("aside", true) }
        if case .valid(let decision) = outcome { object.set("decision", decision) }
        if case .invalid(let invalid) = outcome { object.set("invalid", invalid) }
        object.set("seq", sequence)
        object.set("step", step)
        object.set("usage", usage)
    }
}

extension ToolCallRecord: JSONObjectEncodable {
    public func members(into object: inout some JSONMemberSink) {
        object.set("approval", approval)
        object.set("arguments", argumentsText)
        object.set("attempts", attempts)
        object.set("id", id)
        object.set("results", results)
        object.set("step", step)
        object.set("tool", tool)
        object.set("verdict", verdict)
    }
}

extension ResourceUsage: JSONObjectEncodable {
    public func members(into object: inout some JSONMemberSink) {
        object.set("cost_usd", costUSD)
        object.set("input_tokens", inputTokens)
        object.set("model_calls", modelCalls)
        object.set("model_latency_us", modelLatencyUs)
        object.set("output_tokens", outputTokens)
        object.set("tool_attempts", toolAttempts)
        object.set("tool_time_us", toolTimeUs)
    }
}

extension ContentReference: JSONObjectEncodable {
    public func members(into object: inout some JSONMemberSink) {
        object.set("byte_count", byteCount)
        object.set("hash", hash)
        object.set("media_type", mediaType)
    }
}

extension Anomaly: JSONObjectEncodable {
    public func members(into object: inout some JSONMemberSink) {
        object.set("message", message)
        object.set("seq", sequence)
    }
}
