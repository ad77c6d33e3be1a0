public import AgentRuntime
import Foundation
public import TraceCore

/// A model served over HTTP: builds the provider's request from the run's `ModelRequest`,
/// streams the reply, and hands the runtime the provider's assembled message to map onto a
/// decision (`ReplyFormat`).
///
/// Transport concerns stay here: connection errors, 408, 409, 429, 5xx and Anthropic's 529
/// are retried with exponential backoff and full jitter, honouring `retry-after-ms` and
/// `retry-after`; a stream that breaks off or sends a retryable `error` event is asked
/// again; anything else ends the request with the provider's message. Every failed attempt
/// is returned with the reply (`decision_made.attempts`) or with the error.
///
/// Each attempt is sent under the model's `RequestLimits` (`RequestPolicy`): its `timeout_ms`
/// holds while the reply streams in, however often the server sends (a timeout is retried);
/// a reply past `max_reply_bytes` or a stream line past `max_line_bytes` ends the request.
public struct HTTPModelClient: ModelClient {
    public let settings: ModelSettings
    let dialect: any ProviderDialect
    let transport: any ModelTransport
    let apiKey: String?
    let limiter: RateLimiter?
    /// Waits between attempts; tests make it short, never the logic different.
    let sleep: @Sendable (Int) async throws -> Void
    /// What each attempt is held to: the model's limits, its key kept out of every message.
    let policy: RequestPolicy

    /// Before retry n (1 for the first): a random wait up to min(20 s, 1 s · 2ⁿ⁻¹).
    static let retryBackoff = Backoff.fullJitter(initialMs: 1_000, capMs: 20_000)
    /// The longest wait a server's `retry-after` can ask for.
    static let retryAfterCapMs = 60_000
    /// The most of an error body read for its message: the rest is not read.
    static let errorBodyLimit = 64 * 1024

    /// A client over another transport (an in-memory one in benchmarks, say); without a
    /// rate limit. `HTTPModelClients` makes the usual ones.
    public init(settings: ModelSettings, transport: any ModelTransport, apiKey: String? = nil) {
        self.init(settings: settings, transport: transport, apiKey: apiKey, limiter: nil)
    }

    init(
        settings: ModelSettings, transport: any ModelTransport, apiKey: String?, limiter: RateLimiter?,
        sleep: @escaping @Sendable (Int) async throws -> Void = { try await Task.sleep(for: .milliseconds($0)) },
        clock: any Clock<Duration> = LiveClock()
    ) {
        self.settings = settings
        switch settings.provider {
        case .openai: dialect = OpenAIChatDialect()
        case .anthropic: dialect = AnthropicMessagesDialect()
        }
        self.transport = transport
        self.apiKey = apiKey
        self.limiter = limiter
        self.sleep = sleep
        policy = RequestPolicy(limits: settings.limits, secrets: apiKey.map { [$0] } ?? [], clock: clock)
    }

    public var identity: ModelIdentity { settings.identity }
    public var sampling: SamplingSettings? {
        let sampling = SamplingSettings(temperature: settings.temperature, maxTokens: settings.maxTokens, seed: settings.seed)
        return sampling == SamplingSettings() ? nil : sampling
    }

    /// The provider request body for `request`: what a cassette keys on.
    public func requestBody(for request: ModelRequest) -> JSONValue {
        dialect.body(for: request, settings: settings)
    }

