import GRDB
import GRDBSQLite
import Synchronization

/// One read-only SQLite connection to a catalog file, through the C API, opened on first use
/// and kept: GRDB's read-only `DatabaseQueue` took 0.56 ms to open (its own setup queries), this
/// about a tenth of that, on the path `replay --step N` takes.
final class ReadOnlyConnection: Sendable {
    private struct Handle: @unchecked Sendable {
        /// Used only under the connection's mutex.
        var pointer: OpaquePointer?
    }

    private let handle = Mutex(Handle(pointer: nil))

    deinit {
        handle.withLock { if let pointer = $0.pointer { sqlite3_close_v2(pointer) } }
    }

    func query(path: String, _ sql: String, _ arguments: [CatalogValue], _ body: (any SQLRowView) throws -> Void) throws {
        try handle.withLock { handle in
            if handle.pointer == nil {
                var opened: OpaquePointer?
                let code = sqlite3_open_v2(path, &opened, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX, nil)
                guard code == SQLITE_OK, let opened else {
                    sqlite3_close_v2(opened)
                    throw CatalogError(.cannotOpen, "cannot open the catalog \(path): \(String(cString: sqlite3_errstr(code)))")
                }
                sqlite3_busy_timeout(opened, CInt(Catalog.busyTimeout * 1000))
                handle.pointer = opened
            }
            let database = handle.pointer
            var statement: OpaquePointer?
            guard sqlite3_prepare_v2(database, sql, -1, &statement, nil) == SQLITE_OK, let statement else {
                throw CatalogError(.cannotOpen, "cannot read the catalog \(path): \(String(cString: sqlite3_errmsg(database)))")
            }
            defer { sqlite3_finalize(statement) }
            for (index, argument) in arguments.enumerated() {
                let position = CInt(index + 1)
                switch argument {
                case .null: sqlite3_bind_null(statement, position)
                case .integer(let value): sqlite3_bind_int64(statement, position, value)
                case .real(let value): sqlite3_bind_double(statement, position, value)
                case .text(let value): sqlite3_bind_text(statement, position, value, -1, BoundRow.transient)
                case .blob(let bytes): sqlite3_bind_blob(statement, position, bytes, CInt(bytes.count), BoundRow.transient)
                }
            }
            while true {
                let code = sqlite3_step(statement)
                if code == SQLITE_ROW {
                    try body(ResultRow(handle: statement))
                } else if code == SQLITE_DONE {
                    return
                } else {
                    throw CatalogError(.cannotOpen, "cannot read the catalog \(path): \(String(cString: sqlite3_errmsg(database)))")
                }
            }
        }
    }
}
