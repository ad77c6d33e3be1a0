public import Replay
import Synchronization
import TraceCore
public import TraceLog

/// The catalog's step tables (`step_logs` and `steps`), behind Replay's `StepRecordStore`:
/// `replay --step N` reads one row, and the interactive replay a row per step shown. A table is
/// kept under the file's record (`LogFileRecord`) and the generation of the bytes it was made
/// from; a table of an older generation, of a file that changed since, or of another
/// `StepTable.format`, is not handed out (and is replaced when made again).
///
/// Made with a catalog's path, the store reads through one read-only SQLite connection of its
/// own and opens the catalog (creating or migrating it) only to keep a table: opening the
/// catalog itself costs about 2.4 ms (a connection pool, the schema version checked), a bare
/// read-only connection about 0.05 ms and its first query 0.4 ms (the schema read), and
/// `replay --step N` should take under 2 ms in all (`replay-benchmark`).
public struct CatalogStepStore: StepRecordStore {
    private let access: Access

    public init(catalog: Catalog) {
        access = .catalog(catalog)
    }

    /// A store over the catalog file at `path`, opened when first needed (a PostgreSQL
    /// catalog's URL: that catalog, opened then).
    public init(path: String) {
        access = PostgresStore.isURL(path) ? .server(LazyCatalog(path)) : .file(path, ReadOnlyConnection())
    }

    public func steps(of log: String) throws -> (any StepRecordSource)? {
        let path = Catalog.absolute(log)
        guard let now = FileStamp(path: path) else { return nil }
        var header: KeptSteps?
        try access.query(
            """
            SELECT \(LogFileRecord.columns), s.format, s.run_id, s.steps, s.digests_checked, s.digest_mismatches
            FROM log_files f JOIN step_logs s ON s.file_id = f.file_id AND s.generation = f.generation WHERE f.path = ?
            """, [.text(path)]
        ) { row in
            let file = LogFileRecord(row, from: 0)
            guard row.int(8) == StepTable.format, file.matches(path, now: now) else { return }
            header = KeptSteps(
                access: access, fileId: file.id, generation: file.generation, runId: row.text(9), stepCount: row.int(10),
                digestsChecked: row.int(11), digestMismatches: row.int(12))
        }
        return header
    }

    public func keep(_ table: StepTable, of log: String, fingerprint: LogFingerprint) throws {
        let path = Catalog.absolute(log)
        let catalog: Catalog
        switch access {
        case .catalog(let open): catalog = open
        case .file(let file, _): catalog = try Catalog(path: file)
        case .server(let lazy): catalog = try lazy.catalog()
        }
        try catalog.write { db in try Self.write(table, path: path, fingerprint: fingerprint, in: db) }
    }

    /// Replaces the step table of the log at the absolute `path` inside the transaction `db`,
    /// under the file's record; keeps nothing when the file no longer holds the bytes the table
    /// was made from.
    static func write(_ table: StepTable, path: String, fingerprint: LogFingerprint, in db: any SQLConnection) throws {
        // With the content hash, a checkout's new stamp on the same bytes keeps the record's
        // generation (and the run's row, facts and results made from them) rather than starting
        // a new one; it costs a pass over the file beside the full replay that made the table.
        let contentHash = LogFingerprint.contentHash(path, length: fingerprint.stamp.size)
        guard
            let file = try LogFileRecord.claim(
                path: path, identity: fingerprint, contentHash: contentHash, authoritative: false, in: db)
        else { return }
        try forget(fileId: file.id, in: db)
        try db.execute(
            """
            INSERT INTO step_logs (file_id, generation, format, run_id, steps, digests_checked, digest_mismatches)
            VALUES (?, ?, ?, ?, ?, ?, ?)
            """,
            [
                file.id, file.generation, StepTable.format, table.runId, table.records.count, table.digestsChecked,
                table.digestMismatches,
            ])
        let records = table.records
        // A refused row is the store's own error to the caller (`attributing` reads it).
        do {
            try db.insert(into: "steps", columns: ["file_id", "ordinal", "step", "has_problem", "record"], count: records.count) {
                ordinal, row in
                row.bind(file.id)
                row.bind(ordinal)
                row.bind(records[ordinal].step)
                row.bind(records[ordinal].hasProblem ? 1 : 0)
                row.bind(JSONWriter.encodeString(records[ordinal].storedJSON))
            }
        } catch let refused as RowRefused {
            throw refused.error
        }
    }

