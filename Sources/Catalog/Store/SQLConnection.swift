import Foundation
import TraceCore

/// The SQL a catalog store speaks. The catalog's statements are written once where SQLite and
/// PostgreSQL agree; where they do not, `SQLDialect` gives each its own text, side by side.
public enum SQLDialect: String, Sendable {
    case sqlite
    case postgres

    /// A condition that `column` matches the glob bound to the next `?` (`*`, `?`, `[…]`), as
    /// SQLite's GLOB reads it; on PostgreSQL the glob is bound as the anchored regular expression
    /// `globArgument` makes of it.
    func glob(_ column: String) -> String {
        switch self {
        case .sqlite: return "\(column) GLOB ?"
        case .postgres: return "\(column) ~ ?"
        }
    }

    /// The value to bind for `glob(_:)`.
    func globArgument(_ pattern: String) -> CatalogValue {
        switch self {
        case .sqlite: return .text(pattern)
        case .postgres: return .text(Self.regex(ofGlob: pattern))
        }
    }

    /// The POSIX regular expression matching what SQLite's GLOB matches for `pattern`: `*` any
    /// text, `?` one character, `[…]` a class (`[^…]` negated), everything else itself.
    static func regex(ofGlob pattern: String) -> String {
        var regex = "^"
        var characters = pattern.makeIterator()
        while let character = characters.next() {
            switch character {
            case "*": regex += ".*"
            case "?": regex += "."
            case "[":
                // A class, as far as its closing `]` (a `]` first in it is a member). With no
                // closing `]` SQLite's GLOB matches nothing; so does the lookahead `(?!)`.
                var members: [Character] = []
                var closed = false
                while let inner = characters.next() {
                    if inner == "]" && !(members.isEmpty || members == ["^"]) {
                        closed = true
                        break
                    }
                    members.append(inner)
                }
                if closed {
                    regex += "[" + members.map { $0 == "\\" || $0 == "[" ? "\\" + String($0) : String($0) }.joined() + "]"
                } else {
                    return "(?!)"
                }
            default: regex += escaped(character)
            }
        }
        return regex + "$"
    }

    private static func escaped(_ character: Character) -> String {
        "\\^$.|+()[]{}*?".contains(character) ? "\\" + String(character) : String(character)
    }

    /// Runs newest first, those that never started (no start time) last, as `logs_by_start`
    /// holds them: NULL sorts first in SQLite and last in PostgreSQL.
    var newestFirst: String {
        switch self {
        case .sqlite: return "started_at_us DESC, path"
        case .postgres: return "started_at_us DESC NULLS LAST, path"
        }
    }

    /// `column` in ascending order with NULL first, as SQLite sorts it.
    func nullsFirst(_ column: String) -> String {
        switch self {
        case .sqlite: return column
        case .postgres: return column + " NULLS FIRST"
        }
    }

    /// An empty blob, written in the statement (a bound empty blob can arrive as NULL).
    var emptyBlob: String {
        switch self {
        case .sqlite: return "X''"
        case .postgres: return "''::bytea"
        }
    }

    /// A condition that `column` holds `text`, ignoring the case of ASCII letters (SQLite's
    /// `LIKE` and `lower` fold only those; on PostgreSQL both sides are folded in the "C"
    /// collation the columns have, so both stores match the same rows): the condition, and what
    /// to bind to its `?`.
    func contains(ignoringCase text: String, in column: String) -> (sql: String, argument: CatalogValue) {
        switch self {
        case .sqlite:
            // `LIKE` reads each row's text in place, where `lower` made a folded copy of it: a
            // third of the time over a million runs that do not match. Its pattern has a length
            // limit (50,000 bytes), and ends at a NUL: a text that long, or holding one, is looked
            // for the other way.
            guard text.utf8.count <= Self.longestLikeText, !text.utf8.contains(0) else {
                return ("instr(lower(\(column)), lower(?)) > 0", .text(text))
            }
            return ("\(column) LIKE ? ESCAPE '\\'", .text("%" + Self.likeEscaped(text) + "%"))
        case .postgres:
            return ("strpos(lower(\(column) COLLATE \"C\"), lower(CAST(? AS TEXT) COLLATE \"C\")) > 0", .text(text))
        }
    }

