import Foundation
import GRDB
import TestSupport
import Testing

@testable import Catalog

/// SQLite answers "busy" in more than one way; the catalog's message says which happened, so
/// that "locked for 30 s" is only said of a lock that was waited for.
@Suite("The catalog's busy errors")
struct CatalogBusyTests {
    @Test("a read turned write that finds a newer commit is told to run again, not that the catalog stayed locked for 30 s")
    func staleSnapshot() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("catalog.sqlite")
            _ = try Catalog(path: path)  // a real catalog, in WAL mode
            let reader = try DatabaseQueue(path: path)
            let writer = try DatabaseQueue(path: path)
            var caught: (any Error)?
            try reader.inDatabase { db in
                try db.execute(sql: "BEGIN DEFERRED")
                _ = try Int.fetchOne(db, sql: "SELECT count(*) FROM logs")
                // Another connection commits after this one's snapshot was taken.
                try writer.write { try $0.execute(sql: "CREATE TABLE other_process (x)") }
                do {
                    try db.execute(sql: "CREATE TABLE this_process (x)")
                } catch {
                    caught = error
                }
                try db.execute(sql: "ROLLBACK")
            }
            let error = try #require(caught as? DatabaseError)
            #expect(error.extendedResultCode == .SQLITE_BUSY_SNAPSHOT)
            let described = SQLiteStore.describe(error, path: path)
            #expect(described.message.hasPrefix("another process wrote to the catalog at \(path) while this one was reading it"))
            #expect(described.hint == "run the command again: it reads the catalog as it is now")

            // A lock waited for until the timeout keeps its message.
            let timedOut = SQLiteStore.describe(DatabaseError(resultCode: .SQLITE_BUSY, message: "database is locked"), path: path)
            #expect(timedOut.message.contains("stayed locked by another process for \(Int(Catalog.busyTimeout)) s"))
        }
    }
}
