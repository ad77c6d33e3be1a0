import ConfigFile
import EvalEngine
import Foundation
import TraceCore
import TraceLog

/// How a log stands in the catalog.
public enum LogStatus: String, Sendable, CaseIterable {
    /// Read to its end: every member complete, the chain unbroken.
    case intact
    /// The file ends inside a gzip member: a crashed writer, or a run still being written.
    case torn
    /// The reader stopped at a problem (a corrupt member, a broken chain); the rows hold what
    /// came before it.
    case damaged
    /// The file is gone; its rows stay until `catalog rebuild`.
    case vanished
}

/// What indexing one log did.
public struct IndexedLog: Sendable, Hashable {
    public enum Change: String, Sendable {
        /// Read for the first time.
        case added
        /// Its identity is what the catalog holds: nothing was read.
        case unchanged
        /// It grew on the same prefix: only its new members were read.
        case grew
        /// It changed otherwise: read again from the start.
        case reindexed
        /// The file is gone.
        case vanished
    }

    /// The problem of a log whose file is gone.
    public static let gone = "the file is gone"

    public var path: String
    public var change: Change
    public var status: LogStatus
    public var problem: String?
    /// Events read (0 when nothing was).
    public var eventsRead: Int
    /// The code of the error that made a log just read `damaged` (`log.event_too_large` for a
    /// member over the read limit); nil when it was not read now.
    public var problemCode: String? = nil
}

extension Catalog {
    /// Calls kept in memory before settled ones are written out and dropped, so indexing a
    /// log of any length holds a bounded state.
    static let callsHeldInMemory = 512

    /// The most decompressed bytes one gzip member of a log may hold when the catalog reads it:
    /// the process's `LogReadLimit` (64 MiB unless `--max-member-mib` or the project setting
    /// raised it). The reader's memory per log follows it, so a log that inflates to gigabytes
    /// (a decompression bomb, one endless line) is indexed as `damaged` at that member instead
    /// of taking the machine's memory. The writer's own logs stay within the default.
    public static var defaultMemberLimit: Int { LogReadLimit.memberBytes }

    /// Indexes one log: reads nothing when its identity is unchanged, only its new members when
    /// it grew on the same prefix, all of it otherwise. One transaction: an interrupted index
    /// leaves the log's old rows (and it is read again next time). A log whose rows SQLite
    /// refuses is recorded as `damaged`, with SQLite's reason (`recordFailure`).
    ///
    /// With `keepsFacts`, a log read from its start also gets its facts kept for the fact cache
    /// (`FactCache`), made in the same read: what `IndexingSink` asks for a log a run has just
    /// written, which a suite run then grades without reading it again. `index(paths:)` over
    /// many logs keeps none (a log a suite checks later is read then, once).
    public func index(log: String, memberLimit: Int = Catalog.defaultMemberLimit, keepsFacts: Bool = false) throws(CatalogError)
        -> IndexedLog
    {
        let path = Self.absolute(log)
        if let unchanged = try unchangedLogs(at: [path])[0] { return unchanged }
        let outcome = try writeRollingBack { db in
            let pending = PendingCallRows()
            let indexed = try attributing(to: path, in: db) {
                try index(absolute: path, in: db, pending: pending, memberLimit: memberLimit, keepsFacts: keepsFacts)
            }
            try attributing(to: path, in: db) { try pending.write(to: db) }
            return indexed
        }
        switch outcome {
        case .success(let indexed):
            return indexed
        case .failure(let failure):
            return try write { db in try Self.recordFailure(of: failure.path, problem: failure.problem, in: db) }
        }
    }

    /// Marks the log at `log` vanished, saying why (`problem`), without reading what is at the
    /// path now: for a reader that will not read it there, such as `serve` when the file under a
    /// served folder was replaced by a link out of it. Its rows stay, as for a log deleted.
    public func markVanished(log: String, problem: String) throws(CatalogError) {
        let path = Self.absolute(log)
        try write { db in
            guard let known = try StoredLog.fetch(db, path: path), known.status != .vanished else { return }
            try Self.markVanished(known, problem: problem, in: db)
        }
    }

    private static func markVanished(_ known: StoredLog, problem: String, in db: any SQLConnection) throws {
        try db.execute("UPDATE logs SET status = 'vanished', problem = ?, resume = NULL WHERE log_id = ?", [problem, known.id])
    }

    /// Logs `index(paths:)` indexes in one write transaction.
    static let logsPerTransaction = 64

    /// Each log at the absolute `paths` as the catalog holds it, when its identity is unchanged
    /// (checked on one read snapshot, without the write lock); nil for one that must be read.
    func unchangedLogs(at paths: [String]) throws(CatalogError) -> [IndexedLog?] {
        try read { db in
            try paths.map { path in
                guard let known = try StoredLog.fetch(db, path: path), let stamp = FileStamp(path: path),
                    known.status != .vanished, known.identity.matches(path, now: stamp)
                else { return nil }
                return IndexedLog(path: path, change: .unchanged, status: known.status, problem: known.problem, eventsRead: 0)
            }
        }
    }

