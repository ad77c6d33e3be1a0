import Foundation
import GRDB
public import TraceCore

/// A value from a catalog query, as SQLite holds it.
public enum CatalogValue: Sendable, Hashable, CustomStringConvertible {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    init(_ value: DatabaseValue) {
        switch value.storage {
        case .null: self = .null
        case .int64(let number): self = .integer(number)
        case .double(let number): self = .real(number)
        case .string(let text): self = .text(text)
        case .blob(let data): self = .blob([UInt8](data))
        }
    }

    /// `NULL`, the number, the text, or `<N-byte blob>`.
    public var description: String {
        switch self {
        case .null: return "NULL"
        case .integer(let number): return String(number)
        case .real(let number): return String(number)
        case .text(let text): return text
        case .blob(let data): return "<\(data.count)-byte blob>"
        }
    }

    /// JSON: null, a number, a string; a blob as `{"blob_bytes": N}`.
    public var json: JSONValue {
        switch self {
        case .null: return .null
        case .integer(let number): return .int(Int(number))
        case .real(let number): return .double(number)
        case .text(let text): return .string(text)
        case .blob(let data): return ["blob_bytes": .int(data.count)]
        }
    }

    public var int: Int? {
        if case .integer(let number) = self { return Int(number) }
        return nil
    }
}

/// The rows a query gave, with their column names.
public struct QueryResult: Sendable, Hashable {
    public var columns: [String]
    public var rows: [[CatalogValue]]

    /// Each row as an object keyed by column name (columns in query order).
    public var json: JSONValue {
        .array(
            rows.map { row in
                var object = JSONObject()
                for (column, value) in zip(columns, row) { object[column] = value.json }
                return .object(object)
            })
    }
}

extension Catalog {
    /// Runs one read-only statement and returns its rows. The connection refuses writes, so a
    /// statement that would change the catalog fails with `read_only`.
    public func query(_ sql: String, arguments: [CatalogValue] = []) throws(CatalogError) -> QueryResult {
        try read { db in
            let statement: Statement
            do {
                statement = try db.makeStatement(sql: sql)
            } catch let error as DatabaseError where error.resultCode == .SQLITE_ERROR {
                // The statement's own fault (syntax, a table or column that is not there), not the file's.
                let names = try String.fetchAll(
                    db, sql: "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') AND name NOT LIKE 'sqlite_%' ORDER BY name")
                throw CatalogError(
                    .queryFailed, "the statement cannot run: \(error.message ?? "\(error.resultCode)")",
                    hint: "its tables and views: \(names.joined(separator: ", ")) (docs/catalog.md describes each)")
            }
            if !statement.isReadonly {
                throw CatalogError(
                    .readOnly, "the catalog's query connection is read-only; this statement would change it: \(sql)",
                    hint: "the catalog is derived from logs: change the logs and index them again")
            }
            statement.arguments = StatementArguments(arguments.map(\.databaseValue))
            var result = QueryResult(columns: statement.columnNames, rows: [])
            let cursor = try Row.fetchCursor(statement)
            while let row = try cursor.next() {
                result.rows.append(row.databaseValues.map(CatalogValue.init))
            }
            return result
        }
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
