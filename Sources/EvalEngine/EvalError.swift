public import ConfigFile
public import TraceCore

/// The one error type of the eval engine: the harness could not run (exit 2). A case that
/// fails is not an error; it is a result.
public struct EvalError: Diagnostic, Hashable {
    public enum Code: String, Sendable, Hashable {
        /// A case file is malformed; `location` says where.
        case badCase = "bad_case"
        /// Two cases share a caseId.
        case duplicateCase = "duplicate_case"
        /// No case files were found, or none is left after filtering.
        case noCases = "no_cases"
        /// A path given does not exist.
        case missingPath = "missing_path"
        /// A baseline file cannot be read.
        case unreadableBaseline = "unreadable_baseline"
        /// Writing a report or a baseline failed.
        case writeFailed = "write_failed"
    }

    public var code: Code
    public var message: String
    public var location: SourceLocation?
    public var hint: String?
    /// The error underneath (a log that cannot be read, a config error).
    public var underlying: DiagnosticRecord?

    public init(_ code: Code, _ message: String, location: SourceLocation? = nil, hint: String? = nil, cause: (any Diagnostic)? = nil) {
        self.code = code
        self.message = message
        self.location = location
        self.hint = hint
        self.underlying = cause.map { DiagnosticRecord($0) }
    }

    init(_ error: ConfigError) {
        self.init(.badCase, error.message, location: error.location, hint: error.hint)
    }

    public var diagnosticCode: String { "eval." + code.rawValue }
    public var place: SourceLocation? { location }
    public var cause: (any Diagnostic)? { underlying }
}
