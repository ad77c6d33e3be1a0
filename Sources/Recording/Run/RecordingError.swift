public import TraceCore

/// What stops a recording: a command that cannot start, a gateway that cannot listen, a log that
/// cannot be written, a cassette that cannot be read.
public struct RecordingError: Diagnostic, Hashable {
    public enum Code: String, Sendable, Hashable {
        /// The command could not be started (not found, not executable).
        case commandFailed = "command_failed"
        /// The gateway could not listen on 127.0.0.1.
        case gatewayFailed = "gateway_failed"
        /// The run's log could not be written.
        case logFailed = "log_failed"
        /// The folder the logs go in cannot be made or written.
        case unwritable
        /// The cassette could not be opened.
        case cassetteFailed = "cassette_failed"
        /// The MCP proxy's server could not be started.
        case serverFailed = "server_failed"
        /// An approval could not be given (`agent-eval approve`): no such call waits, or its
        /// file cannot be written.
        case approvalFailed = "approval_failed"
        /// Someone else answered the call first (two people answering at once): this answer
        /// was not taken.
        case alreadyAnswered = "already_answered"
        /// A fork of a recorded run could not be made: an edit that cannot reach the program, or a
        /// program that did not retrace its parent up to the fork point.
        case forkFailed = "fork_failed"
    }

    public var code: Code
    public var message: String
    public var hint: String?

    public init(_ code: Code, _ message: String, hint: String? = nil) {
        self.code = code
        self.message = message
        self.hint = hint
    }

    public var diagnosticCode: String { "record." + code.rawValue }
    public var place: SourceLocation? { nil }
}