    /// Indexes the log at the absolute `path` inside the write transaction `db` (several logs
    /// may share one: `index(paths:)`). Reads the log's row again under the write lock: another
    /// process may have indexed it meanwhile. `prepared`, the log already read outside the
    /// transaction, is written as it is when the row is still the one it was read against;
    /// otherwise the log is read here.
    func index(
        absolute path: String, in db: any SQLConnection, pending: PendingCallRows, prepared: PreparedLog? = nil,
        memberLimit: Int = Catalog.defaultMemberLimit, keepsFacts: Bool = false, row lookedUp: LookedUpRow = .notYet
    ) throws -> IndexedLog {
        let known: StoredLog?
        switch lookedUp {
        case .notYet: known = try StoredLog.fetch(db, path: path)
        case .found(let row): known = row
        }
        guard let stamp = FileStamp(path: path) else {
            // Gone, or something is there that is no log file (a folder, a pipe, a link to
            // nothing): said, so that "vanished" is not all a path never indexed gets.
            let problem = FileProblem.notARegularFile(path) ?? IndexedLog.gone
            if let known, known.status != .vanished { try Self.markVanished(known, problem: problem, in: db) }
            return IndexedLog(path: path, change: .vanished, status: .vanished, problem: problem, eventsRead: 0)
        }
        // A vanished log that is back is read again: its row says it is gone.
        if let known, known.status != .vanished, known.identity.matches(path, now: stamp) {
            return IndexedLog(path: path, change: .unchanged, status: known.status, problem: known.problem, eventsRead: 0)
        }
        if prepared == nil, let known, known.holdsSameContent(path, now: stamp) {
            try known.touch(path: path, now: stamp, in: db)
            return IndexedLog(path: path, change: .unchanged, status: known.status, problem: known.problem, eventsRead: 0)
        }
        if var prepared, prepared.basis == PreparedLog.Basis(known) {
            prepared.row.toolSet = try pending.toolSets.id(of: prepared.row.executedTools, in: db)
            guard known != nil else {
                // A new log read whole outside the transaction: its row in one statement.
                let logId = try prepared.row.insert(path: path, in: db)
                try pending.take(&prepared.rows, logId: logId, path: path, in: db)
                return prepared.indexed
            }
            let logId = try Self.startRows(of: path, known: known, keepingCallsBelow: prepared.keepsCallsBelow, in: db)
            try pending.take(&prepared.rows, logId: logId, path: path, in: db)
            try prepared.row.write(logId: logId, path: path, file: known?.file, in: db)
            return prepared.indexed
        }
        let plan = ReadPlan(known: known, path: path, now: stamp)
        let logId = try Self.startRows(of: path, known: known, keepingCallsBelow: plan.resume?.callBase, in: db)
        var indexer = LogIndexer(path: path, memberLimit: memberLimit, keepsFacts: keepsFacts) { rows in
            try pending.take(&rows, logId: logId, path: path, in: db)
        }
        try indexer.read(from: plan.resume, storedTailOffset: plan.storedTailOffset)
        var row = indexer.finish(stampBefore: stamp, now: Self.nowUs())
        row.toolSet = try pending.toolSets.id(of: row.executedTools, in: db)
        var rows = indexer.rows
        try pending.take(&rows, logId: logId, path: path, in: db)
        // A step table made from other bytes goes with the file's old generation (`claim`).
        // (Replay makes a table when first asked for a step, not index: making one in every
        // read cost index a third of its speed and the catalog four fifths of its size.)
        let file = try row.write(logId: logId, path: path, file: known?.file, in: db)
        if let facts = FactCache.Entry(indexer.takeFacts(row: row), path: path, row: row) {
            try FactCache.write(facts, file: file, in: db)
        }
        return IndexedLog(
            path: path, change: plan.change, status: row.status, problem: row.problem, eventsRead: indexer.eventsRead,
            problemCode: indexer.damageCode)
    }

    /// A log whose rows SQLite refused (a value over its length limit, say), found inside the
    /// write transaction of a batch: the batch is written again, that log recorded by
    /// `recordFailure` instead of its rows.
    struct StoreFailure: Error {
        var path: String
        var problem: String
    }

    /// Runs `body`, the writing of the log at `path`'s rows (or of rows pending from earlier
    /// logs of the transaction), and turns a refusal that concerns those rows alone into a
    /// `StoreFailure` of the log they belong to. Failures of the catalog itself (locked, full,
    /// damaged, an I/O error) are thrown as they are: they stop the index.
    func attributing<T>(to path: String, in db: any SQLConnection, _ body: () throws -> T) throws -> T {
        do {
            return try body()
        } catch let failure as PendingCallRows.Failure {
            guard store.isAboutTheRows(failure.error) else { throw failure.error }
            throw StoreFailure(path: failure.path, problem: store.storeProblem(failure.error))
        } catch  where store.isAboutTheRows(error) {
            throw StoreFailure(path: path, problem: store.storeProblem(error))
        }
    }

    /// Records the log at the absolute `path` as `damaged` with `problem` and no call rows, with
    /// the identity of the whole file as it is now, so it is read again once it changes.
    static func recordFailure(of path: String, problem: String, in db: any SQLConnection) throws -> IndexedLog {
        let known = try StoredLog.fetch(db, path: path)
        let logId = try startRows(of: path, known: known, keepingCallsBelow: nil, in: db)
        let stamp = FileStamp(path: path) ?? FileStamp(size: -1, mtimeNs: 0)
        let tail = LogFingerprint.tailRange(memberOffset: 0, end: max(0, stamp.size))
        let identity =
            LogFingerprint.of(path, stamp: stamp, lastCompleteMember: 0, end: max(0, stamp.size))
            ?? LogFingerprint(stamp: stamp, tailOffset: tail.offset, tailEnd: tail.end, tailHash: "")
        let file = try LogFileRecord.claim(
            path: path, identity: identity, contentHash: nil, known: known?.file, authoritative: true, in: db)
        try db.execute(
            """
            UPDATE logs SET file_id = ?, generation = ?, status = 'damaged', problem = ?,
                run_id = NULL, agent = NULL, agent_version = NULL, model = NULL, input = NULL, started_at_us = NULL,
                ended_at_us = NULL, stop_reason = NULL, stop_limit = NULL, events = 0, steps = 0, decisions = 0,
                invalid_decisions = 0, tool_calls = 0, executed_calls = 0, denied_calls = 0, failed_calls = 0, input_tokens = 0,
                output_tokens = 0, cost_usd = 0, anomalies = 0, indexed_at_us = ?, resume = NULL, forked_from = NULL,
                fork_step = NULL, seen_on = ?, tool_set = ?
            WHERE log_id = ?
            """,
            [file?.id, file?.generation, problem, nowUs(), seenOn, try ToolSets().id(of: [], in: db), logId])
        return IndexedLog(
            path: path, change: known == nil ? .added : .reindexed, status: .damaged, problem: problem, eventsRead: 0,
            problemCode: "catalog.store_failed")
    }

