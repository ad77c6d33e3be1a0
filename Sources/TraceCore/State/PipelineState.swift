import Crypto

/// The state of a pipeline: a fold of its log, as `RunState` is of a run's. The scheduler
/// decides from this state only, so a resumed pipeline, a replay and the live run agree.
public struct PipelineState: JSONObjectEncodable, Hashable {
    public var runId: String?
    public var start: PipelineStarted?
    /// Every task in plan order.
    public private(set) var tasks: [PipelineTaskState] = []
    private var taskIndex: [String: Int] = [:]
    /// Per task, in plan order, a count bumped at every change: what the digester compares
    /// to know which tasks to rehash (integers, so a 1,000-task check copies nothing).
    private(set) var taskRevisions: [Int] = []
    public var breakers: [String: BreakerChanged] = [:]
    public var isPaused = false
    public var stop: PipelineStopped?
    public var rollbacks: [PipelineRolledBack] = []
    /// The run this one is a fork of (`pipeline_forked`): the latest, for a fork of a fork.
    public var forked: PipelineForked?
    public var resumeCount = 0
    /// Tasks in the order their results were settled (succeeded, skipped, or taken from a
    /// fallback) in the current branch.
    public var settledOrder: [String] = []
    /// The last digest the log recorded.
    public var lastStateDigest: String?
    /// Events that do not fit the state: a problem in the log, reported by replay.
    public var anomalies: [String] = []
    public var eventCount = 0

    public init() {}

    public func task(_ id: String) -> PipelineTaskState? { taskIndex[id].map { tasks[$0] } }

    /// The status of task `id`, without copying its record (the scheduler asks this often).
    public func status(of id: String) -> PipelineTaskState.Status? { taskIndex[id].map { tasks[$0].status } }

    /// The settled output of task `id`, without copying its record.
    public func output(of id: String) -> JSONValue? { taskIndex[id].flatMap { tasks[$0].output } }

    /// Folds every event in order.
    public init(events: some Sequence<Event>) {
        for event in events { PipelineState.reduce(into: &self, event) }
    }

    /// Folds one event into `state`.
    public static func reduce(into state: inout PipelineState, _ event: Event) {
        state.eventCount += 1
        guard case .pipeline(let payload) = event.payload else {
            if case .unknown = event.payload { return }
            state.anomalies.append("seq \(event.sequence): \(event.kind) does not belong in a pipeline log")
            return
        }
        if !state.hasStarted, !payload.isStarted {
            state.anomalies.append("seq \(event.sequence): \(event.kind) before pipeline_started")
            return
        }
        switch payload {
        case .started(let started):
            guard !state.hasStarted else {
                state.anomalies.append("seq \(event.sequence): a second pipeline_started")
                return
            }
            state.runId = event.runId
            state.start = started
            state.tasks = started.tasks.map { PipelineTaskState(plan: $0) }
            for (index, task) in state.tasks.enumerated() { state.taskIndex[task.id] = index }
            state.taskRevisions = Array(repeating: 0, count: state.tasks.count)
        case .taskStarted(let started):
            state.change(started.task, event) { task in
                task.status = .running
                task.attempts.append(PipelineTaskAttempt(started: started, startedAtUs: event.timeUs))
            }
            if let primary = started.fallbackFor { state.change(primary, event) { $0.status = .routed } }
        case .taskFinished(let finished):
            state.lastStateDigest = finished.stateDigest
            var fallbackFor: String?
            var isUnmatched = false
            state.change(finished.task, event) { task in
                guard let index = task.attempts.lastIndex(where: { $0.attempt == finished.attempt && $0.finished == nil }) else {
                    isUnmatched = true
                    return
                }
                task.attempts[index].finished = finished
                fallbackFor = task.attempts[index].started.fallbackFor
                task.settle(finished)
            }
            if isUnmatched {
                state.anomalies.append("seq \(event.sequence): \(finished.task) attempt \(finished.attempt) finished without starting")
            }
            if let primary = fallbackFor, state.status(of: finished.task) == .succeeded {
                // A fallback's output stands in for the task it replaced.
                state.change(primary, event) { task in
                    task.status = .succeeded
                    task.output = finished.output
                    task.outputFrom = finished.task
                }
                state.settledOrder.append(primary)
            } else if let primary = fallbackFor, state.status(of: finished.task) == .failed {
                state.change(primary, event) { $0.status = .failed }
            }
            if let status = state.status(of: finished.task), status == .succeeded || status == .skipped {
                state.settledOrder.append(finished.task)
            }
        case .breakerChanged(let changed):
            state.breakers[changed.breaker] = changed
        case .paused:
            state.isPaused = true
        case .resumed:
            state.isPaused = false
            state.resumeCount += 1
        case .rolledBack(let rolledBack):
            state.rollbacks.append(rolledBack)
            state.stop = nil
            let discarded = Set(rolledBack.discarded)
            for id in rolledBack.discarded {
                state.change(id, event) { task in
                    task.status = .pending
                    task.output = nil
                    task.outputFrom = nil
                    for index in task.attempts.indices { task.attempts[index].isDiscarded = true }
                }
            }
            state.settledOrder.removeAll { discarded.contains($0) }
        case .forked(let forked):
            state.forked = forked
        case .stopped(let stopped):
            state.lastStateDigest = stopped.stateDigest
            if state.stop != nil { state.anomalies.append("seq \(event.sequence): a second pipeline_stopped") }
            state.stop = stopped
        }
    }

