import AgentRuntime
import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore

@testable import ModelClients

/// Every outgoing request is held to its limits whatever the peer does (`RequestPolicy`): a
/// reply that keeps coming is cut at the attempt's `timeout_ms`, one that keeps growing at
/// `max_reply_bytes`, a line that never ends at `max_line_bytes`; and no credential the request
/// carried comes back in a message. Hostile peers are the local server's scenarios.
@Suite("Request limits against hostile peers", .ownThread, .serialized)
struct RequestLimitTests {
    /// A transport that answers 200 and then sends a valid content delta every millisecond,
    /// forever: only cancellation ends it.
    struct DripTransport: ModelTransport {
        func exchange(_ request: TransportRequest, receive: ([TransportPart]) throws -> Void) async throws {
            try receive([
                .head(status: 200, headers: [HTTPHeader(name: "content-type", value: "text/event-stream")]),
                .chunk(Array("data: {\"choices\":[{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n".utf8)),
            ])
            while true {
                try await Task.sleep(for: .milliseconds(1))
                try receive([.chunk(Array("data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\".\"}}]}\n\n".utf8))])
            }
        }
    }

    static func settings(
        _ baseURL: String, provider: ModelSettings.Provider = .openai, timeoutMs: Int = 1_000, stream: Bool = true,
        maxReplyBytes: Int = RequestLimits.defaultMaxReplyBytes, maxLineBytes: Int = RequestLimits.defaultMaxLineBytes
    ) -> ModelSettings {
        var settings = ModelSettings(provider: provider, name: "local-model", baseURL: baseURL, stream: stream, timeoutMs: timeoutMs)
        settings.maxRetries = 0
        settings.limits.maxReplyBytes = maxReplyBytes
        settings.limits.maxLineBytes = maxLineBytes
        return settings
    }

    /// The error a request ends with, and how long it took.
    static func failure(of client: HTTPModelClient) async throws -> (ModelClientError, Duration) {
        let started = ContinuousClock.now
        do {
            let reply = try await client.reply(to: HTTPModelClientTests.request)
            Issue.record("a reply: \(reply.raw.prefix(200))")
        } catch let error as ModelClientError {
            return (error, ContinuousClock.now - started)
        }
        throw CancellationError()
    }

    @Test("on an injected clock, each attempt of a reply that never stops streaming is cut at timeout_ms, and retried")
    func injectedClock() async throws {
        let clock = ManualClock()
        var settings = Self.settings("http://unused/v1")
        settings.maxRetries = 1
        let client = HTTPModelClient(
            settings: settings, transport: DripTransport(), apiKey: nil, limiter: nil, sleep: { _ in }, clock: clock)
        async let failure = Self.failure(of: client)
        for _ in 0..<2 {
            await clock.waitForSleepers()
            clock.advance(by: .milliseconds(999))
            #expect(clock.sleeperCount == 1, "the attempt's deadline has not come yet")
            clock.advance(by: .milliseconds(1))
        }
        // The clock is the test's: it alone cut the attempts.
        let (error, _) = try await failure
        #expect(error.kind == .exhausted)
        #expect(error.attempts.count == 2)
        #expect(error.message.contains("gave up after 2 attempts"), "\(error.message)")
        #expect(error.attempts.allSatisfy { $0.error.contains("took longer than 1000 ms (timeout_ms)") }, "\(error.attempts)")
    }

