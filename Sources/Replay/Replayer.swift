public import TraceCore
public import TraceLog

/// Rebuilds a run from its log alone — no model, network or clock — one step at a time,
/// checking every recorded state digest against the state it rebuilt.
///
/// ```swift
/// let result = try Replayer(path: "runs/a.jsonl.gz").replay { step, state in
///     print(step.step, step.after.totalTokens)
///     return true  // go on
/// }
/// ```
public struct Replayer: Sendable {
    public let path: String

    public init(path: String) {
        self.path = path
    }

    /// What a replay found overall.
    public struct Result: Sendable {
        /// The state after the last event replayed.
        public var state: RunState
        public var read: ReadSummary
        public var digestsChecked = 0
        public var digestMismatches: [DigestCheck] = []
        public var stepsReplayed = 0
    }

    /// Replays from the start; `body` gets each step with the state at its end, and returns
    /// false to stop early. Steps after `until` are not read. Throws the reader's errors, and
    /// `LogError.noEvent` for a log from which no event could be read: a log cut before its
    /// first event was complete holds no run to rebuild.
    @discardableResult
    public func replay(until last: Int? = nil, _ body: (ReplayStep, RunState) throws -> Bool) throws -> Result {
        var state = RunState()
        var digester = StateDigester()
        var result = Result(state: RunState(), read: ReadSummary())
        var current: ReplayStep?
        var stopped = false
        // A long log's outputs go back to the log as the replay passes them (read back when
        // looked at).
        var stored = StoredOutputs(log: path)

        func finish() throws {
            guard var step = current else { return }
            step.after = StateSummary(state)
            current = nil
            result.stepsReplayed += 1
            if try !body(step, state) { stopped = true }
        }

        struct Stop: Error {}
        do {
            result.read = try LogReader(path: path, options: LogReader.Options(resolvesContextPackets: true)).forEachEvent { recorded in
                let event = recorded.event
                if let step = current?.step, step != event.step {
                    try finish()
                    if stopped { throw Stop() }
                }
                if let last, event.step > last { throw Stop() }
                if current == nil {
                    let summary = StateSummary(state)
                    current = ReplayStep(step: event.step, events: [], before: summary, after: summary, digests: [], problems: [])
                }
                var problems = StepProblem.problems(of: event)
                if case .stepEnded(let ended) = event.payload {
                    let check = DigestCheck(sequence: event.sequence, recorded: ended.stateDigest, computed: digester.digest(of: state))
                    result.digestsChecked += 1
                    current?.digests.append(check)
                    if !check.isMatch {
                        result.digestMismatches.append(check)
                        problems.append(
                            StepProblem(
                                kind: .digestMismatch, sequence: event.sequence,
                                message: "the recorded state digest \(ended.stateDigest.prefix(19))… differs from the rebuilt state's "
                                    + "\(check.computed.prefix(19))…: the log was written by code whose fold differs from this one"))
                    }
                }
                let anomaliesBefore = state.anomalies.count
                let change = RunState.reduce(into: &state, event)
                digester.track(change)
                stored.folded(recorded, change: change, into: &state)
                for anomaly in state.anomalies[anomaliesBefore...] {
                    problems.append(StepProblem(kind: .anomaly, sequence: anomaly.sequence, message: anomaly.message))
                }
                current?.events.append(recorded)
                current?.problems.append(contentsOf: problems)
            }
            try finish()
            // No event is no run: nothing to rebuild, and nothing that could match.
            if result.stepsReplayed == 0 { throw LogError.noEvent(in: path, tear: result.read.tear) }
        } catch is Stop {}
        if let failure = stored.store?.failure { throw failure }
        result.state = state
        return result
    }

    /// The state at the end of `step` (the fold of every event up to it).
    public func state(atEndOf step: Int) throws -> RunState {
        try replay(until: step) { _, _ in true }.state
    }
}
