import ConfigFile
public import TraceCore

/// Checks a pipeline run — the state folded from its pipeline log — against a case's pipeline
/// expectations. Pure, like `TrajectoryCheck`: per-task trajectory expectations (`run`) are
/// checked by the runner against the task's child log, not here.
public enum PipelineCheck {
    /// A problem with the case itself for this pipeline (a task it does not have, trajectory
    /// expectations on a command task): the case cannot be graded, as a tool typo cannot.
    public static func problem(with expected: PipelineExpectations, in state: PipelineState) -> (message: String, hint: String)? {
        let known = state.tasks.map(\.id)
        for name in expected.taskNames where state.task(name) == nil {
            let suggestion = ConfigNode.suggestion(for: name, among: known)
            return (
                "the case names the task \"\(name)\", which the pipeline \(state.start?.pipeline ?? "") does not have (it has: \(known.joined(separator: ", ")))",
                suggestion.map { "did you mean \"\($0)\"?" } ?? "check the task ids against the pipeline file"
            )
        }
        for task in expected.tasks where task.run != nil && state.task(task.task)?.plan.kind == .command {
            return (
                "the case expects a trajectory (toolsCalled, stopReason…) of \"\(task.task)\", a command task: it has no agent run",
                "check a command task by its status and output"
            )
        }
        return nil
    }

    /// The names of breakers that opened at least once, in the order they first did.
    public static func breakersOpened(in events: [Event]) -> [String] {
        var names: [String] = []
        for event in events {
            if case .pipeline(.breakerChanged(let changed)) = event.payload, changed.state == .open, !names.contains(changed.breaker) {
                names.append(changed.breaker)
            }
        }
        return names
    }

    /// The failures of `state` against `expected`, in the order of the kinds' tables
    /// (`PipelineExpectationKind`, then each task's `TaskExpectationKind`s, in file order).
    public static func check(_ expected: PipelineExpectations, against state: PipelineState, breakersOpened: [String])
        -> [ExpectationFailure]
    {
        var failures: [ExpectationFailure] = []
        let facts = PipelineFacts(
            state: state, breakersOpened: breakersOpened, ran: state.tasks.filter { !$0.currentAttempts.isEmpty }.map(\.id))
        for kind in PipelineExpectationKind.all { kind.check(expected, facts, &failures) }
        for expectation in expected.tasks {
            guard let task = state.task(expectation.task) else { continue }
            for kind in TaskExpectationKind.all { kind.check(expectation, task, &failures) }
        }
        return failures
    }

    /// An output check: `what` names the value in the message, `missing` says why there is none.
    static func check(
        _ expectation: String, _ wanted: OutputExpectation, _ actual: JSONValue?, what: String, missing: @autoclosure () -> String,
        into failures: inout [ExpectationFailure]
    ) {
        guard let actual else { return failures.fail(expectation, wanted.description, missing()) }
        if let problem = wanted.mismatch(actual) {
            failures.fail(
                expectation, wanted.description, "\(problem) (\(what) \(TrajectoryCheck.shortened(JSONWriter.encodeString(actual))))")
        }
    }

    /// "succeeded after 2 attempts", "routed: failure — exit 3 (fallback classify_with_agent)".
    static func describe(_ task: PipelineTaskState) -> String {
        var text = task.status.rawValue
        let current = task.currentAttempts
        if current.isEmpty { return text + " (never ran)" }
        text += " after \(attempts(current.count))"
        if let last = current.last?.finished, last.status == .failed {
            text += ": \(last.errorClass?.rawValue ?? "failed")"
            if let error = last.error { text += " — \(TrajectoryCheck.shortened(error))" }
        }
        if let from = task.outputFrom { text += " (output from fallback \(from))" }
        return text
    }

    static func describeStop(_ state: PipelineState) -> String {
        guard let stop = state.stop else {
            return state.isPaused ? "the pipeline is paused" : "the pipeline has not stopped (the log ends while tasks ran)"
        }
        var text = stop.status.rawValue
        if let task = stop.task { text += " at \(task)" }
        if let error = stop.error { text += ": \(TrajectoryCheck.shortened(error))" }
        return text
    }

    static func attempts(_ count: Int) -> String { count == 1 ? "1 attempt" : "\(count) attempts" }

    static func list(_ names: [String]) -> String { names.isEmpty ? "none" : names.joined(separator: ", ") }
}
