public import AgentRuntime
import Foundation
public import TraceCore

/// Posts a body to an HTTP endpoint (an OTLP collector) through the model clients' transport
/// and with their retry rules: connection errors, 408, 409, 429, 5xx retried with exponential
/// backoff and full jitter, honouring `retry-after-ms` / `retry-after`; any other error status
/// is final. This module owns the HTTP stack, so other modules post through it.
///
/// Each attempt is held to `limits` as a model's request is (`RequestPolicy`): the whole
/// attempt, the answer included, ends at `limits.timeoutMs`; an answer past
/// `limits.maxReplyBytes` ends it; no message shows a header's value, even one the server
/// echoes.
public struct HTTPPoster: Sendable {
    public var maxRetries: Int
    public var limits: RequestLimits
    let transport: any ModelTransport
    let sleep: @Sendable (Int) async throws -> Void
    let clock: any Clock<Duration>

    /// The limits of a post: `timeoutMs` per attempt (the answer included), connecting within
    /// at most 10 s of it, and at most `maxReplyBytes` of answer.
    public static func limits(timeoutMs: Int = 30_000, maxReplyBytes: Int = RequestLimits.defaultMaxReplyBytes) -> RequestLimits {
        RequestLimits(
            timeoutMs: timeoutMs, connectTimeoutMs: min(timeoutMs, 10_000), idleTimeoutMs: timeoutMs, maxReplyBytes: maxReplyBytes)
    }

    public init(maxRetries: Int = 4, limits: RequestLimits = HTTPPoster.limits()) {
        self.init(maxRetries: maxRetries, limits: limits, transport: HTTPTransport())
    }

    init(
        maxRetries: Int, limits: RequestLimits, transport: any ModelTransport,
        sleep: @escaping @Sendable (Int) async throws -> Void = { try await Task.sleep(for: .milliseconds($0)) },
        clock: any Clock<Duration> = LiveClock()
    ) {
        self.maxRetries = maxRetries
        self.limits = limits
        self.transport = transport
        self.sleep = sleep
        self.clock = clock
    }

    /// What the server answered, and the attempts before it that failed.
    public struct Response: Sendable {
        public var status: Int
        public var body: [UInt8]
        public var attempts: [ModelAttempt]
    }

    /// The most of an answer kept (a collector's answer is a short status).
    static let answerLimit = 64 * 1024

    /// What is read of an answer while it arrives.
    private struct Answer: Sendable {
        var status = 0
        var headers: [HTTPHeader] = []
        var body: [UInt8] = []
    }

    /// Posts `body` with `contentType` and `headers` (their values never appear in an error);
    /// returns the 2xx answer, or throws with every attempt.
    public func post(_ body: [UInt8], to url: String, contentType: String = "application/json", headers: [HTTPHeader] = []) async throws
        -> Response
    {
        let request = TransportRequest(
            url: url, headers: [HTTPHeader(name: "content-type", value: contentType)] + headers, body: body, limits: limits)
        let policy = RequestPolicy(limits: limits, secrets: headers.map(\.value), clock: clock)
        var attempts: [ModelAttempt] = []
        while true {
            let (answer, ending) = await policy.send(request, through: transport, into: Answer()) { part, answer in
                switch part {
                case .head(let code, let fields):
                    answer.status = code
                    answer.headers = fields
                case .chunk(let bytes):
                    answer.body += bytes.prefix(Self.answerLimit - answer.body.count)
                    if answer.body.count >= Self.answerLimit { throw RequestPolicy.EnoughRead() }
                }
            }
            let status = answer.status
            var failure: String?
            switch ending {
            case .complete:
                if (200..<300).contains(status) { return Response(status: status, body: answer.body, attempts: attempts) }
            case .cancelled:
                throw CancellationError()
            case .timedOut:
                failure =
                    "the attempt took longer than \(limits.timeoutMs) ms, the answer included"
                    + (status == 0 ? "" : " (HTTP \(status), \(answer.body.count) bytes of it had come)")
            case .tooLarge:
                failure = "the answer is larger than \(limits.maxReplyBytes) bytes; the rest was not read"
            case .failed(let error):
                failure = HTTPTransport.describe(error, request: request)
            }
            let retryable = failure != nil || [408, 409, 429].contains(status) || (500...599).contains(status)
            let message = policy.redact(
                failure
                    ?? "HTTP \(status)\(HTTPModelClient.redirectNote(status: status, headers: answer.headers)): \(HTTPModelClient.preview(answer.body))"
            )
            let retryAfter = HTTPModelClient.retryAfter(answer.headers)
            let canRetry = retryable && attempts.count < maxRetries
            let wait = canRetry ? min(retryAfter ?? HTTPModelClient.backoff(retry: attempts.count), HTTPModelClient.retryAfterCapMs) : 0
            attempts.append(ModelAttempt(status: failure == nil ? status : nil, error: message, retryAfterMs: retryAfter, waitedMs: wait))
            guard canRetry else {
                throw ModelClientError(
                    retryable ? .exhausted : .rejected,
                    "POST \(url) " + (retryable ? "gave up after \(attempts.count) attempt\(attempts.count == 1 ? "" : "s"): " : "failed: ")
                        + message,
                    status: failure == nil ? status : nil, attempts: attempts,
                    hint: retryable
                        ? "is the collector running and reachable?" : "check the endpoint URL (an OTLP/HTTP traces path ends in /v1/traces)"
                )
            }
            try await sleep(wait)
        }
    }
}
