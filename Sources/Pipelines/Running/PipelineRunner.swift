public import AgentRuntime
import Foundation
public import TraceCore
public import TraceLog

/// What an observer of a running pipeline is told, as it happens.
public enum PipelineUpdate: Sendable {
    /// An event of the pipeline log, just recorded.
    case event(Event)
    /// An event of a task's child run (agent tasks), just recorded in its own log.
    case childEvent(task: String, attempt: Int, Event)
    /// The pipeline stopped or paused and its log is closed: the last update.
    case finished(PipelineOutcome)
}

/// A pipeline that stopped (succeeded or failed) or paused.
public struct PipelineOutcome: Sendable {
    public var logPath: String
    /// The fold of the log: equal to what a replay rebuilds.
    public var state: PipelineState

    public init(logPath: String, state: PipelineState) {
        self.logPath = logPath
        self.state = state
    }

    public var runId: String { state.runId ?? "" }
    public var isPaused: Bool { state.stop == nil }
    public var isSucceeded: Bool { state.stop?.status == .succeeded }
}

/// Runs pipelines (docs/pipelines.md): ready tasks run concurrently up to `jobs`, each an
/// isolated child run; every step lands in the pipeline log, whose fold is the only state the
/// scheduler decides from.
///
/// The log's order is deterministic: attempts are committed (their `task_finished` recorded)
/// in the order they started, and new tasks start only at commits, in plan order. A task that
/// finishes early waits for the ones started before it to be committed; its slot is free
/// only then. So the same pipeline with the same task outcomes writes the same sequence of
/// events whatever the timing (durations and times aside).
public struct PipelineRunner: Sendable {
    public var definition: PipelineDefinition
    public var environment: RuntimeEnvironment
    public var durability: Durability

    /// The pipeline log's name inside its directory.
    public static let logName = "pipeline.jsonl.gz"
    /// The file `pipeline pause` creates in the directory; the runner pauses when it sees it.
    public static let pauseRequestName = "pause-requested"

    /// Where a command attempt's process is recorded while it runs (`ProcessIdentity`),
    /// relative to the pipeline's directory: `tasks/<task>-<attempt>.process`.
    public static func processRecord(task: String, attempt: Int) -> String {
        "tasks/\(task)-\(attempt).process"
    }

    public init(definition: PipelineDefinition, environment: RuntimeEnvironment = .live, durability: Durability = .standard) {
        self.definition = definition
        self.environment = environment
        self.durability = durability
    }

    /// Starts a new pipeline run in `directory` (created), writing `directory/pipeline.jsonl.gz`
    /// and each agent attempt's child log under `directory/tasks/`.
    public func start(
        directory: String, runId: String, input: JSONValue? = nil, jobs: Int? = nil, observe: (@Sendable (PipelineUpdate) -> Void)? = nil
    ) async throws(PipelineError) -> PipelineOutcome {
        let path = directory + "/" + Self.logName
        let writer: LogWriter
        do {
            try FileManager.default.createDirectory(atPath: directory + "/tasks", withIntermediateDirectories: true)
            writer = try LogWriter.create(at: path, runId: runId, options: LogWriter.Options(durability: durability))
        } catch let error as LogError {
            throw PipelineError(.log, error.message, path: path)
        } catch {
            throw PipelineError(.log, "cannot create the pipeline directory: \(error)", path: directory)
        }
        let recorder = PipelineRecorder(writer: writer, breakers: definition.breakers, clock: environment.now, observe: observe)
        let jobs = jobs ?? definition.jobs ?? max(1, ProcessInfo.processInfo.activeProcessorCount)
        try recorder.record(
            .started(
                PipelineStarted(
                    pipeline: definition.name, file: definition.path, fileDigest: definition.fileDigest, tasks: definition.plan,
                    input: input ?? definition.input, jobs: jobs)))
        return try await drive(recorder, directory: directory, jobs: jobs)
    }