    @Test(
        "a stream that keeps sending is cut at the attempt's timeout_ms, whatever it sends",
        arguments: [
            ("drip", ModelSettings.Provider.openai), ("drip", .anthropic), ("sse-comments", .openai), ("pings", .anthropic),
            ("byte-per-second", .openai),
        ] as [(String, ModelSettings.Provider)])
    func keepsSending(scenario: String, provider: ModelSettings.Provider) async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        // 3 s: the head comes at once, but a machine busy with the rest of the suite can hold
        // this process back for more than a second before it reads it.
        let client = HTTPModelClient(
            settings: Self.settings(server.baseURL(scenario), provider: provider, timeoutMs: 3_000), transport: HTTPTransport(),
            apiKey: nil,
            limiter: nil)
        let (error, elapsed) = try await Self.failure(of: client)
        #expect(error.message.contains("the attempt took longer than 3000 ms (timeout_ms)"), "\(error.message)")
        #expect(error.status == 200, "the head had come")
        // Uncut, each of these servers goes on for 7 to 10 minutes. (The bound is loose: a machine
        // busy with other tests can hold back this process's tasks for tens of seconds.)
        #expect(elapsed < .seconds(300), "cut off at the timeout, not when the server stops: \(elapsed)")
    }

    @Test(
        "a reply past max_reply_bytes, streamed or whole, or a line past max_line_bytes, ends the request at once, unretried",
        arguments: [
            ("huge-stream", ModelSettings.Provider.openai, true, "max_reply_bytes"),
            ("huge-stream", .anthropic, true, "max_reply_bytes"),
            ("huge-json", .openai, false, "max_reply_bytes"),
            ("huge-line", .openai, true, "max_line_bytes"),
        ] as [(String, ModelSettings.Provider, Bool, String)])
    func tooLarge(scenario: String, provider: ModelSettings.Provider, stream: Bool, limit: String) async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        var settings = Self.settings(
            server.baseURL(scenario), provider: provider, timeoutMs: 60_000, stream: stream, maxReplyBytes: 1 << 20,
            maxLineBytes: limit == "max_line_bytes" ? 64 * 1024 : 256 * 1024)
        settings.maxRetries = 3
        let client = HTTPModelClient(settings: settings, transport: HTTPTransport(), apiKey: nil, limiter: nil, sleep: { _ in })
        let (error, elapsed) = try await Self.failure(of: client)
        #expect(error.message.contains("(\(limit))"), "\(error.message)")
        #expect(error.message.contains(limit == "max_line_bytes" ? "65536" : "1048576"), "\(error.message)")
        #expect(error.attempts.count == 1, "asking again would get the same")
        #expect(try server.requests().count == 1)
        #expect(elapsed < .seconds(300), "the server offers 256 MiB")
    }

    @Test("posting to a collector that drips its answer ends at the timeout, each attempt")
    func posterTimeout() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        let poster = HTTPPoster(maxRetries: 1, limits: HTTPPoster.limits(timeoutMs: 1_000), transport: HTTPTransport(), sleep: { _ in })
        let started = ContinuousClock.now
        do {
            _ = try await poster.post(Array("{}".utf8), to: server.baseURL("drip") + "/traces")
            Issue.record("the post succeeded")
        } catch let error as ModelClientError {
            #expect(error.kind == .exhausted)
            #expect(error.attempts.count == 2)
            #expect(error.message.contains("took longer than 1000 ms, the answer included"), "\(error.message)")
        }
        #expect(ContinuousClock.now - started < .seconds(300), "uncut, the server drips for 10 minutes")
    }

    @Test("a credential a server echoes never comes back in a message, as sent, JSON-escaped or percent-encoded")
    func echoedCredentials() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        let token = "tok/\(UUID().uuidString)+="
        let poster = HTTPPoster(maxRetries: 0, limits: HTTPPoster.limits(timeoutMs: 5_000), transport: HTTPTransport(), sleep: { _ in })
        do {
            _ = try await poster.post(
                Array("{}".utf8), to: server.baseURL("forbidden") + "/traces", headers: [HTTPHeader(name: "x-api-key", value: token)])
            Issue.record("the post succeeded")
        } catch let error as ModelClientError {
            let shown = "\(error) \(error.hint ?? "") \(error.attempts.map(\.error))"
            #expect(error.status == 403)
            #expect(shown.contains("[redacted]"), "\(shown)")
            #expect(!shown.contains(token) && !shown.contains(String(token.dropFirst(4).dropLast(2))), "\(shown)")
        }
        let policy = RequestPolicy(limits: RequestLimits(), secrets: [token, "abc"])
        let echoed =
            "raw \(token), escaped \(token.replacingOccurrences(of: "/", with: "\\/")), "
            + "encoded \(token.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? ""), abc stays"
        let redacted = policy.redact(echoed)
        #expect(redacted.components(separatedBy: "[redacted]").count == 4, "\(redacted)")
        #expect(redacted.hasSuffix("abc stays"), "a value this short is not taken for a secret")
        // A preview cut inside a secret does not show its start.
        let cut = policy.redact("HTTP 401: you sent \(token.prefix(9))…")
        #expect(cut == "HTTP 401: you sent [redacted]…", "\(cut)")
    }

    @Test("a host that does not resolve is said in words, without the library's type names")
    func unknownHost() {
        struct LibraryError: Error, CustomStringConvertible {
            var description: String {
                #"NIOConnectionError(dnsAAAAError: Optional(NIOPosix.SocketAddressError.UnknownHost(host: "x", port: 443)))"#
            }
        }
        let request = TransportRequest(
            url: "https://api.example.invalid/v1/chat/completions", headers: [], body: [], limits: RequestLimits())
        let sentence = HTTPTransport.describe(LibraryError(), request: request)
        #expect(sentence == "could not resolve api.example.invalid: no such host, or no network to ask")
        #expect(!sentence.contains("SocketAddressError"))
    }
}
