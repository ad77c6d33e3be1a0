import ConfigFile
import TraceCore

/// One key a case may give under `expected.pipeline:` about a pipeline run: how it is read from
/// the file, how many checks it counts as, and the function that checks a pipeline's state
/// against it. The pipeline's counterpart of `ExpectationKind`: `PipelineExpectationKind.all`
/// is the one list the case reader, `PipelineExpectations.count` and `PipelineCheck` go through,
/// in its order (the order failures are reported in), and a test holds it to
/// docs/eval-case.schema.json. `TaskExpectationKind` does the same for a task's keys under
/// `expected.tasks.<task>` (beside the trajectory kinds of the task's run).
struct PipelineExpectationKind: Sendable {
    typealias Reader = @Sendable (ConfigNode, inout PipelineExpectations) throws(ConfigError) -> Void
    typealias Checker = @Sendable (PipelineExpectations, PipelineFacts, inout [ExpectationFailure]) -> Void

    let key: String
    let read: Reader
    let count: @Sendable (PipelineExpectations) -> Int
    let check: Checker

    /// Every kind, in the order they are read, counted and checked.
    static let all: [PipelineExpectationKind] = [
        PipelineExpectationKind(
            key: "status",
            read: { node, expected throws(ConfigError) in expected.status = try node.choice("pipeline.status") },
            count: { $0.status == nil ? 0 : 1 },
            check: { expected, facts, failures in
                guard let status = expected.status, facts.state.stop?.status != status else { return }
                failures.fail("pipeline.status", status.rawValue, PipelineCheck.describeStop(facts.state))
            }),
        .names(
            "tasksRan", \.tasksRan,
            check: { expected, facts, failures in
                for id in expected.tasksRan where facts.state.task(id)?.currentAttempts.isEmpty ?? true {
                    failures.fail(
                        "pipeline.tasksRan", "\(id) runs",
                        "\(id) never ran (\(facts.state.task(id)?.status.rawValue ?? "unknown")); tasks that ran: \(PipelineCheck.list(facts.ran))"
                    )
                }
            }),
        .names(
            "tasksNotRan", \.tasksNotRan,
            check: { expected, facts, failures in
                for id in expected.tasksNotRan {
                    guard let task = facts.state.task(id), !task.currentAttempts.isEmpty else { continue }
                    failures.fail(
                        "pipeline.tasksNotRan", "\(id) never runs",
                        "\(id) ran \(PipelineCheck.attempts(task.currentAttempts.count)), ending \(task.status.rawValue)")
                }
            }),
        .names(
            "order", \.order, countsOne: true,
            check: { expected, facts, failures in
                guard !expected.order.isEmpty else { return }
                var remaining = expected.order[...]
                let settled = facts.state.settledOrder
                for id in settled where remaining.first == id { remaining.removeFirst() }
                guard let missing = remaining.first else { return }
                failures.fail(
                    "pipeline.order", "results settle in the order \(expected.order.joined(separator: " → "))",
                    "\(missing) is out of order or never settled; the order was \(settled.isEmpty ? "empty" : settled.joined(separator: " → "))"
                )
            }),
        PipelineExpectationKind(
            key: "maxRetries",
            read: { node, expected throws(ConfigError) in expected.maxRetries = try node.int("pipeline.maxRetries", in: 0...Int.max) },
            count: { $0.maxRetries == nil ? 0 : 1 },
            check: { expected, facts, failures in
                guard let limit = expected.maxRetries else { return }
                let retried = facts.state.tasks.filter { $0.retries > 0 }
                let total = retried.map(\.retries).reduce(0, +)
                guard total > limit else { return }
                failures.fail(
                    "pipeline.maxRetries", "at most \(limit) retr\(limit == 1 ? "y" : "ies")",
                    "\(total) (\(retried.map { "\($0.id): \($0.retries)" }.joined(separator: ", ")))")
            }),
        .names(
            "breakersOpened", \.breakersOpened,
            check: { expected, facts, failures in
                for breaker in expected.breakersOpened where !facts.breakersOpened.contains(breaker) {
                    let now = facts.state.breakers[breaker].map { "it is \($0.state.rawValue)" } ?? "it never changed"
                    failures.fail("pipeline.breakersOpened", "the breaker \(breaker) opens", "it never opened (\(now))")
                }
            }),
        PipelineExpectationKind(
            key: "noBreakerOpened",
            read: { node, expected throws(ConfigError) in expected.noBreakerOpened = try node.bool("pipeline.noBreakerOpened") },
            count: { $0.noBreakerOpened ? 1 : 0 },
            check: { expected, facts, failures in
                guard expected.noBreakerOpened, !facts.breakersOpened.isEmpty else { return }
                let reasons = facts.breakersOpened.map { name in "\(name) (\(facts.state.breakers[name]?.reason ?? "opened"))" }
                failures.fail("pipeline.noBreakerOpened", "no breaker opens", "opened: \(reasons.joined(separator: "; "))")
            }),
        PipelineExpectationKind(
            key: "outputs",
            read: { node, expected throws(ConfigError) in
                expected.outputs = try EvalCaseFile.readOutputMatcher(node, what: "pipeline.outputs")
            },
            count: { $0.outputs == nil ? 0 : 1 },
            check: { expected, facts, failures in
                guard let matcher = expected.outputs else { return }
                PipelineCheck.check(
                    "pipeline.outputs", .matcher(matcher), facts.state.stop?.outputs, what: "outputs",
                    missing: "no outputs: \(PipelineCheck.describeStop(facts.state))", into: &failures)
            }),
    ]

