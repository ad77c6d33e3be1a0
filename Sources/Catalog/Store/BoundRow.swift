import GRDB
import GRDBSQLite

/// The values of one row, bound straight into a prepared statement through the SQLite C API, and
/// the statement stepped: what the catalog uses where it writes or reads a row per log or call
/// (the indexer's call rows, a suite's result rows, a suite's kept results), where building
/// GRDB's `StatementArguments` (an existential box per value) or `Row`s cost more than SQLite's
/// own work. Strings are bound from their UTF-8 bytes and copied by SQLite.
///
/// Used on a connection's cached statement that nothing else binds arguments to while it runs
/// (GRDB rebinds all of them before its own executions in any case).
struct BoundRow: SQLBinder {
    private let handle: SQLiteStatement
    private var index: CInt = 0
    private var failure: CInt = SQLITE_OK

    /// Binds the values `bind` gives, in the statement's parameter order, and runs the statement.
    static func execute(_ statement: Statement, in db: Database, _ bind: (inout any SQLBinder) -> Void) throws {
        try forEachRow(statement, in: db, bind: bind) { _ in }
    }

    /// Binds the values `bind` gives and calls `body` with each row the statement returns.
    static func forEachRow(
        _ statement: Statement, in db: Database, bind: (inout any SQLBinder) -> Void, _ body: (ResultRow) throws -> Void
    ) throws {
        let handle = statement.sqliteStatement
        sqlite3_reset(handle)
        defer { sqlite3_reset(handle) }
        var binder: any SQLBinder = BoundRow(handle: handle)
        bind(&binder)
        // swift-format-ignore: NeverForceUnwrap
        let row = binder as! BoundRow
        let parameters = sqlite3_bind_parameter_count(handle)
        guard row.index == parameters else {
            throw DatabaseError(
                resultCode: .SQLITE_MISUSE, message: "bound \(row.index) values for \(parameters) parameters", sql: statement.sql)
        }
        var code = row.failure
        // A refused bind sets no message on the connection (its last one may read "not an
        // error"): SQLite's sentence for the code says what was refused.
        if code != SQLITE_OK {
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: String(cString: sqlite3_errstr(code)), sql: statement.sql)
        }
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

    /// Binds the next parameter: NULL for nil, else what `bind` binds for the value; keeps the
    /// first failed bind's code.
    private mutating func next<Value>(_ value: Value?, _ bind: (SQLiteStatement, CInt, Value) -> CInt) {
        index += 1
        let code = value.map { bind(handle, index, $0) } ?? sqlite3_bind_null(handle, index)
        if failure == SQLITE_OK && code != SQLITE_OK { failure = code }
    }

    mutating func bind(_ value: Int?) {
        next(value) { sqlite3_bind_int64($0, $1, Int64($2)) }
    }

    mutating func bind(_ value: Int64) {
        next(value) { sqlite3_bind_int64($0, $1, $2) }
    }

    mutating func bind(_ value: Double?) {
        next(value) { sqlite3_bind_double($0, $1, $2) }
    }

    /// Bytes as a blob.
    mutating func bind(_ value: [UInt8]?) {
        next(value) { handle, position, bytes in
            bytes.withUnsafeBytes { raw in
                guard let base = raw.baseAddress, !raw.isEmpty else { return sqlite3_bind_zeroblob(handle, position, 0) }
                return sqlite3_bind_blob(handle, position, base, CInt(raw.count), BoundRow.transient)
            }
        }
    }

    mutating func bind(_ value: String?) {
        next(value) { handle, position, text in
            var text = text
            return text.withUTF8 { bytes in
                // An empty string still needs a pointer: SQLite binds NULL for a null one.
                guard let base = bytes.baseAddress, !bytes.isEmpty else { return sqlite3_bind_text(handle, position, "", 0, nil) }
                return base.withMemoryRebound(to: CChar.self, capacity: bytes.count) {
                    sqlite3_bind_text(handle, position, $0, CInt(bytes.count), BoundRow.transient)
                }
            }
        }
    }

    /// `SQLITE_TRANSIENT`: SQLite copies the bytes before the call returns.
    static let transient = unsafeBitCast(-1, to: sqlite3_destructor_type.self)
}

/// One row of a statement being stepped by `BoundRow.forEachRow`; valid only inside its call.
struct ResultRow: SQLRowView {
    let handle: SQLiteStatement

    var columnCount: Int { Int(sqlite3_column_count(handle)) }

    func name(_ column: Int) -> String { sqlite3_column_name(handle, CInt(column)).map { String(cString: $0) } ?? "" }

    func isNull(_ column: Int) -> Bool { sqlite3_column_type(handle, CInt(column)) == SQLITE_NULL }

    func int(_ column: Int) -> Int { Int(sqlite3_column_int64(handle, CInt(column))) }

    /// The column as text (empty for NULL).
    func text(_ column: Int) -> String {
        guard let bytes = sqlite3_column_text(handle, CInt(column)) else { return "" }
        return String(decoding: UnsafeBufferPointer(start: bytes, count: Int(sqlite3_column_bytes(handle, CInt(column)))), as: UTF8.self)
    }

    /// The column's bytes (a blob, or text's UTF-8), nil for NULL.
    func blob(_ column: Int) -> [UInt8]? {
        guard !isNull(column) else { return nil }
        let start = sqlite3_column_blob(handle, CInt(column))
        let count = Int(sqlite3_column_bytes(handle, CInt(column)))
        guard let start, count > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: start, count: count))
    }

    func value(_ column: Int) -> CatalogValue {
        switch sqlite3_column_type(handle, CInt(column)) {
        case SQLITE_NULL: return .null
        case SQLITE_INTEGER: return .integer(sqlite3_column_int64(handle, CInt(column)))
        case SQLITE_FLOAT: return .real(sqlite3_column_double(handle, CInt(column)))
        case SQLITE_TEXT: return .text(text(column))
        default: return .blob(blob(column) ?? [])
        }
    }
}

/// A GRDB connection seen through the catalog's `SQLConnection`: every statement is prepared
/// once per connection (GRDB's statement cache) and bound and stepped through `BoundRow`.
struct SQLiteConnection: SQLConnection {
    let db: Database

    var dialect: SQLDialect { .sqlite }

    func run(_ sql: String, bind: (inout any SQLBinder) -> Void, each body: (any SQLRowView) throws -> Void) throws {
        try BoundRow.forEachRow(db.cachedStatement(sql: sql), in: db, bind: bind, body)
    }

    var changes: Int { db.changesCount }
}