    /// The longest text `contains(ignoringCase:in:)` looks for with `LIKE`.
    static let longestLikeText = 10_000

    /// `text` as itself in a `LIKE` pattern whose escape is `\`.
    static func likeEscaped(_ text: String) -> String {
        // Scalar by scalar: a `%` with a combining mark after it is one `Character`, and still
        // a wildcard to `LIKE`.
        var escaped = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if scalar == "\\" || scalar == "%" || scalar == "_" { escaped.append("\\") }
            escaped.append(scalar)
        }
        return String(escaped)
    }

    /// A condition that `column` starts with the text bound to the next `?`.
    func hasPrefix(_ column: String) -> String {
        switch self {
        case .sqlite: return "instr(\(column), ?) = 1"
        case .postgres: return "starts_with(\(column), ?)"
        }
    }
}

/// Binds the values of one execution of a statement, in the order of its `?`s.
protocol SQLBinder {
    mutating func bind(_ value: Int?)
    mutating func bind(_ value: Int64)
    mutating func bind(_ value: Double?)
    /// Bytes, as a blob (`BLOB` on SQLite, `BYTEA` on PostgreSQL).
    mutating func bind(_ value: [UInt8]?)
    mutating func bind(_ value: String?)
}

extension SQLBinder {
    mutating func bind(_ value: CatalogValue) {
        switch value {
        case .null: bind(nil as Int?)
        case .integer(let number): bind(number)
        case .real(let number): bind(number)
        case .text(let text): bind(text)
        case .blob(let bytes): bind(bytes)
        }
    }
}

/// One row of a statement as it is stepped; valid only inside the call that hands it out.
/// Columns are counted from 0.
protocol SQLRowView {
    var columnCount: Int { get }
    func name(_ column: Int) -> String
    func value(_ column: Int) -> CatalogValue
    /// The column as an integer (0 for NULL).
    func int(_ column: Int) -> Int
    /// The column as text ("" for NULL).
    func text(_ column: Int) -> String
    /// The column's bytes (a blob, or text's UTF-8), nil for NULL.
    func blob(_ column: Int) -> [UInt8]?
    func isNull(_ column: Int) -> Bool
}

extension SQLRowView {
    /// The column as text, nil for NULL.
    func optionalText(_ column: Int) -> String? { isNull(column) ? nil : text(column) }

    /// The whole row, kept beyond the call.
    func materialized(names: SQLRow.Names?) -> SQLRow {
        let names = names ?? SQLRow.Names((0..<columnCount).map(name))
        return SQLRow(names: names, values: (0..<columnCount).map(value))
    }
}

/// A row kept after its statement was stepped, read by column name.
struct SQLRow: Sendable {
    /// A statement's column names, shared by its rows.
    final class Names: Sendable {
        let list: [String]
        let positions: [String: Int]

        init(_ list: [String]) {
            self.list = list
            var positions: [String: Int] = [:]
            // The first column of a name wins, as SQLite's own lookup by name does.
            for (position, name) in list.enumerated() where positions[name] == nil { positions[name] = position }
            self.positions = positions
        }
    }

    let names: Names
    let values: [CatalogValue]

    /// The column `name`, converted to the type asked for. A column the statement does not
    /// have, or a NULL where a value is required, is a fault of the catalog's own statement.
    subscript<Value: SQLColumnValue>(_ name: String) -> Value {
        guard let position = names.positions[name] else {
            preconditionFailure("the catalog's statement has no column \(name); it has \(names.list)")
        }
        return Value(column: values[position])
    }

    /// The column `name` as the store gave it (NULL for no such column).
    func value(_ name: String) -> CatalogValue { names.positions[name].map { values[$0] } ?? .null }

    /// The column `name`'s bytes (a blob, or text's UTF-8), nil for NULL or no such column.
    func blob(_ name: String) -> [UInt8]? {
        switch names.positions[name].map({ values[$0] }) {
        case .blob(let bytes)?: return bytes
        case .text(let text)?: return Array(text.utf8)
        default: return nil
        }
    }
}

