import Foundation
import GRDB
public import TraceCore

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

extension Catalog {
    /// Rows whose log changed or vanished since it was indexed (nothing is read but the tails).
    public func check() throws(CatalogError) -> (checked: Int, stale: [StaleLog]) {
        let known = try read { db in
            try Row.fetchAll(
                db, sql: "SELECT path, size, mtime_ns, tail_offset, tail_end, tail_hash FROM logs WHERE status <> 'vanished' ORDER BY path")
        }
        var stale: [StaleLog] = []
        for row in known {
            let path: String = row["path"]
            guard let stamp = FileStamp(path: path) else {
                stale.append(StaleLog(path: path, reason: .vanished))
                continue
            }
            let identity = LogIdentity(
                stamp: FileStamp(size: row["size"], mtimeNs: row["mtime_ns"]), tailOffset: row["tail_offset"], tailEnd: row["tail_end"],
                tailHash: row["tail_hash"])
            if !identity.matches(path, now: stamp) { stale.append(StaleLog(path: path, reason: .changed)) }
        }
        return (known.count, stale)
    }

    /// Builds the catalog at `path` again from the logs: those `paths` name, or (when none
    /// are given) every log the old catalog knows. Suite runs and their results — records of
    /// what ran, which the logs do not hold — are carried over from the old catalog when it can
    /// be read. The new catalog is written beside the old one and renamed over it, so an
    /// interrupted rebuild leaves the old one as it was. Run it when nothing else uses the
    /// catalog.
    public static func rebuild(
        at path: String, from paths: [String] = [], jobs: Int = 1,
        progress: (_ log: IndexedLog, _ done: Int, _ total: Int) -> Void = { _, _, _ in }
    ) throws(CatalogError) -> (summary: IndexSummary, suiteRuns: Int) {
        var sources = paths
        var old: Catalog?
        if FileManager.default.fileExists(atPath: path) {
            old = try? Catalog(path: path, readOnly: true)
        }
        if sources.isEmpty {
            guard let old else {
                throw CatalogError(
                    .cannotOpen, "the catalog at \(path) cannot be read, so it cannot say which logs to index",
                    location: SourceLocation(path: path), hint: "name the logs or directories to rebuild it from")
            }
            sources = try old.read { db in try String.fetchAll(db, sql: "SELECT path FROM logs ORDER BY path") }
                .filter { FileManager.default.fileExists(atPath: $0) }
        }
        let temporary = path + ".rebuild-\(ProcessInfo.processInfo.processIdentifier)"
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: temporary + suffix) }
        var suiteRuns = 0
        let summary: IndexSummary
        do {
            let fresh = try Catalog(path: temporary)
            summary = sources.isEmpty ? IndexSummary() : try fresh.index(paths: sources, jobs: jobs, progress: progress)
            if let old {
                suiteRuns = try fresh.copySuites(from: old.path)
                try old.close()
            }
            try fresh.checkpoint()
            try fresh.close()
        } catch {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: temporary + suffix) }
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
        return (summary, suiteRuns)
    }

    /// Copies every suite run and its results from the catalog at `other`; returns how many.
    func copySuites(from other: String) throws(CatalogError) -> Int {
        do {
            // ATTACH cannot run inside a transaction.
            return try pool.writeWithoutTransaction { db in
                try db.execute(sql: "ATTACH DATABASE ? AS old", arguments: [other])
                defer { try? db.execute(sql: "DETACH DATABASE old") }
                try db.inTransaction {
                    for table in ["suite_runs", "case_results", "eval_results"] {
                        try db.execute(sql: "INSERT INTO main.\(table) SELECT * FROM old.\(table)")
                    }
                    return .commit
                }
                return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM main.suite_runs") ?? 0
            }
        } catch {
            throw Self.describe(error, path: other)
        }
    }

    /// Folds the write-ahead log into the database file and empties it.
    public func checkpoint() throws(CatalogError) {
        do {
            try pool.writeWithoutTransaction { db in
                guard let result = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)"), (result[0] as Int?) == 0 else {
                    throw CatalogError(.queryFailed, "the catalog at \(path) could not fold its write-ahead log into the file (it is busy)")
                }
            }
        } catch let error as CatalogError {
            throw error
        } catch {
            throw Self.describe(error, path: path)
        }
    }

    /// Closes the catalog's connections (a checkpoint folds the write-ahead log into the file).
    public func close() throws(CatalogError) {
        do {
            try pool.close()
        } catch {
            throw Self.describe(error, path: path)
        }
    }
}
