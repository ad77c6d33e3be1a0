public import TraceCore

/// What a fold that settles (`ReplayFold(settles: true)`) dropped from the front of its state's
/// lists: how many decisions, calls, content references and anomalies, what the dropped calls
/// add to the run's summary per tool, and which call ids they had. With the state's open part it
/// says what the whole state would: the counts of `StateSummary(_:settled:)`, the per-tool
/// summary of a run's page. The chains over the dropped elements are the fold's digester's, so
/// every digest is checked as with the lists whole.
///
/// It keeps per dropped call an 8-byte hash of its id and per attempt its duration (for the
/// summary's median): a fold that follows a run of 100,000 events holds about 0.2 MB of it.
public struct SettledRun: Sendable, Hashable {
    public private(set) var decisions = 0
    public private(set) var calls = 0
    public private(set) var contents = 0
    public private(set) var anomalies = 0
    /// Per tool, the dropped calls' share of the summary.
    public private(set) var tools: [String: ToolTally] = [:]
    /// The hashes of the dropped calls' ids (`Hasher`, this process's seed): an event that names
    /// one may name a dropped call, which the open part cannot fold as the whole state would.
    private var callIds: Set<Int> = []

    public init() {}

    /// Whether anything was dropped.
    public var isEmpty: Bool { decisions == 0 && calls == 0 && contents == 0 && anomalies == 0 }

    mutating func add(_ settled: StateDigester.Settled) {
        decisions += settled.decisions
        calls += settled.calls.count
        contents += settled.contents
        anomalies += settled.anomalies
        for call in settled.calls { callIds.insert(call.id.hashValue) }
        for (tool, calls) in Dictionary(grouping: settled.calls, by: \.tool) { tools[tool, default: ToolTally()].add(calls) }
    }

    /// Whether folding `event` into the open part could differ from folding it into the whole
    /// state: it names a call id a dropped call had (proposing it again is an anomaly only the
    /// whole state shows; a verdict, intent, result, approval or fork edit would change the
    /// dropped call), or it is a user turn (a conversation's dialogue reads every decision).
    func mayTouch(_ event: Event) -> Bool {
        guard !isEmpty else { return false }
        switch event.payload {
        case .decisionMade(let made):
            guard case .valid(.toolCalls(let proposed)) = made.outcome else { return false }
            return proposed.contains { callIds.contains($0.id.hashValue) }
        case .verdictGiven(let verdict): return callIds.contains(verdict.callId.hashValue)
        case .toolIntended(let intent): return callIds.contains(intent.callId.hashValue)
        case .toolCompleted(let result): return callIds.contains(result.callId.hashValue)
        case .approvalRecorded(let approval): return callIds.contains(approval.callId.hashValue)
        case .runForked(let forked): return forked.edits.contains { $0.callId.map { callIds.contains($0.hashValue) } == true }
        case .userTurn: return true
        default: return false
        }
    }
}

/// One tool's calls in a run's summary: proposed, executed, denied, failed attempts, and every
/// attempt's duration (the summary shows their total, median and longest).
public struct ToolTally: Sendable, Hashable {
    public private(set) var calls = 0
    public private(set) var executed = 0
    public private(set) var denied = 0
    public private(set) var failedAttempts = 0
    public private(set) var totalUs = 0
    /// Every attempt's duration, shortest first.
    public private(set) var durations: [Int] = []

    public init() {}

    /// Adds `calls`' share: their durations sorted, then merged into the sorted ones (a
    /// tally grows by batches, each costing its own sort and one pass over what it had).
    public mutating func add(_ calls: some Sequence<ToolCallRecord>) {
        var added: [Int] = []
        for call in calls {
            self.calls += 1
            if call.isExecuted { executed += 1 }
            if call.isDenied { denied += 1 }
            failedAttempts += call.failedAttempts
            for result in call.results { added.append(result.durationUs) }
        }
        totalUs += added.reduce(0, +)
        guard !added.isEmpty else { return }
        added.sort()
        guard !durations.isEmpty else {
            durations = added
            return
        }
        var merged: [Int] = []
        merged.reserveCapacity(durations.count + added.count)
        var (i, j) = (0, 0)
        while i < durations.count || j < added.count {
            if j == added.count || (i < durations.count && durations[i] <= added[j]) {
                merged.append(durations[i])
                i += 1
            } else {
                merged.append(added[j])
                j += 1
            }
        }
        durations = merged
    }
}

/// A tool's line in a run's summary (`agent-eval view`, `serve`): its calls, and the durations of
/// their attempts.
public struct ToolSummary: Sendable, Hashable {
    public var tool: String
    public var calls: Int
    public var executed: Int
    public var denied: Int
    public var attempts: Int
    public var failedAttempts: Int
    public var totalUs: Int
    /// The median attempt's duration (the lower of the two middle ones), and the longest.
    public var p50Us: Int?
    public var maxUs: Int?

    /// Per tool, in name order, the calls of `state` with those a settling fold dropped from it
    /// (`settled`). What was dropped is read where it is, not copied: a followed run's summary
    /// costs its open part, and a search among the dropped calls' sorted durations.
    public static func tools(of state: RunState, settled: SettledRun = SettledRun()) -> [ToolSummary] {
        var open: [String: ToolTally] = [:]
        for (tool, calls) in Dictionary(grouping: state.calls, by: \.tool) { open[tool, default: ToolTally()].add(calls) }
        let names = Set(open.keys).union(settled.tools.keys).sorted()
        return names.map { tool in
            let dropped = settled.tools[tool] ?? ToolTally()
            let held = open[tool] ?? ToolTally()
            let attempts = dropped.durations.count + held.durations.count
            let longest = [dropped.durations.last, held.durations.last].compactMap { $0 }.max()
            return ToolSummary(
                tool: tool, calls: dropped.calls + held.calls, executed: dropped.executed + held.executed,
                denied: dropped.denied + held.denied, attempts: attempts, failedAttempts: dropped.failedAttempts + held.failedAttempts,
                totalUs: dropped.totalUs + held.totalUs,
                p50Us: attempts == 0 ? nil : element((attempts - 1) / 2, of: dropped.durations, held.durations), maxUs: longest)
        }
    }

    /// The `k`th smallest (from 0) of two sorted lists together, `k` < their total count: it is
    /// the larger of the last ones taken when `j` of the `k + 1` smallest come from `b` and the
    /// rest from `a`, for the one `j` at which the two lists' taken parts interleave.
    static func element(_ k: Int, of a: [Int], _ b: [Int]) -> Int {
        let wanted = k + 1
        for j in max(0, wanted - a.count)...min(b.count, wanted) {
            let i = wanted - j
            let fitsB = j == 0 || i == a.count || b[j - 1] <= a[i]
            let fitsA = i == 0 || j == b.count || a[i - 1] <= b[j]
            if fitsA && fitsB { return max(i > 0 ? a[i - 1] : .min, j > 0 ? b[j - 1] : .min) }
        }
        // Unreachable for sorted lists and `k` in range; the merge is its definition.
        return (a + b).sorted()[k]
    }
}