    /// Continues a paused or interrupted pipeline from its log: settled tasks are not run
    /// again; an attempt the log shows started but not finished is settled first (see
    /// docs/pipelines.md, "Resume").
    ///
    /// A command the earlier run started may still run (its process outlived the one running
    /// the pipeline): then `leftovers` decides — refuse with `still_running` (the default), or
    /// wait for it to end. A second copy never starts beside it.
    public func resume(
        log path: String, jobs: Int? = nil, leftovers: LeftoverPolicy = .refuse, observe: (@Sendable (PipelineUpdate) -> Void)? = nil
    ) async throws(PipelineError) -> PipelineOutcome {
        let (recorder, directory) = try open(path, observe: observe)
        let state = recorder.state
        if let stop = state.stop {
            throw PipelineError(
                .cannotResume, "the pipeline already stopped (\(stop.status.rawValue)); nothing to resume", path: path,
                hint: "to run part of it again: agent-eval pipeline rollback \(ShellWords.quoted(directory)) --to <task>")
        }
        try await settleLeftovers(state, directory: directory, path: path, policy: leftovers)
        try recorder.record(.resumed(PipelineResumed(after: state.isPaused ? "pause" : "crash")))
        try? FileManager.default.removeItem(atPath: directory + "/" + Self.pauseRequestName)
        // An attempt the crash cut short whose agent run had stopped on its own goes on with that
        // run's answer, checked by the task's validation as any attempt's output is.
        var settling = interruptedAttempts(state, directory: directory)
        let attempts = AttemptRunner(environment: environment)
        for index in settling.indices {
            guard let task = definition.task(settling[index].0.task) else { continue }
            await attempts.validated(&settling[index].1, task)
        }
        return try await drive(recorder, directory: directory, jobs: jobs ?? state.start?.jobs ?? 1, settling: settling)
    }

    /// Processes of command attempts that the log shows started and not finished, which still
    /// run: what resume refuses or waits for. Read from each attempt's process record.
    static func leftovers(_ state: PipelineState, directory: String) -> [LeftoverProcess] {
        var found: [LeftoverProcess] = []
        for task in state.tasks where task.status == .running && task.plan.kind == .command {
            for attempt in task.attempts where attempt.finished == nil {
                let record = directory + "/" + Self.processRecord(task: task.id, attempt: attempt.attempt)
                guard let identity = ProcessIdentity.read(from: record), let survivor = identity.survivor() else { continue }
                found.append(LeftoverProcess(task: task.id, attempt: attempt.attempt, pid: survivor, group: identity.pid))
            }
        }
        return found
    }

    /// Refuses, or waits until no leftover runs; then removes the records of the attempts
    /// resume settles (their processes have ended).
    private func settleLeftovers(
        _ state: PipelineState, directory: String, path: String, policy: LeftoverPolicy
    ) async throws(PipelineError) {
        var pauseMs = 20
        var told = false
        while true {
            let running = Self.leftovers(state, directory: directory)
            guard let first = running.first else { break }
            guard case .wait(let waiting) = policy else {
                let more = running.count > 1 ? " (and \(running.count - 1) more)" : ""
                throw PipelineError(
                    .stillRunning,
                    "task \(first.task)'s command from the earlier run is still running as \(first.description)\(more); wait for it or kill it",
                    path: path,
                    hint: "wait for it to end, or stop it and what it started: kill -- -\(first.group)")
            }
            if !told {
                waiting(running)
                told = true
            }
            do {
                try await environment.sleep(pauseMs)
            } catch {
                throw PipelineError(
                    .stillRunning, "interrupted while waiting for task \(first.task)'s command from the earlier run (\(first.description))",
                    path: path)
            }
            pauseMs = min(pauseMs * 2, 500)
        }
        for task in state.tasks where task.status == .running && task.plan.kind == .command {
            for attempt in task.attempts where attempt.finished == nil {
                unlink(directory + "/" + Self.processRecord(task: task.id, attempt: attempt.attempt))
            }
        }
    }

