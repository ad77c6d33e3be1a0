/// The events of a pipeline log (docs/pipelines.md, "The pipeline log"): the same envelope,
/// chain and gzip members as a run log, starting with `pipeline_started` instead of
/// `run_started`. Each task attempt that runs an agent is a child run with a log of its own;
/// the pipeline log records when it started, what it was given, how it ended and what the
/// pipeline did next.
public enum PipelineEvent: Sendable, Hashable {
    case started(PipelineStarted)
    case taskStarted(TaskStarted)
    case taskFinished(TaskFinished)
    case breakerChanged(BreakerChanged)
    case paused(PipelinePaused)
    case resumed(PipelineResumed)
    case rolledBack(PipelineRolledBack)
    case forked(PipelineForked)
    case stopped(PipelineStopped)

    /// The kinds, in the order docs/pipelines.md lists them.
    public static let kinds = [
        "pipeline_started", "task_started", "task_finished", "breaker_changed", "pipeline_paused", "pipeline_resumed",
        "pipeline_rolled_back", "pipeline_forked", "pipeline_stopped",
    ]

    public var kind: String {
        switch self {
        case .started: return "pipeline_started"
        case .taskStarted: return "task_started"
        case .taskFinished: return "task_finished"
        case .breakerChanged: return "breaker_changed"
        case .paused: return "pipeline_paused"
        case .resumed: return "pipeline_resumed"
        case .rolledBack: return "pipeline_rolled_back"
        case .forked: return "pipeline_forked"
        case .stopped: return "pipeline_stopped"
        }
    }

    public var data: JSONValue { body.json }

    /// The value `data` is the JSON form of.
    var body: any JSONEncodable {
        switch self {
        case .started(let payload): return payload
        case .taskStarted(let payload): return payload
        case .taskFinished(let payload): return payload
        case .breakerChanged(let payload): return payload
        case .paused(let payload): return payload
        case .resumed(let payload): return payload
        case .rolledBack(let payload): return payload
        case .forked(let payload): return payload
        case .stopped(let payload): return payload
        }
    }

    /// Reads the data of `kind`, or nil when `kind` is not a pipeline kind.
    static func decode(kind: String, from scanner: inout JSONScanner) throws -> PipelineEvent? {
        switch kind {
        case "pipeline_started": return .started(try PipelineStarted(from: &scanner))
        case "task_started": return .taskStarted(try TaskStarted(from: &scanner))
        case "task_finished": return .taskFinished(try TaskFinished(from: &scanner))
        case "breaker_changed": return .breakerChanged(try BreakerChanged(from: &scanner))
        case "pipeline_paused": return .paused(try PipelinePaused(from: &scanner))
        case "pipeline_resumed": return .resumed(try PipelineResumed(from: &scanner))
        case "pipeline_rolled_back": return .rolledBack(try PipelineRolledBack(from: &scanner))
        case "pipeline_forked": return .forked(try PipelineForked(from: &scanner))
        case "pipeline_stopped": return .stopped(try PipelineStopped(from: &scanner))
        default: return nil
        }
    }

    /// A task is about to run (write-ahead, as `tool_intended` is for a tool), a task's end is
    /// a checkpoint, and a pause, rollback or stop is acted on: each is flushed before the
    /// scheduler goes on.
    var isDurabilityPoint: Bool {
        switch self {
        case .taskStarted, .taskFinished, .paused, .rolledBack, .forked, .stopped: return true
        case .started, .breakerChanged, .resumed: return false
        }
    }
}

/// How a pipeline task does its work.
public enum PipelineTaskKind: String, JSONEnum {
    /// An agent run from an agent file: a child run with its own log.
    case agent
    /// A deterministic command: its input on stdin, its output on stdout.
    case command
}

