import Crypto

/// Computes `RunState` digests, remembering what it hashed before so that the digest of a
/// growing run costs what changed since the last one, not the size of the whole state.
///
/// The digest is a pure function of the state (see `RunState.digest` for the definition): a
/// fresh digester and a long-lived one give the same value for the same state. The cache is
/// only an accelerator. It recognises an unchanged call by its id and `revision`, which the
/// fold bumps whenever it changes the call, and the append-only lists by their count.
public struct StateDigester: Sendable, StateListEncoder {
    /// Hash chains over the append-only lists: `chains[i]` covers elements `0...i`.
    private var decisionChain: [String] = []
    private var contentChain: [String] = []
    private var anomalyChain: [String] = []
    private var userTurnChain: [String] = []
    private var callChain: [String] = []
    private var callMarks: [CallMark] = []
    /// The last element hashed into each append-only chain, to notice a different state.
    private var lastDecision: DecisionRecord?
    private var lastContent: ContentReference?
    private var lastAnomaly: Anomaly?
    private var lastUserTurn: UserTurnRecord?
    /// The start last hashed and its digest (kept apart: reading the digest alone copies nothing).
    private var startValue: RunStarted?
    private var startDigest: String?
    /// Set once `track(_:in:)` is used: calls are then known changed only where events touched
    /// them, and no scan is needed.
    private var isTracking = false
    /// The lowest index of a call touched since the last digest.
    private var firstTouchedCall = Int.max
    /// Whether a tracked event set the start since it was hashed.
    private var isStartTouched = false
    /// The bytes of the last state view and of the last list element hashed, kept for their
    /// capacity: a digest per step would otherwise allocate both each time.
    private var viewBytes: [UInt8] = []
    private var elementBytes: [UInt8] = []

    private struct CallMark: Equatable, Sendable {
        var id: String
        var revision: Int

        init(_ call: borrowing ToolCallRecord) {
            id = call.id
            revision = call.revision
        }
    }

    public init() {}

    /// Notes what folding an event changed (the fold's answer), so the next digest rehashes
    /// only that. A digester that tracks is given the change of every folded event and the
    /// states of that one fold, in order: it neither scans for changed calls nor compares the
    /// lists' last elements. One that never tracks compares what it hashed before with each
    /// state it is given, so any states, in any order, get the right digest.
    public mutating func track(_ change: FoldChange) {
        isTracking = true
        if let index = change.call { firstTouchedCall = min(firstTouchedCall, index) }
        if change.start { isStartTouched = true }
    }

    /// `sha256:<hex>` of the state's digest view (see `RunState.digest`).
    public mutating func digest(of state: RunState) -> String {
        var writer = JSONWriter(capacity: 0)
        swap(&writer.bytes, &viewBytes)
        writer.bytes.removeAll(keepingCapacity: true)
        writer.writeObject { state.canonicalMembers(into: &$0, &self) }
        defer { swap(&writer.bytes, &viewBytes) }
        return ContentHash.sha256(writer.bytes)
    }

    /// What the digest view shows of a list: `{"chain": c, "count": n}`.
    struct ListDigest: JSONObjectEncodable {
        var count: Int
        var chain: String

        func members(into object: inout some JSONMemberSink) {
            object.set("chain", chain)
            object.set("count", count)
        }
    }

    /// The digest view of the state: its canonical JSON with the start hashed and each list
    /// replaced by `{count, chain}`.
    public mutating func view(of state: RunState) -> JSONValue {
        state.canonicalJSON(&self)
    }
    /// Tracking, the start is known unchanged unless an event set it: its digest, without the
    /// state's start being read (handing it over would copy the whole value at every step).
    /// The fold sets a start but never takes one away, so a state whose start was hashed
    /// still has that start.
    mutating func unchangedStart() -> String? {
        isTracking && !isStartTouched ? startDigest : nil
    }

    mutating func start(_ started: RunStarted) -> String {
        isStartTouched = false
        if let startDigest, startValue == started { return startDigest }
        let digest = ContentHash.sha256(JSONWriter.encode(started.stateForm))
        startValue = started
        startDigest = digest
        return digest
    }

    mutating func decisions(_ decisions: [DecisionRecord]) -> ListDigest {
        Self.append(&decisionChain, &lastDecision, decisions, isTracking: isTracking, buffer: &elementBytes)
    }

    mutating func contents(_ contents: [ContentReference]) -> ListDigest {
        Self.append(&contentChain, &lastContent, contents, isTracking: isTracking, buffer: &elementBytes)
    }