    /// What reading the log at the absolute `path` outside any transaction finds, against
    /// `known`, its row as a read snapshot had it: that it is unchanged (or holds the same bytes
    /// under a new stamp, which its row is to take: `touch`), or the log read, for
    /// `index(absolute:in:pending:prepared:)` to write; nothing when the file is gone or the log
    /// holds more calls than one read may keep (`Catalog.callsHeldInMemory`): such a log is read
    /// inside the transaction, its settled calls written as it goes.
    static func prepare(absolute path: String, known: StoredLog?, memberLimit: Int = Catalog.defaultMemberLimit) -> BatchLog {
        var log = BatchLog(path: path)
        guard let stamp = FileStamp(path: path) else { return log }
        if let known, known.status != .vanished {
            let isUnchanged = known.identity.matches(path, now: stamp)
            if isUnchanged || known.holdsSameContent(path, now: stamp) {
                log.unchanged = IndexedLog(path: path, change: .unchanged, status: known.status, problem: known.problem, eventsRead: 0)
                if !isUnchanged { log.touch = (known, stamp) }
                return log
            }
        }
        let plan = ReadPlan(known: known, path: path, now: stamp)
        var indexer = LogIndexer(path: path, memberLimit: memberLimit) { _ in throw PreparedLog.TooManyCalls() }
        do {
            try indexer.read(from: plan.resume, storedTailOffset: plan.storedTailOffset)
        } catch {
            return log
        }
        let row = indexer.finish(stampBefore: stamp, now: nowUs())
        log.prepared = PreparedLog(
            basis: PreparedLog.Basis(known), keepsCallsBelow: plan.resume?.callBase, rows: indexer.rows, row: row,
            indexed: IndexedLog(
                path: path, change: plan.change, status: row.status, problem: row.problem, eventsRead: indexer.eventsRead,
                problemCode: indexer.damageCode))
        return log
    }

    /// The log's id, inserting a placeholder row for a new log, with the call rows its read
    /// replaces deleted: from ordinal `keepingCallsBelow` on for a log read on from where it
    /// stopped, all of them for one read again from the start.
    private static func startRows(of path: String, known: StoredLog?, keepingCallsBelow: Int?, in db: any SQLConnection) throws -> Int64 {
        guard let known else {
            let id = try db.value(
                """
                INSERT INTO logs (path, status, events, steps, decisions, invalid_decisions, tool_calls, executed_calls, denied_calls,
                    failed_calls, input_tokens, output_tokens, cost_usd, anomalies, indexed_at_us)
                VALUES (?, 'damaged', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                RETURNING log_id
                """, [path], as: Int.self)
            return Int64(id ?? 0)
        }
        if let keepingCallsBelow {
            try db.execute("DELETE FROM calls WHERE log_id = ? AND ordinal >= ?", [known.id, keepingCallsBelow])
        } else {
            try db.execute("DELETE FROM calls WHERE log_id = ?", [known.id])
        }
        return known.id
    }

    /// Microseconds since 1970, as the catalog stores times.
    public static func nowUs() -> Int { Int(saturating: Date().timeIntervalSince1970 * 1_000_000) }

    /// `path` made absolute and standard, the key of a log in the catalog (`ConfigPath.absolute`).
    public static func absolute(_ path: String) -> String { ConfigPath.absolute(path) }
}

/// Whether `index(absolute:)`'s caller looked the log's row up already (a batch looks up all of
/// its logs' rows in one statement), and what it found.
enum LookedUpRow {
    case notYet
    case found(StoredLog?)
}

/// A log's row as the catalog holds it, with its file's record, for the identity check.
struct StoredLog: Sendable {
    var id: Int64
    /// What the row was read from: its file's identity while the row is of the file's current
    /// generation; otherwise (another reader found other bytes since) one that matches no file,
    /// so the log is read again from its start.
    var identity: LogFingerprint
    var status: LogStatus
    var problem: String?
    var resume: ResumePoint?
    /// The content hash of the bytes the row was read from, when known.
    var contentHash: String?
    /// The file's record (`log_files`).
    var file: LogFileRecord

    /// Whether the row was read from the bytes its file's record names (its generation is the
    /// record's).
    var isCurrent: Bool { identity != Self.noIdentity }

    /// An identity no file has (size -1).
    static let noIdentity = LogFingerprint(stamp: FileStamp(size: -1, mtimeNs: 0), tailOffset: 0, tailEnd: 0, tailHash: "")

    /// Whether the file at `path`, whose stamp is `now`, holds the very bytes this row was read
    /// from though its stamp is not the row's: the same size and content hash. A fresh checkout
    /// or a copy gives a log a new modification time; it need not be read again for that.
    func holdsSameContent(_ path: String, now: FileStamp) -> Bool {
        status != .vanished && identity.stamp != now && Self.holdsBytes(contentHash, size: identity.stamp.size, path: path, now: now)
    }

    /// Whether the file at `path` (stamped `now`) has `size` bytes whose content hash is
    /// `contentHash`; false without a hash.
    static func holdsBytes(_ contentHash: String?, size: Int, path: String, now: FileStamp) -> Bool {
        guard let contentHash, now.size == size else { return false }
        return LogFingerprint.contentHash(path, length: now.size) == contentHash
    }

    /// Takes the new stamp of a log that `holdsSameContent` — its step table's and its fact
    /// cache entry's too, when they were made from the same file — and this machine as the one
    /// that saw it last: one update of the file's record, which the step table and the facts
    /// entry made from the same bytes refer to as well.
    func touch(path: String, now: FileStamp, in db: any SQLConnection) throws {
        var file = file
        try file.touch(mtimeNs: now.mtimeNs, in: db)
        try db.execute("UPDATE logs SET seen_on = ? WHERE log_id = ?", [Catalog.seenOn, id])
    }

