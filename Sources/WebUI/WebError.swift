public import TraceCore

/// Why `agent-eval serve` cannot start or go on.
public struct WebError: Diagnostic, Hashable {
    public enum Code: String, Sendable, Hashable {
        /// The address cannot be listened on.
        case listenFailed = "listen_failed"
        /// An address other than the loopback one, without a token.
        case tokenNeeded = "token_needed"
        /// The files cannot be watched for changes.
        case watchFailed = "watch_failed"
        /// A directory given is not one.
        case notADirectory = "not_a_directory"
    }

    public var code: Code
    public var message: String
    public var hint: String?

    public init(_ code: Code, _ message: String, hint: String? = nil) {
        self.code = code
        self.message = message
        self.hint = hint
    }

    public var diagnosticCode: String { "serve." + code.rawValue }
    public var place: SourceLocation? { nil }
}
