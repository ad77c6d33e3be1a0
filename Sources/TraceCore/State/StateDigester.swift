import Crypto

/// Computes `RunState` digests, remembering what it hashed before so that the digest of a
/// growing run costs what changed since the last one, not the size of the whole state.
///
/// The digest is a pure function of the state (see `RunState.digest` for the definition): a
/// fresh digester and a long-lived one give the same value for the same state. The cache is
/// only an accelerator. It recognises an unchanged list element by cheap structural marks
/// (attempts, result count, verdict, approval for calls; append-only lists by count), which
/// cover every way the fold changes a call.
public struct StateDigester: Sendable {
    /// Hash chains over the append-only lists: `chains[i]` covers elements `0...i`.
    private var decisionChain: [String] = []
    private var contentChain: [String] = []
    private var anomalyChain: [String] = []
    private var callChain: [String] = []
    private var callMarks: [CallMark] = []
    /// The last element hashed into each append-only chain, to notice a different state.
    private var lastDecision: DecisionRecord?
    private var lastContent: ContentReference?
    private var lastAnomaly: Anomaly?
    private var start: (value: RunStarted, digest: String)?
    /// Set once `track(_:in:)` is used: calls are then known changed only where events touched
    /// them, and no scan is needed.
    private var isTracking = false
    /// The lowest index of a call touched since the last digest.
    private var firstTouchedCall = Int.max

    private struct CallMark: Equatable, Sendable {
        var id: String
        var attempts: Int
        var results: Int
        var verdict: Verdict?
        var approval: ApprovalRecorded?

        init(_ call: ToolCallRecord) {
            id = call.id
            attempts = call.attempts
            results = call.results.count
            verdict = call.verdict?.verdict
            approval = call.approval
        }
    }

    public init() {}

    /// Notes what `event` (just folded into `state`) changed, so the next digest rehashes only
    /// that. A digester that is given every folded event skips the scan for changed calls;
    /// one that is not (or is given states out of order) scans, and is equally right.
    public mutating func track(_ event: Event, in state: RunState) {
        isTracking = true
        if let id = event.payload.callId, let index = state.callIndex(id) { firstTouchedCall = min(firstTouchedCall, index) }
    }

    /// `sha256:<hex>` of the state's digest view (see `RunState.digest`).
    public mutating func digest(of state: RunState) -> String {
        var object = ObjectBuilder()
        object.set("run_id", state.runId)
        if let started = state.start {
            if start?.value != started { start = (started, ContentHash.sha256(JSONWriter.encode(started.json))) }
            object.set("start", start?.digest)
        }
        object.set("started_at_us", state.startedAtUs)
        object.set("last_event_at_us", state.lastEventAtUs)
        object.set("event_count", state.eventCount)
        object.set("step", state.step)
        object.set("steps_completed", state.stepsCompleted)
        object.set("context_packet_count", state.contextPacketCount)
        object.set("last_token_estimate", state.lastTokenEstimate)
        object.set("decisions", Self.append(&decisionChain, &lastDecision, state.decisions) { $0.json })
        object.set("calls", callsDigest(state.calls))
        object.set("usage", state.usage.json)
        object.set("contents", Self.append(&contentChain, &lastContent, state.contents) { $0.json })
        object.set("last_state_digest", state.lastStateDigest)
        object.set("stop", state.stop)
        object.set("resume_count", state.resumeCount)
        object.set("unknown_event_count", state.unknownEventCount)
        object.set("anomalies", Self.append(&anomalyChain, &lastAnomaly, state.anomalies) { $0.json })
        return ContentHash.sha256(JSONWriter.encode(object.json))
    }

    private mutating func callsDigest(_ calls: [ToolCallRecord]) -> JSONValue {
        if isTracking {
            let first = min(firstTouchedCall, callChain.count, calls.count)
            firstTouchedCall = Int.max
            return Self.extend(&callChain, with: calls, from: first) { $0.json }
        }
        // The first call that differs from what was hashed before; everything after it is rehashed.
        var first = min(callMarks.count, calls.count)
        for index in 0..<first where callMarks[index] != CallMark(calls[index]) {
            first = index
            break
        }
        callMarks.removeSubrange(first...)
        callMarks.append(contentsOf: calls[first...].map(CallMark.init))
        return Self.extend(&callChain, with: calls, from: first) { $0.json }
    }

    /// Extends the chain of a list the fold only appends to. If the element last hashed is no
    /// longer where it was, the list belongs to another state: rehash it all.
    private static func append<T: Equatable>(_ chain: inout [String], _ last: inout T?, _ elements: [T], json: (T) -> JSONValue)
        -> JSONValue
    {
        var first = chain.count
        if first > elements.count || (first > 0 && elements[first - 1] != last) { first = 0 }
        let result = extend(&chain, with: elements, from: first, json: json)
        last = elements.last
        return result
    }

    /// Brings `chain` up to `elements`, rehashing from `first`; returns `{count, chain}`.
    /// Lists the fold only appends to are consistent when `first` is the cached count; a
    /// shorter list (a different state) restarts the chain where it diverges.
    private static func extend<T>(_ chain: inout [String], with elements: [T], from first: Int, json: (T) -> JSONValue) -> JSONValue {
        let start = min(first, elements.count, chain.count)
        chain.removeSubrange(start...)
        for index in start..<elements.count {
            var writer = JSONWriter(capacity: 512)
            writer.bytes.append(contentsOf: (chain.last ?? ContentHash.genesis).utf8)
            writer.bytes.append(0x0A)
            writer.write(json(elements[index]))
            chain.append(ContentHash.sha256Hex(writer.bytes))
        }
        return ["count": .int(elements.count), "chain": .string(chain.last ?? ContentHash.genesis)]
    }
}