    /// The row of the log at `path`, with its file's record (`fetch(_:paths:)`).
    static func fetch(_ db: any SQLConnection, path: String) throws -> StoredLog? {
        try fetch(db, paths: [path])[path]
    }

    /// The rows of `paths` that the catalog has, by path: a statement per 500 paths, as each is
    /// a round trip to a PostgreSQL server (a statement per log was a third of a batch's).
    static func fetch(_ db: any SQLConnection, paths: [String]) throws -> [String: StoredLog] {
        var stored: [String: StoredLog] = [:]
        for chunk in SQLList.chunks(of: paths) {
            try db.run(
                """
                SELECT l.log_id, l.generation, l.status, l.problem, l.resume, l.path, \(LogFileRecord.columns)
                FROM logs l JOIN log_files f ON f.file_id = l.file_id WHERE l.path IN (\(SQLList.placeholders(chunk.count)))
                """,
                bind: { binder in for path in chunk { binder.bind(path) } }
            ) { row in
                let file = LogFileRecord(row, from: 6)
                let isCurrent = row.int(1) == file.generation
                // A resume point of older bytes than the record's is no place to pick up from.
                let saved = isCurrent ? row.blob(4) : nil
                let resume = saved.flatMap { bytes in
                    try? bytes.withUnsafeBytes { try JSONScanner.scan($0) { try ResumePoint(from: &$0) } }
                }
                stored[row.text(5)] = StoredLog(
                    id: Int64(row.int(0)), identity: isCurrent ? file.identity : noIdentity,
                    status: LogStatus(rawValue: row.text(2)) ?? .damaged, problem: row.optionalText(3), resume: resume,
                    contentHash: isCurrent ? file.contentHash : nil, file: file)
            }
        }
        return stored
    }
}

/// How a log that is not unchanged is read: on from where the last read stopped when it grew on
/// the same prefix, from the start otherwise.
struct ReadPlan {
    var change: IndexedLog.Change
    var resume: ResumePoint?
    var storedTailOffset = 0

    init(known: StoredLog?, path: String, now: FileStamp) {
        if let known, let resume = known.resume, known.identity.grew(path, now: now) {
            (change, self.resume, storedTailOffset) = (.grew, resume, known.identity.tailOffset)
        } else {
            change = known == nil ? .added : .reindexed
        }
    }
}

/// A log read outside the write transaction, with everything its rows need.
struct PreparedLog: Sendable {
    /// The catalog row a read was made against: none, or a row with this id and identity.
    /// Anything else under the write lock (another process indexed the log meanwhile) reads
    /// the log again there.
    struct Basis: Hashable, Sendable {
        var id: Int64
        var identity: LogFingerprint
        /// The file's record's generation: another reader that found newer bytes meanwhile (the
        /// fact cache, `replay`) moved it on, and this older read must not start yet another.
        var generation: Int

        init?(_ known: StoredLog?) {
            guard let known else { return nil }
            (id, identity, generation) = (known.id, known.identity, known.file.generation)
        }
    }

    struct TooManyCalls: Error {}

    var basis: Basis?
    /// For a log read on from where it stopped: the first call ordinal the read replaces.
    var keepsCallsBelow: Int?
    var rows: [CallRow]
    var row: LogRow
    var indexed: IndexedLog
}

/// What the calls and decisions a long log's read drops from its state (written out as rows,
/// or counted) leave to the run's row: the tools of its executed calls (`logs.tool_set`) and the
/// steps it decided in (`logs.steps`). The counters are the state's own (`RunState.counters`).
struct DroppedFromState: Sendable, Hashable {
    var tools: Set<String> = []
    /// Steps the dropped decisions were made in.
    var decisionSteps = 0
    /// The step of the last dropped decision.
    var lastDecisionStep: Int?

    /// Counts the steps of `decisions`, about to be dropped.
    mutating func count(_ decisions: [DecisionRecord]) {
        for decision in decisions where decision.step != lastDecisionStep {
            decisionSteps += 1
            lastDecisionStep = decision.step
        }
    }

    /// The run's steps decided in (`RunState.decisionStepCount`), with `decisions` held still.
    func decisionSteps(with decisions: [DecisionRecord]) -> Int {
        var copy = self
        copy.count(decisions)
        return copy.decisionSteps
    }
}

/// Where a later index picks up a log that grows: a member's start, the chain just before it,
/// and the (pruned) state folded from everything before it.
struct ResumePoint: JSONRepresentable, Sendable {
    var position: LogReader.Position
    /// The ordinal of `state.calls[0]`: calls before it were written out and dropped.
    var callBase: Int
    /// What the calls and decisions dropped from `state` leave to the run's row.
    var dropped: DroppedFromState
    var state: RunState

    init(position: LogReader.Position, callBase: Int, dropped: DroppedFromState, state: RunState) {
        self.position = position
        self.callBase = callBase
        self.dropped = dropped
        self.state = state
    }

