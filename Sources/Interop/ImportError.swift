public import TraceCore

/// What stops an import or an export: a file that is not what it should be (with the file and
/// the position), a run that cannot be imported, an output that cannot be written.
public struct ImportError: Diagnostic, Hashable {
    public enum Code: String, Sendable, Hashable {
        /// The input cannot be read.
        case unreadable
        /// The input is not valid JSON (or JSONL); `location` has the line and column.
        case invalidJSON = "invalid_json"
        /// The input is JSON, but not of the format given (or of no format known).
        case wrongFormat = "wrong_format"
        /// `auto` cannot tell the format: several fit.
        case ambiguousFormat = "ambiguous_format"
        /// An archive lacks what the format needs, or is damaged.
        case badArchive = "bad_archive"
        /// An input is over one of the import limits (docs/interop.md, Limits): an archive that
        /// would inflate to more than its budget. The message names the limit and the option
        /// that raises it.
        case overLimit = "over_limit"
        /// One run (a trace, a sample, an episode) cannot be imported; the others still are.
        case badRun = "bad_run"
        /// The log to write exists already.
        case outputExists = "output_exists"
        /// Writing a log or an export failed.
        case writeFailed = "write_failed"
        /// A log given to `export` cannot be read.
        case unreadableLog = "unreadable_log"
        /// An export setting from the environment (OTLP headers) is malformed.
        case badSetting = "bad_setting"
    }

    public var code: Code
    public var message: String
    public var location: SourceLocation?
    public var hint: String?
    public var underlying: DiagnosticRecord?

    public init(_ code: Code, _ message: String, location: SourceLocation? = nil, hint: String? = nil, cause: (any Diagnostic)? = nil) {
        self.code = code
        self.message = message
        self.location = location
        self.hint = hint
        self.underlying = cause.map { DiagnosticRecord($0) }
    }

    public var diagnosticCode: String { "import." + code.rawValue }
    public var place: SourceLocation? { location }
    public var cause: (any Diagnostic)? { underlying }
}
