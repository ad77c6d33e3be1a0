import Foundation
import GRDB
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

    public var path: String
    public var change: Change
    public var status: LogStatus
    public var problem: String?
    /// Events read (0 when nothing was).
    public var eventsRead: Int
}

extension Catalog {
    /// Calls kept in memory before settled ones are written out and dropped, so indexing a
    /// log of any length holds a bounded state.
    static let callsHeldInMemory = 512

    /// Indexes one log: reads nothing when its identity is unchanged, only its new members when
    /// it grew on the same prefix, all of it otherwise. One transaction: an interrupted index
    /// leaves the log's old rows (and it is read again next time).
    public func index(log: String) throws(CatalogError) -> IndexedLog {
        let path = Self.absolute(log)
        if let unchanged = try unchangedLogs(at: [path])[0] { return unchanged }
        return try write { db in
            let pending = PendingCallRows()
            let indexed = try index(absolute: path, in: db, pending: pending)
            try pending.write(to: db)
            return indexed
        }
    }

    /// Logs `index(paths:)` indexes in one write transaction.
    static let logsPerTransaction = 64

    /// Each log at the absolute `paths` as the catalog holds it, when its identity is unchanged
    /// (checked on one read snapshot, without the write lock); nil for one that must be read.
    func unchangedLogs(at paths: [String]) throws(CatalogError) -> [IndexedLog?] {
        try read { db in
            try paths.map { path in
                guard let known = try StoredLog.fetch(db, path: path), let stamp = FileStamp(path: path),
                    known.identity.matches(path, now: stamp)
                else { return nil }
                return IndexedLog(path: path, change: .unchanged, status: known.status, problem: known.problem, eventsRead: 0)
            }
        }
    }

    /// Indexes the log at the absolute `path` inside the write transaction `db` (several logs
    /// may share one: `index(paths:)`). Reads the log's row again under the write lock: another
    /// process may have indexed it meanwhile.
    func index(absolute path: String, in db: Database, pending: PendingCallRows) throws -> IndexedLog {
        let known = try StoredLog.fetch(db, path: path)
        guard let stamp = FileStamp(path: path) else {
            if let known, known.status != .vanished {
                try db.execute(
                    sql: "UPDATE logs SET status = 'vanished', problem = 'the file is gone', resume = NULL WHERE log_id = ?",
                    arguments: [known.id])
            }
            return IndexedLog(path: path, change: .vanished, status: .vanished, problem: "the file is gone", eventsRead: 0)
        }
        if let known, known.identity.matches(path, now: stamp) {
            return IndexedLog(path: path, change: .unchanged, status: known.status, problem: known.problem, eventsRead: 0)
        }
        var indexer = LogIndexer(path: path, db: db, pending: pending)
        let change: IndexedLog.Change
        if let known, let resume = known.resume, known.identity.grew(path, now: stamp) {
            change = .grew
            try indexer.read(logId: known.id, from: resume, storedTailOffset: known.identity.tailOffset)
        } else {
            change = known == nil ? .added : .reindexed
            try indexer.read(logId: known?.id, from: nil, storedTailOffset: 0)
        }
        let (status, problem) = try indexer.finish(stampBefore: stamp, now: Self.nowUs())
        return IndexedLog(path: path, change: change, status: status, problem: problem, eventsRead: indexer.eventsRead)
    }

    /// Microseconds since 1970, as the catalog stores times.
    public static func nowUs() -> Int { Int(Date().timeIntervalSince1970 * 1_000_000) }

    /// The working directory, straight from `getcwd` (cheaper than asking Foundation: a suite
    /// asks once per log).
    static func currentDirectory() -> String {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: Int(PATH_MAX) + 1) { buffer in
            guard let base = buffer.baseAddress, getcwd(base, buffer.count) != nil else { return FileManager.default.currentDirectoryPath }
            return String(decoding: UnsafeRawBufferPointer(start: base, count: strlen(base)), as: UTF8.self)
        }
    }

    /// Whether an absolute path has no empty, `.` or `..` component (no `//`, no trailing `/`):
    /// what `absolute` would give back unchanged.
    static func isStandard(_ path: String) -> Bool {
        var componentLength = 0
        var dots = 0
        for (index, byte) in path.utf8.enumerated() {
            if byte == UInt8(ascii: "/") {
                if index > 0 && (componentLength == 0 || componentLength == dots && dots <= 2) { return false }
                componentLength = 0
                dots = 0
            } else {
                if index == 0 { return false }
                componentLength += 1
                if byte == UInt8(ascii: ".") { dots += 1 }
            }
        }
        return path.utf8.count == 1 || !(componentLength == 0 || componentLength == dots && dots <= 2)
    }

    /// `path` made absolute and standard, the key of a log in the catalog.
    public static func absolute(_ path: String) -> String {
        let absolute = path.hasPrefix("/") ? path : currentDirectory() + "/" + path
        // Most paths are standard already (a suite asks once per log).
        if isStandard(absolute) { return absolute }
        // `.`, `..` and empty components folded away (symbolic links are kept as they are).
        var components: [Substring] = []
        for component in absolute.split(separator: "/", omittingEmptySubsequences: true) {
            switch component {
            case ".": continue
            case "..": _ = components.popLast()
            default: components.append(component)
            }
        }
        return "/" + components.joined(separator: "/")
    }
}

