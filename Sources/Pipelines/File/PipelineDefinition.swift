public import AgentRuntime
public import ConfigFile
public import TraceCore

/// A pipeline as its file defines it, checked completely (see `PipelineFile.load`).
public struct PipelineDefinition: Sendable {
    /// The file's `pipeline` key.
    public var name: String
    /// The file as given, and `sha256:<hex>` of its bytes.
    public var path: String
    public var fileDigest: String
    /// The default for `--jobs`.
    public var jobs: Int?
    /// The default pipeline input (`$input`); `--input` replaces it.
    public var input: JSONValue
    /// The tasks whose outputs are the pipeline's outputs.
    public var outputs: [String]
    /// Every task, in plan order once checked (file order before).
    public var tasks: [PipelineTask] {
        didSet { taskIndex = Self.index(tasks) }
    }
    public var breakers: [String: BreakerSettings]
    /// What the checks found that does not stop a run (unused outputs, tasks that lead to no
    /// output), with file:line:column.
    public var warnings: [ConfigError]
    /// Position in `tasks` by id (the first, should a file repeat an id).
    private var taskIndex: [String: Int]

    public init(
        name: String, path: String, fileDigest: String, jobs: Int?, input: JSONValue, outputs: [String], tasks: [PipelineTask],
        breakers: [String: BreakerSettings], warnings: [ConfigError]
    ) {
        (self.name, self.path, self.fileDigest, self.jobs, self.input, self.outputs) = (name, path, fileDigest, jobs, input, outputs)
        (self.tasks, self.breakers, self.warnings) = (tasks, breakers, warnings)
        taskIndex = Self.index(tasks)
    }

    private static func index(_ tasks: [PipelineTask]) -> [String: Int] {
        var index: [String: Int] = [:]
        for (position, task) in tasks.enumerated() where index[task.id] == nil { index[task.id] = position }
        return index
    }

    public func task(_ id: String) -> PipelineTask? { taskIndex[id].map { tasks[$0] } }

    /// The plan as `check --verbose` shows it: a line per task, `id [kind] ← needs (fallback for …)`.
    public var planLines: [String] {
        plan.map { task in
            let needs = task.needs.isEmpty ? "" : " ← " + task.needs.joined(separator: ", ")
            let role = task.fallbackFor.isEmpty ? "" : " (fallback for \(task.fallbackFor.joined(separator: ", ")))"
            return "\(task.id) [\(task.kind.rawValue)]\(needs)\(role)"
        }
    }

    /// The plan `pipeline_started` records.
    public var plan: [PipelineTaskPlan] {
        var primaries: [String: [String]] = [:]
        for task in tasks {
            for fallback in Set(task.recovery.values.compactMap(\.fallback)).sorted() { primaries[fallback, default: []].append(task.id) }
        }
        return tasks.map { task in
            PipelineTaskPlan(id: task.id, kind: task.kind, needs: task.needs, fallbackFor: primaries[task.id] ?? [], breaker: task.breaker)
        }
    }

    /// Tasks that only run in place of a failed task.
    public var fallbackTasks: Set<String> { Set(tasks.flatMap { $0.recovery.values.compactMap(\.fallback) }) }

    /// `root` and every task downstream of it, in plan order.
    public func descendants(of root: String) -> [String] {
        var reached: Set<String> = [root]
        for task in tasks where task.id != root && task.needs.contains(where: reached.contains) {
            reached.insert(task.id)
        }
        // Plan order is a topological order (checked at load), so one pass finds them all.
        return tasks.map(\.id).filter(reached.contains)
    }
}

/// One task of a pipeline.
public struct PipelineTask: Sendable {
    /// How the task does its work.
    public enum Work: Sendable {
        /// An agent run; `goal` is the template its goal is built from (nil: the input as JSON).
        case agent(path: String, agent: Agent, goal: String?)
        /// A command: the input as JSON on stdin; stdout is the output (JSON unless `isText`).
        case command(arguments: [String], directory: String, isText: Bool)
    }

    public var id: String
    public var work: Work
    /// The declared inputs, by name, in name order: all the task ever sees.
    public var inputs: [(name: String, reference: InputReference)]
    /// Every task it waits for: the tasks its inputs name and its `after` list, sorted.
    public var needs: [String]
    public var timeoutMs: Int?
    public var validation: OutputValidation
    /// What to do per error class; a missing class fails the pipeline.
    public var recovery: [TaskErrorClass: RecoveryPolicy]
    public var breaker: String?
    /// Where the task is defined, for messages.
    public var location: SourceLocation