    public func reply(to request: ModelRequest) async throws -> ModelReply {
        let body = JSONWriter.encode(requestBody(for: request))
        if let limiter {
            try await limiter.acquire(tokens: request.packet.tokenEstimate + (settings.maxTokens ?? 0))
        }
        var headers = [HTTPHeader(name: "content-type", value: "application/json")]
        headers += dialect.headers(apiKey: apiKey)
        if settings.stream { headers.append(HTTPHeader(name: "accept", value: "text/event-stream")) }
        let outgoing = TransportRequest(url: settings.baseURL + dialect.path, headers: headers, body: body, limits: settings.limits)
        var attempts: [ModelAttempt] = []
        while true {
            try Task.checkCancellation()
            switch await attempt(outgoing) {
            case .replied(let raw, let usage, let ttftUs):
                let cost = usage.flatMap { usage in PriceTable.prices(for: settings)?.cost(of: usage) }
                return ModelReply(
                    raw: JSONWriter.encodeString(raw), format: dialect.format.rawValue, usage: usage, timeToFirstTokenUs: ttftUs,
                    costUSD: cost, attempts: attempts)
            case .cancelled:
                throw CancellationError()
            case .failed(let failure):
                try Task.checkCancellation()
                let canRetry = failure.isRetryable && attempts.count < settings.maxRetries
                let wait = canRetry ? min(failure.retryAfterMs ?? Self.backoff(retry: attempts.count + 1), Self.retryAfterCapMs) : 0
                attempts.append(
                    ModelAttempt(status: failure.status, error: failure.message, retryAfterMs: failure.retryAfterMs, waitedMs: wait))
                guard canRetry else {
                    let gaveUp = failure.isRetryable ? "gave up after \(attempts.count) attempt\(attempts.count == 1 ? "" : "s")" : "failed"
                    if failure.kind == .notRecorded {
                        throw ModelClientError(.notRecorded, failure.message, attempts: attempts, hint: failure.hint)
                    }
                    throw ModelClientError(
                        failure.isRetryable ? .exhausted : failure.kind,
                        "the \(settings.provider.rawValue) request for \(settings.name) \(gaveUp): "
                            + (failure.status.map { "HTTP \($0): " } ?? "") + failure.message,
                        status: failure.status, attempts: attempts, hint: failure.hint)
                }
                try await sleep(wait)
            }
        }
    }

    /// The wait before retry `retry` (1 for the first): random, below `retryBackoff`'s bound.
    static func backoff(retry: Int) -> Int { retryBackoff.delayMs(retry: retry, source: RandomJitter()) }

    // MARK: One attempt

    struct Failure: Sendable {
        var status: Int?
        var message: String
        var isRetryable: Bool
        var retryAfterMs: Int?
        var kind: ModelClientError.Kind = .rejected
        var hint: String?
    }

    enum AttemptResult: Sendable {
        case replied(raw: JSONValue, usage: TokenUsage?, ttftUs: Int?)
        case failed(Failure)
        /// The run was cancelled (Ctrl-C): not the model's failure, and never retried.
        case cancelled
    }

    /// What is read of a response while it arrives.
    struct Reading: Sendable {
        var status = 0
        var headers: [HTTPHeader] = []
        var isEventStream = false
        var parser: ServerSentEventParser
        var assembler: any ReplyAssembler
        /// A non-streamed body, or the start of an error body.
        var body: [UInt8] = []
        /// Bytes of body received.
        var received = 0
        var firstContentUs: Int?
        /// Where the run's observer is, and how much of the text it was shown.
        var showText = ModelTextObserver.current
        var textShown = 0
    }

    /// One attempt under the model's limits (`RequestPolicy`). Every failure it reports has
    /// the key kept out of its message, here: a server may echo what it was sent (an error
    /// body, an event), and the key never goes further than the request.
    func attempt(_ request: TransportRequest) async -> AttemptResult {
        let clock = ContinuousClock()
        let started = clock.now
        let reading = Reading(parser: ServerSentEventParser(maxLineBytes: settings.limits.maxLineBytes), assembler: dialect.makeAssembler())
        let (read, ending) = await policy.send(request, through: transport, into: reading) { part, reading in
            try Self.take(part, into: &reading, elapsedUs: { Self.microseconds(started.duration(to: clock.now)) })
        }
        let result = outcome(of: read, ending: ending, request: request)
        guard case .failed(var failure) = result else { return result }
        failure.message = policy.redact(failure.message)
        return .failed(failure)
    }

    /// What an attempt came to, from what was read and how it ended.
    func outcome(of reading: Reading, ending: RequestPolicy.Ending, request: TransportRequest) -> AttemptResult {
        let status = reading.status == 0 ? nil : reading.status
        switch ending {
        case .complete:
            return finish(reading)
        case .cancelled:
            return .cancelled
        case .timedOut:
            let progress = status == nil ? "before the server answered" : "\(reading.received) bytes of the reply had come"
            return .failed(
                Failure(
                    status: status, message: "the attempt took longer than \(settings.limits.timeoutMs) ms (timeout_ms); \(progress)",
                    isRetryable: true))
        case .tooLarge:
            return .failed(
                Failure(
                    status: status,
                    message: "the reply is larger than \(settings.limits.maxReplyBytes) bytes (max_reply_bytes); the rest was not read",
                    isRetryable: false, kind: .malformed,
                    hint: "raise the model's max_reply_bytes if replies this large are expected"))
        case .failed(let problem as StreamProblem):
            return .failed(Failure(status: status, message: problem.message, isRetryable: problem.isRetryable, kind: .malformed))
        case .failed(let error as ModelClientError):
            // A cassette's answer (nothing recorded): final, and said as it is.
            return .failed(Failure(status: error.status, message: error.message, isRetryable: false, kind: error.kind, hint: error.hint))
        case .failed(let error):
            return .failed(Failure(status: status, message: HTTPTransport.describe(error, request: request), isRetryable: true))
        }
    }

