import Foundation
public import TraceCore

/// Posts a body to an HTTP endpoint (an OTLP collector) through the model clients' transport
/// and with their retry rules: connection errors, 408, 409, 429, 5xx retried with exponential
/// backoff and full jitter, honouring `retry-after-ms` / `retry-after`; any other error status
/// is final. This module owns the HTTP stack, so other modules post through it.
public struct HTTPPoster: Sendable {
    public var maxRetries: Int
    public var timeoutMs: Int
    let transport: any ModelTransport
    let sleep: @Sendable (Int) async throws -> Void

    public init(maxRetries: Int = 4, timeoutMs: Int = 30_000) {
        self.init(maxRetries: maxRetries, timeoutMs: timeoutMs, transport: HTTPTransport())
    }

    init(
        maxRetries: Int, timeoutMs: Int, transport: any ModelTransport,
        sleep: @escaping @Sendable (Int) async throws -> Void = { try await Task.sleep(for: .milliseconds($0)) }
    ) {
        self.maxRetries = maxRetries
        self.timeoutMs = timeoutMs
        self.transport = transport
        self.sleep = sleep
    }

    /// What the server answered, and the attempts before it that failed.
    public struct Response: Sendable {
        public var status: Int
        public var body: [UInt8]
        public var attempts: [ModelAttempt]
    }

    /// Posts `body` with `contentType` and `headers` (their values never appear in an error);
    /// returns the 2xx answer, or throws with every attempt.
    public func post(_ body: [UInt8], to url: String, contentType: String = "application/json", headers: [HTTPHeader] = []) async throws
        -> Response
    {
        let request = TransportRequest(
            url: url, headers: [HTTPHeader(name: "content-type", value: contentType)] + headers, body: body, timeoutMs: timeoutMs,
            connectTimeoutMs: min(timeoutMs, 10_000), idleTimeoutMs: timeoutMs)
        var attempts: [ModelAttempt] = []
        while true {
            var status = 0
            var headers: [HTTPHeader] = []
            var answer: [UInt8] = []
            var failure: String?
            do {
                try await transport.exchange(request) { parts in
                    for part in parts {
                        switch part {
                        case .head(let code, let fields):
                            status = code
                            headers = fields
                        case .chunk(let bytes): if answer.count < 64 * 1024 { answer += bytes }
                        }
                    }
                }
            } catch is CancellationError {
                throw CancellationError()
            } catch {
                failure = HTTPTransport.describe(error, request: request)
            }
            if failure == nil, (200..<300).contains(status) { return Response(status: status, body: answer, attempts: attempts) }
            let retryable = failure != nil || [408, 409, 429].contains(status) || (500...599).contains(status)
            let message = failure ?? "HTTP \(status): \(HTTPModelClient.preview(answer))"
            let retryAfter = HTTPModelClient.retryAfter(headers)
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