    init(from scanner: inout JSONScanner) throws {
        var offset: Int?
        var index: Int?
        var sequence: Int?
        var previous: String?
        var run: String?
        var callBase: Int?
        var droppedTools: [String]?
        var droppedSteps: Int?
        var lastDroppedStep: Int?
        var counters: RunCounters?
        var state: RunState?
        try scanner.readObject { scanner, key in
            switch key {
            case "member_offset": offset = try scanner.read()
            case "member_index": index = try scanner.read()
            case "seq": sequence = try scanner.read()
            case "prev": previous = try scanner.read()
            case "run": run = try scanner.read()
            case "call_base": callBase = try scanner.read()
            case "dropped_tools": droppedTools = try scanner.readArray { try $0.readString() }
            case "dropped_decision_steps": droppedSteps = try scanner.read()
            case "last_dropped_decision_step": lastDroppedStep = try scanner.readOptional()
            case "counters": counters = try Self.counters(from: &scanner)
            case "state": state = try RunState(snapshot: &scanner)
            default: try scanner.skipValue()
            }
        }
        position = LogReader.Position(
            memberOffset: try required(offset, "member_offset"), memberIndex: try required(index, "member_index"),
            sequence: try required(sequence, "seq"), previousHash: try required(previous, "prev"), runId: try required(run, "run"))
        self.callBase = try required(callBase, "call_base")
        // A point saved before schema 14 did not keep what the dropped calls and decisions
        // leave to the row: with calls dropped, it is no place to pick up from (the log is read
        // from its start).
        if self.callBase == 0 {
            dropped = DroppedFromState()
        } else {
            dropped = DroppedFromState(
                tools: Set(try required(droppedTools, "dropped_tools")),
                decisionSteps: try required(droppedSteps, "dropped_decision_steps"), lastDecisionStep: lastDroppedStep)
        }
        var loaded = try required(state, "state")
        // A snapshot's counters are rebuilt from its lists, which no longer hold the dropped
        // calls and decisions: the run's own are kept beside it (before schema 14 they were not,
        // and a log read on from such a point counted only the calls after it).
        if self.callBase > 0 { loaded.counters = try required(counters, "counters") }
        self.state = loaded
    }

    var json: JSONValue {
        var object = ObjectBuilder()
        object.set("member_offset", position.memberOffset)
        object.set("member_index", position.memberIndex)
        object.set("seq", position.sequence)
        object.set("prev", position.previousHash)
        object.set("run", position.runId)
        object.set("call_base", callBase)
        object.set("dropped_tools", JSONValue.array(ToolSets.sorted(dropped.tools).map { .string($0) }))
        object.set("dropped_decision_steps", dropped.decisionSteps)
        object.set("last_dropped_decision_step", dropped.lastDecisionStep)
        object.set("counters", Self.json(of: state.counters))
        object.set("state", state.snapshotJSON)
        return object.json
    }

    private static func json(of counters: RunCounters) -> JSONValue {
        var object = ObjectBuilder()
        object.set("invalid_decisions", counters.invalidDecisions)
        object.set("executed_calls", counters.executedCalls)
        object.set("denied_calls", counters.deniedCalls)
        object.set("calls_awaiting_approval", counters.callsAwaitingApproval)
        object.set("failed_attempts", counters.failedAttempts)
        object.set("failed_calls", counters.failedCalls)
        return object.json
    }

    private static func counters(from scanner: inout JSONScanner) throws -> RunCounters {
        var counters = RunCounters()
        try scanner.readObject { scanner, key in
            switch key {
            case "invalid_decisions": counters.invalidDecisions = try scanner.read()
            case "executed_calls": counters.executedCalls = try scanner.read()
            case "denied_calls": counters.deniedCalls = try scanner.read()
            case "calls_awaiting_approval": counters.callsAwaitingApproval = try scanner.read()
            case "failed_attempts": counters.failedAttempts = try scanner.read()
            case "failed_calls": counters.failedCalls = try scanner.read()
            default: try scanner.skipValue()
            }
        }
        return counters
    }
}

/// Reads one log and makes its rows: the fold of its events, with settled calls made into rows
/// and dropped as it goes, so memory stays bounded. It touches no database, so a log can be read
/// on another thread than the one that writes its rows (`Catalog.index(paths:)`): rows are handed
/// to `spill` whenever settled calls are dropped, and the rest come with `finish`.
struct LogIndexer {
    let path: String
    /// The reader's limit on one member's decompressed bytes (`Catalog.defaultMemberLimit`).
    let memberLimit: Int
    /// Takes the rows made so far (emptying them), or throws to give up the read.
    private let spill: (inout [CallRow]) throws -> Void
    /// Rows of calls dropped from the state, not yet handed to `spill`; their log id is 0.
    private(set) var rows: [CallRow] = []
    /// The fold: the state, and for a log read from its start, its facts (`LogFactsFold`: every
    /// digest checked), so that the catalog keeps them without a second read (`takeFacts`).
    private var fold = LogFactsFold()
    /// Whether the read is to make the log's facts, when it reads the log from its start.
    let keepsFacts: Bool
    /// Whether `fold` makes the log's facts: asked to, read from its start, no call dropped, no damage.
    private var makesFacts = false
    /// The ordinal of `fold.state.calls[0]`.
    private var callBase = 0
    /// What the calls and decisions dropped from the state (before `callBase`) leave to the row.
    private var dropped = DroppedFromState()
    private(set) var eventsRead = 0
    private var damage: String?
    /// The code of the error behind `damage`.
    private(set) var damageCode: String?
    private var summary = ReadSummary()
    /// The member being read and the one before it (byte offsets).
    private var members: (previous: Int?, current: Int?) = (nil, nil)
    /// The start of the member being read, with the state before it.
    private var memberStart: ResumePoint?
    private var lastEvent: (sequence: Int, hash: String, memberIndex: Int, runId: String)?

    init(
        path: String, memberLimit: Int = Catalog.defaultMemberLimit, keepsFacts: Bool = false,
        spill: @escaping (inout [CallRow]) throws -> Void
    ) {
        self.path = path
        self.memberLimit = memberLimit
        self.keepsFacts = keepsFacts
        self.spill = spill
    }

    /// Reads the log, from the start or from `resume`, folding and making call rows.
    mutating func read(from resume: ResumePoint?, storedTailOffset: Int) throws {
        if let resume {
            fold.state = resume.state
            callBase = resume.callBase
            dropped = resume.dropped
            members = (storedTailOffset, resume.position.memberOffset)
        }
        if resume == nil { makesFacts = keepsFacts }
        // The fold reads no context packet's text: it is checked, not made.
        let reader = LogReader(path: path, options: .init(memberContentLimit: memberLimit, keepsPacketText: false))
        do {
            if let resume {
                memberStart = resume
                summary = try reader.forEachEvent(from: resume.position, readsAhead: true) { recorded in
                    try visit(recorded)
                    return true
                }
            } else {
                summary = try reader.forEachEvent { try visit($0) }
            }
        } catch let error as LogError {
            damage = error.description
            damageCode = error.diagnosticCode
            makesFacts = false
        }
    }