    /// Whether `pipeline_started` was folded (without copying `start`, which holds the plan).
    private var hasStarted: Bool {
        if case .none = start { return false }
        return true
    }

    private mutating func change(_ id: String, _ event: Event, _ body: (inout PipelineTaskState) -> Void) {
        guard let index = taskIndex[id] else {
            anomalies.append("seq \(event.sequence): \(event.kind) names task \"\(id)\", which is not in the plan")
            return
        }
        body(&tasks[index])
        taskRevisions[index] &+= 1
    }

    /// The next attempt number of `id`: attempts count on across retries and rollbacks.
    public func nextAttempt(of id: String) -> Int { (task(id)?.attempts.map(\.attempt).max() ?? 0).addingSaturating(1) }

    /// The JSON form `agent-eval replay --json` prints. The digest covers part of it: the tasks,
    /// breakers, pause and stop (`PipelineStateDigester`), not the run id, rollbacks or fork.
    public func members(into object: inout some JSONMemberSink) {
        object.set("breakers", JSONValue.object(JSONObject(breakers.sorted { $0.key < $1.key }.map { ($0.key, $0.value.json) })))
        object.set("forked", forked)
        object.set("paused", isPaused)
        object.set("pipeline", start?.pipeline)
        object.set("rollbacks", rollbacks)
        object.set("run", runId)
        object.set("settled_order", settledOrder)
        object.set("stop", stop)
        object.set("tasks", JSONValue.array(tasks.map(\.json)))
    }

    /// `sha256:<hex>` over the state that decides what runs next: each task's status, attempts
    /// and output, the breakers, pause and stop. A pure function of the state.
    public var digest: String {
        var digester = PipelineStateDigester()
        return digester.digest(of: self)
    }
}

/// Digests pipeline states, rehashing only what changed since the last digest, so a
/// 1,000-task pipeline does not rehash every task at every checkpoint.
///
/// The digest is a two-level hash: each task's canonical JSON is hashed (SHA-256); the task
/// hashes, in plan order, are hashed in chunks of 64; the digest is the SHA-256 of the chunk
/// hashes followed by the canonical JSON of the rest (breakers as `state:key`, sorted by key;
/// pause; the stop's status). A checkpoint rehashes one task and one chunk, not every task.
public struct PipelineStateDigester: Sendable {
    /// Tasks per chunk.
    static let chunkSize = 64
    static let hashSize = 32
    /// Per task, the revision its hash is of (-1: none yet).
    private var revisions: [Int] = []
    /// The task hashes, `hashSize` bytes per task in plan order: a chunk is hashed in one call.
    private var taskHashes: [UInt8] = []
    /// The chunk hashes in order, then the rest's canonical JSON: the bytes the digest hashes.
    private var top: [UInt8] = []
    private var isChunkStale: [Bool] = []
    /// Reused for each task's JSON.
    private var writer = JSONWriter(capacity: 1024)

    public init() {}

