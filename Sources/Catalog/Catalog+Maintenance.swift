import Foundation
public import TraceCore
import TraceLog

/// A row whose log is not what the catalog says any more.
public struct StaleLog: Sendable, Hashable {
    public enum Reason: String, Sendable {
        /// Size, modification time or the tail's bytes differ: index it again.
        case changed
        /// The file is gone (and the row does not say so yet).
        case vanished
    }

    public var path: String
    public var reason: Reason

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("path", path)
        object.set("reason", reason.rawValue)
        return object.json
    }
}

/// Whether the file of an indexed run still holds the bytes its row was read from, as the
/// catalog found when it listed the row (`RunRow.file`): a row describes the log as it was
/// indexed, and a log edited, replaced or removed since is not what the row says.
public enum IndexedFileState: String, Sendable, Hashable {
    /// The file holds the bytes the row was read from.
    case asIndexed = "as_indexed"
    /// The file's bytes differ from those the row was read from: the row is of older bytes
    /// (`agent-eval index` reads the log again). Also a row that says `vanished` of a file that
    /// is there.
    case changed
    /// The file holds the bytes the row was read from and more after them (a run still being
    /// written, or resumed): the row holds what the log had then (`index` reads what was added).
    case grew
    /// No file at the row's path.
    case vanished
    /// The row was indexed last on another machine of a shared catalog (`seen_on`), whose
    /// files are not looked at here.
    case elsewhere
}

extension Catalog {
    /// What SQLite's `PRAGMA quick_check` finds wrong in the catalog's file (its pages, its
    /// indexes); empty when nothing, and always on PostgreSQL, whose server keeps its own pages.
    public func damage() throws(CatalogError) -> [String] {
        guard sqlite != nil else { return [] }
        return try read { db in try db.column("PRAGMA quick_check", as: String.self) }.filter { $0 != "ok" }
    }

    /// Rows whose log changed or vanished since it was indexed (nothing is read but the tails,
    /// and the whole file of a log whose stamp changed but not its size, to see whether its
    /// bytes did: a checkout gives a log a new modification time, not new content);
    /// in a catalog many machines share, of the logs this machine saw last (`seenHere`).
    public func check() throws(CatalogError) -> (checked: Int, stale: [StaleLog]) {
        let known = try read { db in
            let seen = Self.seenHere(db)
            var rows: [(path: String, file: LogFileRecord, isCurrent: Bool)] = []
            try db.run(
                """
                SELECT l.path, l.generation, \(LogFileRecord.columns) FROM logs l JOIN log_files f ON f.file_id = l.file_id
                WHERE l.status <> 'vanished'\(seen.condition) ORDER BY l.path
                """,
                bind: { $0.bind(all: seen.arguments) }
            ) { row in
                let file = LogFileRecord(row, from: 2)
                rows.append((row.text(0), file, row.int(1) == file.generation))
            }
            return rows
        }
        var stale: [StaleLog] = []
        for (path, file, isCurrent) in known {
            switch Self.fileState(path: path, file: file, isCurrent: isCurrent) {
            case .vanished: stale.append(StaleLog(path: path, reason: .vanished))
            case .changed, .grew: stale.append(StaleLog(path: path, reason: .changed))
            case .asIndexed, .elsewhere: break
            }
        }
        return (known.count, stale)
    }

    /// How the file at `path` stands against the record of the bytes a row was read from
    /// (`file`, nil when the row names none; `isCurrent`: the row was read from the record's
    /// generation of the file). The same bytes under a new stamp (a checkout) are as indexed:
    /// `index` takes the stamp. A row of an older generation of its file (another reader found
    /// other bytes since) is not. The one comparison `check` and `runs` make.
    static func fileState(path: String, file: LogFileRecord?, isCurrent: Bool) -> IndexedFileState {
        guard let stamp = FileStamp(path: path) else { return .vanished }
        guard let file, isCurrent else { return .changed }
        if file.matches(path, now: stamp)
            || StoredLog.holdsBytes(file.contentHash, size: file.identity.stamp.size, path: path, now: stamp)
        {
            return .asIndexed
        }
        return file.identity.grew(path, now: stamp) ? .grew : .changed
    }

    /// Gives every indexed run the set of tools its `calls` rows show executed (`logs.tool_set`),
    /// as migration 14 did. `index` keeps each run's set itself; this is for rows put into the
    /// catalog by SQL (the benchmarks' million copied runs, tests' loaded rows).
    public func deriveToolSets() throws(CatalogError) {
        try write { db in
            let statements =
                db.dialect == .postgres ? PostgresSchema.toolSetsFromCallsStatements : CatalogSchema.toolSetsFromCallsStatements
            for statement in statements { try db.execute(statement) }
        }
    }

