import AgentRuntime
import Foundation
public import ModelClients
public import NIOCore
public import NIOHTTP1
import TraceCore

/// Where the gateway sends each provider's requests.
public struct Upstreams: Sendable, Hashable {
    /// The OpenAI base URL, `/v1` included (`https://api.openai.com/v1`).
    public var openAI: String
    /// The Anthropic base URL, without `/v1` (`https://api.anthropic.com`).
    public var anthropic: String

    public static let publicOpenAI = "https://api.openai.com/v1"
    public static let publicAnthropic = "https://api.anthropic.com"

    public init(openAI: String = Upstreams.publicOpenAI, anthropic: String = Upstreams.publicAnthropic) {
        self.openAI = openAI
        self.anthropic = anthropic
    }

    /// `--upstream` values, then the variables the SDKs read in `environment`, then the public URLs.
    public static func resolve(given: [String: String], environment: [String: String]) -> Upstreams {
        func pick(_ key: String, _ variable: String, _ fallback: String) -> String {
            let value = given[key] ?? environment[variable].flatMap { $0.isEmpty ? nil : $0 } ?? fallback
            return value.hasSuffix("/") ? String(value.dropLast()) : value
        }
        return Upstreams(
            openAI: pick("openai", "OPENAI_BASE_URL", publicOpenAI), anthropic: pick("anthropic", "ANTHROPIC_BASE_URL", publicAnthropic))
    }
}

/// The recording gateway: an HTTP/1.1 server on 127.0.0.1 that an agent's SDK takes for its
/// model provider. Requests under `/openai/…` go to `upstreams.openAI`, those under
/// `/anthropic/…` to `upstreams.anthropic` (the rest of the path appended); the answer is passed
/// back as it arrives, streamed or whole, status and headers included, and each finished
/// exchange is handed to `recorder`. docs/record.md describes what it sees and records.
///
/// Requests that are not a model call (`GET /v1/models`, an unknown path) are answered 404 with
/// a JSON error that says what the gateway forwards: nothing leaves the machine unrecorded.
public final class ModelGateway: Sendable {
    private let server: LocalHTTPServer
    public var port: Int { server.port }

    /// The base URLs the agent is given: `OPENAI_BASE_URL` and `ANTHROPIC_BASE_URL`.
    public var openAIBaseURL: String { "http://127.0.0.1:\(port)/openai/v1" }
    /// Where the command's `agent-eval mcp-proxy` records its gate (`AGENT_EVAL_RECORDER`).
    public var proxyURL: String { "http://127.0.0.1:\(port)\(ExchangeRecorder.proxyPath)" }
    public var anthropicBaseURL: String { "http://127.0.0.1:\(port)/anthropic" }
    /// The OTLP/HTTP endpoint the command's exporters are given (`OTEL_EXPORTER_OTLP_ENDPOINT`;
    /// traces go to `/v1/traces` under it), when the gateway takes spans.
    public var otlpEndpoint: String { "http://127.0.0.1:\(port)" }

    /// Starts listening on a free port of 127.0.0.1.
    public init(handler: GatewayHandler) async throws {
        server = try await LocalHTTPServer(handler: handler)
    }

    /// Stops listening and ends every connection.
    public func stop() async {
        await server.stop()
    }
}

/// Serves the gateway's connections: forwards each model request and tells the recorder.
public final class GatewayHandler: HTTPRequestHandling {
    let upstreams: Upstreams
    let forwarder: ModelForwarder
    /// Answers a fork's requests before its fork point (from the parent's cassette).
    let prefixForwarder: ModelForwarder?
    let recorder: ExchangeRecorder
    /// The largest request body taken (a model request with its whole conversation): 32 MiB by
    /// default, so that a request and its answer (16 MiB, `RequestLimits.defaultMaxReplyBytes`)
    /// fit the one event of the log they are recorded in (`LogReadLimit`).
    let maxRequestBytes: Int
    /// Takes the command's spans (`POST /v1/traces`), when the gateway is given a receiver.
    let traces: TraceReceiver?

    public init(
        upstreams: Upstreams, forwarder: ModelForwarder, prefixForwarder: ModelForwarder? = nil, recorder: ExchangeRecorder,
        maxRequestBytes: Int = 32 << 20, traces: TraceReceiver? = nil
    ) {
        self.upstreams = upstreams
        self.forwarder = forwarder
        self.prefixForwarder = prefixForwarder
        self.recorder = recorder
        self.maxRequestBytes = maxRequestBytes
        self.traces = traces
    }