    /// A list of task (or breaker) names, one check per name (or one for the whole list).
    static func names(
        _ key: String, _ path: any WritableKeyPath<PipelineExpectations, [String]> & Sendable, countsOne: Bool = false,
        check: @escaping Checker
    ) -> PipelineExpectationKind {
        PipelineExpectationKind(
            key: key, read: { node, expected throws(ConfigError) in expected[keyPath: path] = try node.names("pipeline.\(key)") },
            count: { expected in countsOne ? (expected[keyPath: path].isEmpty ? 0 : 1) : expected[keyPath: path].count }, check: check)
    }
}

/// One key a case may give for a task under `expected.tasks.<task>`, beside the trajectory
/// kinds (`ExpectationKind`) that check the child run of the task's last attempt.
struct TaskExpectationKind: Sendable {
    typealias Reader = @Sendable (ConfigNode, inout TaskExpectations, _ what: String) throws(ConfigError) -> Void
    typealias Checker = @Sendable (TaskExpectations, PipelineTaskState, inout [ExpectationFailure]) -> Void

    let key: String
    let read: Reader
    let count: @Sendable (TaskExpectations) -> Int
    let check: Checker

    static let all: [TaskExpectationKind] = [
        TaskExpectationKind(
            key: "status", read: { node, task, what throws(ConfigError) in task.status = try node.choice("\(what).status") },
            count: { $0.status == nil ? 0 : 1 },
            check: { expectation, task, failures in
                guard let status = expectation.status, task.status != status else { return }
                failures.fail("tasks.\(task.id).status", status.rawValue, PipelineCheck.describe(task))
            }),
        TaskExpectationKind(
            key: "retries",
            read: { node, task, what throws(ConfigError) in task.retries = try EvalCaseFile.readRange(node, what: "\(what).retries") },
            count: { $0.retries == nil ? 0 : 1 },
            check: { expectation, task, failures in
                guard let range = expectation.retries, !range.contains(task.retries) else { return }
                failures.fail("tasks.\(task.id).retries", "\(range) retries", "\(task.retries) (\(PipelineCheck.describe(task)))")
            }),
        TaskExpectationKind(
            key: "output",
            read: { node, task, what throws(ConfigError) in
                // A mapping is an argument matcher; any other value must be equal.
                if case .mapping = node.content {
                    task.output = .matcher(try EvalCaseFile.readOutputMatcher(node, what: "\(what).output"))
                } else {
                    task.output = .equals(node.json)
                }
            },
            count: { $0.output == nil ? 0 : 1 },
            check: { expectation, task, failures in
                guard let output = expectation.output else { return }
                PipelineCheck.check(
                    "tasks.\(task.id).output", output, task.output, what: "output",
                    missing: "no output (\(PipelineCheck.describe(task)))", into: &failures)
            }),
    ]
}

/// What a pipeline's expectations are checked against: the state folded from its log, the
/// breakers that opened at least once, and the tasks that ran in the current branch.
struct PipelineFacts {
    let state: PipelineState
    let breakersOpened: [String]
    let ran: [String]
}

extension [ExpectationFailure] {
    mutating func fail(_ expectation: String, _ wanted: String, _ actual: String) {
        append(ExpectationFailure(expectation: expectation, expected: wanted, actual: actual))
    }
}