    /// Discards the results of `task` and every task downstream of it and runs them again in
    /// the same log: their earlier attempts stay recorded (a fork, not an erasure).
    public func rollback(
        log path: String, to task: String, jobs: Int? = nil, observe: (@Sendable (PipelineUpdate) -> Void)? = nil
    ) async throws(PipelineError) -> PipelineOutcome {
        let (recorder, directory) = try open(path, observe: observe)
        let rolledBack = try rollingBack(to: task, state: recorder.state, path: path, verb: "roll back")
        try record(rolledBack, by: "the rollback", on: recorder)
        try recorder.record(.resumed(PipelineResumed(after: "rollback")))
        return try await drive(recorder, directory: directory, jobs: jobs ?? recorder.state.start?.jobs ?? 1)
    }

    /// The rollback to `task` of a pipeline in `state` (read from `path`): the task and every
    /// task downstream of it, with their fallbacks. Refused for a task the plan does not have, a
    /// fallback, or a pipeline with a task that started and did not finish.
    private func rollingBack(to task: String, state: PipelineState, path: String, verb: String) throws(PipelineError)
        -> PipelineRolledBack
    {
        guard let planned = definition.task(task) else {
            throw PipelineError(
                .unknownTask, "the pipeline has no task \"\(task)\"", path: path,
                hint: "tasks: \(definition.tasks.map(\.id).joined(separator: ", "))")
        }
        guard !definition.fallbackTasks.contains(planned.id) else {
            throw PipelineError(.unknownTask, "\"\(task)\" only runs as a fallback; \(verb) to the task it stands in for", path: path)
        }
        if state.tasks.contains(where: { $0.status == .running }) {
            throw PipelineError(
                .cannotResume, "the pipeline has a task that started and did not finish", path: path,
                hint: "resume it first (agent-eval pipeline resume), or let it finish")
        }
        let discarded = Set(
            definition.descendants(of: task)
                + definition.descendants(of: task).flatMap { id in
                    definition.task(id)?.recovery.values.compactMap(\.fallback) ?? []
                })
        return PipelineRolledBack(to: task, discarded: definition.tasks.map(\.id).filter(discarded.contains))
    }

    /// Records a rollback, then closes each breaker of the tasks it runs again that was left open:
    /// else those tasks would not run, or would, depending on how long after the failures the
    /// rollback (or fork) comes.
    private func record(_ rolledBack: PipelineRolledBack, by whom: String, on recorder: PipelineRecorder) throws(PipelineError) {
        try recorder.record(.rolledBack(rolledBack))
        let rerun = Set(rolledBack.discarded)
        let breakers = Set((recorder.state.start?.tasks ?? []).filter { rerun.contains($0.id) }.compactMap(\.breaker))
        for (key, changed) in recorder.state.breakers.sorted(by: { $0.key < $1.key })
        where changed.state != .closed && breakers.contains(key) {
            try recorder.record(
                .breakerChanged(
                    BreakerChanged(
                        breaker: key, state: .closed, failures: 0, reason: "closed by \(whom) to \(rolledBack.to): its tasks run again")))
        }
    }

