import Crypto

/// Computes `RunState` digests, remembering what it hashed before so that the digest of a
/// growing run costs what changed since the last one, not the size of the whole state.
///
/// The digest is a pure function of the state (see `RunState.digest` for the definition): a
/// fresh digester and a long-lived one give the same value for the same state. The cache is
/// only an accelerator. It recognises an unchanged call by its id and `revision`, which the
/// fold bumps whenever it changes the call, and the append-only lists by their count.
public struct StateDigester: Sendable, StateListEncoder {
    /// The chains over the append-only lists: only the last link is ever built on.
    private var decisionChain = ChainHead()
    private var contentChain = ChainHead()
    private var anomalyChain = ChainHead()
    private var userTurnChain = ChainHead()
    /// The chain over the calls, one link per call still in the state: `callChain[i]` covers the
    /// calls settled before it (`settledCalls`, whose chain is `settledCallChain`) and the
    /// state's calls `0...i`. A call that changes is rehashed from its place on.
    private var callChain: [String] = []
    private var settledCalls = 0
    private var settledCallChain = ContentHash.genesis
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
    /// The writers of the last state view and of the last list element hashed, kept for their
    /// memory: a digest per step would otherwise allocate both each time.
    private var viewWriter = JSONWriter(capacity: 0)
    private var elementWriter = JSONWriter(capacity: 0)

    /// The chain over an append-only list: how many elements it covers, the last link, and how
    /// many of those elements were settled (dropped from the front of the state's list).
    private struct ChainHead: Sendable {
        var count = 0
        var link = ContentHash.genesis
        var settled = 0
    }

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
        swap(&writer, &viewWriter)
        writer.removeAll()
        writer.writeObject { state.canonicalMembers(into: &$0, &self) }
        defer { swap(&writer, &viewWriter) }
        return writer.withUnsafeBytes { ContentHash.sha256($0) }
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
        Self.append(&decisionChain, &lastDecision, decisions, isTracking: isTracking, writer: &elementWriter)
    }

    mutating func contents(_ contents: [ContentReference]) -> ListDigest {
        Self.append(&contentChain, &lastContent, contents, isTracking: isTracking, writer: &elementWriter)
    }

    mutating func anomalies(_ anomalies: [Anomaly]) -> ListDigest {
        Self.append(&anomalyChain, &lastAnomaly, anomalies, isTracking: isTracking, writer: &elementWriter)
    }

    mutating func userTurns(_ turns: [UserTurnRecord]) -> ListDigest {
        Self.append(&userTurnChain, &lastUserTurn, turns, isTracking: isTracking, writer: &elementWriter)
    }

    mutating func calls(_ calls: [ToolCallRecord]) -> ListDigest {
        if isTracking {
            let first = min(firstTouchedCall, callChain.count, calls.count)
            firstTouchedCall = Int.max
            return extendCalls(calls, from: first)
        }
        // The first call that differs from what was hashed before; everything after it is rehashed.
        var first = min(callMarks.count, calls.count)
        for index in 0..<first where callMarks[index] != CallMark(calls[index]) {
            first = index
            break
        }
        callMarks.removeSubrange(first...)
        callMarks.append(contentsOf: calls[first...].map(CallMark.init))
        return extendCalls(calls, from: first)
    }

    /// Extends the chain of a list the fold only appends to. If the element last hashed is no
    /// longer where it was, the list belongs to another state: rehash it all. A tracking
    /// digester is given the states of one fold in order, whose lists only grow: it does not
    /// compare (comparing a decision went through its calls' arguments every step).
    private static func append<T: Equatable & JSONEncodable>(
        _ head: inout ChainHead, _ last: inout T?, _ elements: [T], isTracking: Bool, writer: inout JSONWriter
    ) -> ListDigest {
        // The place in `elements` of the first element not hashed yet.
        var first = head.count - head.settled
        if first > elements.count || (!isTracking && first > 0 && elements[first - 1] != last) {
            // Only a digester that settles nothing is given other states (settling needs tracking).
            first = 0
            head = ChainHead()
        }
        if first < elements.count {
            for index in first..<elements.count { head.link = link(after: head.link, elements[index], &writer) }
            head.count = head.settled + elements.count
        }
        if !isTracking { last = elements.last }
        return ListDigest(count: head.count, chain: head.link)
    }

    /// Brings the call chain up to `calls`, rehashing from the state's call `first` on.
    private mutating func extendCalls(_ calls: [ToolCallRecord], from first: Int) -> ListDigest {
        let start = min(first, calls.count, callChain.count)
        callChain.removeSubrange(start...)
        for index in start..<calls.count {
            callChain.append(Self.link(after: callChain.last ?? settledCallChain, calls[index], &elementWriter))
        }
        return ListDigest(count: settledCalls + calls.count, chain: callChain.last ?? settledCallChain)
    }

    /// The link that follows `previous` for `element`: `hex(sha256(previous + "\n" + json(element)))`.
    /// `writer`'s memory is reused from one element to the next.
    private static func link(after previous: String, _ element: some JSONEncodable, _ writer: inout JSONWriter) -> String {
        writer.removeAll()
        writer.append(utf8: previous)
        writer.append(0x0A)
        element.write(to: &writer)
        return writer.withUnsafeBytes { ContentHash.sha256Hex($0) }
    }

    /// Settles the front of `state`'s lists: drops its first `calls` calls and all its decisions,
    /// content references and anomalies, keeping the chains over them, so that the digest of
    /// every state the fold goes on to is what it would be with the lists whole. A fold that
    /// holds only the open part of a long run (`ReplayFold(settles:)`) stays as small as that
    /// part. The state's user turns are kept: a conversation's dialogue reads its decisions, and
    /// is not settled (nothing is when `state` has user turns).
    ///
    /// Only for a digester given every change of the fold of `state` (`track`), since the last
    /// settle; one that is not (and so may be given other states) settles nothing and returns
    /// nil. A settled state is the open part of a run: its lists and `calls` indices start after
    /// what was dropped, and an event that names a dropped call cannot be folded into it as into
    /// the whole state (the caller notices such an event and folds the whole log again).
    public mutating func settle(_ state: inout RunState, calls count: Int) -> Settled? {
        guard isTracking, state.userTurns.isEmpty else { return nil }
        let count = min(max(count, 0), state.calls.count)
        // Every link of what is dropped is made first.
        _ = decisions(state.decisions)
        _ = contents(state.contents)
        _ = anomalies(state.anomalies)
        _ = calls(state.calls)
        let settled = Settled(
            decisions: state.decisions.count, calls: Array(state.calls.prefix(count)), contents: state.contents.count,
            anomalies: state.anomalies.count)
        if count > 0 {
            settledCallChain = callChain[count - 1]
            callChain.removeFirst(count)
            settledCalls += count
            state.calls.removeFirst(count)
        }
        decisionChain.settled = decisionChain.count
        contentChain.settled = contentChain.count
        anomalyChain.settled = anomalyChain.count
        state.decisions.removeAll()
        state.contents.removeAll()
        state.anomalies.removeAll()
        return settled
    }

    /// What one `settle` dropped from the state: the calls themselves, and how many decisions,
    /// content references and anomalies.
    public struct Settled: Sendable {
        public var decisions: Int
        public var calls: [ToolCallRecord]
        public var contents: Int
        public var anomalies: Int
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
