import AgentRuntime
import Foundation
import ModelClients
import Recording
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// An answer the agent received is a recorded fact: the gateway makes it durable when the reply
/// is complete (its end marker), whatever the client or the upstream does afterwards — a client
/// that closes at `[DONE]`, an upstream that resets the connection or ends its body late, a
/// command that exits while the body is still open.
@Suite("the gateway keeps every answer the agent received", .ownThread)
struct AnsweredExchangeTests {
    /// A gateway recording into `directory`'s `run.jsonl.gz`, forwarding to the local server's
    /// `scenario` through `transport` (the network, or a cassette in front of it).
    static func gateway(
        _ server: LocalModelServer, _ scenario: String, in directory: TemporaryDirectory, runId: String,
        limits: ExchangeRecorder.Limits = .init(), keys: RequestKeys? = nil, transport: any ModelTransport = ModelTransports.live,
        timeoutMs: Int = 30_000
    ) async throws -> (log: String, recorder: ExchangeRecorder, gateway: ModelGateway) {
        let log = directory.path("run.jsonl.gz")
        let recorder = ExchangeRecorder(
            logPath: log, runId: runId, goal: nil, agentName: "agent", command: ["agent"], limits: limits, keys: keys, onStop: { _ in })
        let gateway = try await ModelGateway(
            handler: GatewayHandler(
                upstreams: Upstreams(openAI: server.baseURL(scenario)),
                forwarder: ModelForwarder(transport: transport, limits: RequestLimits(timeoutMs: timeoutMs)), recorder: recorder))
        return (log, recorder, gateway)
    }

    /// The refund agent's three requests through a gateway recording into a fresh log, each read
    /// up to `[DONE]` and then closed; the upstream is the local server's `scenario`. Returns the
    /// log's events, read after the run was stopped as a command's exit stops it: at once.
    static func record(scenario: String) async throws -> (events: [Event], stop: RunStopped) {
        let directory = try TemporaryDirectory()
        let server = try LocalModelServer()
        defer {
            server.stop()
            directory.remove()
        }
        let (log, recorder, gateway) = try await Self.gateway(server, scenario, in: directory, runId: "run-answered")
        var messages: [JSONValue] = [
            ["role": "system", "content": "You are a support agent."], ["role": "user", "content": "Refund A-1042."],
        ]
        for _ in 0..<3 {
            let message = try await gateway.streamedChatMessageToDone(messages)
            messages.append(message)
            if let call = message["tool_calls"]?.arrayValue?.first, let id = call["id"]?.stringValue {
                messages.append(["role": "tool", "tool_call_id": .string(id), "content": "{\"ok\": true}"])
            }
        }
        // The agent has its answer and exits: the gateway stops, the run with it.
        await gateway.stop()
        let stop = try recorder.finish(.exited(0))
        var events: [Event] = []
        _ = try LogReader(path: log).forEachEvent { events.append($0.event) }
        return (events, stop)
    }

    static func decisions(_ events: [Event]) -> [String] {
        events.compactMap { event -> String? in
            guard case .decisionMade(let made) = event.payload else { return nil }
            switch made.outcome {
            case .valid(.toolCalls(let calls)): return calls.map(\.name).joined(separator: ",")
            case .valid(.answer): return "answer"
            default: return "other"
            }
        }
    }

    @Test(
        "an upstream that resets the connection 50 ms after [DONE], or ends its body 5 s late, loses no answer the agent read",
        arguments: ["refund-reset", "refund-late"])
    func answeredBeforeTheBodyEnds(scenario: String) async throws {
        let (events, stop) = try await Self.record(scenario: scenario)
        #expect(Self.decisions(events) == ["lookup_order", "refund_order", "answer"], "\(scenario)")
        #expect(stop.reason == .success, "\(stop)")
        #expect(stop.answer == "Refunded 25 EUR for order A-1042.")
    }

