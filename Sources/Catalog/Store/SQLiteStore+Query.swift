import Foundation
import GRDB
import GRDBSQLite

extension CatalogValue {
    init(_ value: DatabaseValue) {
        switch value.storage {
        case .null: self = .null
        case .int64(let number): self = .integer(number)
        case .double(let number): self = .real(number)
        case .string(let text): self = .text(text)
        case .blob(let data): self = .blob([UInt8](data))
        }
    }
}

extension SQLiteStore {
    /// `Catalog.query` on a SQLite file: one read-only statement on a reader connection, with
    /// its deadline kept by SQLite's progress handler.
    func query(_ sql: String, arguments: [CatalogValue], timeout: Double?) throws(CatalogError) -> QueryResult {
        let deadline = QueryDeadline(seconds: timeout)
        do {
            return try readDatabase { db in
                if let second = Self.secondStatement(in: sql, db: db) {
                    let snippet = second.text.count > 40 ? second.text.prefix(40) + "…" : second.text
                    throw CatalogError(
                        .severalStatements,
                        "sql runs one statement; this text has a second one at character \(second.offset + 1): \(snippet)",
                        hint: "run each statement on its own")
                }
                let statement: Statement
                do {
                    statement = try db.makeStatement(sql: sql)
                } catch let error as DatabaseError where error.resultCode == .SQLITE_ERROR {
                    // The statement's own fault (syntax, a table or column that is not there), not the file's.
                    let names = try String.fetchAll(
                        db,
                        sql: "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name")
                    throw CatalogError(
                        .queryFailed, "the statement cannot run: \(error.message ?? "\(error.resultCode)")",
                        hint: "its tables and views: \(names.joined(separator: ", ")) (docs/catalog.md describes each)")
                }
                // ATTACH and DETACH count as read-only to SQLite (they change the connection, not
                // the file); an attachment would outlive the statement on the reused connection,
                // and a file it cannot open is no fault of the catalog's.
                let keyword = Catalog.leadingKeyword(sql)
                if keyword == "ATTACH" || keyword == "DETACH" {
                    throw CatalogError(
                        .readOnly, "sql runs one query over the catalog; \(keyword) would change what its connection reads",
                        hint: "query another database with its own tools")
                }
                if !statement.isReadonly {
                    throw CatalogError(
                        .readOnly, "the catalog's query connection is read-only; this statement would change it: \(sql)",
                        hint: "the catalog is derived from logs: change the logs and index them again")
                }
                statement.arguments = StatementArguments(arguments.map(\.databaseValue))
                var result = QueryResult(columns: statement.columnNames, rows: [])
                // SQLite asks the handler every few thousand steps of its virtual machine; it
                // stops the statement once the deadline has passed. Reader connections are
                // reused: the handler goes when the statement is done.
                deadline.install(on: db.sqliteConnection)
                defer { QueryDeadline.remove(from: db.sqliteConnection) }
                let cursor = try Row.fetchCursor(statement)
                while let row = try cursor.next() {
                    result.rows.append(row.databaseValues.map(CatalogValue.init))
                }
                return result
            }
        } catch  where error.code == .queryFailed && deadline.hasPassed {
            throw CatalogError(
                .timedOut,
                "the statement ran for more than \(QueryDeadline.describe(timeout ?? 0)) and was stopped",
                hint: "narrow it (a WHERE on an indexed column, a LIMIT), or give it longer")
        }
    }

    /// Where a second statement starts in `sql` (its character offset and text), when there is
    /// one after the first; nil for one statement, with or without a closing `;` and comments.
    /// A text whose first statement does not compile is left to `makeStatement` to report.
    static func secondStatement(in sql: String, db: Database) -> (offset: Int, text: String)? {
        guard let connection = db.sqliteConnection else { return nil }
        let bytes = Array(sql.utf8) + [0]
        return bytes.withUnsafeBufferPointer { buffer -> (offset: Int, text: String)? in
            guard let base = buffer.baseAddress else { return nil }
            return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { text -> (offset: Int, text: String)? in
                var statement: OpaquePointer?
                var tail: UnsafePointer<CChar>?
                let first = sqlite3_prepare_v2(connection, text, -1, &statement, &tail)
                sqlite3_finalize(statement)
                guard first == SQLITE_OK, let tail else { return nil }
                var rest: OpaquePointer?
                // Whitespace, comments and semicolons compile to no statement at all.
                let second = sqlite3_prepare_v2(connection, tail, -1, &rest, nil)
                sqlite3_finalize(rest)
                if second == SQLITE_OK && rest == nil { return nil }
                let start = text.distance(to: tail)
                let remainder = String(decoding: bytes[start..<(bytes.count - 1)], as: UTF8.self)
                let skipped = remainder.prefix { $0.isWhitespace || $0 == ";" }
                let offset = sql.utf8.index(sql.utf8.startIndex, offsetBy: start)
                let characters = sql.distance(from: sql.startIndex, to: offset) + skipped.count
                let shown = remainder.dropFirst(skipped.count).prefix { $0 != "\n" }
                return (characters, String(shown))
            }
        }
    }
}

/// When a `query` statement must stop: an instant on the monotonic clock, checked by SQLite's
/// progress handler (a C callback, so it reads the deadline through a pointer it is given).
///
/// Unchecked Sendable by confinement: the statement's thread is the only writer (below).
final class QueryDeadline: @unchecked Sendable {
    // Written once before the handler is installed, then only read (by the handler, on the
    // thread running the statement, and after it): no lock needed.
    private let endNs: UInt64?
    private(set) var hasPassed = false

    init(seconds: Double?) {
        endNs = seconds.flatMap { $0 > 0 ? QueryDeadline.nowNs() &+ UInt64($0 * 1_000_000_000) : nil }
    }

    static func nowNs() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    /// `30 s`, `1.5 s`.
    static func describe(_ seconds: Double) -> String {
        seconds == seconds.rounded() ? "\(Int(seconds)) s" : "\(seconds) s"
    }

    /// Makes SQLite stop the statement running on `connection` once the deadline has passed.
    func install(on connection: OpaquePointer?) {
        guard endNs != nil, let connection else { return }
        sqlite3_progress_handler(
            connection, 10_000,
            { context in
                guard let context else { return 0 }
                let deadline = Unmanaged<QueryDeadline>.fromOpaque(context).takeUnretainedValue()
                guard let end = deadline.endNs, QueryDeadline.nowNs() >= end else { return 0 }
                deadline.hasPassed = true
                return 1
            }, Unmanaged.passUnretained(self).toOpaque())
    }

    static func remove(from connection: OpaquePointer?) {
        guard let connection else { return }
        sqlite3_progress_handler(connection, 0, nil, nil)
    }
}

extension CatalogValue {
    var databaseValue: DatabaseValue {
        switch self {
        case .null: return .null
        case .integer(let number): return number.databaseValue
        case .real(let number): return number.databaseValue
        case .text(let text): return text.databaseValue
        case .blob(let bytes): return Data(bytes).databaseValue
        }
    }
}
