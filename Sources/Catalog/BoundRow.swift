import GRDB
import GRDBSQLite

/// The values of one row, bound straight into a prepared statement through the SQLite C API, and
/// the statement stepped: what the catalog uses where it writes or reads a row per log or call
/// (the indexer's call rows, a suite's result rows, a suite's kept results), where building
/// GRDB's `StatementArguments` (an existential box per value) or `Row`s cost more than SQLite's
/// own work. Strings are bound from their UTF-8 bytes and copied by SQLite.
///
/// Used only inside a write transaction, on a statement that nothing else binds arguments to
/// (GRDB rebinds all of them before its own executions in any case).
struct BoundRow {
    private let handle: SQLiteStatement
    private var index: CInt = 0
    private var failure: CInt = SQLITE_OK

    /// Binds the values `bind` gives, in the statement's parameter order, and runs the statement.
    static func execute(_ statement: Statement, in db: Database, _ bind: (inout BoundRow) -> Void) throws {
        try forEachRow(statement, in: db, bind: bind) { _ in }
    }

    /// Binds the values `bind` gives and calls `body` with each row the statement returns.
    static func forEachRow(
        _ statement: Statement, in db: Database, bind: (inout BoundRow) -> Void, _ body: (ResultRow) throws -> Void
    ) throws {
        let handle = statement.sqliteStatement
        sqlite3_reset(handle)
        defer { sqlite3_reset(handle) }
        var row = BoundRow(handle: handle)
        bind(&row)
        let parameters = sqlite3_bind_parameter_count(handle)
        guard row.index == parameters else {
            throw DatabaseError(
                resultCode: .SQLITE_MISUSE, message: "bound \(row.index) values for \(parameters) parameters", sql: statement.sql)
        }
        var code = row.failure
        while code == SQLITE_OK {
            let stepped = sqlite3_step(handle)
            if stepped == SQLITE_ROW {
                try body(ResultRow(handle: handle))
            } else {
                code = stepped == SQLITE_DONE ? SQLITE_DONE : stepped
            }
        }
        guard code == SQLITE_DONE else {
            let message = db.sqliteConnection.map { String(cString: sqlite3_errmsg($0)) }
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: statement.sql)
        }
    }

    private init(handle: SQLiteStatement) {
        self.handle = handle
    }

    /// The next parameter's position.
    private mutating func advance() -> CInt {
        index += 1
        return index
    }

    /// Keeps the first failed bind's code.
    private mutating func record(_ code: CInt) {
        if failure == SQLITE_OK && code != SQLITE_OK { failure = code }
    }

    mutating func bind(_ value: Int?) {
        let position = advance()
        let code = value.map { sqlite3_bind_int64(handle, position, Int64($0)) } ?? sqlite3_bind_null(handle, position)
        record(code)
    }

    mutating func bind(_ value: Int64) {
        let position = advance()
        let code = sqlite3_bind_int64(handle, position, value)
        record(code)
    }

    mutating func bind(_ value: Double?) {
        let position = advance()
        let code = value.map { sqlite3_bind_double(handle, position, $0) } ?? sqlite3_bind_null(handle, position)
        record(code)
    }

    /// Bytes as a blob (NULL for nil; an empty blob for no bytes).
    mutating func bind(_ value: [UInt8]?) {
        let position = advance()
        let handle = handle
        guard let bytes = value else {
            record(sqlite3_bind_null(handle, position))
            return
        }
        let code = bytes.withUnsafeBytes { raw in
            sqlite3_bind_blob(handle, position, raw.baseAddress ?? UnsafeRawPointer(bitPattern: 1), CInt(raw.count), BoundRow.transient)
        }
        record(code)
    }

    mutating func bind(_ value: String?) {
        let position = advance()
        let handle = handle
        guard var text = value else {
            record(sqlite3_bind_null(handle, position))
            return
        }
        let code = text.withUTF8 { bytes in
            // An empty string still needs a pointer: SQLite binds NULL for a null one.
            guard let base = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_text(handle, position, "", 0, nil) }
            return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                sqlite3_bind_text(handle, position, $0, CInt(bytes.count), BoundRow.transient)
            }
        }
        record(code)
    }

    /// `SQLITE_TRANSIENT`: SQLite copies the bytes before the call returns.
    private static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}

/// One row of a statement being stepped by `BoundRow.forEachRow`; valid only inside its call.
struct ResultRow {
    fileprivate let handle: SQLiteStatement

    func int(_ column: CInt) -> Int { Int(sqlite3_column_int64(handle, column)) }

    /// The column as text (empty for NULL).
    func text(_ column: CInt) -> String {
        guard let bytes = sqlite3_column_text(handle, column) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(handle, column))), as: UTF8.self)
    }
}