    /// Builds the catalog at `path` again from the logs: those `paths` name, or (when none
    /// are given) every log the old catalog knows. Suite runs and their results — records of
    /// what ran, which the logs do not hold — are carried over from the old catalog, whatever
    /// schema version it has (older ones are read as they are, never migrated in place: the
    /// columns both versions have are copied, later columns take their defaults). The new
    /// catalog is written beside the old one and renamed over it, so an interrupted rebuild
    /// leaves the old one as it was. It refuses, changing nothing, while another process has
    /// the catalog open for writing (`CatalogFileLock`), and writers wait for it to finish.
    ///
    /// It refuses, changing nothing, to replace a file that is not a catalog (a log, a text
    /// file, another program's SQLite database), and a damaged catalog whose suite history
    /// cannot be read unless `discardingUnreadableHistory` says to go on without it. A missing
    /// or empty file is simply created.
    public static func rebuild(
        at path: String, from paths: [String] = [], jobs: Int = 1, memberLimit: Int = Catalog.defaultMemberLimit,
        discardingUnreadableHistory: Bool = false,
        progress: (_ log: IndexedLog, _ done: Int, _ total: Int) -> Void = { _, _, _ in }
    ) throws(CatalogError) -> RebuildOutcome {
        if PostgresStore.isURL(path) {
            return try rebuildInPlace(at: path, from: paths, jobs: jobs, memberLimit: memberLimit, progress: progress)
        }
        // Looked at first, so that a file that is not a catalog is refused with nothing made
        // beside it; then the lock, held until the new file has the name (no other process
        // writes to the old one meanwhile: its writes would go to a file without a name once
        // the new one is renamed over it); then looked at again, as it is now.
        _ = try OldCatalog.look(at: path)
        let lock = try CatalogFileLock.forReplacing(path)
        defer { lock.release() }
        let old = try OldCatalog.look(at: path)
        var outcome = RebuildOutcome()
        var sources = paths
        if sources.isEmpty {
            guard let known = old.logs else {
                throw CatalogError(
                    .cannotOpen, "the catalog at \(path) cannot be read, so it cannot say which logs to index",
                    location: SourceLocation(path: path), hint: "name the logs or directories to rebuild it from")
            }
            sources = known.filter { FileManager.default.fileExists(atPath: $0) }
        }
        outcome.fromSchemaVersion = old.version
        let temporary = path + ".rebuild-\(ProcessInfo.processInfo.processIdentifier)"
        // The new file's own lock file goes with it: the catalog's is the old one's, kept.
        let temporaryFiles = ["", "-wal", "-shm", ".lock"].map { temporary + $0 }
        for file in temporaryFiles { try? FileManager.default.removeItem(atPath: file) }
        defer { try? FileManager.default.removeItem(atPath: CatalogFileLock.path(of: temporary)) }
        do {
            let fresh = try Catalog(path: temporary)
            outcome.summary =
                sources.isEmpty ? IndexSummary() : try fresh.index(paths: sources, jobs: jobs, memberLimit: memberLimit, progress: progress)
            if old.version != nil {
                do {
                    outcome.suiteRuns = try fresh.copySuites(from: path)
                } catch  where discardingUnreadableHistory {
                    outcome.discardedHistory = error.message
                }
            }
            try fresh.checkpoint()
            try fresh.close()
        } catch {
            for file in temporaryFiles { try? FileManager.default.removeItem(atPath: file) }
            throw error
        }
        // Everything is in the new file now; the old file's write-ahead log must not be applied to it.
        for suffix in ["-wal", "-shm"] {
            try? FileManager.default.removeItem(atPath: temporary + suffix)
            try? FileManager.default.removeItem(atPath: path + suffix)
        }
        guard rename(temporary, path) == 0 else {
            throw CatalogError(.cannotOpen, "cannot move the rebuilt catalog \(temporary) to \(path)", location: SourceLocation(path: path))
        }
        return outcome
    }

    /// Copies every suite run and its results from the catalog at `other`, of this schema
    /// version or another: the columns both have, by name (a column added since takes its
    /// default, NULL or `[]`). Returns how many suite runs there are. A failure is thrown, never
    /// passed over: the history exists nowhere else. All or nothing (one transaction).
    func copySuites(from other: String) throws(CatalogError) -> Int {
        guard let sqlite else { throw CatalogError(.queryFailed, "only a SQLite catalog copies suites from a file") }
        return try sqlite.copySuites(from: other)
    }

