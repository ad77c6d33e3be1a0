public import TraceCore
public import TraceLog

/// The one error type of the runtime: a run that could not be started, resumed or recorded.
/// Failures *inside* a run (a tool that crashes, a model that errs) are not errors: they are
/// recorded and end the run with a stop reason.
public struct RuntimeError: Diagnostic, Hashable {
    public enum Code: String, Sendable, Hashable {
        /// The log could not be written or read; `log` has the details.
        case log
        /// The run cannot be resumed as asked (not stopped for approval, unknown call id…).
        case cannotResume = "cannot_resume"
        /// A resume did not decide every call waiting for approval.
        case undecidedCalls = "undecided_calls"
        /// The agent given does not fit the run (a different configuration than the log's).
        case agentMismatch = "agent_mismatch"
        /// A tool server (MCP) could not be started or does not fit the agent; `location` is
        /// where the agent file declares it.
        case toolServer = "tool_server"
    }

    public var code: Code
    public var message: String
    /// The log concerned.
    public var path: String
    public var hint: String?
    /// The log error underneath, for `.log`.
    public var log: LogError?
    /// The place in a config file the error is about, when it is one.
    public var location: SourceLocation?

    public init(
        _ code: Code, _ message: String, path: String, hint: String? = nil, log: LogError? = nil, location: SourceLocation? = nil
    ) {
        self.code = code
        self.message = message
        self.path = path
        self.hint = hint
        self.log = log
        self.location = location
    }

    init(_ error: LogError) {
        self.init(.log, error.message, path: error.path, hint: error.hint, log: error)
    }

    public var diagnosticCode: String { log?.diagnosticCode ?? "runtime." + code.rawValue }
    public var place: SourceLocation? { log?.place ?? location ?? (path.isEmpty ? nil : SourceLocation(path: path)) }
}
