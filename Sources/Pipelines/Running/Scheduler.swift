import AgentRuntime
import Foundation
import TraceCore

/// The scheduling loop of one `start`, `resume` or `rollback`: starts ready tasks in plan
/// order up to `jobs`, commits finished attempts in the order they started, applies recovery
/// policies and breakers, and ends the pipeline (stopped or paused).
struct Scheduler {
    let runner: PipelineRunner
    let recorder: PipelineRecorder
    let directory: String
    let jobs: Int
    /// Attempts running or finished but not yet committed, by ticket (start order).
    private var inFlight: [Int: Launch] = [:]
    private var nextTicket = 0
    private var nextCommit = 0
    private var finishedEarly: [Int: AttemptResult] = [:]
    /// The failure that stops the pipeline once running attempts are committed.
    private var failure: (task: String, error: String)?
    private var isPausing = false
    /// The ids of the tasks that are some task's fallback.
    private let fallbacks: Set<String>
    /// Plan positions of the tasks that are some task's fallback; they start only when routed
    /// to, so they are looked at apart from the others.
    private let fallbackIndices: [Int]
    /// Per fallback task, the tasks that may route to it, in plan order.
    private let primaries: [String: [String]]
    /// Every task before this plan position that is not a fallback is done for this scheduler
    /// (settled, failed for good, or routed): the search for the next task starts here, so a
    /// 1,000-task pipeline is not scanned from its first task at every start.
    private var scanFrom = 0

    init(runner: PipelineRunner, recorder: PipelineRecorder, directory: String, jobs: Int) {
        self.runner = runner
        self.recorder = recorder
        self.directory = directory
        self.jobs = max(1, jobs)
        let tasks = runner.definition.tasks
        let fallbacks = runner.definition.fallbackTasks
        self.fallbacks = fallbacks
        fallbackIndices = tasks.indices.filter { fallbacks.contains(tasks[$0].id) }
        primaries = Dictionary(
            runner.definition.plan.filter { !$0.fallbackFor.isEmpty }.map { ($0.id, $0.fallbackFor) },
            uniquingKeysWith: { first, _ in first })
    }

    private var definition: PipelineDefinition { runner.definition }
    private var state: PipelineState { recorder.state }

    mutating func run() async throws(PipelineError) {
        let attempts = AttemptRunner(environment: runner.environment)
        var thrown: PipelineError?
        let thread = ExecutorThread(name: "agent-eval pipeline scheduler")
        defer { thread.stop() }
        await withTaskExecutorPreference(thread) {
            // On the thread (this closure's jobs run there): the thread digests the state while
            // it waits, and stops doing so before anything after this closure reads the state.
            let recorder = recorder
            thread.whenIdle = { recorder.prepareDigest() }
            defer { thread.whenIdle = nil }
            await withTaskGroup(of: (Int, AttemptResult).self) { group in
                do throws(PipelineError) {
                    checkPauseRequest()
                    try startReady(&group, attempts, thread)
                    try recorder.flushDeferred()
                    while let (ticket, result) = await group.next() {
                        finishedEarly[ticket] = result
                        // Interrupted from outside: commit nothing more; resume settles what ran.
                        if Task.isCancelled { continue }
                        // One commit, then the starts it allows, then the next commit: the same
                        // interleaving however many attempts finished meanwhile.
                        while let ready = finishedEarly.removeValue(forKey: nextCommit),
                            let launch = inFlight.removeValue(forKey: nextCommit)
                        {
                            nextCommit += 1
                            try commit(launch, ready)
                            checkPauseRequest()
                            try startReady(&group, attempts, thread)
                            // The checkpoint went out with the next start's flush; if nothing
                            // started, it is made durable before the scheduler waits.
                            try recorder.flushDeferred()
                        }
                    }
                } catch {
                    thrown = error
                    group.cancelAll()
                }
            }
        }
        if let thrown { throw thrown }
        try finish()
    }

    /// Looked for at every commit: one `access` call (FileManager's check cost several times more).
    private var pauseRequestPath: String { directory + "/" + PipelineRunner.pauseRequestName }

    private mutating func checkPauseRequest() {
        if !isPausing, access(pauseRequestPath, F_OK) == 0 { isPausing = true }
    }

    // MARK: Starting

