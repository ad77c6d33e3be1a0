import AgentRuntime
import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

@testable import ModelClients

/// The clients against a real HTTP server on 127.0.0.1 (`scripts/model_server.py`), one
/// scenario per published behaviour of the providers' APIs.
@Suite("HTTP model clients against a local server", .ownThread, .serialized)
struct HTTPModelClientTests {
    static let request = ModelRequest(
        instructions: "Be brief.", packet: ContextBuilt(goal: "Where is order A-1042?", stateSummary: "step 1", tokenEstimate: 20),
        tools: [
            ToolSpec(
                name: "lookup_order", description: "Finds an order.",
                inputSchema: ["type": "object", "required": ["order_id"], "properties": ["order_id": ["type": "string"]]], sideEffect: .read
            )
        ], observations: [], feedback: nil, decisionIndex: 0, step: 1)

    /// A client for one scenario, with short waits between attempts.
    static func client(
        _ server: LocalModelServer, _ scenario: String, provider: ModelSettings.Provider = .openai, retries: Int = 3,
        key: String? = "sk-test-PLANTED-0123456789abcdef"
    ) -> HTTPModelClient {
        var settings = ModelSettings(provider: provider, name: "local-model", baseURL: server.baseURL(scenario))
        settings.maxRetries = retries
        // The whole attempt, the stream included: room for a machine busy with other tests.
        settings.timeoutMs = 60_000
        return HTTPModelClient(settings: settings, transport: HTTPTransport(), apiKey: key, limiter: nil, sleep: { _ in })
    }

    static func decision(_ reply: ModelReply) throws -> DecisionMade.Outcome {
        try ServerSentEventTests.makeParser().parse(reply.raw, format: reply.format, nextCallNumber: 1)
    }