/// A type a column's value converts to.
protocol SQLColumnValue {
    init(column: CatalogValue)
}

extension Int: SQLColumnValue {
    init(column: CatalogValue) {
        switch column {
        case .integer(let number): self = Int(number)
        // A real or text cell no Int holds (a sum past 2^63 that PostgreSQL gives as numeric, a
        // hand-edited 1e300) saturates: a query never traps on what a catalog holds.
        case .real(let number): self = Int(saturating: number)
        case .text(let text): self = Int(text) ?? Int(saturating: Double(text) ?? 0)
        case .null, .blob: self = 0
        }
    }
}

extension Double: SQLColumnValue {
    init(column: CatalogValue) {
        switch column {
        case .integer(let number): self = Double(number)
        case .real(let number): self = number
        case .text(let text): self = Double(text) ?? 0
        case .null, .blob: self = 0
        }
    }
}

extension String: SQLColumnValue {
    init(column: CatalogValue) {
        switch column {
        case .text(let text): self = text
        case .integer(let number): self = String(number)
        case .real(let number): self = String(number)
        case .blob(let bytes): self = String(decoding: bytes, as: UTF8.self)
        case .null: self = ""
        }
    }
}

extension Optional: SQLColumnValue where Wrapped: SQLColumnValue {
    init(column: CatalogValue) {
        if case .null = column { self = nil } else { self = Wrapped(column: column) }
    }
}

/// A value bound to a `?` from an argument list.
protocol SQLArgument {
    var catalogValue: CatalogValue { get }
}

extension Int: SQLArgument { var catalogValue: CatalogValue { .integer(Int64(self)) } }
extension Int64: SQLArgument { var catalogValue: CatalogValue { .integer(self) } }
extension Double: SQLArgument { var catalogValue: CatalogValue { .real(self) } }
extension String: SQLArgument { var catalogValue: CatalogValue { .text(self) } }
extension CatalogValue: SQLArgument { var catalogValue: CatalogValue { self } }
extension Array: SQLArgument where Element == UInt8 { var catalogValue: CatalogValue { .blob(self) } }

/// One connection of a catalog store, inside a transaction or a read snapshot: what the
/// catalog's code asks of SQLite and PostgreSQL alike. Statements hold one command each, with
/// `?` for their parameters (the PostgreSQL store numbers them).
protocol SQLConnection {
    var dialect: SQLDialect { get }

    /// Runs `sql` once with the values `bind` gives, calling `body` with each row it returns.
    func run(_ sql: String, bind: (inout any SQLBinder) -> Void, each body: (any SQLRowView) throws -> Void) throws

    /// The rows the last INSERT, UPDATE or DELETE changed.
    var changes: Int { get }
}

/// Lists of values in one statement (`IN (?, ?, …)`): on PostgreSQL each statement is a round
/// trip, so a statement per value costs a round trip per value.
enum SQLList {
    /// The values a list holds at most, well within both stores' limits on parameters.
    static let size = 500

    /// `values` in slices of at most `size`.
    static func chunks<T>(of values: [T]) -> [ArraySlice<T>] {
        stride(from: 0, to: values.count, by: size).map { values[$0..<min(values.count, $0 + size)] }
    }

    /// `?, ?, …`: `count` placeholders.
    static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }
}

extension SQLConnection {
    /// Runs `sql` with `arguments` (nil binds NULL), ignoring any rows.
    func execute(_ sql: String, _ arguments: [(any SQLArgument)?] = []) throws {
        try run(sql, bind: { $0.bind(all: arguments) }, each: { _ in })
    }

    /// Runs `sql` with the values `bind` gives, ignoring any rows.
    func execute(_ sql: String, bind: (inout any SQLBinder) -> Void) throws {
        try run(sql, bind: bind, each: { _ in })
    }