/// A log's row as the catalog holds it, for the identity check.
struct StoredLog {
    var id: Int64
    var identity: LogIdentity
    var status: LogStatus
    var problem: String?
    var resume: ResumePoint?

    /// The row of the log at `path`, read straight through SQLite's C API (`BoundRow`): it is
    /// looked up twice per log indexed, and GRDB's `Row` cost more than the lookup.
    static func fetch(_ db: Database, path: String) throws -> StoredLog? {
        let statement = try db.cachedStatement(
            sql: "SELECT log_id, size, mtime_ns, tail_offset, tail_end, tail_hash, status, problem, resume FROM logs WHERE path = ?")
        var stored: StoredLog?
        try BoundRow.forEachRow(statement, in: db, bind: { $0.bind(path) }) { row in
            let resume = row.blob(8).flatMap { bytes in
                try? bytes.withUnsafeBytes { try JSONScanner.scan($0) { try ResumePoint(from: &$0) } }
            }
            stored = StoredLog(
                id: Int64(row.int(0)),
                identity: LogIdentity(
                    stamp: FileStamp(size: row.int(1), mtimeNs: row.int(2)), tailOffset: row.int(3), tailEnd: row.int(4),
                    tailHash: row.text(5)),
                status: LogStatus(rawValue: row.text(6)) ?? .damaged, problem: row.optionalText(7), resume: resume)
        }
        return stored
    }
}

/// Where a later index picks up a log that grows: a member's start, the chain just before it,
/// and the (pruned) state folded from everything before it.
struct ResumePoint: JSONRepresentable {
    var position: LogReader.Position
    /// The ordinal of `state.calls[0]`: calls before it were written out and dropped.
    var callBase: Int
    var state: RunState

    init(position: LogReader.Position, callBase: Int, state: RunState) {
        self.position = position
        self.callBase = callBase
        self.state = state
    }

    init(from scanner: inout JSONScanner) throws {
        var offset: Int?
        var index: Int?
        var sequence: Int?
        var previous: String?
        var run: String?
        var callBase: Int?
        var state: RunState?
        try scanner.readObject { scanner, key in
            switch key {
            case "member_offset": offset = try scanner.read()
            case "member_index": index = try scanner.read()
            case "seq": sequence = try scanner.read()
            case "prev": previous = try scanner.read()
            case "run": run = try scanner.read()
            case "call_base": callBase = try scanner.read()
            case "state": state = try RunState(snapshot: &scanner)
            default: try scanner.skipValue()
            }
        }
        position = LogReader.Position(
            memberOffset: try required(offset, "member_offset"), memberIndex: try required(index, "member_index"),
            sequence: try required(sequence, "seq"), previousHash: try required(previous, "prev"), runId: try required(run, "run"))
        self.callBase = try required(callBase, "call_base")
        self.state = try required(state, "state")
    }

    var json: JSONValue {
        var object = ObjectBuilder()
        object.set("member_offset", position.memberOffset)
        object.set("member_index", position.memberIndex)
        object.set("seq", position.sequence)
        object.set("prev", position.previousHash)
        object.set("run", position.runId)
        object.set("call_base", callBase)
        object.set("state", state.snapshotJSON)
        return object.json
    }
}

