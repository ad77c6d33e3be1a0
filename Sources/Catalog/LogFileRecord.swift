import TraceCore
import TraceLog

/// The catalog's one record of a log file (`log_files`, schema 13): its path, the identity of
/// the bytes last read from it (`LogFingerprint`: size, modification time, a checksum of its
/// last complete member's tail), their content hash when known, and a generation that counts
/// the times those bytes changed.
///
/// What the catalog makes from a log — the run's row in `logs`, the fact cache's entry in
/// `facts`, the replayer's step table in `step_logs` — refers to the record (`file_id`) and keeps
/// the generation it was made at. It holds while that is the record's generation and the file
/// still has the record's identity. A reader that finds other bytes than the record names
/// starts a new generation (`claim`), so everything made from the old bytes stops holding at
/// once; the same bytes under a new modification time (a checkout, a copy) are one `touch`, and
/// everything made from them still holds.
struct LogFileRecord: Sendable, Hashable {
    var id: Int64
    var generation: Int
    var identity: LogFingerprint
    /// `LogFingerprint.contentHash` of the bytes `identity` names; nil when no reader hashed them.
    var contentHash: String?

    /// The columns `init(_:from:)` reads, in its order, from `log_files` named `f`.
    static let columns = "f.file_id, f.generation, f.size, f.mtime_ns, f.tail_offset, f.tail_end, f.tail_hash, f.content_hash"

    /// The record in `row`'s columns `first` … `first + 7` (`columns`).
    init(_ row: any SQLRowView, from first: Int) {
        id = Int64(row.int(first))
        generation = row.int(first + 1)
        identity = LogFingerprint(
            stamp: FileStamp(size: row.int(first + 2), mtimeNs: row.int(first + 3)), tailOffset: row.int(first + 4),
            tailEnd: row.int(first + 5), tailHash: row.text(first + 6))
        contentHash = row.optionalText(first + 7)
    }

    init(id: Int64, generation: Int, identity: LogFingerprint, contentHash: String?) {
        (self.id, self.generation, self.identity, self.contentHash) = (id, generation, identity, contentHash)
    }

    /// The record of the file at the absolute `path`, if the catalog has one.
    static func fetch(_ db: any SQLConnection, path: String) throws -> LogFileRecord? {
        var found: LogFileRecord?
        try db.run("SELECT \(columns) FROM log_files f WHERE f.path = ?", bind: { $0.bind(path) }) { found = LogFileRecord($0, from: 0) }
        return found
    }

    /// Whether the file at `path`, stamped `now`, still holds the bytes this record names.
    func matches(_ path: String, now: FileStamp) -> Bool { identity.matches(path, now: now) }

    /// The record that something made from a read of the file at the absolute `path` is to refer
    /// to, inside the write transaction `db`: the read found `identity` (and `contentHash`, when
    /// it hashed the bytes). `known` is the record as the caller looked it up (nil: look it up
    /// here).
    ///
    /// - The bytes the record names (the same identity, or the same stamp with the record's tail
    ///   still in place — another reader may hash another range of the same file): the record,
    ///   its content hash filled in when it had none.
    /// - The same bytes under a new stamp (the same size and content hash): the record takes the
    ///   new modification time; its generation stays.
    /// - Other bytes: a new generation with this identity. A reader that is not `authoritative`
    ///   (the fact cache, the step store, whose entries wait before they are written) gets nil
    ///   instead when the file no longer holds what it read, so an older read never replaces a
    ///   newer one; the indexer's read is what `logs` says, whatever happened since (a file that
    ///   changed while it was read has size -1 and is read again next time).
    static func claim(
        path: String, identity: LogFingerprint, contentHash: String?, known: LogFileRecord? = nil, authoritative: Bool,
        in db: any SQLConnection
    ) throws -> LogFileRecord? {
        var record = known
        if record == nil {
            var inserted: Int64?
            try db.run(
                """
                INSERT INTO log_files (path, generation, size, mtime_ns, tail_offset, tail_end, tail_hash, content_hash)
                VALUES (?, 1, ?, ?, ?, ?, ?, ?) ON CONFLICT (path) DO NOTHING RETURNING file_id
                """,
                bind: { row in
                    row.bind(path)
                    bind(identity, contentHash, to: &row)
                }
            ) { inserted = Int64($0.int(0)) }
            if let inserted { return LogFileRecord(id: inserted, generation: 1, identity: identity, contentHash: contentHash) }
            record = try fetch(db, path: path)
        }
        guard var record else {
            throw CatalogError(
                .queryFailed, "the catalog refused a record of \(path) as one it has, then had none",
                hint: "another process may be rebuilding the catalog; run the command again, or agent-eval catalog rebuild")
        }
        let sameBytes =
            record.identity == identity
            || record.identity.stamp == identity.stamp && identity.stamp.size >= 0 && record.matches(path, now: identity.stamp)
        if sameBytes {
            if record.contentHash == nil, let contentHash {
                try db.execute("UPDATE log_files SET content_hash = ? WHERE file_id = ?", [contentHash, record.id])
                record.contentHash = contentHash
            }
            return record
        }
        if let contentHash, record.contentHash == contentHash, record.identity.stamp.size == identity.stamp.size {
            try record.touch(mtimeNs: identity.stamp.mtimeNs, in: db)
            return record
        }
        if !authoritative {
            guard let now = FileStamp(path: path), identity.matches(path, now: now) else { return nil }
        }
        record.generation += 1
        (record.identity, record.contentHash) = (identity, contentHash)
        try db.execute(
            """
            UPDATE log_files SET generation = ?, size = ?, mtime_ns = ?, tail_offset = ?, tail_end = ?, tail_hash = ?, content_hash = ?
            WHERE file_id = ?
            """
        ) { row in
            row.bind(record.generation)
            bind(identity, contentHash, to: &row)
            row.bind(record.id)
        }
        // The step table of the old bytes goes now: it is the largest thing kept per log, and
        // nothing reads it again. (A facts entry is replaced when the log is next checked.)
        try CatalogStepStore.forget(fileId: record.id, in: db)
        return record
    }

    /// The same bytes under a new modification time: the record takes it, and what was made
    /// from the file still holds.
    mutating func touch(mtimeNs: Int, in db: any SQLConnection) throws {
        try db.execute("UPDATE log_files SET mtime_ns = ? WHERE file_id = ?", [mtimeNs, id])
        identity.stamp = FileStamp(size: identity.stamp.size, mtimeNs: mtimeNs)
    }

    /// Binds the identity's columns and the content hash, in `log_files`' order.
    static func bind(_ identity: LogFingerprint, _ contentHash: String?, to row: inout any SQLBinder) {
        row.bind(identity.stamp.size)
        row.bind(identity.stamp.mtimeNs)
        row.bind(identity.tailOffset)
        row.bind(identity.tailEnd)
        row.bind(identity.tailHash)
        row.bind(contentHash)
    }
}
