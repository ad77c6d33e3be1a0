public import AgentRuntime
import Foundation
import TraceCore

/// How every outgoing request of the project is sent — a model's, a judge's, an OTLP export's:
/// the one place that holds an attempt to its `RequestLimits` and keeps the credentials it
/// carried out of what it says (docs/models.md, "Limits").
///
/// - The whole attempt, the streamed body included, ends at `limits.timeoutMs` on `clock`,
///   however often the server sends: the attempt's task is cancelled, which cuts the
///   connection.
/// - A reply body past `limits.maxReplyBytes` ends the attempt; nothing more of it is read.
/// - Text that came from the peer or the transport (an error body, a stream's event, a
///   connection error) goes through `redact` before anyone sees it: a server that echoes the
///   key it was sent shows `[redacted]`.
///
/// The per-line limit belongs to the one reader of lines, `ServerSentEventParser`, made with
/// `limits.maxLineBytes`.
public struct RequestPolicy: Sendable {
    public var limits: RequestLimits
    /// Values the request carried that must never be shown: an API key, a collector's headers.
    public let secrets: [String]
    /// The clock of the per-attempt deadline: the live clock unless a test injects one.
    public var clock: any Clock<Duration>

    public init(limits: RequestLimits, secrets: [String] = [], clock: any Clock<Duration> = LiveClock()) {
        self.limits = limits
        self.secrets = secrets.filter { $0.count >= Self.shortestSecret }
        self.clock = clock
    }

    /// Shorter values are not taken for secrets: replacing every "1" of a message would say
    /// nothing and hide much.
    static let shortestSecret = 4

    /// How an attempt ended.
    enum Ending: Sendable {
        /// The reply arrived whole (or as much of it as the reader wanted: `EnoughRead`).
        case complete
        /// `limits.timeoutMs` passed first; the attempt was cut off.
        case timedOut
        /// The reply grew past `limits.maxReplyBytes`; the attempt was cut off.
        case tooLarge
        /// The caller was cancelled (Ctrl-C).
        case cancelled
        /// The transport failed, or the reader threw.
        case failed(any Error)
    }

    /// Thrown by a reader that has all it wants of a reply (the start of an error body, the
    /// answer an event stream was opened for): the attempt ends `complete`, without reading
    /// the rest.
    public struct EnoughRead: Error {
        public init() {}
    }

    private struct TooLarge: Error {}

    /// Sends `request` through `transport` and folds each part of the reply into `state` with
    /// `take`, as it arrives, under the limits; returns the state and how the attempt ended.
    func send<State: Sendable>(
        _ request: TransportRequest, through transport: any ModelTransport, into state: State,
        take: @escaping @Sendable (TransportPart, inout State) throws -> Void
    ) async -> (state: State, ending: Ending) {
        let maxReplyBytes = limits.maxReplyBytes
        let (outcome, timedOut) = await Deadline.run(within: .milliseconds(limits.timeoutMs), on: clock) {
            () async -> (State, Ending) in
            var state = state
            var received = 0
            do {
                try await transport.exchange(request) { parts in
                    for part in parts {
                        if case .chunk(let bytes) = part {
                            received += bytes.count
                            if received > maxReplyBytes { throw TooLarge() }
                        }
                        try take(part, &state)
                    }
                    // Also between parts: a reply that keeps coming stops at once when cut off.
                    try Task.checkCancellation()
                }
                return (state, .complete)
            } catch is EnoughRead {
                return (state, .complete)
            } catch is TooLarge {
                return (state, .tooLarge)
            } catch is CancellationError {
                return (state, .cancelled)
            } catch {
                return (state, Task.isCancelled ? .cancelled : .failed(error))
            }
        }
        return (outcome.0, timedOut ? .timedOut : outcome.1)
    }

    /// `text` with every secret the request carried replaced by `[redacted]`: as sent, and as
    /// a server may echo it (JSON-escaped, percent-encoded).
    /// A preview cut inside a secret (`…` after its first characters) loses that start too.
    public func redact(_ text: String) -> String {
        var text = text
        for secret in secrets {
            for form in Self.forms(of: secret) {
                if text.contains(form) { text = text.replacingOccurrences(of: form, with: "[redacted]") }
                text = Self.redactingCutStart(of: form, in: text)
            }
        }
        return text
    }

    /// `text` with the start of `form` (at least `shortestSecret` characters of it) that a
    /// preview's cut (`…`) left behind replaced.
    private static func redactingCutStart(of form: String, in text: String) -> String {
        guard text.contains("…") else { return text }
        var result = ""
        var rest = Substring(text)
        while let cut = rest.firstIndex(of: "…") {
            var before = rest[..<cut]
            for length in stride(from: form.count - 1, through: shortestSecret, by: -1) where before.hasSuffix(form.prefix(length)) {
                before = before.dropLast(length)
                result += before + "[redacted]"
                before = ""
                break
            }
            result += before + "…"
            rest = rest[rest.index(after: cut)...]
        }
        return result + rest
    }

    private static func forms(of secret: String) -> [String] {
        let escaped = String(JSONWriter.encodeString(.string(secret)).dropFirst().dropLast())
        let candidates = [
            secret, escaped, escaped.replacingOccurrences(of: "/", with: "\\/"),
            secret.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? secret,
        ]
        var forms: [String] = []
        for form in candidates where !forms.contains(form) { forms.append(form) }
        return forms
    }
}