    /// Takes one part of the response into `reading`.
    static func take(_ part: TransportPart, into reading: inout Reading, elapsedUs: () -> Int) throws {
        switch part {
        case .head(let status, let headers):
            reading.status = status
            reading.headers = headers
            let type = headers.first { $0.name.lowercased() == "content-type" }?.value.lowercased() ?? ""
            reading.isEventStream = status == 200 && type.hasPrefix("text/event-stream")
        case .chunk(let bytes):
            reading.received += bytes.count
            guard reading.isEventStream else {
                guard reading.status == 200 else {
                    // An error body is read for its message: its start is enough.
                    reading.body += bytes.prefix(errorBodyLimit - reading.body.count)
                    if reading.body.count >= errorBodyLimit { throw RequestPolicy.EnoughRead() }
                    return
                }
                reading.body += bytes
                return
            }
            let events: [ServerSentEvent]
            do {
                events = try reading.parser.feed(bytes)
            } catch {
                throw StreamProblem(
                    message:
                        "the stream sent a line (or an event) longer than \(error.limit) bytes (max_line_bytes) at byte \(error.offset); "
                        + "the rest was not read",
                    isRetryable: false)
            }
            for event in events {
                try reading.assembler.consume(event)
                if reading.firstContentUs == nil, reading.assembler.hasContent { reading.firstContentUs = elapsedUs() }
                if let show = reading.showText {
                    let text = reading.assembler.textSoFar.utf8
                    if text.count > reading.textShown {
                        show(String(decoding: text.dropFirst(reading.textShown), as: UTF8.self))
                        reading.textShown = text.count
                    }
                }
            }
            // The end marker: the reply is whole, whatever the server does with the rest of
            // its body (ends it late, resets the connection).
            if reading.assembler.isComplete { throw RequestPolicy.EnoughRead() }
        }
    }

    func finish(_ reading: Reading) -> AttemptResult {
        var reading = reading
        let type = reading.headers.first { $0.name.lowercased() == "content-type" }?.value ?? "no content type"
        guard reading.status == 200 else {
            return .failed(failure(status: reading.status, headers: reading.headers, body: reading.body))
        }
        if reading.isEventStream {
            guard reading.assembler.isComplete else {
                return .failed(
                    Failure(
                        status: 200,
                        message: "the stream ended after \(reading.parser.offset) bytes before the reply was complete (no "
                            + (settings.provider == .openai ? "[DONE]" : "message_stop") + ")",
                        isRetryable: true))
            }
            let (raw, usage) = reading.assembler.reply()
            return .replied(raw: raw, usage: usage, ttftUs: reading.firstContentUs)
        }
        guard let whole = try? JSONParser.parse(reading.body), whole.objectValue != nil else {
            return .failed(
                Failure(
                    status: 200,
                    message: "the server answered HTTP 200 with \(type), not a model reply: \(Self.preview(reading.body))",
                    isRetryable: false, kind: .malformed, hint: "check base_url: it should end in /v1 for OpenAI-compatible servers"))
        }
        do {
            try reading.assembler.consume(whole: whole)
        } catch {
            return .failed(Failure(status: 200, message: error.message, isRetryable: error.isRetryable, kind: .malformed))
        }
        let (raw, usage) = reading.assembler.reply()
        return .replied(raw: raw, usage: usage, ttftUs: nil)
    }