    /// Folds the write-ahead log into the database file and empties it.
    /// Folds the write-ahead log into the database file and empties it; nothing to do on
    /// PostgreSQL, whose server keeps its own.
    public func checkpoint() throws(CatalogError) {
        try sqlite?.checkpoint()
    }

    /// Closes the catalog's connections (a checkpoint folds the write-ahead log into the file).
    public func close() throws(CatalogError) {
        try store.close()
    }

    /// `rebuild` of a PostgreSQL catalog, shared by many machines: the rows of the logs being
    /// indexed again here (those `paths` name, or every log the catalog knows that this machine
    /// has) are deleted in one transaction — their runs, calls, facts, check results and step
    /// tables — and those logs indexed again. Rows of logs this machine does not have, and the
    /// suite history, stay. The paths are resolved first, so a path that matches nothing
    /// changes nothing. Unlike a file's, the rebuild is not all or nothing: one interrupted
    /// after the deletion leaves the logs it had not indexed yet out until `index` runs.
    private static func rebuildInPlace(
        at url: String, from paths: [String], jobs: Int, memberLimit: Int,
        progress: (_ log: IndexedLog, _ done: Int, _ total: Int) -> Void
    ) throws(CatalogError) -> RebuildOutcome {
        let catalog = try Catalog(path: url)
        defer { try? catalog.close() }
        var outcome = RebuildOutcome()
        outcome.fromSchemaVersion = PostgresSchema.version
        var sources = paths.isEmpty ? [] : try findLogs(paths)
        if paths.isEmpty {
            sources = try catalog.read { db in try db.column("SELECT path FROM logs ORDER BY path", as: String.self) }
                .filter { FileManager.default.fileExists(atPath: $0) }
        }
        outcome.suiteRuns = try catalog.write { db in
            // A few hundred paths a statement: each statement is a round trip to the server (a
            // statement per path and table took 1.7 s of a 3.8 s rebuild of 1,000 logs).
            for chunk in SQLList.chunks(of: sources) {
                let paths: [(any SQLArgument)?] = chunk.map { $0 }
                let list = "(" + SQLList.placeholders(chunk.count) + ")"
                // The runs' calls and rows a statement each (a cascade deletes row by row), then
                // the files' records, and with them (`ON DELETE CASCADE`) their facts and results
                // and their step tables.
                try db.execute("DELETE FROM calls WHERE log_id IN (SELECT log_id FROM logs WHERE path IN \(list))", paths)
                try db.execute("DELETE FROM logs WHERE path IN \(list)", paths)
                try db.execute("DELETE FROM log_files WHERE path IN \(list)", paths)
            }
            return try db.value("SELECT COUNT(*) FROM suite_runs", as: Int.self) ?? 0
        }
        if !sources.isEmpty {
            outcome.summary = try catalog.index(paths: sources, jobs: jobs, memberLimit: memberLimit, progress: progress)
        }
        return outcome
    }
}

/// What `Catalog.rebuild` did.
public struct RebuildOutcome: Sendable {
    /// The logs indexed into the new catalog.
    public var summary = IndexSummary()
    /// Suite runs carried over from the old catalog.
    public var suiteRuns = 0
    /// The old catalog's schema version; nil when there was none (no file, an empty one).
    public var fromSchemaVersion: Int?
    /// The new catalog's schema version.
    public var toSchemaVersion: Int { CatalogSchema.version }
    /// Why the old catalog's suite history could not be read, when the rebuild went on
    /// without it (`discardingUnreadableHistory`).
    public var discardedHistory: String?

    public init() {}
}

/// The file at a catalog's path as `rebuild` finds it, looked at through a read-only
/// connection that migrates nothing.
struct OldCatalog {
    /// The schema version; nil when there is no catalog to carry anything from.
    var version: Int?
    /// The logs it knows; nil when it cannot say.
    var logs: [String]?

    /// Looks at `path`: nothing there (or an empty database) is no catalog; a catalog of any
    /// schema version is read for its logs (a damaged one may not say); anything else — a file
    /// that is not SQLite, a SQLite database without the catalog's tables — is refused.
    static func look(at path: String) throws(CatalogError) -> OldCatalog {
        try SQLiteStore.look(at: path)
    }

    static func notACatalog(_ path: String, _ why: String) -> CatalogError {
        CatalogError(
            .notACatalog, "\(path) is not an agent-eval catalog (\(why)), so rebuild does not replace it; nothing was changed",
            location: SourceLocation(path: path),
            hint: "give --catalog the catalog's own file, or a path where no file is yet")
    }
}