    public func maxRequestBytes(for head: HTTPRequestHead) -> Int {
        if let traces, TraceReceiver.serves(head.uri) { return traces.maxRequestBytes }
        return maxRequestBytes
    }

    public func answerTooLarge(_ head: HTTPRequestHead, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>) async throws
        -> Bool
    {
        if let traces, TraceReceiver.serves(head.uri) { return try await traces.answerTooLarge(head, outbound) }
        return try await Self.answer(
            413, "the request body is larger than \(maxRequestBytes) bytes, more than the gateway takes", to: head, outbound)
    }

    /// Answers one request; false when the connection must close (a reply cut off mid-way).
    public func handle(_ head: HTTPRequestHead, body: [UInt8], _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>)
        async throws -> Bool
    {
        let path = head.uri
        if let traces, TraceReceiver.serves(path) {
            // The command's OpenTelemetry exporters (`agent-eval record` sets their endpoint here).
            return try await traces.handle(head, body: body, outbound)
        }
        if path == ExchangeRecorder.proxyPath {
            // An `agent-eval mcp-proxy` of the command records its gate into this run.
            guard head.method == .POST, let request = try? JSONParser.parse(body), request.objectValue != nil else {
                return try await Self.answer(400, "the proxy endpoint takes POST with a JSON object", to: head, outbound)
            }
            return try await Self.answer(json: await recorder.proxyOperation(request), to: head, outbound)
        }
        let route: (base: String, rest: Substring)?
        if path.hasPrefix("/openai/v1/") {
            route = (upstreams.openAI, path.dropFirst("/openai/v1".count))
        } else if path.hasPrefix("/anthropic/") {
            route = (upstreams.anthropic, path.dropFirst("/anthropic".count))
        } else {
            route = nil
        }
        let endpoint = route.map { String($0.rest.prefix { $0 != "?" }) }
        guard let route, head.method == .POST, let endpoint, Self.endpoints.contains(endpoint), let api = ModelAPI(path: endpoint) else {
            let message =
                "agent-eval's gateway forwards model requests only: POST /openai/v1/chat/completions, /openai/v1/responses "
                + "or /anthropic/v1/messages; \(head.method.rawValue) \(path) is not one"
            // The agent is told the path it asked for; agent-eval's own output names it without
            // its query, which may hold a key (`?api_key=…`).
            recorder.noteRefused("\(head.method.rawValue) \(path.prefix { $0 != "?" }) is no model API's path", isBody: false)
            return try await Self.answer(404, message, to: head, outbound)
        }
        let headers = head.headers.compactMap { name, value -> HTTPHeader? in
            Self.hopByHop.contains(name.lowercased()) ? nil : HTTPHeader(name: name, value: value)
        }
        let parsed: JSONValue
        do {
            parsed = try JSONParser.parse(body)
        } catch {
            // Why, in the parser's words: a member named twice reads as JSON to many tools.
            let message = "the request body is not JSON that agent-eval's gateway can record: \(error)"
            recorder.noteRefused(message, isBody: true)
            return try await Self.answer(400, message, to: head, outbound)
        }
        guard parsed.objectValue != nil else {
            let message = "the request body is not a JSON object, but \(parsed.typeDescription)"
            recorder.noteRefused(message, isBody: true)
            return try await Self.answer(400, message, to: head, outbound)
        }
        await recorder.settleForkPoint(body: parsed)
        let exchange = recorder.begin(
            api: api, body: parsed, bytes: body,
            secrets: ModelForwarder.secrets(in: headers) + ModelForwarder.secrets(inURL: String(route.rest)))
        if let refusal = exchange.refusal {
            return try await Self.answer(refusal.status, refusal.message, to: head, outbound, type: refusal.type)
        }
        // A fork's edits may have changed the request (`RecordedFork`): what is sent is what is recorded.
        let request = TransportRequest(url: route.base + route.rest, headers: headers, body: exchange.bytes, limits: forwarder.limits)

        // The parts go to the agent in order, through a stream that a writer task drains. The
        // forward runs in a task of its own, so that an agent that leaves stops it: the rest of
        // the answer is not read (nor billed) for nobody.
        let (parts, continuation) = AsyncStream<TransportPart>.makeStream()
        let chosen = exchange.isPrefix ? prefixForwarder ?? forwarder : forwarder
        let forwarding = Task(executorPreference: ExecutorThread.current) {
            await chosen.forward(request, api: api) { part in continuation.yield(part) }
        }
        let writer = Task(executorPreference: ExecutorThread.current) { () -> Delivery in
            var delivery = Delivery()
            do {
                for await part in parts {
                    switch part {
                    case .head(let status, let fields):
                        var responseHead = HTTPResponseHead(version: head.version, status: HTTPResponseStatus(statusCode: status))
                        for field in fields where !Self.hopByHop.contains(field.name.lowercased()) {
                            responseHead.headers.add(name: field.name, value: field.value)
                        }
                        try await outbound.write(.head(responseHead))
                        delivery.sentHead = true
                    case .chunk(let bytes):
                        try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: bytes))))
                        delivery.bytes += bytes.count
                    }
                }
            } catch {
                delivery.isCut = true
                forwarding.cancel()
            }
            return delivery
        }
        // A client that stops reading must not hold the gateway's stop: cancelling the
        // connection's task cancels the forward and the writer too.
        var outcome = await withTaskCancellationHandler {
            await forwarding.value
        } onCancel: {
            forwarding.cancel()
        }
        continuation.finish()
        let delivery = await withTaskCancellationHandler {
            await writer.value
        } onCancel: {
            writer.cancel()
        }
        let sentHead = delivery.sentHead
        if delivery.isCut {
            // The agent's connection closed before the answer was passed on whole: it did not get
            // the reply the upstream made, so the log must not hold it as the agent's.
            outcome.failure =
                "the agent's connection closed before the answer was passed on whole (\(delivery.bytes) bytes of it were); "
                + "the agent did not get this reply"
        }
        // Recorded whatever happens to the agent's connection now: an SDK that has read a
        // stream's end marker may close it before the end of the HTTP answer. The results the
        // request carries get their tool spans first, when the command sends them.
        if outcome.failure == nil { await recorder.awaitToolSpans(for: exchange) }
        recorder.finish(exchange, outcome: outcome)
        let keepOpen: Bool
        if outcome.failure == nil {
            try await outbound.write(.end(nil))
            keepOpen = true
        } else if sentHead {
            // The answer was cut off: so is the agent's, as it was.
            keepOpen = false
        } else if outcome.isNotRecorded {
            keepOpen = try await Self.answer(
                400, "agent-eval: \(outcome.failure ?? "") (record it with --record new)", to: head, outbound,
                type: "agent_eval_not_recorded"
            )
        } else {
            keepOpen = try await Self.answer(
                502, "agent-eval's gateway could not reach the model: \(outcome.failure ?? "")", to: head, outbound,
                type: "agent_eval_gateway")
        }
        return keepOpen
    }

    /// What the agent was passed of an answer: its head, how many bytes of its body, and whether
    /// writing to it failed before the answer's end (the agent left).
    struct Delivery: Sendable {
        var sentHead = false
        var bytes = 0
        var isCut = false
    }

    /// The model endpoints, after `/openai/v1` and `/anthropic`: nothing else is forwarded.
    static let endpoints: Set<String> = ["/chat/completions", "/responses", "/v1/messages"]

    /// Headers that belong to one connection, not to the request or answer passed on. The
    /// encoding is left out too: the answer is read on the way, so it comes uncompressed.
    static let hopByHop: Set<String> = [
        "connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length",
        "accept-encoding", "content-encoding",
    ]

    /// An answer holding `value` as JSON.
    static func answer(
        json value: JSONValue, status: Int = 200, to head: HTTPRequestHead,
        _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>
    ) async throws -> Bool {
        try await LocalHTTPServer.answer(
            status: status, contentType: "application/json", body: JSONWriter.encode(value), to: head, outbound)
    }

    /// A JSON error answer in the shape both providers' SDKs read (`{"error": {"message", "type"}}`).
    static func answer(
        _ status: Int, _ message: String, to head: HTTPRequestHead, _ outbound: NIOAsyncChannelOutboundWriter<HTTPServerResponsePart>,
        type: String = "agent_eval_gateway"
    ) async throws -> Bool {
        try await answer(
            json: ["type": "error", "error": ["message": .string(message), "type": .string(type)]], status: status, to: head, outbound)
    }
}