    private mutating func visit(_ recorded: RecordedEvent) throws {
        let event = recorded.event
        if recorded.location.memberOffset != members.current {
            members = (members.current, recorded.location.memberOffset)
            memberStart = ResumePoint(
                position: LogReader.Position(
                    memberOffset: recorded.location.memberOffset, memberIndex: recorded.location.memberIndex, sequence: event.sequence,
                    previousHash: event.previousHash ?? "", runId: event.runId), callBase: callBase, dropped: dropped,
                state: fold.state)
        }
        if makesFacts { fold.add(recorded) } else { RunState.reduce(into: &fold.state, event) }
        eventsRead += 1
        lastEvent = (event.sequence, recorded.hash, recorded.location.memberIndex, event.runId)
        if case .stepEnded = event.payload, fold.state.calls.count >= Catalog.callsHeldInMemory { try dropSettledCalls() }
    }

    /// Makes rows of the settled calls at the front of the list (the step that proposed them
    /// has ended, no attempt is in flight, none waits for approval) and drops them, with the
    /// decisions and contents the catalog keeps only as counts; hands the rows to `spill`.
    private mutating func dropSettledCalls() throws {
        let settled = fold.state.calls.prefix { !$0.isAwaitingApproval && $0.attempts == $0.results.count }.count
        guard settled > 0 else { return }
        makesFacts = false
        for index in 0..<settled {
            let call = fold.state.calls[index]
            rows.append(row(of: call, ordinal: callBase + index))
            if call.attempts > 0 { dropped.tools.insert(call.tool) }
        }
        fold.state.calls.removeFirst(settled)
        callBase += settled
        dropped.count(fold.state.decisions)
        fold.state.decisions.removeAll()
        fold.state.contents.removeAll()
        try spill(&rows)
    }

    private func row(of call: ToolCallRecord, ordinal: Int) -> CallRow {
        let last = call.results.last
        return CallRow(
            logId: 0, ordinal: ordinal, runId: fold.state.runId ?? "", step: call.step, callId: call.id, tool: call.tool,
            arguments: call.argumentsText.string, verdict: call.verdict?.verdict.rawValue, rule: call.verdict?.rule,
            approval: call.approval.map { $0.isGranted ? "granted" : "refused" }, approver: call.approval?.approver,
            attempts: call.attempts, status: last?.status.rawValue, durationUs: call.results.reduce(0) { $0 + $1.durationUs },
            error: last?.error)
    }

    /// The log's facts, made in the read, for a log read whole from its start that did not change
    /// meanwhile (`row`, from `finish`, is its identity) and held every call; nil otherwise.
    func takeFacts(row: LogRow) -> LogFacts? {
        guard makesFacts, row.size >= 0, row.status != .damaged else { return nil }
        return fold.facts(tear: summary.tear)
    }

    /// Makes the rows of the calls still held (in `rows`, after any not handed over yet) and the
    /// log's row: how the log stands, where a later read picks up, and the identity of what was read.
    mutating func finish(stampBefore: FileStamp, now: Int) -> LogRow {
        for (index, call) in fold.state.calls.enumerated() { rows.append(row(of: call, ordinal: callBase + index)) }
        // A finished run's log does not grow (a run stopped for approval does, when resumed).
        let isOpen = fold.state.stop == nil || fold.state.stop?.reason == .approvalRequired || summary.tear != nil
        // Only a log that can no longer grow is known by its content (a growing one would be
        // hashed whole at each index); hashed before the stamp is taken again below, so a file
        // rewritten meanwhile is caught there.
        let contentHash = isOpen ? nil : LogFingerprint.contentHash(path, length: stampBefore.size)
        // A file that changed while it was read gets no identity (size -1): it is read again next time.
        let after = FileStamp(path: path)
        let isSteady = after == stampBefore
        // A log appended to while it was read (a run being written, followed by `serve`) is read
        // again from the start of the last member read, with the state before it: the bytes
        // before that member are as they were read, whatever was appended since. (Read again
        // from its start each time instead, a log written without pause cost each index more
        // than the last, and was never read steadily once it took longer to read than to grow.)
        let grewWhileRead = !isSteady && (after?.size ?? -1) > stampBefore.size
        var status = LogStatus.intact
        var problem: String?
        var point: ResumePoint?
        if let damage {
            (status, problem) = (.damaged, damage)
        } else if fold.state.eventCount == 0 && summary.tear == nil {
            // Whole members with no line: no run, as the verifier says (`no_event`), not intact.
            (status, problem) = (.damaged, LogError.noEvent(in: path, tear: nil).message)
        } else {
            if let tear = summary.tear { (status, problem) = (.torn, tear.description) }
            // Where a later read picks up: the torn member's start (its complete events are
            // folded again then, from the state before it), or the end of what was read.
            if let tear = summary.tear, let memberStart, memberStart.position.memberOffset == tear.memberOffset {
                point = memberStart
            } else if grewWhileRead, let memberStart {
                point = memberStart
            } else if let lastEvent, isSteady {
                point = ResumePoint(
                    position: LogReader.Position(
                        memberOffset: summary.tear?.memberOffset ?? stampBefore.size, memberIndex: lastEvent.memberIndex + 1,
                        sequence: lastEvent.sequence + 1, previousHash: summary.lastHash ?? lastEvent.hash, runId: lastEvent.runId),
                    callBase: callBase, dropped: dropped, state: fold.state)
            }
        }
        // The identity's bytes: the end of the last complete member before the resume point; for
        // a damaged log (never resumed), the end of the file.
        var tail = (lastComplete: 0, end: stampBefore.size)
        if let point {
            let end = point.position.memberOffset
            tail = ((members.current == end ? members.previous : members.current) ?? 0, end)
        }
        let identity = LogFingerprint.of(path, stamp: stampBefore, lastCompleteMember: tail.lastComplete, end: tail.end)
        let range = LogFingerprint.tailRange(memberOffset: tail.lastComplete, end: tail.end)
        let start = fold.state.start
        return LogRow(
            size: isSteady ? stampBefore.size : -1, mtimeNs: stampBefore.mtimeNs, tailOffset: identity?.tailOffset ?? range.offset,
            tailEnd: identity?.tailEnd ?? range.end, tailHash: identity?.tailHash ?? "", status: status, problem: problem,
            runId: fold.state.runId, agent: start?.agent.name, agentVersion: start?.agent.version,
            model: start.map { "\($0.model.provider):\($0.model.name)" }, input: start?.goal, startedAtUs: fold.state.startedAtUs,
            endedAtUs: fold.state.stop == nil ? nil : fold.state.lastEventAtUs, stopReason: fold.state.stop?.reason.rawValue,
            stopLimit: fold.state.stop?.limit?.rawValue, events: fold.state.eventCount,
            steps: dropped.decisionSteps(with: fold.state.decisions),
            decisions: fold.state.usage.modelCalls,
            invalidDecisions: fold.state.counters.invalidDecisions, toolCalls: callBase + fold.state.calls.count,
            executedCalls: fold.state.counters.executedCalls, deniedCalls: fold.state.counters.deniedCalls,
            failedCalls: fold.state.counters.failedCalls, inputTokens: fold.state.usage.inputTokens,
            outputTokens: fold.state.usage.outputTokens,
            costUSD: fold.state.usage.costUSD, anomalies: fold.state.anomalies.count, indexedAtUs: now,
            resume: point.flatMap { isOpen && (isSteady || grewWhileRead) ? JSONWriter.encode($0.json) : nil },
            forkedFrom: fold.state.forked?.parentRunId,
            forkStep: fold.state.forked?.step, contentHash: isSteady ? contentHash : nil,
            executedTools: dropped.tools.union(fold.state.calls.lazy.filter { $0.attempts > 0 }.map(\.tool)))
    }
}