/// One task of the plan, as `pipeline_started` records it.
public struct PipelineTaskPlan: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var id: String
    public var kind: PipelineTaskKind
    /// The tasks whose outputs it needs or that must finish first, sorted.
    public var needs: [String]
    /// The task it runs in place of when that one fails and routes to it; such a task is not
    /// scheduled on its own.
    public var fallbackFor: [String]
    /// The circuit breaker it counts against and is stopped by, if any.
    public var breaker: String?

    public init(id: String, kind: PipelineTaskKind, needs: [String], fallbackFor: [String] = [], breaker: String? = nil) {
        self.id = id
        self.kind = kind
        self.needs = needs
        self.fallbackFor = fallbackFor
        self.breaker = breaker
    }

    public init(from scanner: inout JSONScanner) throws {
        var id: String?
        var kind: PipelineTaskKind?
        var needs: [String] = []
        var fallbackFor: [String] = []
        var breaker: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "id": id = try scanner.read()
            case "kind": kind = try scanner.read()
            case "needs": needs = try scanner.read()
            case "fallback_for": fallbackFor = try scanner.read()
            case "breaker": breaker = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.id = try required(id, "id")
        self.kind = try required(kind, "kind")
        self.needs = needs
        self.fallbackFor = fallbackFor
        self.breaker = breaker
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("breaker", breaker)
        if !fallbackFor.isEmpty { object.set("fallback_for", fallbackFor) }
        object.set("id", id)
        object.set("kind", kind)
        object.set("needs", needs)
    }
}

/// The first event of a pipeline log.
public struct PipelineStarted: JSONRepresentable, JSONObjectEncodable, Hashable {
    /// The pipeline's name (the file's `pipeline` key).
    public var pipeline: String
    /// The pipeline file as given when the run started.
    public var file: String
    /// `sha256:<hex>` of the pipeline file's bytes: resume and rollback refuse another file.
    public var fileDigest: String
    /// Every task, in the file's order.
    public var tasks: [PipelineTaskPlan]
    /// The pipeline's input (`$input` in the file).
    public var input: JSONValue
    /// How many tasks may run at once.
    public var jobs: Int

    public init(pipeline: String, file: String, fileDigest: String, tasks: [PipelineTaskPlan], input: JSONValue, jobs: Int) {
        self.pipeline = pipeline
        self.file = file
        self.fileDigest = fileDigest
        self.tasks = tasks
        self.input = input
        self.jobs = jobs
    }

