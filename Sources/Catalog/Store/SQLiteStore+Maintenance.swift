import Foundation
import GRDB
import TraceCore

extension SQLiteStore {
    /// `Catalog.copySuites(from:)`: every suite run and its results from the SQLite catalog at
    /// `other`, the columns both have, in one transaction.
    func copySuites(from other: String) throws(CatalogError) -> Int {
        do {
            // ATTACH cannot run inside a transaction.
            return try pool.writeWithoutTransaction { db in
                try db.execute(sql: "ATTACH DATABASE ? AS old", arguments: [other])
                defer { try? db.execute(sql: "DETACH DATABASE old") }
                try db.inTransaction {
                    for table in ["suite_runs", "case_results", "eval_results"] {
                        let theirs = Set(try Row.fetchAll(db, sql: "PRAGMA old.table_info(\(table))").map { $0["name"] as String })
                        let columns = try Row.fetchAll(db, sql: "PRAGMA main.table_info(\(table))").map { $0["name"] as String }
                            .filter(theirs.contains).map { "\"\($0)\"" }.joined(separator: ", ")
                        try db.execute(sql: "INSERT INTO main.\(table) (\(columns)) SELECT \(columns) FROM old.\(table)")
                    }
                    return .commit
                }
                return try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM main.suite_runs") ?? 0
            }
        } catch {
            let described = SQLiteStore.describe(error, path: other)
            throw CatalogError(
                .historyUnreadable,
                "the suite history of the catalog at \(other) cannot be read (\(described.message)), so it was not rebuilt: nothing was changed",
                location: SourceLocation(path: other),
                hint: "copy the file somewhere safe; then the rebuild can go on without that history if you tell it to")
        }
    }

    /// Folds the write-ahead log into the database file and empties it.
    func checkpoint() throws(CatalogError) {
        try writeWithoutTransaction { db in
            guard let result = try Row.fetchOne(db, sql: "PRAGMA wal_checkpoint(TRUNCATE)"), (result[0] as Int?) == 0 else {
                throw CatalogError(.queryFailed, "the catalog at \(path) could not fold its write-ahead log into the file (it is busy)")
            }
        }
    }

    /// `Catalog.look(at:)`: what a file at `path` holds before a rebuild replaces it.
    static func look(at path: String) throws(CatalogError) -> OldCatalog {
        let location = SourceLocation(path: path)
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return OldCatalog() }
        if isDirectory.boolValue {
            throw CatalogError(.cannotOpen, "the catalog path \(path) is a directory", location: location)
        }
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw CatalogError(.cannotOpen, "cannot read \(path) to see whether it is a catalog", location: location)
        }
        let header = [UInt8]((try? handle.read(upToCount: 100)) ?? Data())
        try? handle.close()
        if header.isEmpty { return OldCatalog() }
        guard header.starts(with: SQLiteStore.sqliteMagic) else { throw OldCatalog.notACatalog(path, "it is not a SQLite database") }
        var found = OldCatalog()
        do {
            let queue = try SQLiteStore.readOnlyQueue(path)
            defer { try? queue.close() }
            try queue.read { db in
                let version = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
                let tables = Set(try String.fetchAll(db, sql: "SELECT name FROM sqlite_schema WHERE type = 'table'"))
                if version == 0 && tables.isEmpty { return }
                guard version > 0, tables.isSuperset(of: ["logs", "suite_runs", "case_results", "eval_results"]) else {
                    throw OldCatalog.notACatalog(path, "it is a SQLite database without the catalog's tables and schema version")
                }
                found.version = version
                found.logs = try? String.fetchAll(db, sql: "SELECT path FROM logs ORDER BY path")
            }
        } catch let error as CatalogError {
            throw error
        } catch {
            // SQLite cannot read it: a damaged catalog when its header names a schema version.
            let headerVersion = header.count >= 64 ? header[60..<64].reduce(0) { $0 << 8 | Int($1) } : 0
            guard headerVersion > 0 else {
                throw OldCatalog.notACatalog(path, "SQLite cannot read it, and its header names no schema version")
            }
            found = OldCatalog(version: headerVersion)
        }
        return found
    }
}
