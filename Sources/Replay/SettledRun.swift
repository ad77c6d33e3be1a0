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
        for call in settled.calls {
            tools[call.tool, default: ToolTally()].add(call)
            callIds.insert(call.id.hashValue)
        }
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
    public var calls = 0
    public var executed = 0
    public var denied = 0
    public var failedAttempts = 0
    /// In the order the calls were proposed, each call's attempts in order.
    public var durations: [Int] = []

    public init() {}

    public mutating func add(_ call: ToolCallRecord) {
        calls += 1
        if call.isExecuted { executed += 1 }
        if call.isDenied { denied += 1 }
        failedAttempts += call.failedAttempts
        durations += call.results.map(\.durationUs)
    }

    /// The tallies of `calls` by tool, added to `settled`'s (what a settling fold dropped).
    public static func byTool(_ calls: [ToolCallRecord], settled: SettledRun = SettledRun()) -> [String: ToolTally] {
        var tallies = settled.tools
        for call in calls { tallies[call.tool, default: ToolTally()].add(call) }
        return tallies
    }
}
