import ConfigFile
public import TraceCore

/// What a case expects of a pipeline run (docs/eval-cases.md, "Pipelines"): pipeline-level
/// facts from the pipeline log, and per-task ones, where a task's trajectory expectations are
/// checked against the child run of its last attempt.
public struct PipelineExpectations: Sendable {
    /// How the pipeline must stop.
    public var status: PipelineStopped.Status?
    /// Tasks that must have at least one attempt in the current branch.
    public var tasksRan: [String] = []
    /// Tasks that must have no attempt in the current branch.
    public var tasksNotRan: [String] = []
    /// Tasks whose results must have settled in this order (others may come between them).
    public var order: [String] = []
    /// Retries over all tasks of the current branch, at most.
    public var maxRetries: Int?
    /// Breakers that must have opened at least once.
    public var breakersOpened: [String] = []
    /// No breaker may have opened.
    public var noBreakerOpened = false
    /// What the pipeline's outputs (by task id) must match.
    public var outputs: ArgumentMatcher?
    /// Per task, in file order.
    public var tasks: [TaskExpectations] = []

    public init() {}

    /// Every task the expectations name, in order, without repeats.
    public var taskNames: [String] {
        var names: [String] = []
        var seen: Set<String> = []
        for name in tasksRan + tasksNotRan + order + tasks.map(\.task) where seen.insert(name).inserted { names.append(name) }
        return names
    }

    /// How many checks these are: each kind's (`PipelineExpectationKind`) and each task's.
    public var count: Int { PipelineExpectationKind.all.reduce(0) { $0 + $1.count(self) } + tasks.map(\.count).reduce(0, +) }
}

/// What one task of a pipeline must show.
public struct TaskExpectations: Sendable {
    public var task: String
    public var status: PipelineTaskState.Status?
    /// Retries of the task in the current branch.
    public var retries: CountRange?
    /// What the task's settled output must match.
    public var output: OutputExpectation?
    /// Trajectory expectations for the child run of the task's last attempt (agent tasks only).
    public var run: Expectations?
    /// Where the task's entry is in the case file.
    public var location: SourceLocation

    public init(task: String, location: SourceLocation) {
        self.task = task
        self.location = location
    }

    /// Each kind's checks (`TaskExpectationKind`) and those of its run's trajectory.
    public var count: Int { TaskExpectationKind.all.reduce(0) { $0 + $1.count(self) } + (run?.count ?? 0) }
}

/// An expected task output: a mapping is an argument matcher (a superset match by default, or
/// `{mode, match, paths, ignoreKeys}`); any other value must be equal.
public enum OutputExpectation: Sendable, CustomStringConvertible {
    case matcher(ArgumentMatcher)
    case equals(JSONValue)

    /// Why `actual` does not match; nil when it does.
    public func mismatch(_ actual: JSONValue) -> String? {
        switch self {
        case .matcher(let matcher): return matcher.mismatch(actual)
        case .equals(let expected): return ArgumentMatcher.ValueTest.equals(expected).mismatch(actual)
        }
    }

    public var description: String {
        switch self {
        case .matcher(let matcher): return matcher.description
        case .equals(let value): return "= \(JSONWriter.encodeString(value))"
        }
    }
}