/// Reads one log inside a write transaction and writes its rows: the fold of its events, with
/// settled calls written out and dropped as it goes, so memory stays bounded.
struct LogIndexer {
    let path: String
    let db: Database
    /// Call rows not written yet: the transaction's logs are read one after another and their
    /// rows written together, so the reader and SQLite each keep their caches warm.
    let pending: PendingCallRows
    private var logId: Int64 = 0
    private var state = RunState()
    /// The ordinal of `state.calls[0]`.
    private var callBase = 0
    private(set) var eventsRead = 0
    private var damage: String?
    private var summary = ReadSummary()
    /// The member being read and the one before it (byte offsets).
    private var members: (previous: Int?, current: Int?) = (nil, nil)
    /// The start of the member being read, with the state before it.
    private var memberStart: ResumePoint?
    private var lastEvent: (sequence: Int, hash: String, memberIndex: Int, runId: String)?

    init(path: String, db: Database, pending: PendingCallRows) {
        self.path = path
        self.db = db
        self.pending = pending
    }

    /// Reads the log, from the start or from `resume`, folding and writing call rows.
    mutating func read(logId existing: Int64?, from resume: ResumePoint?, storedTailOffset: Int) throws {
        if let existing {
            logId = existing
        } else {
            try db.cachedStatement(
                sql: """
                    INSERT INTO logs (path, size, mtime_ns, tail_offset, tail_end, tail_hash, status, events, steps, decisions,
                        invalid_decisions, tool_calls, executed_calls, denied_calls, failed_calls, input_tokens, output_tokens, cost_usd,
                        anomalies, indexed_at_us)
                    VALUES (?, -1, 0, 0, 0, '', 'damaged', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
                    """
            ).execute(arguments: [path])
            logId = db.lastInsertedRowID
        }
        if let resume {
            state = resume.state
            callBase = resume.callBase
            members = (storedTailOffset, resume.position.memberOffset)
            try db.cachedStatement(sql: "DELETE FROM calls WHERE log_id = ? AND ordinal >= ?").execute(arguments: [logId, callBase])
        } else if existing != nil {
            // A log read again from the start: its old call rows go (a new log has none).
            try db.cachedStatement(sql: "DELETE FROM calls WHERE log_id = ?").execute(arguments: [logId])
        }
        // The fold reads no context packet's text: it is checked, not made.
        let reader = LogReader(path: path, options: .init(keepsPacketText: false))
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
        }
    }

    private mutating func visit(_ recorded: RecordedEvent) throws {
        let event = recorded.event
        if recorded.location.memberOffset != members.current {
            members = (members.current, recorded.location.memberOffset)
            memberStart = ResumePoint(
                position: LogReader.Position(
                    memberOffset: recorded.location.memberOffset, memberIndex: recorded.location.memberIndex, sequence: event.sequence,
                    previousHash: event.previousHash, runId: event.runId), callBase: callBase, state: state)
        }
        RunState.reduce(into: &state, event)
        eventsRead += 1
        lastEvent = (event.sequence, recorded.hash, recorded.location.memberIndex, event.runId)
        if case .stepEnded = event.payload, state.calls.count >= Catalog.callsHeldInMemory { try writeSettledCalls() }
    }

    /// Writes out the settled calls at the front of the list (the step that proposed them has
    /// ended, no attempt is in flight, none waits for approval) and drops them, with the
    /// decisions and contents the catalog keeps only as counts.
    private mutating func writeSettledCalls() throws {
        let settled = state.calls.prefix { !$0.isAwaitingApproval && $0.attempts == $0.results.count }.count
        guard settled > 0 else { return }
        for index in 0..<settled { try writeCall(state.calls[index], ordinal: callBase + index) }
        state.calls.removeFirst(settled)
        callBase += settled
        state.decisions.removeAll()
        state.contents.removeAll()
    }

    private func writeCall(_ call: ToolCallRecord, ordinal: Int) throws {
        let last = call.results.last
        pending.rows.append(
            CallRow(
                logId: logId, ordinal: ordinal, runId: state.runId ?? "", step: call.step, callId: call.id, tool: call.tool,
                arguments: JSONWriter.encodeString(call.arguments), verdict: call.verdict?.verdict.rawValue, rule: call.verdict?.rule,
                approval: call.approval.map { $0.isGranted ? "granted" : "refused" }, approver: call.approval?.approver,
                attempts: call.attempts, status: last?.status.rawValue, durationUs: call.results.reduce(0) { $0 + $1.durationUs },
                error: last?.error))
        if pending.rows.count >= PendingCallRows.limit { try pending.write(to: db) }
    }

    /// Writes the remaining calls and the log's row; returns how the log stands.
    mutating func finish(stampBefore: FileStamp, now: Int) throws -> (status: LogStatus, problem: String?) {
        for (index, call) in state.calls.enumerated() { try writeCall(call, ordinal: callBase + index) }
        // A file that changed while it was read gets no identity (size -1): it is read again next time.
        let isSteady = FileStamp(path: path) == stampBefore
        var status = LogStatus.intact
        var problem: String?
        var point: ResumePoint?
        if let damage {
            (status, problem) = (.damaged, damage)
        } else {
            if let tear = summary.tear { (status, problem) = (.torn, tear.description) }
            // Where a later read picks up: the torn member's start (its complete events are
            // folded again then, from the state before it), or the end of what was read.
            if let tear = summary.tear, let memberStart, memberStart.position.memberOffset == tear.memberOffset {
                point = memberStart
            } else if let lastEvent, isSteady {
                point = ResumePoint(
                    position: LogReader.Position(
                        memberOffset: summary.tear?.memberOffset ?? stampBefore.size, memberIndex: lastEvent.memberIndex + 1,
                        sequence: lastEvent.sequence + 1, previousHash: lastEvent.hash, runId: lastEvent.runId),
                    callBase: callBase, state: state)
            }
        }
        // The identity's bytes: the end of the last complete member before the resume point; for
        // a damaged log (never resumed), the end of the file.
        var tail = LogIdentity.tailRange(memberOffset: 0, end: stampBefore.size)
        if let point {
            let end = point.position.memberOffset
            let lastComplete = members.current == end ? members.previous : members.current
            tail = LogIdentity.tailRange(memberOffset: lastComplete ?? 0, end: end)
        }
        let tailHash = LogIdentity.hash(path, from: tail.offset, to: tail.end) ?? ""
        // A finished run's log does not grow (a run stopped for approval does, when resumed).
        let isOpen = state.stop == nil || state.stop?.reason == .approvalRequired || summary.tear != nil
        let resume = point.flatMap { isOpen && isSteady ? JSONWriter.encode($0.json) : nil }
        let start = state.start
        let statement = try db.cachedStatement(
            sql: """
                UPDATE logs SET size = ?, mtime_ns = ?, tail_offset = ?, tail_end = ?, tail_hash = ?, status = ?, problem = ?,
                    run_id = ?, agent = ?, agent_version = ?, model = ?, input = ?, started_at_us = ?, ended_at_us = ?,
                    stop_reason = ?, stop_limit = ?, events = ?, steps = ?, decisions = ?, invalid_decisions = ?, tool_calls = ?,
                    executed_calls = ?, denied_calls = ?, failed_calls = ?, input_tokens = ?, output_tokens = ?, cost_usd = ?,
                    anomalies = ?, indexed_at_us = ?, resume = ?
                WHERE log_id = ?
                """)
        try BoundRow.execute(statement, in: db) { row in
            row.bind(isSteady ? stampBefore.size : -1)
            row.bind(stampBefore.mtimeNs)
            row.bind(tail.offset)
            row.bind(tail.end)
            row.bind(tailHash)
            row.bind(status.rawValue)
            row.bind(problem)
            row.bind(state.runId)
            row.bind(start?.agent.name)
            row.bind(start?.agent.version)
            row.bind(start.map { "\($0.model.provider):\($0.model.name)" })
            row.bind(start?.goal)
            row.bind(state.startedAtUs)
            row.bind(state.stop == nil ? nil : state.lastEventAtUs)
            row.bind(state.stop?.reason.rawValue)
            row.bind(state.stop?.limit?.rawValue)
            row.bind(state.eventCount)
            row.bind(state.step)
            row.bind(state.usage.modelCalls)
            row.bind(state.counters.invalidDecisions)
            row.bind(callBase + state.calls.count)
            row.bind(state.counters.executedCalls)
            row.bind(state.counters.deniedCalls)
            row.bind(state.counters.failedCalls)
            row.bind(state.usage.inputTokens)
            row.bind(state.usage.outputTokens)
            row.bind(state.usage.costUSD)
            row.bind(state.anomalies.count)
            row.bind(now)
            row.bind(resume)
            row.bind(logId)
        }
        return (status, problem)
    }
}

/// A `calls` row waiting to be written.
struct CallRow {
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

    func write(to db: Database) throws {
        guard !rows.isEmpty else { return }
        let statement = try db.cachedStatement(
            sql: """
                INSERT INTO calls (log_id, ordinal, run_id, step, call_id, tool, arguments, verdict, rule, approval, approver,
                    attempts, status, duration_us, error)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """)
        for call in rows {
            try BoundRow.execute(statement, in: db) { row in
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
        rows.removeAll(keepingCapacity: true)
    }
}
