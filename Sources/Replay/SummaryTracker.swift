import TraceCore

/// Keeps `StateSummary` up to date while events are folded, in constant time per event:
/// `StateSummary(state)` counts calls by walking them all, which makes a replay of a long log
/// quadratic when done at every step.
struct SummaryTracker {
    private var executed = 0
    private var denied = 0
    private var awaiting = 0
    private var failed = 0
    private var invalid = 0

    /// Folds `event` into `state`, updating the call counters from the one call it touches.
    mutating func fold(_ event: Event, into state: inout RunState) {
        if case .decisionMade(let made) = event.payload, case .invalid = made.outcome { invalid += 1 }
        let id = event.payload.callId
        let before = id.flatMap { state.call(id: $0) }
        RunState.reduce(into: &state, event)
        guard let id, let after = state.call(id: id) else { return }
        executed += (after.isExecuted ? 1 : 0) - (before?.isExecuted == true ? 1 : 0)
        denied += (after.isDenied ? 1 : 0) - (before?.isDenied == true ? 1 : 0)
        awaiting += (Self.isAwaiting(after) ? 1 : 0) - (before.map(Self.isAwaiting) == true ? 1 : 0)
        failed += after.results.count { $0.status != .ok } - (before?.results.count { $0.status != .ok } ?? 0)
    }

    static func isAwaiting(_ call: ToolCallRecord) -> Bool {
        call.verdict?.verdict == .approvalRequired && call.approval == nil
    }

    /// The summary of `state`, which must be the state this tracker folded every event into.
    func summary(of state: RunState) -> StateSummary {
        var summary = StateSummary()
        summary.eventCount = state.eventCount
        summary.step = state.step
        summary.stepsCompleted = state.stepsCompleted
        summary.contextPackets = state.contextPacketCount
        summary.decisions = state.decisions.count
        summary.invalidDecisions = invalid
        summary.calls = state.calls.count
        summary.executedCalls = executed
        summary.deniedCalls = denied
        summary.awaitingApproval = awaiting
        summary.toolAttempts = state.usage.toolAttempts
        summary.failedAttempts = failed
        summary.inputTokens = state.usage.inputTokens
        summary.outputTokens = state.usage.outputTokens
        summary.costMicroUSD = Int((state.usage.costUSD * 1_000_000).rounded())
        summary.modelLatencyUs = state.usage.modelLatencyUs
        summary.toolTimeUs = state.usage.toolTimeUs
        summary.contents = state.contents.count
        summary.anomalies = state.anomalies.count
        summary.resumes = state.resumeCount
        summary.stopReason = state.stopReason
        summary.limit = state.limitFired
        return summary
    }
}