    /// Drops the step table kept for the file `fileId` (its bytes changed: the steps are made
    /// again when asked for).
    static func forget(fileId: Int64, in db: any SQLConnection) throws {
        try db.execute("DELETE FROM steps WHERE file_id = ?", [fileId])
        try db.execute("DELETE FROM step_logs WHERE file_id = ?", [fileId])
    }
}

/// How a store reaches the catalog: an open one, or its file through a read-only connection
/// opened on the first read.
enum Access: Sendable {
    case catalog(Catalog)
    case file(String, ReadOnlyConnection)
    case server(LazyCatalog)

    /// Runs `sql` with `arguments`, calling `body` with each row.
    func query(_ sql: String, _ arguments: [CatalogValue], _ body: (any SQLRowView) throws -> Void) throws {
        switch self {
        case .catalog(let catalog):
            try catalog.read { db in
                try db.run(sql, bind: { row in for argument in arguments { row.bind(argument) } }, each: body)
            }
        case .file(let path, let connection):
            try connection.query(path: path, sql, arguments, body)
        case .server(let lazy):
            try Access.catalog(try lazy.catalog()).query(sql, arguments, body)
        }
    }

    /// The first column of the first row, as an integer.
    func int(_ sql: String, _ arguments: [CatalogValue]) throws -> Int? {
        var found: Int?
        try query(sql, arguments) { row in if found == nil { found = row.int(0) } }
        return found
    }
}

/// A PostgreSQL catalog opened on first use and kept.
final class LazyCatalog: Sendable {
    private let location: String
    private let opened = Mutex<Catalog?>(nil)

    init(_ location: String) { self.location = location }

    func catalog() throws(CatalogError) -> Catalog {
        try opened.withLock { (opened: inout Catalog?) throws(CatalogError) -> Catalog in
            if let catalog = opened { return catalog }
            let catalog = try Catalog(path: location)
            opened = catalog
            return catalog
        }
    }
}

/// A step table the catalog keeps, read a row at a time.
struct KeptSteps: StepRecordSource {
    let access: Access
    let fileId: Int64
    /// The generation of the bytes the table was made from: a table made again meanwhile (for
    /// newer bytes) is not read row by row into this one.
    let generation: Int
    let runId: String
    let stepCount: Int
    let digestsChecked: Int
    let digestMismatches: Int

    func record(at position: Int) throws -> StepRecord? {
        var found: StepRecord?
        try access.query(
            "SELECT step, has_problem, record FROM steps WHERE file_id = ? AND ordinal = ?\(Self.ofThisTable)",
            [.integer(fileId), .integer(Int64(position)), .integer(fileId), .integer(Int64(generation))]
        ) {
            row in
            guard let json = row.blob(2).flatMap({ try? JSONParser.parse($0) }) else { return }
            found = StepRecord(step: row.int(0), hasProblem: row.int(1) != 0, runId: runId, storedJSON: json)
        }
        return found
    }

    /// The condition that the rows are still of this table (`step_logs` at its generation).
    static let ofThisTable = " AND EXISTS (SELECT 1 FROM step_logs t WHERE t.file_id = ? AND t.generation = ?)"

    func position(ofStep step: Int) throws -> Int? {
        try access.int(
            "SELECT ordinal FROM steps WHERE file_id = ? AND step = ?\(Self.ofThisTable) ORDER BY ordinal LIMIT 1",
            [.integer(fileId), .integer(Int64(step)), .integer(fileId), .integer(Int64(generation))])
    }

    func problem(after position: Int) throws -> Int? {
        try access.int(
            "SELECT ordinal FROM steps WHERE file_id = ? AND ordinal > ? AND has_problem = 1\(Self.ofThisTable) ORDER BY ordinal LIMIT 1",
            [.integer(fileId), .integer(Int64(position)), .integer(fileId), .integer(Int64(generation))])
    }
}
