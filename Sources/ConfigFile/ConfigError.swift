public import TraceCore

/// Every error found in one config file, in file order: readers that can go on after an
/// error (the next case, the next expectation) report them all at once.
public struct ConfigErrors: Error, Sendable {
    public var errors: [ConfigError]

    public init(_ errors: [ConfigError]) {
        self.errors = errors
    }

    /// The errors in file order: those in `path` by line and column first, then those in the
    /// files it names (a model script, an agent file), each file's in line order.
    public func inFileOrder(of path: String) -> ConfigErrors {
        let ordered = errors.enumerated().sorted { left, right in
            let (a, b) = (left.element.location, right.element.location)
            if (a.path == path) != (b.path == path) { return a.path == path }
            if a.path != b.path { return left.offset < right.offset }
            return (a.line, a.column, left.offset) < (b.line, b.column, right.offset)
        }
        return ConfigErrors(ordered.map(\.element))
    }

    /// Runs `body`; an error it throws is kept and nil returned, so reading goes on.
    @discardableResult
    public mutating func collect<T>(_ body: () throws(ConfigError) -> T) -> T? {
        do {
            return try body()
        } catch {
            errors.append(error)
            return nil
        }
    }
}

/// The one error type of config files (agent files, scripted models, eval cases): what is
/// wrong, where (file, line, column) and what to do.
public struct ConfigError: Diagnostic, Hashable {
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
        /// The file is none of the kinds agent-eval reads (docs/eval-cases.md, "Which files are
        /// cases"): named on the command line, it is an error; found in a folder, skipped.
        case unknownKind = "unknown_kind"
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

    public var diagnosticCode: String { "config." + code.rawValue }

    /// One line, hint included: `file:line:column: message (hint)`.
    public var description: String {
        "\(location): \(message)" + (hint.map { " (\($0))" } ?? "")
    }
    public var place: SourceLocation? { location }
}