    /// An error status: the provider's message from its JSON error body (or the page's
    /// text), whether to retry, and the server's `retry-after`.
    func failure(status: Int, headers: [HTTPHeader], body: [UInt8]) -> Failure {
        let retryable = [408, 409, 429, 529].contains(status) || (500...599).contains(status)
        var message = Self.preview(body)
        if let value = try? JSONParser.parse(body) {
            let error = value["error"] ?? value
            if let text = error["message"]?.stringValue ?? value["message"]?.stringValue {
                message = (error["type"]?.stringValue.map { "\($0): " } ?? "") + text
            }
        }
        var hint: String?
        switch status {
        case 401, 403:
            // Said in the message, not only in a hint: a run's stop records the message alone.
            message += "; " + credentialAdvice(status: status)
        case 404: hint = "check base_url (\(settings.baseURL)) and the model name (\(settings.name))"
        case 300..<400:
            // Said first: the answer's body (often "moved") says nothing of why it stopped there.
            message = String(Self.redirectNote(status: status, headers: headers).dropFirst(2).dropLast()) + ": " + message
            hint = "set base_url to where the server redirects (\(settings.baseURL) is redirected)"
        default: break
        }
        return Failure(
            status: status, message: message, isRetryable: retryable, retryAfterMs: Self.retryAfter(headers), kind: .rejected, hint: hint)
    }

    /// What to do about a 401 or 403: the variable the key came from (its name, never its value)
    /// and the base URL it was sent to.
    func credentialAdvice(status: Int) -> String {
        let variable = settings.apiKeyVariable
        let baseURL = settings.baseURL
        guard apiKey != nil else {
            return
                "no API key was sent, as \(variable) is not set: set \(variable) (or the model's api_key_env) to a key valid for \(baseURL)"
        }
        return status == 403
            ? "check that the key in \(variable) is valid for \(baseURL) and may use the model \(settings.name)"
            : "check that the key in \(variable) is valid for \(baseURL)"
    }

    /// `retry-after-ms` (milliseconds) or `retry-after` (seconds; an HTTP date is not read).
    static func retryAfter(_ headers: [HTTPHeader]) -> Int? {
        func value(_ name: String) -> Double? {
            headers.first { $0.name.lowercased() == name }.flatMap { Double($0.value.trimmingCharacters(in: .whitespaces)) }
        }
        // What the server asked for, rounded up, and at most the largest measure a log holds:
        // `retry-after: 1e300` (or `inf`) is a wait past any cap, not a trap converting it.
        func milliseconds(_ ms: Double) -> Int { min(Int(saturating: ms.rounded(.up)), JSONScanner.maximumMeasure) }
        if let ms = value("retry-after-ms"), ms >= 0 { return milliseconds(ms) }
        if let seconds = value("retry-after"), seconds >= 0 { return milliseconds(seconds * 1000) }
        return nil
    }

    /// The start of a body as one line: an HTML page's title, or its first 200 characters.
    /// What a redirect answer (3xx) needs said: where it pointed, and that it was not followed (a
    /// redirect could carry the request's credentials — an API key, a header a server file gives —
    /// to another host). Empty for any other status.
    public static func redirectNote(status: Int, location: String?) -> String {
        guard (300..<400).contains(status) else { return "" }
        return " (a redirect" + (location.map { " to \($0)" } ?? "")
            + ", not followed: agent-eval follows no redirect, which could carry the request's credentials to another host; give the URL it names)"
    }

    static func redirectNote(status: Int, headers: [HTTPHeader]) -> String {
        redirectNote(status: status, location: headers.first { $0.name.lowercased() == "location" }?.value)
    }

    static func preview(_ body: [UInt8]) -> String {
        let text = String(decoding: body.prefix(4096), as: UTF8.self)
        if let open = text.range(of: "<title>", options: .caseInsensitive),
            let close = text.range(of: "</title>", options: .caseInsensitive, range: open.upperBound..<text.endIndex)
        {
            return "\"" + text[open.upperBound..<close.lowerBound].trimmingCharacters(in: .whitespacesAndNewlines) + "\" (an HTML page)"
        }
        let line = text.split(whereSeparator: \.isNewline).joined(separator: " ")
        if line.isEmpty { return "an empty body" }
        return line.count > 200 ? String(line.prefix(200)) + "…" : line
    }

    static func microseconds(_ duration: Duration) -> Int {
        let parts = duration.components
        return Int(parts.seconds) * 1_000_000 + Int(parts.attoseconds / 1_000_000_000_000)
    }
}