    mutating func anomalies(_ anomalies: [Anomaly]) -> ListDigest {
        Self.append(&anomalyChain, &lastAnomaly, anomalies, isTracking: isTracking, buffer: &elementBytes)
    }

    mutating func userTurns(_ turns: [UserTurnRecord]) -> ListDigest {
        Self.append(&userTurnChain, &lastUserTurn, turns, isTracking: isTracking, buffer: &elementBytes)
    }

    mutating func calls(_ calls: [ToolCallRecord]) -> ListDigest {
        if isTracking {
            let first = min(firstTouchedCall, callChain.count, calls.count)
            firstTouchedCall = Int.max
            return Self.extend(&callChain, with: calls, from: first, buffer: &elementBytes)
        }
        // The first call that differs from what was hashed before; everything after it is rehashed.
        var first = min(callMarks.count, calls.count)
        for index in 0..<first where callMarks[index] != CallMark(calls[index]) {
            first = index
            break
        }
        callMarks.removeSubrange(first...)
        callMarks.append(contentsOf: calls[first...].map(CallMark.init))
        return Self.extend(&callChain, with: calls, from: first, buffer: &elementBytes)
    }

    /// Extends the chain of a list the fold only appends to. If the element last hashed is no
    /// longer where it was, the list belongs to another state: rehash it all. A tracking
    /// digester is given the states of one fold in order, whose lists only grow: it does not
    /// compare (comparing a decision went through its calls' arguments every step).
    private static func append<T: Equatable & JSONEncodable>(
        _ chain: inout [String], _ last: inout T?, _ elements: [T], isTracking: Bool, buffer: inout [UInt8]
    ) -> ListDigest {
        var first = chain.count
        if first > elements.count || (!isTracking && first > 0 && elements[first - 1] != last) { first = 0 }
        let result = extend(&chain, with: elements, from: first, buffer: &buffer)
        if !isTracking { last = elements.last }
        return result
    }

    /// Brings `chain` up to `elements`, rehashing from `first`; returns `{count, chain}`.
    /// Lists the fold only appends to are consistent when `first` is the cached count; a
    /// shorter list (a different state) restarts the chain where it diverges. Each element is
    /// written into `buffer`, which keeps its capacity for the next one.
    private static func extend<T: JSONEncodable>(
        _ chain: inout [String], with elements: [T], from first: Int, buffer: inout [UInt8]
    ) -> ListDigest {
        let start = min(first, elements.count, chain.count)
        chain.removeSubrange(start...)
        guard start < elements.count else { return ListDigest(count: elements.count, chain: chain.last ?? ContentHash.genesis) }
        var writer = JSONWriter(capacity: 0)
        swap(&writer.bytes, &buffer)
        defer { swap(&writer.bytes, &buffer) }
        for index in start..<elements.count {
            writer.bytes.removeAll(keepingCapacity: true)
            writer.bytes.append(contentsOf: (chain.last ?? ContentHash.genesis).utf8)
            writer.bytes.append(0x0A)
            elements[index].write(to: &writer)
            chain.append(ContentHash.sha256Hex(writer.bytes))
        }
        return ListDigest(count: elements.count, chain: chain.last ?? ContentHash.genesis)
    }
}

/// A fold that checks each `step_ended`'s recorded digest against the state before it, event by
/// event: what a tool that must not build on an edited log runs as it reads (a fork, a log
/// upgrade), in the memory of the state alone.
public struct CheckedFold: Sendable {
    /// The fold of the events added so far.
    public private(set) var state = RunState()
    private var digester = StateDigester()

    public init() {}

    /// The digest of the state so far: what a `step_ended` recorded now must carry.
    public mutating func digest() -> String { digester.digest(of: state) }

    /// Folds `event`, or returns false, folding nothing, when it is a `step_ended` whose
    /// recorded digest is not the state's.
    public mutating func add(_ event: Event) -> Bool {
        if case .stepEnded(let ended) = event.payload, ended.stateDigest != digester.digest(of: state) { return false }
        digester.track(RunState.reduce(into: &state, event))
        return true
    }
}

extension StateDigester {
    /// Folds `events` in order, checking each `step_ended`'s digest against the state before
    /// it: the state they fold to, or the first `step_ended` whose recorded digest is not its
    /// state's (the fold stops there).
    public static func foldChecking(_ events: some Sequence<Event>) -> (state: RunState, mismatch: Event?) {
        var fold = CheckedFold()
        for event in events where !fold.add(event) { return (fold.state, event) }
        return (fold.state, nil)
    }
}