    @Test("100 streams in flight at once through the gateway are all answered and all recorded")
    func hundredConcurrentStreams() async throws {
        let directory = try TemporaryDirectory()
        let server = try LocalModelServer()
        defer {
            server.stop()
            directory.remove()
        }
        let (log, recorder, gateway) = try await Self.gateway(
            server, "slow-answer", in: directory, runId: "run-many", limits: .init(maxRequests: 200), timeoutMs: 60_000)
        let answers = try await withThrowingTaskGroup(of: String.self) { group in
            for index in 0..<100 {
                group.addTask {
                    let message = try await gateway.streamedChatMessageToDone([["role": "user", "content": .string("Question \(index)")]])
                    return message["content"]?.stringValue ?? "no answer: \(message)"
                }
            }
            var answers: [String] = []
            for try await answer in group { answers.append(answer) }
            return answers
        }
        await gateway.stop()
        _ = try recorder.finish(.exited(0))
        #expect(answers.count == 100 && answers.allSatisfy { $0 == "Slow but sure." }, "\(Set(answers))")
        var decisions = 0
        _ = try LogReader(path: log).forEachEvent { if case .decisionMade = $0.event.payload { decisions += 1 } }
        #expect(decisions == 100)
    }

    @Test("an upstream that echoes the request's headers puts none of their values into the log or the cassette")
    func echoedHeadersRedacted() async throws {
        let directory = try TemporaryDirectory()
        let server = try LocalModelServer()
        defer {
            server.stop()
            directory.remove()
        }
        let secrets = [
            "Bearer tok-9f8e7d6c5b4a3921", "session=c0ffee-and-cake-4242", "org-Q7xW2eR9tY5uI3oP", "tenant-acme-77-private",
        ]
        let headers = [
            HTTPHeader(name: "Authorization", value: secrets[0]), HTTPHeader(name: "Cookie", value: secrets[1]),
            HTTPHeader(name: "OpenAI-Organization", value: secrets[2]), HTTPHeader(name: "X-Tenant", value: secrets[3]),
            // Words, not credentials: left as they are, so the log's JSON and text stay whole.
            HTTPHeader(name: "anthropic-dangerous-direct-browser-access", value: "true"), HTTPHeader(name: "X-Timeout", value: "60000"),
            HTTPHeader(name: "x-client-request-id", value: "5b8f0c1e-2d3a-4f5b-9c6d-7e8f9a0b1c2d"),
        ]
        let cassette = try Cassette(directory: directory.path("cassette"), mode: .new)
        let keys = RequestKeys()
        let (log, recorder, gateway) = try await Self.gateway(
            server, "echo-headers", in: directory, runId: "run-echo", keys: keys,
            transport: cassette.transport(provider: "gateway", live: ModelTransports.live, keyedBy: keys.key(for:)))
        let message = try await gateway.chatMessage([["role": "user", "content": "What did I send?"]], headers: headers)
        await gateway.stop()
        _ = try recorder.finish(.exited(0))
        // The agent itself gets the upstream's answer as it came.
        #expect(message["content"]?.stringValue?.contains(secrets[1]) == true, "\(message)")
        let text = try await Subprocess.run(gzipPath, ["-dc", log]).stdoutText
        #expect(text.contains("Your headers:") && text.contains("[redacted:header:"), "\(text.prefix(600))")
        #expect(text.contains(#"\"X-Timeout\": \"60000\""#) || text.contains("60000"), "a number is no secret")
        #expect(text.contains("5b8f0c1e-2d3a-4f5b-9c6d-7e8f9a0b1c2d"), "a request id is no secret")
        #expect(try LogVerifier.verify(path: log).isIntact, "every event was written: no JSON value became a placeholder")
        #expect(text.contains("\"stream\":true") || !text.contains("\"stream\""), "true is a word")
        var stored = ""
        for file in try FileManager.default.contentsOfDirectory(atPath: directory.path("cassette")) where file.hasSuffix(".gz") {
            stored += try await Subprocess.run(gzipPath, ["-dc", directory.path("cassette/\(file)")]).stdoutText
        }
        #expect(stored.contains("Your headers:"), "\(stored.prefix(300))")
        for secret in secrets + ["tok-9f8e7d6c5b4a3921"] {
            #expect(!text.contains(secret), "the log holds \(secret)")
            #expect(!stored.contains(secret), "the cassette holds \(secret)")
        }
    }
}
