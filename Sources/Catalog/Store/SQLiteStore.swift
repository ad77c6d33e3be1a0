import ConfigFile
import Foundation
import GRDB
import GRDBSQLite
import TraceCore
import TraceLog

/// The catalog in a SQLite file beside the logs, the default: WAL, a busy timeout, and write
/// transactions that take the write lock when they begin, so several processes can use one
/// file at once (`run --jobs N`, CI shards on one machine, an `index` beside a `run`).
final class SQLiteStore: CatalogStore {
    /// The catalog file.
    let path: String
    let pool: DatabasePool
    /// Held shared while the catalog is open for writing (`CatalogFileLock`): a rebuild does
    /// not replace the file under it.
    private let fileLock: CatalogFileLock?

    var dialect: SQLDialect { .sqlite }
    var location: String { path }

    /// Opens the catalog at `path`, creating it (and its directory) on first use and migrating
    /// an older schema. `readOnly` opens an existing catalog with a connection that refuses
    /// every write.
    init(path: String, readOnly: Bool) throws(CatalogError) {
        self.path = path
        let location = SourceLocation(path: path)
        let fileManager = FileManager.default
        var isDirectory: ObjCBool = false
        if fileManager.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw CatalogError(.cannotOpen, "the catalog path \(path) is a directory", location: location)
        }
        if readOnly, !fileManager.fileExists(atPath: path) {
            throw CatalogError(
                .cannotOpen, "there is no catalog at \(path)", location: location,
                hint: "index some logs first; the catalog is created then")
        }
        if !readOnly {
            do {
                try fileManager.createDirectory(
                    atPath: (path as NSString).deletingLastPathComponent.isEmpty ? "." : (path as NSString).deletingLastPathComponent,
                    withIntermediateDirectories: true)
            } catch {
                throw CatalogError(
                    .cannotOpen, "cannot create the catalog's directory for \(path): \(FileProblem.reason(of: error))", location: location)
            }
        }
        var configuration = Configuration()
        configuration.busyMode = .timeout(Catalog.busyTimeout)
        configuration.readonly = readOnly
        configuration.label = "agent-eval catalog"
        configuration.prepareDatabase { db in
            // The catalog is derived data: a crash may lose the last transactions, never the
            // file's consistency (WAL).
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        do {
            // Look before opening for real: opening a pool switches a database to WAL, and a
            // file that is not a catalog of a version this build knows must stay as it is.
            if fileManager.fileExists(atPath: path) { try Self.probe(path) }
            // Before the pool opens the file: a connection made while a rebuild runs would be
            // to the file the rebuild is about to replace.
            fileLock = readOnly ? nil : try CatalogFileLock.forWriting(path)
            pool = try DatabasePool(path: path, configuration: configuration)
            try Self.migrate(pool, path: path, readOnly: readOnly)
        } catch let error as CatalogError {
            throw error
        } catch {
            throw Self.describe(error, path: path)
        }
    }

    /// One read-only connection to the file at `path` (nothing migrated, nothing switched to
    /// WAL), for looking at a file before it is opened for real or replaced.
    static func readOnlyQueue(_ path: String) throws -> DatabaseQueue {
        var configuration = Configuration()
        configuration.readonly = true
        configuration.busyMode = .timeout(Catalog.busyTimeout)
        return try DatabaseQueue(path: path, configuration: configuration)
    }

    /// Checks, through a read-only connection, that the file at `path` is a SQLite database
    /// that is empty or one of our catalogs of a version this build can read or migrate.
    private static func probe(_ path: String) throws {
        if isCurrentWALCatalog(path) { return }
        let queue = try readOnlyQueue(path)
        defer { try? queue.close() }
        try queue.read { db in
            let version = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
            if version > CatalogSchema.version { throw newerSchema(version, path: path) }
            if version == 0, try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sqlite_schema") ?? 0 > 0 { throw foreign(path) }
        }
    }

    /// Whether the file's header already says what the probe would find: a SQLite database in
    /// WAL mode with this build's schema version (`user_version`). Opening the pool changes
    /// nothing in such a file, so the probe's own connection is skipped (it cost a millisecond
    /// of every `agent-eval run`); the version is read again through the pool.
    private static func isCurrentWALCatalog(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        guard let header = try? handle.read(upToCount: 100), header.count == 100 else { return false }
        let bytes = [UInt8](header)
        let userVersion = bytes[60..<64].reduce(0) { $0 << 8 | Int($1) }
        // "SQLite format 3\0", then the file format write and read versions: 2 is WAL.
        return bytes.starts(with: sqliteMagic) && bytes[18] == 2 && bytes[19] == 2
            && userVersion == CatalogSchema.version
    }