/// A `logs` row's values, as `LogIndexer.finish` makes them, with the identity of what was read
/// (`size` … `tailHash`, `contentHash`), which goes to the file's record (`LogFileRecord`).
struct LogRow: Sendable {
    var size: Int
    var mtimeNs: Int
    var tailOffset: Int
    var tailEnd: Int
    var tailHash: String
    var status: LogStatus
    var problem: String?
    var runId: String?
    var agent: String?
    var agentVersion: String?
    var model: String?
    var input: String?
    var startedAtUs: Int?
    var endedAtUs: Int?
    var stopReason: String?
    var stopLimit: String?
    var events: Int
    var steps: Int
    var decisions: Int
    var invalidDecisions: Int
    var toolCalls: Int
    var executedCalls: Int
    var deniedCalls: Int
    var failedCalls: Int
    var inputTokens: Int
    var outputTokens: Int
    var costUSD: Double
    var anomalies: Int
    var indexedAtUs: Int
    var resume: [UInt8]?
    /// The parent run and its step, for a fork (`run_forked`).
    var forkedFrom: String?
    var forkStep: Int?
    /// `LogFingerprint.contentHash` of the bytes read; nil for a log that can still grow (not
    /// stopped, stopped for approval, or torn) and for one that changed while it was read.
    var contentHash: String?
    /// The tools the run executed (a call with an attempt), for its set (`logs.tool_set`).
    var executedTools: Set<String> = []
    /// The id of that set in the catalog, which the write transaction looks up (`ToolSets`).
    var toolSet: Int64?

    /// The identity of what was read.
    var identity: LogFingerprint {
        LogFingerprint(stamp: FileStamp(size: size, mtimeNs: mtimeNs), tailOffset: tailOffset, tailEnd: tailEnd, tailHash: tailHash)
    }

    /// The file's record with what was read (`LogFileRecord.claim`; `known`, as the row's lookup
    /// found it).
    private func claim(path: String, known: LogFileRecord?, in db: any SQLConnection) throws -> LogFileRecord {
        guard
            let file = try LogFileRecord.claim(
                path: path, identity: identity, contentHash: contentHash, known: known, authoritative: true, in: db)
        else {
            // An authoritative claim always gives a record; this is the store failing to keep one.
            throw CatalogError(
                .queryFailed, "the catalog kept no record of \(path)", hint: "run the command again, or agent-eval catalog rebuild")
        }
        return file
    }

    /// Writes the values into the row `logId` (inserted before, as a placeholder, when new) of
    /// the log at `path`, with this machine as the one that saw it (`Catalog.seenOn`); returns
    /// the file's record the row now refers to.
    @discardableResult
    func write(logId: Int64, path: String, file known: LogFileRecord?, in db: any SQLConnection) throws -> LogFileRecord {
        let file = try claim(path: path, known: known, in: db)
        try db.execute(Self.updateSQL) { row in
            bindValues(file, to: &row)
            row.bind(logId)
        }
        return file
    }

    /// Inserts the row of a log the catalog does not have yet, at `path`; returns its id.
    ///
    /// On PostgreSQL, where each statement is a round trip, a file the catalog has no record of
    /// either gets its record and its run's row in one statement (a second round trip per new log
    /// cost `catalog rebuild` a quarter of its speed).
    func insert(path: String, in db: any SQLConnection) throws -> Int64 {
        var id: Int64?
        if db.dialect == .postgres {
            try db.run(
                Self.insertWithRecordSQL,
                bind: { row in
                    row.bind(path)
                    LogFileRecord.bind(identity, contentHash, to: &row)
                    row.bind(path)
                    bindValues(nil, to: &row)
                }
            ) { id = Int64($0.int(0)) }
            if let id { return id }
        }
        let file = try claim(path: path, known: nil, in: db)
        try db.run(
            Self.insertSQL,
            bind: { row in
                row.bind(path)
                bindValues(file, to: &row)
            }
        ) { id = Int64($0.int(0)) }
        guard let id else { throw CatalogError(.queryFailed, "the catalog gave no id to the new row of \(path)") }
        return id
    }

