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

    public static func check(_ expected: PipelineExpectations, against state: PipelineState, breakersOpened: [String])
        -> [ExpectationFailure]
    {
        var failures: [ExpectationFailure] = []
        func fail(_ expectation: String, _ wanted: String, _ actual: String) {
            failures.append(ExpectationFailure(expectation: expectation, expected: wanted, actual: actual))
        }
        let ran = state.tasks.filter { !$0.currentAttempts.isEmpty }.map(\.id)
        if let status = expected.status, state.stop?.status != status {
            fail("pipeline.status", status.rawValue, describeStop(state))
        }
        for id in expected.tasksRan where state.task(id)?.currentAttempts.isEmpty ?? true {
            fail(
                "pipeline.tasksRan", "\(id) runs",
                "\(id) never ran (\(state.task(id)?.status.rawValue ?? "unknown")); tasks that ran: \(list(ran))")
        }
        for id in expected.tasksNotRan {
            guard let task = state.task(id), !task.currentAttempts.isEmpty else { continue }
            fail(
                "pipeline.tasksNotRan", "\(id) never runs",
                "\(id) ran \(attempts(task.currentAttempts.count)), ending \(task.status.rawValue)")
        }
        if !expected.order.isEmpty {
            var remaining = expected.order[...]
            for id in state.settledOrder where remaining.first == id { remaining.removeFirst() }
            if let missing = remaining.first {
                fail(
                    "pipeline.order", "results settle in the order \(expected.order.joined(separator: " → "))",
                    "\(missing) is out of order or never settled; the order was \(state.settledOrder.isEmpty ? "empty" : state.settledOrder.joined(separator: " → "))"
                )
            }
        }
        if let limit = expected.maxRetries {
            let retried = state.tasks.filter { $0.retries > 0 }
            let total = retried.map(\.retries).reduce(0, +)
            if total > limit {
                fail(
                    "pipeline.maxRetries", "at most \(limit) retr\(limit == 1 ? "y" : "ies")",
                    "\(total) (\(retried.map { "\($0.id): \($0.retries)" }.joined(separator: ", ")))")
            }
        }
        for breaker in expected.breakersOpened where !breakersOpened.contains(breaker) {
            let now = state.breakers[breaker].map { "it is \($0.state.rawValue)" } ?? "it never changed"
            fail("pipeline.breakersOpened", "the breaker \(breaker) opens", "it never opened (\(now))")
        }
        if expected.noBreakerOpened, !breakersOpened.isEmpty {
            let reasons = breakersOpened.map { name in "\(name) (\(state.breakers[name]?.reason ?? "opened"))" }
            fail("pipeline.noBreakerOpened", "no breaker opens", "opened: \(reasons.joined(separator: "; "))")
        }
        /// An output check: `what` names the value in the message, `missing` says why there is none.
        func check(
            _ expectation: String, _ wanted: OutputExpectation, _ actual: JSONValue?, what: String, missing: @autoclosure () -> String
        ) {
            guard let actual else { return fail(expectation, wanted.description, missing()) }
            if let problem = wanted.mismatch(actual) {
                fail(expectation, wanted.description, "\(problem) (\(what) \(TrajectoryCheck.shortened(JSONWriter.encodeString(actual))))")
            }
        }
        if let matcher = expected.outputs {
            check(
                "pipeline.outputs", .matcher(matcher), state.stop?.outputs, what: "outputs", missing: "no outputs: \(describeStop(state))")
        }
        for expectation in expected.tasks {
            guard let task = state.task(expectation.task) else { continue }
            let name = "tasks.\(task.id)"
            if let status = expectation.status, task.status != status {
                fail("\(name).status", status.rawValue, describe(task))
            }
            if let range = expectation.retries, !range.contains(task.retries) {
                fail("\(name).retries", "\(range) retries", "\(task.retries) (\(describe(task)))")
            }
            if let output = expectation.output {
                check("\(name).output", output, task.output, what: "output", missing: "no output (\(describe(task)))")
            }
        }
        return failures
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