    public mutating func digest(of state: PipelineState) -> String {
        let count = state.tasks.count
        let chunks = (count + Self.chunkSize - 1) / Self.chunkSize
        if revisions.count != count {
            revisions = Array(repeating: -1, count: count)
            taskHashes = Array(repeating: 0, count: count * Self.hashSize)
            isChunkStale = Array(repeating: true, count: chunks)
            top = Array(repeating: 0, count: chunks * Self.hashSize)
        }
        for (index, revision) in state.taskRevisions.enumerated() where revisions[index] != revision {
            revisions[index] = revision
            writer.removeAll()
            state.tasks[index].write(to: &writer)
            let hash = writer.withUnsafeBytes { SHA256.hash(data: $0) }
            Self.store(hash, in: &taskHashes, at: index * Self.hashSize)
            isChunkStale[index / Self.chunkSize] = true
        }
        for chunk in 0..<chunks where isChunkStale[chunk] {
            isChunkStale[chunk] = false
            let range = chunk * Self.chunkSize * Self.hashSize..<min((chunk + 1) * Self.chunkSize, count) * Self.hashSize
            let hash = taskHashes.withUnsafeBytes { SHA256.hash(data: UnsafeRawBufferPointer(rebasing: $0[range])) }
            Self.store(hash, in: &top, at: chunk * Self.hashSize)
        }
        top.removeSubrange((chunks * Self.hashSize)...)
        var rest = ObjectBuilder()
        rest.set("breakers", state.breakers.sorted { $0.key < $1.key }.map { $0.value.state.rawValue + ":" + $0.key })
        rest.set("paused", state.isPaused)
        rest.set("stop", state.stop?.status)
        writer.removeAll()
        writer.write(rest.json)
        writer.withUnsafeBytes { top.append(contentsOf: $0) }
        return top.withUnsafeBytes { SHA256.hash(data: $0) }.withUnsafeBytes { "sha256:" + ContentHash.hex($0) }
    }

    private static func store(_ hash: SHA256.Digest, in bytes: inout [UInt8], at offset: Int) {
        hash.withUnsafeBytes { hash in bytes.replaceSubrange(offset..<offset + hashSize, with: hash) }
    }
}

/// One task of a pipeline, as the fold sees it.
public struct PipelineTaskState: JSONObjectEncodable, Hashable {
    public enum Status: String, JSONEnum {
        /// Not run yet in this branch (or discarded by a rollback).
        case pending
        case running
        /// Failed, and a retry follows.
        case retrying
        case succeeded
        /// Failed, and the pipeline went on with the task's default output.
        case skipped
        /// Failed, and its fallback runs in its place.
        case routed
        /// Failed for good.
        case failed
    }

    public var plan: PipelineTaskPlan
    public var status: Status = .pending
    public var attempts: [PipelineTaskAttempt] = []
    /// The settled output (succeeded or skipped).
    public var output: JSONValue?
    /// The fallback task whose output this is, when one stood in.
    public var outputFrom: String?

    public var id: String { plan.id }

    public init(plan: PipelineTaskPlan) {
        self.plan = plan
    }

    /// Whether downstream tasks can use its output.
    public var isSettled: Bool { status == .succeeded || status == .skipped }

    /// Attempts of the current branch (not discarded by a rollback).
    public var currentAttempts: [PipelineTaskAttempt] { attempts.filter { !$0.isDiscarded } }

    /// Retries in the current branch: failed attempts whose recovery was a retry.
    public var retries: Int { currentAttempts.filter { $0.finished?.recovery?.action == .retry }.count }

    mutating func settle(_ finished: TaskFinished) {
        switch (finished.status, finished.recovery?.action) {
        case (.succeeded, _):
            status = .succeeded
            output = finished.output
        case (.failed, .retry?): status = .retrying
        case (.failed, .skip?):
            status = .skipped
            output = finished.output
        case (.failed, .fallback?): status = .routed
        case (.failed, .fail?), (.failed, nil): status = .failed
        }
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("attempts", attempts)
        object.set("id", id)
        object.set("kind", plan.kind)
        object.set("output", output)
        object.set("output_from", outputFrom)
        object.set("status", status)
    }
}

/// One attempt of a task.
public struct PipelineTaskAttempt: JSONObjectEncodable, Hashable {
    public var started: TaskStarted
    public var startedAtUs: Int
    public var finished: TaskFinished?
    /// A rollback discarded it; it stays for the record.
    public var isDiscarded = false

    public var attempt: Int { started.attempt }

    public init(started: TaskStarted, startedAtUs: Int) {
        self.started = started
        self.startedAtUs = startedAtUs
    }

    public func members(into object: inout some JSONMemberSink) {
        object.set("attempt", attempt)
        if isDiscarded { object.set("discarded", true) }
        object.set("duration_us", finished?.durationUs)
        object.set("error", finished?.error)
        object.set("error_class", finished?.errorClass)
        object.set("fallback_for", started.fallbackFor)
        object.set("log", started.log)
        object.set("recovery", finished?.recovery?.action)
        object.set("run", started.run)
        object.set("status", finished?.status)
    }
}

extension PipelineEvent {
    var isStarted: Bool {
        if case .started = self { return true }
        return false
    }
}