    /// The columns `write` and `insert` give values to, in `bindValues`'s order.
    static let columns = [
        "file_id", "generation", "status", "problem", "run_id", "agent", "agent_version", "model",
        "input", "started_at_us", "ended_at_us", "stop_reason", "stop_limit", "events", "steps", "decisions", "invalid_decisions",
        "tool_calls", "executed_calls", "denied_calls", "failed_calls", "input_tokens", "output_tokens", "cost_usd", "anomalies",
        "indexed_at_us", "resume", "forked_from", "fork_step", "seen_on", "tool_set",
    ]

    private static let updateSQL = "UPDATE logs SET " + columns.map { "\($0) = ?" }.joined(separator: ", ") + " WHERE log_id = ?"
    private static let insertSQL =
        "INSERT INTO logs (path, " + columns.joined(separator: ", ") + ") VALUES (?, " + SQLList.placeholders(columns.count)
        + ") RETURNING log_id"

    /// A new file's record (generation 1) and its run's row, in one statement: nothing when the
    /// catalog has a record of the path already (`insert` then claims it first).
    private static let insertWithRecordSQL = """
        WITH f AS (
            INSERT INTO log_files (path, generation, size, mtime_ns, tail_offset, tail_end, tail_hash, content_hash)
            VALUES (?, 1, ?, ?, ?, ?, ?, ?) ON CONFLICT (path) DO NOTHING RETURNING file_id, generation
        )
        INSERT INTO logs (path, \(columns.joined(separator: ", ")))
        SELECT ?, f.file_id, f.generation, \(SQLList.placeholders(columns.count - 2)) FROM f RETURNING log_id
        """

    /// Binds the values of `columns`; without `file`, all but the first two (the file's).
    private func bindValues(_ file: LogFileRecord?, to row: inout any SQLBinder) {
        if let file {
            row.bind(file.id)
            row.bind(file.generation)
        }
        row.bind(status.rawValue)
        row.bind(problem)
        row.bind(runId)
        row.bind(agent)
        row.bind(agentVersion)
        row.bind(model)
        row.bind(input)
        row.bind(startedAtUs)
        row.bind(endedAtUs)
        row.bind(stopReason)
        row.bind(stopLimit)
        row.bind(events)
        row.bind(steps)
        row.bind(decisions)
        row.bind(invalidDecisions)
        row.bind(toolCalls)
        row.bind(executedCalls)
        row.bind(deniedCalls)
        row.bind(failedCalls)
        row.bind(inputTokens)
        row.bind(outputTokens)
        row.bind(costUSD)
        row.bind(anomalies)
        row.bind(indexedAtUs)
        row.bind(resume)
        row.bind(forkedFrom)
        row.bind(forkStep)
        row.bind(Catalog.seenOn)
        row.bind(toolSet.map(Int.init))
    }
}

/// A `calls` row waiting to be written.
struct CallRow: Sendable {
    var logId: Int64
    var ordinal: Int
    var runId: String
    var step: Int
    var callId: String
    var tool: String
    var arguments: String
    var verdict: String?
    var rule: String?
    var approval: String?
    var approver: String?
    var attempts: Int
    var status: String?
    var durationUs: Int
    var error: String?
}

/// The call rows of the logs a write transaction indexes, written in one go when the
/// transaction's logs are read (or when they reach `limit`, which bounds memory).
final class PendingCallRows {
    static let limit = 4096
    var rows: [CallRow] = []
    /// The sets of tools the transaction's runs executed, by their ids (`logs.tool_set`).
    let toolSets = ToolSets()

    /// A row the store refused, with the log it belongs to (rows of several logs wait
    /// together). The log is named here, not looked up: a PostgreSQL transaction reads nothing
    /// more once a statement in it failed.
    struct Failure: Error {
        var path: String
        var error: any Error
    }

    /// The path of each log whose rows wait.
    private var paths: [Int64: String] = [:]

    /// Takes `made` (emptying it) as rows of the log `logId`; writes out once `limit` wait.
    func take(_ made: inout [CallRow], logId: Int64, path: String, in db: any SQLConnection) throws {
        paths[logId] = path
        rows.reserveCapacity(rows.count + made.count)
        for var row in made {
            row.logId = logId
            rows.append(row)
        }
        made.removeAll(keepingCapacity: true)
        if rows.count >= Self.limit { try write(to: db) }
    }

    func write(to db: any SQLConnection) throws {
        guard !rows.isEmpty else { return }
        do {
            try db.insert(into: "calls", columns: Self.columns, count: rows.count) { index, row in Self.bind(rows[index], to: &row) }
        } catch let refused as RowRefused {
            throw Failure(path: paths[rows[refused.row].logId] ?? "", error: refused.error)
        }
        rows.removeAll(keepingCapacity: true)
        paths.removeAll(keepingCapacity: true)
    }

    static let columns = [
        "log_id", "ordinal", "run_id", "step", "call_id", "tool", "arguments", "verdict", "rule", "approval", "approver", "attempts",
        "status", "duration_us", "error",
    ]

    private static func bind(_ call: CallRow, to row: inout any SQLBinder) {
        row.bind(call.logId)
        row.bind(call.ordinal)
        row.bind(call.runId)
        row.bind(call.step)
        row.bind(call.callId)
        row.bind(call.tool)
        row.bind(call.arguments)
        row.bind(call.verdict)
        row.bind(call.rule)
        row.bind(call.approval)
        row.bind(call.approver)
        row.bind(call.attempts)
        row.bind(call.status)
        row.bind(call.durationUs)
        row.bind(call.error)
    }
}
