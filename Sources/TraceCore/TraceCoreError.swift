/// The one error type of the core: JSON that does not parse, or an event that does not match
/// the format.
///
/// `message` is a full sentence for people; `code` is stable for programs; `byteOffset` (in
/// the text being parsed) and `fieldPath` (such as `data.calls[2].name`) say where.
public struct TraceCoreError: Error, Sendable, Hashable, CustomStringConvertible {
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
    public var message: String
    /// The byte offset in the parsed text, for JSON and UTF-8 errors.
    public var byteOffset: Int?
    /// The path of the offending field, for field errors.
    public var fieldPath: String?

    public init(_ code: Code, _ message: String, byteOffset: Int? = nil, fieldPath: String? = nil) {
        self.code = code
        self.message = message
        self.byteOffset = byteOffset
        self.fieldPath = fieldPath
    }

    public var description: String { message }
}