    /// Forks the pipeline run whose log is `path` at `task` (docs/pipelines.md, "Fork"): a new run
    /// `runId` in `directory` (which must not exist, or be empty) holds a copy of the parent's log
    /// — every event, each digest checked — and of its child logs, then `pipeline_forked`, the
    /// rollback of `task` and what is downstream of it, and the run of those tasks again. The
    /// tasks before it are not run again: their results are the parent's. The parent is not
    /// written to.
    public func fork(
        log path: String, at task: String, directory: String, runId: String, jobs: Int? = nil,
        observe: (@Sendable (PipelineUpdate) -> Void)? = nil
    ) async throws(PipelineError) -> PipelineOutcome {
        let recorded: [RecordedEvent]
        do {
            var options = LogReader.Options()
            options.isStrict = true
            // `parent_head` names the last copied line by its hash, in a log of any version.
            options.hashesLines = true
            recorded = try LogReader(path: path, options: options).readAll().events
        } catch let error as LogError {
            throw PipelineError(
                .log, "cannot fork \(path): \(error.message)", path: path,
                hint: error.code == .tornTail
                    ? "the pipeline was cut mid-write: seal its log first (agent-eval log repair \(ShellWords.quoted(path))), which runs nothing; "
                        + "pipeline resume would seal it and run its tasks on" : error.hint)
        } catch {
            throw PipelineError(.log, "cannot read the pipeline log: \(error)", path: path)
        }
        let events = recorded.map(\.event).filter { event in
            if case .unknown(let kind, _) = event.payload, kind == LogSigner.kind { return false }
            return true
        }
        let parent = try PipelineReplay(events: events, path: path)
        if let mismatch = parent.mismatches.first {
            throw PipelineError(
                .log, "cannot fork \(path): its recorded state digests do not match its events (\(mismatch))", path: path,
                hint: "agent-eval log verify \(ShellWords.quoted(path)) says more; a pipeline whose log was changed cannot be forked")
        }
        guard let start = parent.state.start, start.fileDigest == definition.fileDigest else {
            throw PipelineError(
                .fileChanged,
                "the pipeline file \(definition.path) has changed since the run started (its digest is not the recorded \(parent.state.start?.fileDigest ?? "none"))",
                path: path, hint: "fork with the file as it was (its agents and --model may differ); start a new run for a changed one")
        }
        let rolledBack = try rollingBack(to: task, state: parent.state, path: path, verb: "fork")
        guard runId != parent.state.runId else {
            throw PipelineError(
                .log, "the fork's run id \(runId) is its parent's: a fork is a run of its own", path: path,
                hint: "give another --run-id, or none")
        }
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        if fileManager.fileExists(atPath: directory, isDirectory: &isDirectory),
            !isDirectory.boolValue || !((try? fileManager.contentsOfDirectory(atPath: directory))?.isEmpty ?? true)
        {
            throw PipelineError(
                .log,
                "\(directory) already exists\(isDirectory.boolValue ? " and is not empty" : " as a file"): a fork is written to a new directory",
                path: directory, hint: "give another --run-id or --out, or remove it")
        }
        let parentDirectory = (path as NSString).deletingLastPathComponent
        let childLogs = Set(parent.state.tasks.flatMap { $0.attempts.compactMap(\.started.log) })
        let forkPath = directory + "/" + Self.logName
        let writer: LogWriter
        let isNew = !fileManager.fileExists(atPath: directory)
        do {
            try fileManager.createDirectory(atPath: directory + "/tasks", withIntermediateDirectories: true)
            // The child runs are the parent's: their logs are copied as they are, so the fork's
            // directory holds everything its log names.
            for log in childLogs.sorted()
            where fileManager.fileExists(atPath: (parentDirectory.isEmpty ? "." : parentDirectory) + "/" + log) {
                let target = directory + "/" + log
                try fileManager.createDirectory(
                    atPath: (target as NSString).deletingLastPathComponent, withIntermediateDirectories: true)
                try fileManager.copyItem(atPath: (parentDirectory.isEmpty ? "." : parentDirectory) + "/" + log, toPath: target)
            }
            writer = try LogWriter.create(at: forkPath, runId: runId, options: LogWriter.Options(durability: durability))
        } catch {
            // Nothing half made is left to block another try.
            if isNew { try? fileManager.removeItem(atPath: directory) }
            if let error = error as? LogError { throw PipelineError(.log, error.message, path: forkPath) }
            throw PipelineError(.log, "cannot make the fork's directory: \(error)", path: directory)
        }
        let recorder = PipelineRecorder(writer: writer, breakers: definition.breakers, clock: environment.now, observe: observe)
        // Copied as one batch: the fork's first durability point is its `pipeline_forked`.
        var copied = 0
        for event in events {
            guard case .pipeline(let payload) = event.payload else { continue }
            try recorder.record(payload, atUs: event.timeUs, defersDurability: true)
            copied += 1
        }
        try recorder.record(
            .forked(
                PipelineForked(
                    parentRunId: events[0].runId, parentHead: recorded[recorded.count - 1].hash, parentLog: path,
                    copiedEvents: copied)))
        try record(rolledBack, by: "the fork", on: recorder)
        try recorder.record(.resumed(PipelineResumed(after: "fork")))
        return try await drive(recorder, directory: directory, jobs: jobs ?? start.jobs)
    }

