/// Checks the state digests a log records as its events come, whichever state the log folds
/// to: a run log's each `step_ended` (`StateDigester`, as `CheckedFold` checks them), a pipeline
/// log's each `task_finished` and its `pipeline_stopped` (`PipelineStateDigester`). The first
/// event decides which. Unlike `CheckedFold` it folds an event whose digest does not match, so
/// that every later digest is checked too, as the reference reader checks them. What a tool
/// that says a log is whole (`log verify`) checks beside its chain: an event edited with the
/// chain computed again keeps the chain and breaks a digest.
public struct RecordedDigests: Sendable {
    private enum Fold: Sendable {
        case run(RunState, StateDigester)
        case pipeline(PipelineState, PipelineStateDigester)
    }

    private var fold: Fold?
    /// The digests checked so far.
    public private(set) var checked = 0

    public init() {}

    /// What the fold found that does not fit, in the events added so far: a run's anomalies, with
    /// the sequence of each, or a pipeline's (each message names its `seq`).
    public var anomalies: [(sequence: Int?, message: String)] {
        switch fold {
        case .run(let state, _)?: return state.anomalies.map { ($0.sequence, $0.message) }
        case .pipeline(let state, _)?: return state.anomalies.map { (nil, $0) }
        case nil: return []
        }
    }

    /// Folds `event`; false when it records a digest that is not the digest of the state the
    /// events before it fold to (it is folded all the same, so each later digest is checked as
    /// the reference reader checks it: against the events as they are).
    public mutating func add(_ event: Event) -> Bool {
        if fold == nil {
            if case .pipeline(.started) = event.payload {
                fold = .pipeline(PipelineState(), PipelineStateDigester())
            } else {
                fold = .run(RunState(), StateDigester())
            }
        }
        switch fold {
        case .run(var state, var digester)?:
            var matches = true
            if case .stepEnded(let ended) = event.payload {
                checked += 1
                matches = ended.stateDigest == digester.digest(of: state)
            }
            digester.track(RunState.reduce(into: &state, event))
            fold = .run(state, digester)
            return matches
        case .pipeline(var state, var digester)?:
            let recorded: String?
            switch event.payload {
            case .pipeline(.taskFinished(let finished)): recorded = finished.stateDigest
            case .pipeline(.stopped(let stopped)): recorded = stopped.stateDigest
            default: recorded = nil
            }
            var matches = true
            if let recorded {
                checked += 1
                matches = digester.digest(of: state) == recorded
            }
            PipelineState.reduce(into: &state, event)
            fold = .pipeline(state, digester)
            return matches
        case nil:
            return true
        }
    }
}
