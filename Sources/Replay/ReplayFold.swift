public import TraceCore
public import TraceLog

/// The replayer's fold, one event at a time: the run state, every `step_ended` digest checked
/// against the rebuilt state, and each step's problems. `Replayer` drives it over a log it
/// reads; `StepTableBuilder` is given the events of a read someone else makes (the catalog's
/// `index`), so one fold serves both and they cannot disagree.
///
///     var fold = ReplayFold(log: path)
///     try reader.forEachEvent { recorded in
///         if fold.startsNewStep(recorded.event), let step = fold.finishStep() { show(step, fold.state) }
///         fold.add(recorded)
///     }
///     if let step = fold.finishStep() { show(step, fold.state) }
///     if let failure = fold.storeFailure { throw failure }
public struct ReplayFold: Sendable {
    /// The state after the last event added.
    public private(set) var state = RunState()
    public private(set) var digestsChecked = 0
    public private(set) var digestMismatches: [DigestCheck] = []
    public private(set) var stepsReplayed = 0
    /// Whether each step keeps its events (a step table needs only its counts and problems).
    public let keepsEvents: Bool
    private var digester = StateDigester()
    /// A long log's outputs go back to the log as the fold passes them (read back when looked at).
    private var stored: StoredOutputs
    private var current: ReplayStep?

    /// `minimumLogBytes`: the size from which a log's outputs go back to it
    /// (`StoredOutputs.minimumLogBytes`; 0 for a fold kept while its log grows, `ReplayFollower`).
    public init(log: String, keepsEvents: Bool = true, minimumLogBytes: Int = StoredOutputs.minimumLogBytes) {
        stored = StoredOutputs(log: log, minimumLogBytes: minimumLogBytes)
        self.keepsEvents = keepsEvents
    }

    /// Why reading an output back from the log failed, if it did: the state is then incomplete.
    public var storeFailure: LogError? { stored.store?.failure }

    /// Whether `event` belongs to another step than the one being folded: finish that one first.
    public func startsNewStep(_ event: Event) -> Bool {
        guard let step = current?.step else { return false }
        return step != event.step
    }

    /// Ends the step being folded, with the state's counters at its end; nil when none is.
    public mutating func finishStep() -> ReplayStep? {
        guard var step = current else { return nil }
        step.after = StateSummary(state)
        current = nil
        stepsReplayed += 1
        return step
    }

    /// Folds one event into the step being folded (starting one when none is).
    public mutating func add(_ recorded: RecordedEvent) {
        let event = recorded.event
        if current == nil {
            let summary = StateSummary(state)
            current = ReplayStep(step: event.step, events: [], before: summary, after: summary, digests: [], problems: [])
        }
        var problems = StepProblem.problems(of: event)
        if case .stepEnded(let ended) = event.payload {
            let check = DigestCheck(sequence: event.sequence, recorded: ended.stateDigest, computed: digester.digest(of: state))
            digestsChecked += 1
            current?.digests.append(check)
            if !check.isMatch {
                digestMismatches.append(check)
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
        if keepsEvents {
            current?.events.append(recorded)
        } else {
            if current?.firstEventSequence == nil { current?.firstEventSequence = event.sequence }
            current?.lastEventSequence = event.sequence
        }
        current?.problems.append(contentsOf: problems)
    }
}