    /// Asks the pipeline running in `directory` to pause: it starts no new task, lets running
    /// ones finish, records `pipeline_paused` and exits.
    public static func requestPause(directory: String) throws(PipelineError) {
        let path = directory + "/" + logName
        guard FileManager.default.fileExists(atPath: path) else {
            throw PipelineError(.notFound, "no pipeline log in \(directory)", path: path)
        }
        guard
            FileManager.default.createFile(
                atPath: directory + "/" + pauseRequestName, contents: Array("pause\n".utf8).withUnsafeBytes { Data($0) })
        else {
            throw PipelineError(.log, "cannot write the pause request", path: directory + "/" + pauseRequestName)
        }
    }

    /// Runs the pipeline like `start`, as a sequence of updates: every event as it is
    /// recorded (the pipeline's and its child runs'), the outcome last.
    public func updates(directory: String, runId: String, input: JSONValue? = nil, jobs: Int? = nil) -> AsyncThrowingStream<
        PipelineUpdate, any Error
    > {
        AsyncThrowingStream { yield in
            .finished(try await start(directory: directory, runId: runId, input: input, jobs: jobs) { yield($0) })
        }
    }

    // MARK: Opening a log

    private func open(_ path: String, observe: (@Sendable (PipelineUpdate) -> Void)?) throws(PipelineError) -> (PipelineRecorder, String) {
        let directory = (path as NSString).deletingLastPathComponent
        let writer: LogWriter
        var events: [Event] = []
        do {
            writer = try LogWriter.open(at: path, options: LogWriter.Options(durability: durability)).0
            _ = try LogReader(path: path).forEachEvent { events.append($0.event) }
        } catch let error as LogError {
            throw PipelineError(.log, error.message, path: path, hint: error.hint)
        } catch {
            throw PipelineError(.log, "cannot open the pipeline log: \(error)", path: path)
        }
        let state = PipelineState(events: events)
        guard let start = state.start else {
            throw PipelineError(.notPipeline, "the log does not start with pipeline_started: it is not a pipeline log", path: path)
        }
        guard start.fileDigest == definition.fileDigest else {
            throw PipelineError(
                .fileChanged, "the pipeline file \(definition.path) is not the one the run started with (\(start.file))", path: path,
                hint: "resume and roll back with the file as it was; start a new run for the changed one")
        }
        let recorder = PipelineRecorder(
            writer: writer, state: state, events: events, breakers: definition.breakers, clock: environment.now, observe: observe)
        return (recorder, directory)
    }

    /// How attempts the log shows started and not finished ended (the process died or was
    /// interrupted): an agent run that stopped on its own is taken as it ended; one cut short
    /// runs again, unless a draft or write tool's intent has no recorded result — that tool
    /// may have run, so the attempt fails as `interrupted` and the task's policy for that class
    /// decides (fail, by default). A command task runs again.
    private func interruptedAttempts(_ state: PipelineState, directory: String) -> [(Launch, AttemptResult)] {
        var settled: [(Launch, AttemptResult)] = []
        for task in state.tasks where task.status == .running {
            guard let attempt = task.attempts.last(where: { $0.finished == nil }), let planned = definition.task(task.id) else { continue }
            var result = AttemptResult(
                status: .failed(.interrupted, "the attempt was cut short (the pipeline process stopped)"), durationUs: 0,
                recovery: TaskRecovery(action: .retry, delayMs: 0))
            if let log = attempt.started.log, case .agent = planned.work {
                let (child, untrusted) = Self.readChild(directory + "/" + log, run: attempt.started.run)
                if let untrusted {
                    // No answer is taken from a record that does not hold: the resume does not
                    // build on it, and a case over the pipeline could not run.
                    result.recovery = nil
                    result.status = .failed(.failure, "\(TaskFinished.couldNotRunPrefix) its run's log \(log) \(untrusted)")
                } else if let stop = child.stop, !stop.isInterruption {
                    result.recovery = nil
                    result.stopReason = stop.reason.rawValue
                    result.durationUs = max(0, (child.lastEventAtUs ?? 0) - (child.startedAtUs ?? 0))
                    if stop.reason == .success {
                        result.status = .succeeded(AttemptRunner.output(ofAnswer: stop.answer ?? ""))
                    } else {
                        result.status = .failed(
                            .failure, "the agent run stopped with \(stop.reason.rawValue)" + (stop.error.map { ": \($0)" } ?? ""))
                    }
                } else if let unsafe = Self.unresolvedSideEffect(child) {
                    result.recovery = nil
                    result.status = .failed(
                        .interrupted, "the attempt was cut short after \(unsafe) was intended without a recorded result: it may have run")
                }
            }
            settled.append((Launch(task: planned.id, started: attempt.started), result))
        }
        return settled
    }

