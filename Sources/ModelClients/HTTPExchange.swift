public import AgentRuntime
import Foundation
public import TraceCore

/// One HTTP request whose answer is handed over part by part as it arrives, under
/// `RequestPolicy`'s limits (the whole exchange within `limits.timeoutMs` on the clock, at most
/// `limits.maxReplyBytes` of answer, the request's secrets kept out of every message), and with
/// no retry: for a protocol that decides itself what a failure means — MCP over Streamable HTTP
/// (MCPTools), where a `tools/call` sent twice may act twice. This module owns the HTTP stack,
/// so other modules exchange through it.
///
/// ```swift
/// let exchange = HTTPExchange(limits: HTTPPoster.limits(timeoutMs: 30_000), secrets: [token])
/// let (body, ending) = await exchange.send(url: url, headers: headers, body: bytes, into: [UInt8]()) { part, body in
///     if case .chunk(let bytes) = part { body += bytes }
/// }
/// ```
public struct HTTPExchange: Sendable {
    /// How an exchange ended.
    public enum Ending: Sendable, Hashable {
        /// The answer came whole, or the reader had all it wanted (it threw `RequestPolicy.EnoughRead`).
        case complete
        /// `limits.timeoutMs` passed first; the exchange was cut off (the connection closed).
        case timedOut
        /// The answer grew past `limits.maxReplyBytes`; nothing more of it was read.
        case tooLarge
        /// The caller was cancelled; the exchange was cut off.
        case cancelled
        /// The connection failed, or the reader threw: why, as a sentence with no secret in it.
        case failed(String)
    }

    /// Thrown by a reader for an answer the protocol does not allow (a line too long, a body
    /// that is not JSON): the exchange ends `failed` with `message`.
    public struct Unreadable: Error {
        public var message: String

        public init(_ message: String) {
            self.message = message
        }
    }

    public var limits: RequestLimits
    let policy: RequestPolicy
    let transport: any ModelTransport

    public init(limits: RequestLimits, secrets: [String] = [], clock: any Clock<Duration> = LiveClock()) {
        self.init(limits: limits, secrets: secrets, clock: clock, transport: HTTPTransport())
    }

    init(limits: RequestLimits, secrets: [String], clock: any Clock<Duration>, transport: any ModelTransport) {
        self.limits = limits
        policy = RequestPolicy(limits: limits, secrets: secrets, clock: clock)
        self.transport = transport
    }

    /// Sends one request and folds each part of the answer into `state` with `take` as it
    /// arrives; returns the state and how the exchange ended.
    public func send<State: Sendable>(
        method: String = "POST", url: String, headers: [HTTPHeader], body: [UInt8], into state: State,
        take: @escaping @Sendable (TransportPart, inout State) throws -> Void
    ) async -> (state: State, ending: Ending) {
        let request = TransportRequest(method: method, url: url, headers: headers, body: body, limits: limits)
        let (state, ending) = await policy.send(request, through: transport, into: state, take: take)
        switch ending {
        case .complete: return (state, .complete)
        case .timedOut: return (state, .timedOut)
        case .tooLarge: return (state, .tooLarge)
        case .cancelled: return (state, .cancelled)
        case .failed(let error):
            let text = (error as? Unreadable)?.message ?? HTTPTransport.describe(error, request: request)
            return (state, .failed(policy.redact(text)))
        }
    }

    /// `text` with every secret the requests carry replaced by `[redacted]` (a server that
    /// echoes a token it was sent shows none).
    public func redact(_ text: String) -> String { policy.redact(text) }
}