    public init(from scanner: inout JSONScanner) throws {
        var pipeline: String?
        var file: String?
        var fileDigest: String?
        var tasks: [PipelineTaskPlan]?
        var input: JSONValue = .null
        var jobs: Int?
        try scanner.readObject { scanner, key in
            switch key {
            case "pipeline": pipeline = try scanner.read()
            case "file": file = try scanner.read()
            case "file_digest": fileDigest = try scanner.read()
            case "tasks": tasks = try scanner.read()
            case "input": input = try scanner.read()
            case "jobs": jobs = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.pipeline = try required(pipeline, "pipeline")
        self.file = try required(file, "file")
        self.fileDigest = try required(fileDigest, "file_digest")
        self.tasks = try required(tasks, "tasks")
        self.input = input
        self.jobs = try required(jobs, "jobs")
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("file", file)
        object.set("file_digest", fileDigest)
        object.set("input", input)
        object.set("jobs", jobs)
        object.set("pipeline", pipeline)
        object.set("tasks", tasks)
    }
}

/// A task attempt starts: recorded before it runs.
public struct TaskStarted: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var task: String
    /// 1 for the first attempt of the task in this branch of the pipeline; counts on across
    /// retries, resumes and rollbacks, so every attempt has its own child log.
    public var attempt: Int
    /// When this is a fallback: the task it stands in for (its output becomes that task's).
    public var fallbackFor: String?
    /// The child run's id and log (relative to the pipeline log's directory), for agent tasks.
    public var run: String?
    public var log: String?
    /// Exactly what the task was given: its declared inputs, by name.
    public var input: JSONValue
    /// This attempt is a circuit breaker's half-open probe.
    public var isProbe: Bool

    public init(
        task: String, attempt: Int, fallbackFor: String? = nil, run: String? = nil, log: String? = nil, input: JSONValue,
        isProbe: Bool = false
    ) {
        self.task = task
        self.attempt = attempt
        self.fallbackFor = fallbackFor
        self.run = run
        self.log = log
        self.input = input
        self.isProbe = isProbe
    }

    public init(from scanner: inout JSONScanner) throws {
        var task: String?
        var attempt: Int?
        var fallbackFor: String?
        var run: String?
        var log: String?
        var input: JSONValue = .null
        var isProbe = false
        try scanner.readObject { scanner, key in
            switch key {
            case "task": task = try scanner.read()
            case "attempt": attempt = try scanner.read()
            case "fallback_for": fallbackFor = try scanner.readOptional()
            case "run": run = try scanner.readOptional()
            case "log": log = try scanner.readOptional()
            case "input": input = try scanner.read()
            case "probe": isProbe = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.task = try required(task, "task")
        self.attempt = try required(attempt, "attempt")
        self.fallbackFor = fallbackFor
        self.run = run
        self.log = log
        self.input = input
        self.isProbe = isProbe
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("attempt", attempt)
        object.set("fallback_for", fallbackFor)
        object.set("input", input)
        object.set("log", log)
        if isProbe { object.set("probe", true) }
        object.set("run", run)
        object.set("task", task)
    }
}

/// Why a task attempt failed: the key of a task's recovery policy.
public enum TaskErrorClass: String, JSONEnum {
    /// The attempt ran past the task's `timeout_ms`.
    case timeout
    /// The command exited non-zero, or the agent run stopped without success.
    case failure
    /// The output did not parse or did not pass the task's validation.
    case invalidOutput = "invalid_output"
    /// The task's circuit breaker was open: the task failed fast without running.
    case breakerOpen = "breaker_open"
    /// The process running the pipeline died while the attempt ran (found on resume).
    case interrupted
}

/// What the pipeline did about a failed attempt.
public struct TaskRecovery: JSONRepresentable, JSONObjectEncodable, Hashable {
    public enum Action: String, JSONEnum {
        /// Run the task again (`task_started` with the next attempt follows) after `delayMs`.
        case retry
        /// Go on with the task's default output in place of its output.
        case skip
        /// Run the fallback task in its place.
        case fallback
        /// Stop the pipeline: no new task starts; running ones finish; `pipeline_stopped` follows.
        case fail
    }

    public var action: Action
    public var delayMs: Int?
    public var fallback: String?

    public init(action: Action, delayMs: Int? = nil, fallback: String? = nil) {
        self.action = action
        self.delayMs = delayMs
        self.fallback = fallback
    }

    public init(from scanner: inout JSONScanner) throws {
        var action: Action?
        var delayMs: Int?
        var fallback: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "action": action = try scanner.read()
            case "delay_ms": delayMs = try scanner.readOptional()
            case "fallback": fallback = try scanner.readOptional()
            default: try scanner.skipValue()
            }
        }
        self.action = try required(action, "action")
        self.delayMs = delayMs
        self.fallback = fallback
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("action", action)
        object.set("delay_ms", delayMs)
        object.set("fallback", fallback)
    }
}

/// A task attempt ended. With `succeeded`, this is the task's checkpoint: its validated
/// output, durable before anything downstream starts.
public struct TaskFinished: JSONRepresentable, JSONObjectEncodable, Hashable {
    public enum Status: String, JSONEnum {
        case succeeded
        case failed
    }

    public var task: String
    public var attempt: Int
    public var status: Status
    /// The validated output (succeeded), or the default output a `skip` goes on with.
    public var output: JSONValue?
    public var errorClass: TaskErrorClass?
    public var error: String?
    /// What happens next, for a failed attempt.
    public var recovery: TaskRecovery?
    /// The child run's stop reason, for agent tasks that ran.
    public var stopReason: String?
    /// How long the attempt ran (microseconds, monotonic clock).
    public var durationUs: Int
    /// The digest of the pipeline state before this event (see `PipelineState.digest`).
    public var stateDigest: String

    /// How `error` begins when the harness could not run the attempt at all — its command or
    /// validation command could not start, its agent run could not be set up (an MCP server
    /// that would not start, a log that could not be written): the attempt shows the machine,
    /// not the task, so a case over the pipeline could not run.
    public static let couldNotRunPrefix = "the harness could not run the attempt:"

    /// The harness could not run the attempt (`couldNotRunPrefix`).
    public var isHarnessFault: Bool { (error ?? "").hasPrefix(Self.couldNotRunPrefix) }

