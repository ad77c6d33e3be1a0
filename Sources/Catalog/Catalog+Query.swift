import Foundation
public import TraceCore

/// A value from a catalog query, as SQLite holds it.
public enum CatalogValue: Sendable, Hashable, CustomStringConvertible {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

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
    /// How long `query` lets a statement run by default (`sql --timeout`).
    public static let defaultQueryTimeout: Double = 30

    /// Runs one read-only statement and returns its rows. The connection refuses writes, so a
    /// statement that would change the catalog fails with `read_only`. A statement still running
    /// after `timeout` seconds (nil: no limit) is stopped (`timed_out`): an endless recursive
    /// query ends there. Text with a second statement after the first is refused
    /// (`several_statements`) before anything runs.
    public func query(
        _ sql: String, arguments: [CatalogValue] = [], timeout: Double? = Catalog.defaultQueryTimeout
    ) throws(CatalogError) -> QueryResult {
        if let postgres = store as? PostgresStore { return try postgres.query(sql, arguments: arguments, timeout: timeout) }
        guard let sqlite else { throw CatalogError(.queryFailed, "the catalog at \(path) runs no SQL of its own") }
        return try sqlite.query(sql, arguments: arguments, timeout: timeout)
    }

    /// The first word of a statement, upper-cased, past white space, comments and parentheses.
    static func leadingKeyword(_ sql: String) -> String {
        var rest = Substring(sql)
        while true {
            rest = rest.drop { $0.isWhitespace || $0 == "(" }
            if rest.hasPrefix("--") {
                rest = rest.drop { $0 != "\n" }
            } else if rest.hasPrefix("/*") {
                guard let end = rest.range(of: "*/") else { return "" }
                rest = rest[end.upperBound...]
            } else {
                return String(rest.prefix { $0.isLetter }).uppercased()
            }
        }
    }
}