    /// The state a child log folds to, and why it is no record to resume from, when it is not:
    /// a state digest its events do not rebuild (edited), or another run than the attempt's.
    static func readChild(_ path: String, run: String?) -> (state: RunState, untrusted: String?) {
        var state = RunState()
        var digests = RecordedDigests()
        var untrusted: String?
        // A torn child log is read up to its last complete event.
        _ = try? LogReader(path: path).forEachEvent { recorded in
            if untrusted == nil, let run, recorded.event.runId != run {
                untrusted = "holds run \(recorded.event.runId), not the run \(run) the attempt started"
            }
            if untrusted == nil, !digests.add(recorded.event) {
                untrusted =
                    "was edited: its state digest at seq \(recorded.event.sequence) is not the digest of the state its events fold to"
            }
            RunState.reduce(into: &state, recorded.event)
        }
        return (state, untrusted)
    }

    /// "tool (write) call c1 at step 3" for the first intent of a draft or write tool with no result.
    static func unresolvedSideEffect(_ child: RunState) -> String? {
        let effects = Dictionary((child.start?.tools ?? []).map { ($0.name, $0.sideEffect) }, uniquingKeysWith: { first, _ in first })
        for call in child.calls where call.attempts > call.results.count {
            let effect = effects[call.tool] ?? .write
            if effect != .read { return "\(call.tool) (\(effect.rawValue)) call \(call.id) at step \(call.step)" }
        }
        return nil
    }

    // MARK: Running

    /// Runs the scheduler to the pipeline's stop or pause, after committing `settling` (the
    /// attempts a resume found unfinished), and closes the log.
    private func drive(
        _ recorder: PipelineRecorder, directory: String, jobs: Int, settling: [(Launch, AttemptResult)] = []
    ) async throws(PipelineError) -> PipelineOutcome {
        var scheduler = Scheduler(runner: self, recorder: recorder, directory: directory, jobs: jobs)
        do {
            for (launch, result) in settling { try scheduler.commit(launch, result) }
            try await scheduler.run()
        } catch {
            try? recorder.writer.close()
            throw error
        }
        do {
            try recorder.writer.close()
        } catch {
            throw PipelineError(.log, "cannot close the pipeline log: \(error)", path: recorder.writer.path)
        }
        return PipelineOutcome(logPath: recorder.writer.path, state: recorder.state)
    }
}

/// What `resume` does when a command started by the earlier run still runs.
public enum LeftoverPolicy: Sendable {
    /// Throw `still_running`, naming the process.
    case refuse
    /// Wait until every such process has ended; `waiting` is told once what is waited for.
    case wait(waiting: @Sendable ([LeftoverProcess]) -> Void)
}

/// A process of a command attempt from an earlier run of the pipeline that still runs.
public struct LeftoverProcess: Sendable, Hashable, CustomStringConvertible {
    public var task: String
    public var attempt: Int
    /// The process that runs: the command's own, or one it started in its process group.
    public var pid: Int32
    /// The command's process, which led that group.
    public var group: Int32