    public init(
        task: String, attempt: Int, status: Status, output: JSONValue? = nil, errorClass: TaskErrorClass? = nil, error: String? = nil,
        recovery: TaskRecovery? = nil, stopReason: String? = nil, durationUs: Int, stateDigest: String
    ) {
        self.task = task
        self.attempt = attempt
        self.status = status
        self.output = output
        self.errorClass = errorClass
        self.error = error
        self.recovery = recovery
        self.stopReason = stopReason
        self.durationUs = durationUs
        self.stateDigest = stateDigest
    }

    public init(from scanner: inout JSONScanner) throws {
        var task: String?
        var attempt: Int?
        var status: Status?
        var output: JSONValue?
        var errorClass: TaskErrorClass?
        var error: String?
        var recovery: TaskRecovery?
        var stopReason: String?
        var durationUs: Int?
        var stateDigest: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "task": task = try scanner.read()
            case "attempt": attempt = try scanner.read()
            case "status": status = try scanner.read()
            case "output": output = try scanner.read()
            case "error_class": errorClass = try scanner.readOptional()
            case "error": error = try scanner.readOptional()
            case "recovery": recovery = try scanner.readOptional()
            case "stop_reason": stopReason = try scanner.readOptional()
            case "duration_us": durationUs = try scanner.readMeasure()
            case "state_digest": stateDigest = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.task = try required(task, "task")
        self.attempt = try required(attempt, "attempt")
        self.status = try required(status, "status")
        self.output = output
        self.errorClass = errorClass
        self.error = error
        self.recovery = recovery
        self.stopReason = stopReason
        self.durationUs = try required(durationUs, "duration_us")
        self.stateDigest = try required(stateDigest, "state_digest")
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("attempt", attempt)
        object.set("duration_us", durationUs)
        object.set("error", error)
        object.set("error_class", errorClass)
        object.set("output", output)
        object.set("recovery", recovery)
        object.set("state_digest", stateDigest)
        object.set("status", status)
        object.set("stop_reason", stopReason)
        object.set("task", task)
    }
}

/// A circuit breaker changed state.
public struct BreakerChanged: JSONRepresentable, JSONObjectEncodable, Hashable {
    public enum State: String, JSONEnum {
        case closed
        case open
        /// The cool-down passed: the next task is a probe; its success closes the breaker.
        case halfOpen = "half_open"
    }

    public var breaker: String
    public var state: State
    /// Failures counted in the window when it opened.
    public var failures: Int
    public var reason: String

    public init(breaker: String, state: State, failures: Int, reason: String) {
        self.breaker = breaker
        self.state = state
        self.failures = failures
        self.reason = reason
    }

