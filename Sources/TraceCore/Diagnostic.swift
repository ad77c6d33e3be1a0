/// What every error people see has in common: a stable code, a full sentence, where it
/// applies, what to do, and the error underneath. Each module's one public error type
/// conforms; the CLI renders them all with `lines` (terminal) and `json`, and picks exit
/// codes per command.
///
/// Library hints say what to do without naming command-line flags; the CLI adds its own.
public protocol Diagnostic: Error, Sendable, CustomStringConvertible {
    /// `module.code`, stable for programs (`log.torn_tail`, `config.unknown_key`).
    var diagnosticCode: String { get }
    /// A full sentence: what failed, on which input.
    var message: String { get }
    /// Where: file, line and column for case and agent files; log path, member offset and
    /// sequence number for logs.
    var place: SourceLocation? { get }
    /// What to do about it, when there is something specific to say.
    var hint: String? { get }
    /// The error underneath, when this one wraps another.
    var cause: (any Diagnostic)? { get }
}

extension Diagnostic {
    public var hint: String? { nil }
    public var cause: (any Diagnostic)? { nil }

    /// `where: message`.
    public var description: String { (place.map { "\($0): " } ?? "") + message }

    /// The terminal form: `error: …`, `  --> where`, `hint: …` (a replacement hint, when the
    /// caller knows a better one), then each cause as `caused by: …`.
    public func lines(hint replacement: String? = nil) -> [String] {
        var lines = ["error: \(message)"]
        if let place { lines.append("  --> \(place)") }
        if let hint = replacement ?? hint { lines.append("hint: \(hint)") }
        var next = cause
        while let inner = next {
            if inner.message != message { lines.append("caused by: \(inner)") }
            next = inner.cause
        }
        return lines
    }

    /// The JSON form: `{"code", "message", "location"?, "hint"?, "cause"?}`.
    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("code", diagnosticCode)
        object.set("message", message)
        object.set("location", place?.json)
        object.set("hint", hint)
        object.set("cause", cause?.json)
        return object.json
    }
}

/// Where a diagnostic applies: a position in a text file (line and column start at 1; 0 means
/// the whole file), or a place in a log (the gzip member's byte offset, the event's sequence).
public struct SourceLocation: Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var line: Int
    public var column: Int
    /// The byte offset of the gzip member concerned, for logs.
    public var memberOffset: Int?
    /// The event's sequence number, for logs.
    public var sequence: Int?

    public init(path: String, line: Int = 0, column: Int = 0, memberOffset: Int? = nil, sequence: Int? = nil) {
        self.path = path
        self.line = line
        self.column = column
        self.memberOffset = memberOffset
        self.sequence = sequence
    }

    /// The line and column (from 1) of byte `offset` of a text file's `bytes`.
    public init(path: String, byteOffset offset: Int, in bytes: [UInt8]) {
        var line = 1
        var lineStart = 0
        for index in 0..<min(offset, bytes.count) where bytes[index] == 0x0A {
            line += 1
            lineStart = index + 1
        }
        self.init(path: path, line: line, column: offset - lineStart + 1)
    }

    /// `path:line:column`; `path (gzip member at byte N, seq S)` for logs; only the path for
    /// the whole file.
    public var description: String {
        if line > 0 { return "\(path):\(line):\(column)" }
        if let memberOffset { return "\(path) (gzip member at byte \(memberOffset)" + (sequence.map { ", seq \($0))" } ?? ")") }
        if let sequence { return "\(path) (seq \(sequence))" }
        return path
    }

    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("path", path)
        if line > 0 {
            object.set("line", line)
            object.set("column", column)
        }
        object.set("member_offset", memberOffset)
        object.set("seq", sequence)
        return object.json
    }
}

/// A diagnostic kept as a value (in results and reports): the code, sentence, place, hint
/// and cause of the error it was made from.
public struct DiagnosticRecord: Diagnostic, Hashable {
    public var diagnosticCode: String
    public var message: String
    public var place: SourceLocation?
    public var hint: String?
    /// The cause, kept as a record too (boxed: a record may hold a chain).
    public var causeRecord: [DiagnosticRecord]

    public init(code: String, message: String, place: SourceLocation? = nil, hint: String? = nil, cause: DiagnosticRecord? = nil) {
        self.diagnosticCode = code
        self.message = message
        self.place = place
        self.hint = hint
        self.causeRecord = cause.map { [$0] } ?? []
    }

    /// A record of any diagnostic, with its whole chain of causes.
    public init(_ diagnostic: any Diagnostic) {
        self.init(
            code: diagnostic.diagnosticCode, message: diagnostic.message, place: diagnostic.place, hint: diagnostic.hint,
            cause: diagnostic.cause.map { DiagnosticRecord($0) })
    }

    public var cause: (any Diagnostic)? { causeRecord.first }
}
