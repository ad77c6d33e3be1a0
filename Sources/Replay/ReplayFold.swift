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
    /// Whether the fold holds only the open part of the run (see `init`).
    public let settles: Bool
    /// What a settling fold dropped from its state: `state` and this are the run's state.
    public private(set) var settled = SettledRun()
    /// Set when a settling fold met an event that names a call it dropped (or a user turn after
    /// it dropped something): its state is no longer the open part of the run's, and the log is
    /// to be folded again by a fold that does not settle. The fold settles nothing more.
    public private(set) var needsWholeState = false

    /// A settling fold drops the settled front of its state's lists when a step ends with at
    /// least this many elements in them.
    static let settlesFrom = 64

    /// `minimumLogBytes`: the size from which a log's outputs go back to it
    /// (`StoredOutputs.minimumLogBytes`; 0 for a fold kept while its log grows, `ReplayFollower`).
    /// `settles`: at the end of a step, drop from the state the calls that are done (their step
    /// ended, every attempt has its result, none waits for approval) and every decision, content
    /// reference and anomaly, keeping only their chains (`StateDigester.settle`) and what the
    /// summaries need (`settled`): a fold that follows a long run holds what is open, not the
    /// run (`ReplayFollower`). Every digest is checked as by a fold that keeps all; `state` is
    /// then the open part, and `StateSummary(_:settled:)` the whole run's counts.
    public init(log: String, keepsEvents: Bool = true, minimumLogBytes: Int = StoredOutputs.minimumLogBytes, settles: Bool = false) {
        stored = StoredOutputs(log: log, minimumLogBytes: minimumLogBytes)
        self.keepsEvents = keepsEvents
        self.settles = settles
    }

    /// The counters of the whole run's state (the open part's and what was settled).
    public var summary: StateSummary { StateSummary(state, settled: settled) }

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
        step.after = summary
        current = nil
        stepsReplayed += 1
        return step
    }

    /// Folds one event into the step being folded (starting one when none is).
    public mutating func add(_ recorded: RecordedEvent) {
        let event = recorded.event
        if current == nil {
            let before = summary
            current = ReplayStep(step: event.step, events: [], before: before, after: before, digests: [], problems: [])
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
        // The open part cannot fold it as the whole state would: nothing more is folded (the
        // follower folds the log again whole).
        if needsWholeState || settled.mayTouch(event) {
            needsWholeState = true
            return
        }
        let anomaliesBefore = state.anomalies.count
        let change = RunState.reduce(into: &state, event)
        digester.track(change)
        stored.folded(recorded, change: change, into: &state)
        for anomaly in state.anomalies[anomaliesBefore...] {
            problems.append(StepProblem(kind: .anomaly, sequence: anomaly.sequence, message: anomaly.message))
        }
        if settles, case .stepEnded = event.payload,
            state.calls.count + state.decisions.count + state.contents.count + state.anomalies.count >= Self.settlesFrom
        {
            let done = state.calls.prefix { !$0.isAwaitingApproval && $0.attempts == $0.results.count }.count
            if let dropped = digester.settle(&state, calls: done) {
                settled.add(dropped)
                stored.settled(calls: done)
            }
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