    private static func foreign(_ path: String) -> CatalogError {
        CatalogError(
            .notACatalog, "\(path) is a SQLite database, but not an agent-eval catalog (it has tables and no schema version)",
            location: SourceLocation(path: path), hint: "point the catalog option at another file")
    }

    /// Brings the schema up to `CatalogSchema.version`, one transaction per migration, under
    /// the write lock (two processes creating one catalog at once apply each migration once).
    private static func migrate(_ pool: DatabasePool, path: String, readOnly: Bool) throws {
        let current = try pool.read { db in try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0 }
        if current > CatalogSchema.version { throw newerSchema(current, path: path) }
        if current == CatalogSchema.version { return }
        if readOnly {
            throw CatalogError(
                .cannotOpen, "the catalog at \(path) has schema version \(current); this agent-eval needs \(CatalogSchema.version)",
                location: SourceLocation(path: path), hint: "open it once for writing (index some logs) to migrate it")
        }
        try pool.writeWithoutTransaction { db in
            try db.inTransaction(.immediate) {
                // Read again under the write lock: another process may have migrated meanwhile.
                let version = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
                if version > CatalogSchema.version { throw newerSchema(version, path: path) }
                // A file that holds tables but no version is not ours.
                if version == 0, try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sqlite_schema") ?? 0 > 0 { throw foreign(path) }
                for number in version..<CatalogSchema.version {
                    try db.execute(sql: CatalogSchema.migrations[number])
                }
                try db.execute(sql: "PRAGMA user_version = \(CatalogSchema.version)")
                return .commit
            }
        }
    }

    private static func newerSchema(_ version: Int, path: String) -> CatalogError {
        CatalogError(
            .newerSchema,
            "the catalog at \(path) has schema version \(version), newer than this agent-eval knows (\(CatalogSchema.version))",
            location: SourceLocation(path: path), hint: "use the newer agent-eval that wrote it, or " + CatalogError.rebuildHint)
    }

    /// A SQLite error as the catalog's error, with the rebuild hint where the file itself is
    /// the problem.
    static func describe(_ error: any Error, path: String) -> CatalogError {
        let location = SourceLocation(path: path)
        guard let error = error as? DatabaseError else {
            return CatalogError(.queryFailed, "the catalog at \(path) failed: \(FileProblem.reason(of: error))", location: location)
        }
        let detail = error.message ?? "\(error.resultCode)"
        switch error.resultCode.primaryResultCode {
        case .SQLITE_NOTADB where hasSQLiteHeader(path):
            return CatalogError(
                .corrupt, "the catalog at \(path) is damaged (\(detail))", location: location, hint: CatalogError.rebuildHint)
        case .SQLITE_NOTADB:
            // Someone's file, not damage of ours: rebuilding over it would destroy it.
            return CatalogError(
                .notACatalog, "\(path) is not a SQLite database (\(detail))", location: location,
                hint: "point the catalog option at another file: agent-eval neither reads nor replaces a file that is not its catalog")
        case .SQLITE_CORRUPT:
            return CatalogError(
                .corrupt, "the catalog at \(path) is damaged (\(detail))", location: location, hint: CatalogError.rebuildHint)
        case .SQLITE_CANTOPEN, .SQLITE_PERM:
            return CatalogError(.cannotOpen, "cannot open the catalog at \(path) (\(detail))", location: location)
        case .SQLITE_READONLY where error.extendedResultCode == .SQLITE_READONLY:
            return CatalogError(.readOnly, "the catalog refuses writes here (\(detail))", location: location)
        case .SQLITE_BUSY where error.extendedResultCode == .SQLITE_BUSY_SNAPSHOT:
            // Returned at once, not after the wait: a read turned write found a newer commit.
            return CatalogError(
                .queryFailed, "another process wrote to the catalog at \(path) while this one was reading it (\(detail))",
                location: location, hint: "run the command again: it reads the catalog as it is now")
        case .SQLITE_BUSY where error.extendedResultCode == .SQLITE_BUSY_RECOVERY:
            return CatalogError(
                .queryFailed, "another process is recovering the catalog at \(path) after a crash (\(detail))", location: location,
                hint: "run the command again in a moment")
        case .SQLITE_BUSY:
            return CatalogError(
                .queryFailed, "the catalog at \(path) stayed locked by another process for \(Int(Catalog.busyTimeout)) s (\(detail))",
                location: location, hint: "wait for the other agent-eval to finish, or use another catalog")
        default:
            return CatalogError(.queryFailed, "the catalog at \(path) failed: \(detail)", location: location)
        }
    }

