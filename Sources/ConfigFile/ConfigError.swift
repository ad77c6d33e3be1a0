/// The one error type of config files (agent files, scripted models, eval cases): what is
/// wrong, where (file, line, column) and what to do.
public struct ConfigError: Error, Sendable, Hashable, CustomStringConvertible {
    /// Stable identifiers of what went wrong.
    public enum Code: String, Sendable, Hashable {
        /// The file cannot be read.
        case unreadable
        /// The file is not valid YAML (or JSON).
        case syntax
        /// A required key is missing.
        case missingKey = "missing_key"
        /// A key this format does not have.
        case unknownKey = "unknown_key"
        /// A key appears twice in one mapping.
        case duplicateKey = "duplicate_key"
        /// A value has the wrong type or an unaccepted value.
        case invalidValue = "invalid_value"
    }

    public var code: Code
    /// A full sentence: what is wrong.
    public var message: String
    public var location: SourceLocation
    /// What to do about it, when there is something specific to say.
    public var hint: String?

    public init(_ code: Code, _ message: String, at location: SourceLocation, hint: String? = nil) {
        self.code = code
        self.message = message
        self.location = location
        self.hint = hint
    }

    public var description: String {
        "\(location): \(message)" + (hint.map { " (\($0))" } ?? "")
    }
}

/// A position in a config file. `line` and `column` start at 1; 0 means the whole file.
public struct SourceLocation: Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var line: Int
    public var column: Int

    public init(path: String, line: Int = 0, column: Int = 0) {
        self.path = path
        self.line = line
        self.column = column
    }

    /// `path:line:column`, or only the path for the whole file.
    public var description: String {
        line > 0 ? "\(path):\(line):\(column)" : path
    }
}