    private mutating func startReady(_ group: inout TaskGroup<(Int, AttemptResult)>, _ attempts: AttemptRunner, _ thread: ExecutorThread)
        throws(PipelineError)
    {
        while failure == nil, !isPausing, !Task.isCancelled, inFlight.count < jobs, let (task, primary) = nextCandidate() {
            let attempt = state.nextAttempt(of: task.id)
            var isProbe = false
            if let key = task.breaker {
                switch recorder.breakers.admission(key, nowUs: runner.environment.now()) {
                case .run:
                    break
                case .probe:
                    if recorder.breakers.states[key] != .halfOpen {
                        try recorder.record(
                            .breakerChanged(
                                BreakerChanged(
                                    breaker: key, state: .halfOpen, failures: 0, reason: "open for its full time: \(task.id) probes")))
                    }
                    isProbe = true
                case .failFast(let why):
                    let started = TaskStarted(task: task.id, attempt: attempt, fallbackFor: primary, input: .null)
                    try recorder.record(.taskStarted(started))
                    try commit(Launch(task: task.id, started: started), AttemptResult(status: .failed(.breakerOpen, why), durationUs: 0))
                    continue
                }
            }
            let input: JSONValue
            switch buildInput(task) {
            case .success(let value):
                input = value
            case .failure(let error):
                let started = TaskStarted(task: task.id, attempt: attempt, fallbackFor: primary, input: .null, isProbe: isProbe)
                try recorder.record(.taskStarted(started))
                // The task never ran: its input could not be made (a path the pipeline names that
                // the output it reads lacks). Whatever recovery follows is the wiring's doing, not
                // the task's, so a case over the run cannot pass on it.
                try commit(
                    Launch(task: task.id, started: started),
                    AttemptResult(
                        status: .failed(.failure, "\(TaskFinished.couldNotRunPrefix) its input could not be made: \(error.message)"),
                        durationUs: 0))
                continue
            }
            var started = TaskStarted(task: task.id, attempt: attempt, fallbackFor: primary, input: input, isProbe: isProbe)
            if case .agent = task.work {
                started.run = "\(state.runId ?? "pipeline").\(task.id).\(attempt)"
                started.log = "tasks/\(task.id)-\(attempt).jsonl.gz"
            }
            let delayMs =
                recorder.state.status(of: task.id) == .retrying
                ? state.task(task.id)?.currentAttempts.last?.finished?.recovery?.delayMs ?? 0 : 0
            try recorder.record(.taskStarted(started))
            let ticket = nextTicket
            nextTicket += 1
            inFlight[ticket] = Launch(task: task.id, started: started)
            let childLog = started.log.map { directory + "/" + $0 }
            let processRecord =
                task.kind == .command ? directory + "/" + PipelineRunner.processRecord(task: task.id, attempt: attempt) : nil
            let runId = started.run
            var observeChild: (@Sendable (Event) -> Void)?
            if let observe = recorder.observe {
                let id = task.id
                observeChild = { event in observe(.childEvent(task: id, attempt: attempt, event)) }
            }
            let childObserver = observeChild
            // A command attempt's async part runs on the scheduler's thread (no hop to start
            // it or to resume the scheduler after it); an agent run works, so it goes to the pool.
            let preference: any TaskExecutor = task.kind == .command ? thread : globalConcurrentExecutor
            group.addTask(executorPreference: preference) {
                let result = await attempts.run(
                    task, input: input, childLog: childLog, runId: runId, processRecord: processRecord, delayMs: delayMs,
                    observe: childObserver)
                return (ticket, result)
            }
        }
    }

    /// The next task to start, in plan order, and the task it stands in for when it is a fallback.
    private mutating func nextCandidate() -> (PipelineTask, String?)? {
        let tasks = definition.tasks
        let running = Set(inFlight.values.map(\.task))
        func isSettled(_ id: String) -> Bool {
            let status = recorder.state.status(of: id)
            return status == .succeeded || status == .skipped
        }
        // Within one scheduler a task that is done never runs again (a rollback makes a new one).
        while scanFrom < tasks.count, !running.contains(tasks[scanFrom].id) {
            let id = tasks[scanFrom].id
            let status = recorder.state.status(of: id)
            guard fallbacks.contains(id) || status == .succeeded || status == .skipped || status == .failed || status == .routed else {
                break
            }
            scanFrom += 1
        }
        var regular: Int?
        for index in scanFrom..<tasks.count {
            let task = tasks[index]
            guard !fallbacks.contains(task.id), !running.contains(task.id) else { continue }
            let status = recorder.state.status(of: task.id)
            guard status == .pending || status == .retrying, task.needs.allSatisfy(isSettled) else { continue }
            regular = index
            break
        }
        for index in fallbackIndices where index < regular ?? tasks.count {
            let task = tasks[index]
            guard !running.contains(task.id), let current = recorder.state.task(task.id) else { continue }
            if current.status == .retrying, let primary = current.currentAttempts.last?.started.fallbackFor {
                return (task, primary)
            }
            let routed = primaries[task.id]?.first { primary in
                recorder.state.status(of: primary) == .routed
                    && recorder.state.task(primary)?.currentAttempts.last?.finished?.recovery?.fallback == task.id
            }
            if let routed { return (task, routed) }
        }
        return regular.map { (tasks[$0], nil) }
    }