    public init(from scanner: inout JSONScanner) throws {
        var breaker: String?
        var state: State?
        var failures = 0
        var reason = ""
        try scanner.readObject { scanner, key in
            switch key {
            case "breaker": breaker = try scanner.read()
            case "state": state = try scanner.read()
            case "failures": failures = try scanner.read()
            case "reason": reason = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.breaker = try required(breaker, "breaker")
        self.state = try required(state, "state")
        self.failures = failures
        self.reason = reason
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("breaker", breaker)
        object.set("failures", failures)
        object.set("reason", reason)
        object.set("state", state)
    }
}

/// The pipeline stopped starting tasks and every running task finished: it can be resumed.
public struct PipelinePaused: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var reason: String

    public init(reason: String) { self.reason = reason }

    public init(from scanner: inout JSONScanner) throws {
        var reason = ""
        try scanner.readObject { scanner, key in
            switch key {
            case "reason": reason = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.reason = reason
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("reason", reason)
    }
}

/// A paused, interrupted or rolled-back pipeline continues in the same log.
public struct PipelineResumed: JSONRepresentable, JSONObjectEncodable, Hashable {
    /// `pause`, `crash` (the log ended without a pause or stop), `rollback` or `fork`.
    public var after: String

    public init(after: String) { self.after = after }

    public init(from scanner: inout JSONScanner) throws {
        var after = ""
        try scanner.readObject { scanner, key in
            switch key {
            case "after": after = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.after = after
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("after", after)
    }
}

/// Outputs of `to` and every task downstream of it were discarded; they run again. Their
/// earlier attempts stay in the log (and their child logs on disk): a fork, not an erasure.
public struct PipelineRolledBack: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var to: String
    /// The tasks whose results were discarded, in plan order.
    public var discarded: [String]

    public init(to: String, discarded: [String]) {
        self.to = to
        self.discarded = discarded
    }

    public init(from scanner: inout JSONScanner) throws {
        var to: String?
        var discarded: [String] = []
        try scanner.readObject { scanner, key in
            switch key {
            case "to": to = try scanner.read()
            case "discarded": discarded = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.to = try required(to, "to")
        self.discarded = discarded
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("discarded", discarded)
        object.set("to", to)
    }
}

/// The pipeline ended: every task done (`succeeded`) or a failure it could not recover from
/// (`failed`, naming the task). A rollback may continue a stopped pipeline.
public struct PipelineStopped: JSONRepresentable, JSONObjectEncodable, Hashable {
    public enum Status: String, JSONEnum {
        case succeeded
        case failed
    }

    public var status: Status
    public var task: String?
    public var error: String?
    /// The pipeline's outputs by task id (the file's `outputs`, or every task nothing depends on).
    public var outputs: JSONValue
    /// The digest of the pipeline state before this event.
    public var stateDigest: String

    public init(status: Status, task: String? = nil, error: String? = nil, outputs: JSONValue, stateDigest: String) {
        self.status = status
        self.task = task
        self.error = error
        self.outputs = outputs
        self.stateDigest = stateDigest
    }

    public init(from scanner: inout JSONScanner) throws {
        var status: Status?
        var task: String?
        var error: String?
        var outputs: JSONValue = .object(JSONObject())
        var stateDigest: String?
        try scanner.readObject { scanner, key in
            switch key {
            case "status": status = try scanner.read()
            case "task": task = try scanner.readOptional()
            case "error": error = try scanner.readOptional()
            case "outputs": outputs = try scanner.read()
            case "state_digest": stateDigest = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.status = try required(status, "status")
        self.task = task
        self.error = error
        self.outputs = outputs
        self.stateDigest = try required(stateDigest, "state_digest")
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("error", error)
        object.set("outputs", outputs)
        object.set("state_digest", stateDigest)
        object.set("status", status)
        object.set("task", task)
    }
}

/// `pipeline_forked`: this pipeline run is a fork of another (`agent-eval pipeline fork`,
/// docs/pipelines.md "Fork"). The log holds every event of the parent's log — the same payloads
/// and times under this run's id and hash chain, each recorded state digest that of this run's
/// state — then this event, then the `pipeline_rolled_back` that discards the task forked at and
/// what is downstream of it, and what the fork ran. `parentHead` is the hash of the parent's last
/// line, so anyone holding the parent can check the copy.
public struct PipelineForked: JSONRepresentable, JSONObjectEncodable, Hashable {
    public var parentRunId: String
    /// SHA-256 (hex) of the parent's last event line: the copy holds the parent's events up to it.
    public var parentHead: String
    /// The parent's log as it was named when forking (information only: a log can move).
    public var parentLog: String?
    /// The parent's events copied (its signature lines left out).
    public var copiedEvents: Int

    public init(parentRunId: String, parentHead: String, parentLog: String? = nil, copiedEvents: Int) {
        self.parentRunId = parentRunId
        self.parentHead = parentHead
        self.parentLog = parentLog
        self.copiedEvents = copiedEvents
    }

    public init(from scanner: inout JSONScanner) throws {
        var parentRunId: String?
        var parentHead: String?
        var parentLog: String?
        var copiedEvents = 0
        try scanner.readObject { scanner, key in
            switch key {
            case "parent_run_id": parentRunId = try scanner.read()
            case "parent_head": parentHead = try scanner.read()
            case "parent_log": parentLog = try scanner.readOptional()
            case "copied_events": copiedEvents = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        self.parentRunId = try required(parentRunId, "parent_run_id")
        self.parentHead = try required(parentHead, "parent_head")
        self.parentLog = parentLog
        self.copiedEvents = copiedEvents
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("copied_events", copiedEvents)
        object.set("parent_head", parentHead)
        object.set("parent_log", parentLog)
        object.set("parent_run_id", parentRunId)
    }
}