    /// "pid 4242", or "pid 4250 (started by the command, pid 4242, which ended)".
    public var description: String {
        pid == group ? "pid \(pid)" : "pid \(pid) (started by the command, pid \(group), which ended)"
    }
}

/// One attempt handed to the task group.
struct Launch: Sendable {
    var task: String
    var started: TaskStarted
}

/// The pipeline log's writer and the fold of everything written: the scheduler's only state.
///
/// Unchecked Sendable by confinement: one `Scheduler` owns it and calls it from its own loop
/// only (attempts run in child tasks and hand their results back to that loop); it crosses
/// into the loop's task once, when the scheduler is made.
final class PipelineRecorder: @unchecked Sendable {
    let writer: LogWriter
    private(set) var state: PipelineState
    private(set) var breakers: CircuitBreakers
    private var digester = PipelineStateDigester()
    private let clock: @Sendable () -> Int
    let observe: (@Sendable (PipelineUpdate) -> Void)?

    /// Records into `writer`; `state` is the fold of `events`, what the log already holds.
    init(
        writer: LogWriter, state: PipelineState = PipelineState(), events: [Event] = [], breakers settings: [String: BreakerSettings],
        clock: @escaping @Sendable () -> Int, observe: (@Sendable (PipelineUpdate) -> Void)?
    ) {
        self.writer = writer
        self.state = state
        self.clock = clock
        self.observe = observe
        breakers = CircuitBreakers(settings: settings, plan: state.start?.tasks ?? [])
        for event in events { breakers.observe(event) }
    }

    /// The digest of `state`, and the event count it is of.
    private var lastDigest: (eventCount: Int, digest: String)?

    func digest() -> String {
        if let lastDigest, lastDigest.eventCount == state.eventCount { return lastDigest.digest }
        let digest = digester.digest(of: state)
        lastDigest = (state.eventCount, digest)
        return digest
    }

    /// Digests the state now, while the scheduler waits for an attempt, so that the attempt's
    /// checkpoint finds its digest done.
    func prepareDigest() { _ = digest() }

    /// Events recorded since a durability point was deferred: observers hear of them once it is
    /// durable, so the event stream never shows a checkpoint a crash could still lose.
    private var unobserved: [Event] = []

    /// Records `event`; with `defersDurability`, a durability point is made durable by the next
    /// one or by `flushDeferred()`, which the scheduler calls before it waits or acts.
    /// `atUs` is the event's time (a copied event keeps its own); now when nil.
    @discardableResult
    func record(_ event: PipelineEvent, atUs: Int? = nil, defersDurability: Bool = false) throws(PipelineError) -> Event {
        let recorded: Event
        do {
            recorded = try writer.append(.pipeline(event), step: 0, timeUs: atUs ?? clock(), defersDurability: defersDurability)
        } catch {
            throw Self.writeError(error, path: writer.path)
        }
        PipelineState.reduce(into: &state, recorded)
        if case .started(let started) = event { breakers = CircuitBreakers(settings: breakers.settings, plan: started.tasks) }
        breakers.observe(recorded)
        if defersDurability || !unobserved.isEmpty {
            unobserved.append(recorded)
            if recorded.payload.isDurabilityPoint && !defersDurability { tellObservers() }
        } else {
            observe?(.event(recorded))
        }
        return recorded
    }

    /// Makes a deferred durability point durable and tells observers what waited for it.
    func flushDeferred() throws(PipelineError) {
        do {
            try writer.flushDeferred()
        } catch {
            throw Self.writeError(error, path: writer.path)
        }
        tellObservers()
    }

    private func tellObservers() {
        for event in unobserved { observe?(.event(event)) }
        unobserved.removeAll()
    }

    private static func writeError(_ error: any Error, path: String) -> PipelineError {
        if let error = error as? LogError { return PipelineError(.log, error.message, path: path, hint: error.hint) }
        return PipelineError(.log, "cannot write the pipeline log: \(error)", path: path)
    }
}