    /// Every row `sql` returns, kept.
    func rows(_ sql: String, _ arguments: [(any SQLArgument)?] = []) throws -> [SQLRow] {
        var rows: [SQLRow] = []
        var names: SQLRow.Names?
        try run(sql, bind: { $0.bind(all: arguments) }) { row in
            let kept = row.materialized(names: names)
            names = kept.names
            rows.append(kept)
        }
        return rows
    }

    /// The first row `sql` returns.
    func row(_ sql: String, _ arguments: [(any SQLArgument)?] = []) throws -> SQLRow? {
        var found: SQLRow?
        try run(sql, bind: { $0.bind(all: arguments) }) { row in
            if found == nil { found = row.materialized(names: nil) }
        }
        return found
    }

    /// The first column of every row.
    func column<Value: SQLColumnValue>(_ sql: String, _ arguments: [(any SQLArgument)?] = [], as type: Value.Type = Value.self) throws
        -> [Value]
    {
        var values: [Value] = []
        try run(sql, bind: { $0.bind(all: arguments) }) { row in values.append(Value(column: row.value(0))) }
        return values
    }

    /// The store's plan for `sql`, one line per step: SQLite's `EXPLAIN QUERY PLAN` (its
    /// details), PostgreSQL's `EXPLAIN`.
    func plan(_ sql: String, _ arguments: [(any SQLArgument)?] = []) throws -> [String] {
        switch dialect {
        case .sqlite: return try rows("EXPLAIN QUERY PLAN " + sql, arguments).map { $0["detail"] }
        case .postgres: return try column("EXPLAIN " + sql, arguments, as: String.self)
        }
    }

    /// The first column of the first row; nil when there is no row (or it is NULL, for an
    /// optional type).
    func value<Value: SQLColumnValue>(_ sql: String, _ arguments: [(any SQLArgument)?] = [], as type: Value.Type = Value.self) throws
        -> Value?
    {
        var found: Value?
        var seen = false
        try run(sql, bind: { $0.bind(all: arguments) }) { row in
            if !seen {
                seen = true
                if !row.isNull(0) { found = Value(column: row.value(0)) }
            }
        }
        return found
    }
}

extension SQLConnection {
    /// Inserts `count` rows into `table`'s `columns`, `bind(i, …)` giving row i's values in
    /// column order. On SQLite each row is one execution of one prepared statement (a local
    /// call); on PostgreSQL, where each statement is a round trip, rows go in multi-row
    /// statements of up to 500. A row the store refuses throws `RowRefused` with its number:
    /// on PostgreSQL a refused statement is rolled back to a savepoint and its rows are
    /// inserted again one at a time to find it, so the caller can say whose row it was.
    func insert(into table: String, columns: [String], count: Int, bind: (Int, inout any SQLBinder) -> Void) throws {
        guard count > 0 else { return }
        let group = "(" + columns.map { _ in "?" }.joined(separator: ", ") + ")"
        let head = "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES "
        func one(_ row: Int) throws {
            do {
                try execute(head + group) { bind(row, &$0) }
            } catch {
                throw RowRefused(row: row, error: error)
            }
        }
        guard dialect == .postgres, count > 1 else {
            for row in 0..<count { try one(row) }
            return
        }
        let chunk = max(1, min(500, 60_000 / max(1, columns.count)))
        var start = 0
        while start < count {
            let end = min(count, start + chunk)
            let sql = head + Array(repeating: group, count: end - start).joined(separator: ", ")
            try execute("SAVEPOINT agent_eval_rows")
            do {
                try execute(sql) { binder in for row in start..<end { bind(row, &binder) } }
                try execute("RELEASE SAVEPOINT agent_eval_rows")
            } catch {
                try execute("ROLLBACK TO SAVEPOINT agent_eval_rows")
                for row in start..<end { try one(row) }
                // Refused together, accepted one by one: the statement's own fault.
                throw error
            }
            start = end
        }
    }
}

/// A row `insert(into:columns:count:bind:)` could not insert, and why.
struct RowRefused: Error {
    var row: Int
    var error: any Error
}

extension SQLBinder {
    mutating func bind(all arguments: [(any SQLArgument)?]) {
        for argument in arguments { bind(argument?.catalogValue ?? .null) }
    }
}
