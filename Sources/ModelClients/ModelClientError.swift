public import TraceCore

/// Why a model client gave up on a request: the provider's own message, the HTTP status
/// when there was one, and every attempt it made. Never holds the API key or a header.
public struct ModelClientError: Diagnostic, Hashable {
    public enum Kind: String, Sendable {
        /// The server answered with an error status that asking again does not fix.
        case rejected
        /// Retryable failures until the retries ran out.
        case exhausted
        /// The reply could not be read (not a stream, not JSON, an unknown shape).
        case malformed
        /// Set-up: a key that is not in the environment, a URL that is not one.
        case configuration
        /// A cassette has no recording for the request (strict replay).
        case notRecorded
    }

    public var kind: Kind
    public var message: String
    public var status: Int?
    /// Every failed attempt, oldest first, the last one included.
    public var attempts: [ModelAttempt]
    public var hint: String?

    public init(_ kind: Kind, _ message: String, status: Int? = nil, attempts: [ModelAttempt] = [], hint: String? = nil) {
        self.kind = kind
        self.message = message
        self.status = status
        self.attempts = attempts
        self.hint = hint
    }

    public var diagnosticCode: String { "model.\(kind.rawValue)" }
    public var place: SourceLocation? { nil }

    /// The message with the attempts, as a run's stop records it.
    public var description: String {
        guard attempts.count > 1 else { return message }
        // A server that is down fails every attempt alike: say so once, with the waits.
        if let first = attempts.first, attempts.allSatisfy({ $0.error == first.error && $0.status == first.status }) {
            let waits = attempts.dropLast().map { "\($0.waitedMs)" }.joined(separator: ", ")
            return message + "; every attempt failed the same way (waited \(waits) ms between them)"
        }
        return message + "; attempts: "
            + attempts.enumerated().map { "\($0.offset + 1)) \($0.element.summary)" }.joined(separator: "; ")
    }
}
