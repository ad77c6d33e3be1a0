/// The one error type of the core: JSON that does not parse, or an event that does not match
/// the format.
///
/// `message` is a full sentence for people; `code` is stable for programs; `byteOffset` (in
/// the text being parsed) and `fieldPath` (such as `data.calls[2].name`) say where.
public struct TraceCoreError: Diagnostic, Hashable {
    /// Stable identifiers of what went wrong.
    public enum Code: String, Sendable, Hashable {
        /// The text is not valid JSON.
        case invalidJSON = "invalid_json"
        /// The text is not valid UTF-8.
        case invalidUTF8 = "invalid_utf8"
        /// A field is missing, or has the wrong type or an unknown value.
        case invalidField = "invalid_field"
        /// The envelope's schema version is not one this code reads.
        case unsupportedVersion = "unsupported_version"
    }

    public var code: Code
    /// What is wrong; for field errors, said of the field (`must be a string, found null`).
    public var detail: String
    /// The byte offset in the parsed text, for JSON and UTF-8 errors.
    public var byteOffset: Int?
    /// The path of the offending field, for field errors (`data.calls[0].name`).
    public var fieldPath: String?

    public init(_ code: Code, _ detail: String, byteOffset: Int? = nil, fieldPath: String? = nil) {
        self.code = code
        self.detail = detail
        self.byteOffset = byteOffset
        self.fieldPath = fieldPath
    }

    /// The full sentence: the field path, when there is one, then what is wrong.
    public var message: String {
        guard code == .invalidField, let fieldPath, !fieldPath.isEmpty else { return detail }
        return "\(fieldPath) \(detail)"
    }

    /// The same error one level up: the field it happened in sits inside `key` (a member name,
    /// or an index written as `[3]`). Decoders build paths only on the way out of a failure,
    /// so that the success path never formats one.
    public func inside(_ key: String) -> TraceCoreError {
        guard code == .invalidField else { return self }
        var error = self
        let path = fieldPath ?? ""
        error.fieldPath = path.isEmpty ? key : (path.hasPrefix("[") ? key + path : key + "." + path)
        return error
    }

    public var diagnosticCode: String { "core." + code.rawValue }
    /// The core parses text it is handed; the caller knows the file and line.
    public var place: SourceLocation? { nil }
}