    public var kind: PipelineTaskKind {
        if case .agent = work { return .agent }
        return .command
    }
}

/// Where an input comes from: `$input`, `$input.key`, `task` or `task.key.0.name`.
public struct InputReference: Sendable, Hashable, CustomStringConvertible {
    /// The task whose output it reads; nil for the pipeline's input.
    public var task: String?
    /// Member names and array indices into that value.
    public var path: [String]

    public var description: String { ([task ?? "$input"] + path).joined(separator: ".") }

    /// The referenced value, or why there is none.
    public func resolve(in value: JSONValue) -> Result<JSONValue, InputError> {
        var current = value
        for (depth, component) in path.enumerated() {
            let here = ([task ?? "$input"] + path.prefix(depth)).joined(separator: ".")
            switch current {
            case .object(let object):
                guard let next = object[component] else {
                    let keys = object.keys.prefix(8).joined(separator: ", ")
                    return .failure(InputError(message: "\(here) has no member \"\(component)\" (it has: \(keys))"))
                }
                current = next
            case .array(let items):
                guard let index = Int(component), items.indices.contains(index) else {
                    return .failure(InputError(message: "\(here) is a list of \(items.count); \"\(component)\" is not an index of it"))
                }
                current = items[index]
            default:
                return .failure(InputError(message: "\(here) is \(current.typeDescription), so it has no \"\(component)\""))
            }
        }
        return .success(current)
    }
}

/// A task input that its reference cannot be resolved to (a member a task's output does not
/// have).
public struct InputError: Diagnostic, Hashable {
    public var message: String
    public var diagnosticCode: String { "pipeline.unresolved_input" }
    public var place: SourceLocation? { nil }
}

/// The checks an output must pass before the task counts as succeeded.
public struct OutputValidation: Sendable {
    public var schema: JSONSchema?
    /// A command given the output as JSON on stdin: exit 0 accepts it; otherwise its stderr
    /// says why not.
    public var command: [String]?
    public var directory: String

    public init(schema: JSONSchema? = nil, command: [String]? = nil, directory: String = ".") {
        self.schema = schema
        self.command = command
        self.directory = directory
    }
}

/// What a task does when an attempt fails with one error class.
public struct RecoveryPolicy: Sendable, Hashable {
    /// Attempts after the first.
    public var retries: Int
    /// The first retry's delay; each next one doubles, up to `maxBackoffMs`; the delay taken
    /// is drawn from [0, that] (full jitter), reproducibly for a task and attempt.
    public var backoffMs: Int
    public var maxBackoffMs: Int
    /// What happens when no retry is left.
    public var then: TaskRecovery.Action
    /// The output `skip` goes on with.
    public var defaultOutput: JSONValue?
    /// The task `fallback` runs.
    public var fallback: String?

    public init(
        retries: Int = 0, backoffMs: Int = 100, maxBackoffMs: Int = 30_000, then: TaskRecovery.Action = .fail,
        defaultOutput: JSONValue? = nil, fallback: String? = nil
    ) {
        self.retries = retries
        self.backoffMs = backoffMs
        self.maxBackoffMs = maxBackoffMs
        self.then = then
        self.defaultOutput = defaultOutput
        self.fallback = fallback
    }

    /// The delay before retry number `retry` (1 for the first) of `task`'s attempt `attempt`.
    public func delay(retry: Int, task: String, attempt: Int) -> Int {
        // Full jitter from a hash of the task and attempt: spread like random, yet the same on
        // every run, so the log of a re-run pipeline is the same.
        Backoff.fullJitter(initialMs: backoffMs, capMs: maxBackoffMs).delayMs(retry: retry, source: HashedJitter(key: "\(task)#\(attempt)"))
    }
}

/// A circuit breaker's settings (the file's `breakers`).
public struct BreakerSettings: Sendable, Hashable {
    /// Failures within `windowMs` that open it.
    public var failures: Int
    public var windowMs: Int
    /// How long it stays open before a probe may run.
    public var openMs: Int

    public init(failures: Int, windowMs: Int, openMs: Int) {
        self.failures = failures
        self.windowMs = windowMs
        self.openMs = openMs
    }
}