    /// Whether the file at `path` begins as a SQLite database does (a damaged catalog still
    /// does; a log or a text file does not).
    static func hasSQLiteHeader(_ path: String) -> Bool {
        guard let handle = FileHandle(forReadingAtPath: path) else { return false }
        defer { try? handle.close() }
        guard let header = try? handle.read(upToCount: 16) else { return false }
        return [UInt8](header) == sqliteMagic
    }

    /// The first 16 bytes of every SQLite database file.
    static let sqliteMagic = Array("SQLite format 3\0".utf8)

    /// Runs `body` in a write transaction that takes the write lock at once (so the busy
    /// timeout applies, instead of failing when a read turns into a write).
    func write<T>(_ body: (any SQLConnection) throws -> T) throws(CatalogError) -> T {
        do {
            // GRDB begins write transactions IMMEDIATE on a writable connection.
            return try pool.write { db in try body(SQLiteConnection(db: db)) }
        } catch let error as CatalogError {
            throw error
        } catch {
            throw describe(error)
        }
    }

    /// `write`, for a body that may find one log's rows refused (`StoreFailure`): then nothing
    /// it wrote is kept, and the failure is returned for the caller to record that log and
    /// write the others again.
    func writeRollingBack<T>(_ body: (any SQLConnection) throws -> T) throws(CatalogError) -> Result<T, Catalog.StoreFailure> {
        do {
            return try pool.writeWithoutTransaction { db in
                var outcome: Result<T, Catalog.StoreFailure>?
                try db.inTransaction(.immediate) {
                    do {
                        outcome = .success(try body(SQLiteConnection(db: db)))
                        return .commit
                    } catch let failure as Catalog.StoreFailure {
                        outcome = .failure(failure)
                        return .rollback
                    }
                }
                guard let outcome else { throw CatalogError(.queryFailed, "the catalog's write at \(path) ended without a result") }
                return outcome
            }
        } catch let error as CatalogError {
            throw error
        } catch {
            throw describe(error)
        }
    }

    /// Lowers SQLite's limit on the length of one value (by default 1,000,000,000 bytes) on the
    /// writing connection, so that a test reaches it with a log of kilobytes: what SQLite does
    /// then is what it does at its default limit with a gigabyte.
    func limitValueLength(to bytes: Int32) {
        pool.writeWithoutTransaction { db in _ = sqlite3_limit(db.sqliteConnection, SQLITE_LIMIT_LENGTH, bytes) }
    }

    /// Runs `body` on a read-only snapshot.
    func read<T>(_ body: (any SQLConnection) throws -> T) throws(CatalogError) -> T {
        do {
            return try pool.read { db in try body(SQLiteConnection(db: db)) }
        } catch let error as CatalogError {
            throw error
        } catch {
            throw describe(error)
        }
    }

    func describe(_ error: any Error) -> CatalogError { Self.describe(error, path: path) }

    /// Runs `body` on a read-only snapshot, with GRDB's connection itself (`sql`'s statement
    /// checks, its deadline).
    func readDatabase<T>(_ body: (Database) throws -> T) throws(CatalogError) -> T {
        do {
            return try pool.read(body)
        } catch let error as CatalogError {
            throw error
        } catch {
            throw describe(error)
        }
    }

    /// Runs `body` on the writing connection outside any transaction (ATTACH, checkpoints).
    func writeWithoutTransaction<T>(_ body: (Database) throws -> T) throws(CatalogError) -> T {
        do {
            return try pool.writeWithoutTransaction(body)
        } catch let error as CatalogError {
            throw error
        } catch {
            throw describe(error)
        }
    }

    /// Whether SQLite refused a statement for the values it was given, rather than because the
    /// catalog cannot be written.
    func isAboutTheRows(_ error: any Error) -> Bool {
        guard let error = error as? DatabaseError else { return false }
        return [.SQLITE_TOOBIG, .SQLITE_CONSTRAINT, .SQLITE_MISMATCH, .SQLITE_RANGE].contains(error.resultCode.primaryResultCode)
    }

    func storeProblem(_ error: any Error) -> String {
        let detail = (error as? DatabaseError).map { $0.message ?? "\($0.resultCode)" } ?? "\(error)"
        return "the catalog could not store what was read from this log (SQLite: \(detail))"
    }

    func close() throws(CatalogError) {
        do {
            try pool.close()
        } catch {
            throw describe(error)
        }
        fileLock?.release()
    }
}