    /// The task's input: its declared inputs and nothing else.
    private func buildInput(_ task: PipelineTask) -> Result<JSONValue, InputError> {
        var object = JSONObject()
        for (name, reference) in task.inputs {
            let source = reference.task.map { recorder.state.output(of: $0) ?? .null } ?? state.start?.input ?? .null
            switch reference.resolve(in: source) {
            case .success(let value): object[name] = value
            case .failure(let error): return .failure(InputError(message: "input \"\(name)\" (\(reference)): \(error.message)"))
            }
        }
        return .success(.object(object))
    }

    // MARK: Committing

    /// Records how an attempt ended and what follows from it.
    mutating func commit(_ launch: Launch, _ result: AttemptResult) throws(PipelineError) {
        guard let task = definition.task(launch.task) else { return }
        var finished = TaskFinished(
            task: task.id, attempt: launch.started.attempt, status: .succeeded, stopReason: result.stopReason,
            durationUs: result.durationUs,
            stateDigest: recorder.digest())
        switch result.status {
        case .succeeded(let output):
            finished.output = output
        case .failed(let errorClass, let message):
            let (recovery, output) = result.recovery.map { ($0, nil) } ?? decide(task, errorClass, launch.started)
            (finished.status, finished.output, finished.errorClass, finished.error, finished.recovery) =
                (.failed, output, errorClass, message, recovery)
            if recovery.action == .fail, failure == nil {
                let what = launch.started.fallbackFor.map { "\(task.id) (fallback for \($0))" } ?? task.id
                failure = (task.id, "\(what) failed (\(errorClass.rawValue)): \(message)")
            }
        }
        // Durable with the next task's start (one flush for both), or by `flushDeferred`.
        try recorder.record(.taskFinished(finished), defersDurability: true)
        if let key = task.breaker, let change = recorder.breakers.change(after: finished, key: key, nowUs: runner.environment.now()) {
            try recorder.record(.breakerChanged(change))
        }
    }

    /// The recovery for a failed attempt: a retry while the class's budget lasts, then the
    /// policy's `then`; and the default output a skip goes on with.
    private func decide(_ task: PipelineTask, _ errorClass: TaskErrorClass, _ started: TaskStarted) -> (TaskRecovery, JSONValue?) {
        let policy = task.recovery[errorClass] ?? RecoveryPolicy()
        let used = (state.task(task.id)?.currentAttempts ?? []).filter { attempt in
            attempt.finished?.errorClass == errorClass && attempt.finished?.recovery?.action == .retry
                && attempt.started.fallbackFor == started.fallbackFor
        }.count
        if used < policy.retries {
            return (TaskRecovery(action: .retry, delayMs: policy.delay(retry: used + 1, task: task.id, attempt: started.attempt)), nil)
        }
        switch policy.then {
        case .skip: return (TaskRecovery(action: .skip), policy.defaultOutput ?? .null)
        case .fallback: return (TaskRecovery(action: .fallback, fallback: policy.fallback), nil)
        case .fail, .retry: return (TaskRecovery(action: .fail), nil)
        }
    }

    // MARK: Ending

    private mutating func finish() throws(PipelineError) {
        if Task.isCancelled {
            try recorder.record(
                .paused(
                    PipelinePaused(reason: "interrupted: the pipeline process was stopped; attempts it cut short are settled on resume")))
            return
        }
        if isPausing {
            try recorder.record(.paused(PipelinePaused(reason: "pause requested")))
            try? FileManager.default.removeItem(atPath: directory + "/" + PipelineRunner.pauseRequestName)
            return
        }
        if let failure {
            try recorder.record(
                .stopped(
                    PipelineStopped(
                        status: .failed, task: failure.task, error: failure.error, outputs: outputs(), stateDigest: recorder.digest())))
            return
        }
        let waiting = definition.tasks.filter { !fallbacks.contains($0.id) && state.task($0.id)?.isSettled != true }
        if let first = waiting.first {
            let blockers = first.needs.filter { state.task($0)?.isSettled != true }
            try recorder.record(
                .stopped(
                    PipelineStopped(
                        status: .failed, task: first.id,
                        error: "no task can run: \(first.id) waits for \(blockers.joined(separator: ", "))", outputs: outputs(),
                        stateDigest: recorder.digest())))
            return
        }
        try recorder.record(.stopped(PipelineStopped(status: .succeeded, outputs: outputs(), stateDigest: recorder.digest())))
    }

    /// The pipeline's outputs that are settled, by task id.
    private func outputs() -> JSONValue {
        .object(JSONObject(definition.outputs.compactMap { id in state.task(id)?.output.map { (id, $0) } }))
    }
}
