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
        /// The state after the last event replayed (a settling fold's open part: see `settled`).
        public var state: RunState
        /// What a settling fold dropped from `state` (`ReplayFollower`); empty for a replay.
        public var settled = SettledRun()
        public var read: ReadSummary
        public var digestsChecked = 0
        public var digestMismatches: [DigestCheck] = []
        public var stepsReplayed = 0
        /// The log's last event is a final signature (`Event.isFinalSignature`): its end is signed.
        public var endIsSigned = false
    }

    /// Replays from the start; `body` gets each step with the state at its end, and returns
    /// false to stop early. Steps after `until` are not read. Throws the reader's errors, and
    /// `LogError.noEvent` for a log from which no event could be read: a log cut before its
    /// first event was complete holds no run to rebuild.
    @discardableResult
    public func replay(until last: Int? = nil, _ body: (ReplayStep, RunState) throws -> Bool) throws -> Result {
        var fold = ReplayFold(log: path)
        var result = Result(state: RunState(), read: ReadSummary())
        struct Stop: Error {}
        do {
            result.read = try LogReader(path: path, options: LogReader.Options(resolvesContextPackets: true)).forEachEvent { recorded in
                if fold.startsNewStep(recorded.event), let step = fold.finishStep(), try !body(step, fold.state) { throw Stop() }
                if let last, recorded.event.step > last { throw Stop() }
                fold.add(recorded)
                result.endIsSigned = recorded.event.isFinalSignature
            }
            if let step = fold.finishStep() { _ = try body(step, fold.state) }
            // No event is no run: nothing to rebuild, and nothing that could match.
            if fold.stepsReplayed == 0 { throw LogError.noEvent(in: path, tear: result.read.tear) }
        } catch is Stop {}
        if let failure = fold.storeFailure { throw failure }
        result.state = fold.state
        result.digestsChecked = fold.digestsChecked
        result.digestMismatches = fold.digestMismatches
        result.stepsReplayed = fold.stepsReplayed
        return result
    }

    /// The state at the end of `step` (the fold of every event up to it).
    public func state(atEndOf step: Int) throws -> RunState {
        try replay(until: step) { _, _ in true }.state
    }
}