    @Test("tool-call arguments split over many deltas are assembled, usage comes from the last chunk")
    func splitArguments() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        let reply = try await Self.client(server, "split-args").reply(to: Self.request)
        #expect(reply.format == "openai.chat")
        #expect(reply.usage == TokenUsage(input: 31, output: 12))
        #expect(reply.timeToFirstTokenUs != nil)
        #expect(reply.attempts.isEmpty)
        guard case .valid(.toolCalls(let calls)) = try Self.decision(reply) else {
            Issue.record("not a tool call: \(reply.raw)")
            return
        }
        #expect(calls.map(\.arguments) == [["order_id": "A-1042", "note": "fragile"]])
        let sent = try server.requests()
        let headers = sent.first?["headers"] as? [String: String] ?? [:]
        #expect(headers.first { $0.key.lowercased() == "authorization" }?.value == "Bearer sk-test-PLANTED-0123456789abcdef")
        let body = sent.first?["body"] as? [String: Any] ?? [:]
        #expect(body["stream"] as? Bool == true)
        #expect((body["stream_options"] as? [String: Any])?["include_usage"] as? Bool == true)
    }

    @Test(
        "the official openai Python SDK reads the same streams as our client: same text, calls, finish reason and usage", .tags(.python),
        .needsPython)
    func sameAsOfficialSDK() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        let scenarios = ["answer", "split-args", "parallel", "text-and-calls", "utf8-split", "agent"]
        let command = try await PythonEnvironment.interop.script(
            "openai_sdk_replies.py", scenarios.map { "\($0)=\(server.baseURL($0))" })
        let sdk = try await Subprocess.run(command[0], Array(command.dropFirst()))
        #expect(sdk.status == 0, "\(sdk.stderr)")
        let lines = sdk.stdoutText.split(separator: "\n").map { try? JSONParser.parse(Array($0.utf8)) }
        #expect(lines.count == scenarios.count, "\(sdk.stdoutText)")
        for (scenario, line) in zip(scenarios, lines) {
            let expected = try #require(line, "\(scenario): \(sdk.stdoutText)")
            #expect(expected["error"] == nil, "\(scenario): the SDK failed: \(expected)")
            let reply = try await Self.client(server, scenario).reply(to: Self.request)
            let raw = try JSONParser.parse(Array(reply.raw.utf8))
            let message = raw["message"]
            #expect(message?["content"] == expected["content"], "\(scenario) content: ours \(raw), the SDK's \(expected)")
            let ours = (message?["tool_calls"]?.arrayValue ?? []).map { call -> JSONValue in
                [
                    "id": call["id"] ?? .null, "name": call["function"]?["name"] ?? .null,
                    "arguments": call["function"]?["arguments"] ?? .null,
                ]
            }
            #expect(JSONValue.array(ours) == expected["tool_calls"], "\(scenario) calls: ours \(raw), the SDK's \(expected)")
            #expect(raw["finish_reason"] == expected["finish_reason"], "\(scenario)")
            let usage = reply.usage.map { used -> JSONValue in ["prompt_tokens": .int(used.input), "completion_tokens": .int(used.output)] }
            #expect((usage ?? .null) == expected["usage"], "\(scenario) usage")
        }
    }

    @Test("two parallel calls interleaved by index come out in index order")
    func parallel() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        let reply = try await Self.client(server, "parallel").reply(to: Self.request)
        guard case .valid(.toolCalls(let calls)) = try Self.decision(reply) else {
            Issue.record("not tool calls: \(reply.raw)")
            return
        }
        #expect(calls.map(\.arguments) == [["order_id": "A-1"], ["order_id": "B-2"]])
        #expect(calls.map(\.id) == ["call-1", "call-2"], "ids are the runtime's, never the provider's")
    }

    @Test("text beside tool calls is kept in the raw reply; the calls are the decision")
    func textAndCalls() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        let reply = try await Self.client(server, "text-and-calls").reply(to: Self.request)
        #expect(reply.raw.contains("Let me look that up."))
        guard case .valid(.toolCalls) = try Self.decision(reply) else {
            Issue.record("not tool calls: \(reply.raw)")
            return
        }
    }

    @Test("a multi-byte character split across two chunks arrives whole")
    func utf8Split() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        let reply = try await Self.client(server, "utf8-split").reply(to: Self.request)
        #expect(try Self.decision(reply) == .valid(.answer("caf\u{e9} \u{2603} done")))
    }

    @Test("an empty reply is an invalid decision that says so")
    func empty() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        let reply = try await Self.client(server, "empty").reply(to: Self.request)
        guard case .invalid(let invalid) = try Self.decision(reply) else {
            Issue.record("valid: \(reply.raw)")
            return
        }
        #expect(invalid.kind == .empty)
        #expect(invalid.message.contains("finish_reason \"stop\""))
    }

    @Test(
        "a server's retry-after is read as it says, and one no wait is (1e300 s, inf) is the longest a log holds, never a trap",
        arguments: [
            ([("retry-after-ms", "5"), ("retry-after", "1")], 5), ([("Retry-After", "2")], 2_000), ([("retry-after", "0.0004")], 1),
            ([("retry-after", "1e300")], JSONScanner.maximumMeasure), ([("retry-after-ms", "inf")], JSONScanner.maximumMeasure),
            ([("retry-after", "-1")], nil), ([("retry-after", "nan")], nil), ([("retry-after", "Wed, 21 Oct 2026 07:28:00 GMT")], nil),
        ] as [([(String, String)], Int?)])
    func retryAfterHeader(headers: [(String, String)], milliseconds: Int?) {
        #expect(HTTPModelClient.retryAfter(headers.map { HTTPHeader(name: $0.0, value: $0.1) }) == milliseconds)
    }

    @Test(
        "retryable failures are retried and every attempt is kept",
        arguments: [
            ("rate-limited", ModelSettings.Provider.openai, 429, "after the rate limit", 5),
            ("server-error", .openai, 500, "after the 500", 3),
            ("dropped", .openai, 200, "after the drop", nil),
            ("overloaded", .anthropic, 529, "after 529", nil),
            ("error-event", .anthropic, 200, "after the error event", nil),
        ] as [(String, ModelSettings.Provider, Int?, String, Int?)])
    func retried(scenario: String, provider: ModelSettings.Provider, status: Int?, answer: String, retryAfterMs: Int?) async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        let reply = try await Self.client(server, scenario, provider: provider).reply(to: Self.request)
        #expect(try Self.decision(reply) == .valid(.answer(answer)))
        #expect(reply.attempts.count == 1)
        #expect(reply.attempts.first?.status == status)
        #expect(reply.attempts.first?.retryAfterMs == retryAfterMs)
        if let retryAfterMs { #expect(reply.attempts.first?.waitedMs == retryAfterMs, "retry-after-ms is honoured") }
        #expect(try server.requests().count == 2)
    }

    @Test(
        "a stream read whole to its end marker is the reply, though the server then resets the connection or ends its body late",
        arguments: [
            ("refund-reset", ModelSettings.Provider.openai), ("refund-reset", .anthropic), ("refund-late", .openai),
        ] as [(String, ModelSettings.Provider)])
    func completeAtTheEndMarker(scenario: String, provider: ModelSettings.Provider) async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        let reply = try await Self.client(server, scenario, provider: provider).reply(to: Self.request)
        guard case .valid(.toolCalls(let calls)) = try Self.decision(reply) else {
            Issue.record("not the lookup: \(reply.raw)")
            return
        }
        #expect(calls.map(\.name) == ["lookup_order"])
        #expect(reply.attempts.isEmpty, "no failed attempt: \(reply.attempts)")
        #expect(try server.requests().count == 1, "the whole reply is not asked for again")
    }

    @Test(
        "failures that asking again cannot fix end the request with the provider's words",
        arguments: [
            ("unauthorized", "HTTP 401: invalid_request_error: Incorrect API key provided.", 1),
            ("html", "HTTP 200 with text/html, not a model reply: \"502 Bad Gateway\" (an HTML page)", 1),
            // Not followed: a redirect could carry the key to another host.
            ("redirect", "HTTP 307: a redirect to /answer/v1/chat/completions, not followed: agent-eval follows no redirect", 1),
            ("bad-delta", "sent an event that is not JSON", 1),
            ("always-busy", "gave up after 4 attempts: HTTP 503: server_error: busy", 4),
        ])
    func rejected(scenario: String, message: String, requests: Int) async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        do {
            _ = try await Self.client(server, scenario).reply(to: Self.request)
            Issue.record("\(scenario) gave a reply")
        } catch let error as ModelClientError {
            #expect(error.message.contains(message), "\(error.message)")
            #expect(error.attempts.count == requests)
            #expect(!"\(error)".contains("sk-test-PLANTED"))
        }
        #expect(try server.requests().count == requests)
    }

    @Test(
        "a 401 or 403 names the key's variable and the base URL and says what to check, never the key",
        arguments: [
            ("unauthorized", ModelSettings.Provider.openai, 401), ("forbidden", .openai, 403), ("forbidden", .anthropic, 403),
        ] as [(String, ModelSettings.Provider, Int)])
    func refusedKey(scenario: String, provider: ModelSettings.Provider, status: Int) async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        let key = "sk-test-PLANTED-0123456789abcdef"
        // As an agent file's `api_key_env: SUPPORT_BOT_KEY` makes it, through the CLI's factory.
        var settings = ModelSettings(
            provider: provider, name: "local-model", baseURL: server.baseURL(scenario), apiKeyVariable: "SUPPORT_BOT_KEY")
        settings.maxRetries = 0
        let client = try HTTPModelClients(environment: ["SUPPORT_BOT_KEY": key]).client(for: settings)
        do {
            _ = try await client.reply(to: Self.request)
            Issue.record("\(scenario) gave a reply")
        } catch let error as ModelClientError {
            #expect(error.status == status)
            #expect(error.message.contains("HTTP \(status): "), "\(error.message)")
            #expect(
                error.message.contains("check that the key in SUPPORT_BOT_KEY is valid for \(server.baseURL(scenario))"), "\(error.message)"
            )
            // Everything a run or a report can show of the error: the server echoed the key, it goes no further.
            let shown = "\(error) \(error.message) \(error.hint ?? "") \(error.attempts.map(\.error))"
            #expect(!shown.contains("sk-test-PLANTED"), "\(shown)")
        }
        let sent = try server.requests().first?["headers"] as? [String: String] ?? [:]
        #expect(sent.values.contains { $0.contains(key) }, "the key did reach the server")
    }

    @Test("a 401 to a request sent without a key says which variable was not set, and for which base URL")
    func noKeySent() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        // No api_key_env in the agent file: the provider's variable, not required, and not set.
        var settings = ModelSettings(provider: .openai, name: "local-model", baseURL: server.baseURL("unauthorized"))
        settings.maxRetries = 0
        let client = try HTTPModelClients(environment: [:]).client(for: settings)
        do {
            _ = try await client.reply(to: Self.request)
            Issue.record("a reply without a key")
        } catch let error as ModelClientError {
            #expect(error.status == 401)
            #expect(
                error.message.hasSuffix(
                    "no API key was sent, as OPENAI_API_KEY is not set: set OPENAI_API_KEY (or the model's api_key_env) to a key valid for \(server.baseURL("unauthorized"))"
                ), "\(error.message)")
        }
    }

    @Test("a refusal from Anthropic is an invalid decision with the provider's reason")
    func refusal() async throws {
        let server = try LocalModelServer()
        defer { server.stop() }
        let reply = try await Self.client(server, "refusal", provider: .anthropic).reply(to: Self.request)
        guard case .invalid(let invalid) = try Self.decision(reply) else {
            Issue.record("valid: \(reply.raw)")
            return
        }
        #expect(invalid.message == "the model refused (stop_reason \"refusal\"): I can't help with that.")
        let headers = try server.requests().first?["headers"] as? [String: String] ?? [:]
        #expect(headers.first { $0.key.lowercased() == "x-api-key" }?.value == "sk-test-PLANTED-0123456789abcdef")
        #expect(headers.first { $0.key.lowercased() == "anthropic-version" }?.value == "2023-06-01")
    }

    @Test("nothing listening is a connection error in a sentence, retried, then given up")
    func refused() async throws {
        var settings = ModelSettings(provider: .openai, name: "m", baseURL: "http://127.0.0.1:9/v1")
        settings.maxRetries = 1
        settings.connectTimeoutMs = 300
        let client = HTTPModelClient(settings: settings, transport: HTTPTransport(), apiKey: nil, limiter: nil, sleep: { _ in })
        do {
            _ = try await client.reply(to: Self.request)
            Issue.record("a reply from nowhere")
        } catch let error as ModelClientError {
            #expect(error.kind == .exhausted)
            #expect(error.message.contains("127.0.0.1:9"), "\(error.message)")
            #expect(!error.message.contains("NIO"), "\(error.message)")
            #expect(error.attempts.count == 2)
            // What the run's stop records: the failure once, not once per attempt.
            let recorded = "\(error)"
            #expect(recorded.hasPrefix(error.message + "; every attempt failed the same way (waited "), "\(recorded)")
            #expect(recorded.components(separatedBy: "127.0.0.1:9").count == 2, "\(recorded)")
        }
    }

    @Test("attempts that failed differently are each listed in what the run's stop records")
    func differentAttempts() {
        let error = ModelClientError(
            .exhausted, "the openai request for m gave up after 2 attempts: HTTP 503: busy",
            attempts: [
                ModelAttempt(status: 429, error: "slow down", retryAfterMs: 20, waitedMs: 20),
                ModelAttempt(status: 503, error: "busy", retryAfterMs: nil, waitedMs: 0),
            ])
        #expect(
            "\(error)"
                == "the openai request for m gave up after 2 attempts: HTTP 503: busy; attempts: 1) HTTP 429: slow down (waited 20 ms); "
                + "2) HTTP 503: busy (waited 0 ms)")
    }
}
