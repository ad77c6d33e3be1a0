import AgentRuntime
import Foundation
import ModelClients
import Synchronization
import TraceCore

/// An MCP server over Streamable HTTP (docs/mcp.md, "Servers over HTTP"): each request its own
/// POST to the endpoint, answered with one JSON object or with an event stream that ends in the
/// answer, in either era.
///
/// - 2025 era: `initialize` is answered with an `Mcp-Session-Id`, which every later request
///   carries with `MCP-Protocol-Version` (the version `initialize` agreed); a 404 for a known
///   session means the server forgot it, so the channel fails and the next call opens another;
///   a server's request inside a stream (`ping`; sampling, elicitation and roots are refused) is
///   answered with a POST of its own; `stop` deletes the session.
/// - 2026-07-28: no session; every request carries `MCP-Protocol-Version` from its envelope.
/// - Both: `Mcp-Method`, `Mcp-Name` (a tool's or prompt's name, a resource's URI) and, for
///   `tools/call`, an `Mcp-Param-<token>` for each argument the tool's schema marks with
///   `x-mcp-header` (the channel reads them from the `tools/list` answers it carries); an error
///   status whose body is a JSON-RPC error is that error (a modern server's -32022 on a 400).
///
/// The HTTP itself is ModelClients' `HTTPExchange`: the whole request within its deadline, at
/// most `answerLimit` bytes of answer, the headers' values never shown. No request is sent twice.
final class StreamableHTTPChannel: MCPChannel {
    let url: String
    /// The agent file's headers, in name order.
    private let headers: [HTTPHeader]
    private let secrets: [String]
    private let state = Mutex(State())

    /// The most of one answer read (a stream's events count): as much as one stdio message.
    static let answerLimit = JSONLinesProcess.lineLimit
    static let sessionHeader = "mcp-session-id"

    private struct State {
        var sent = 0
        var sessionId: String?
        /// The version `initialize` agreed, sent on every later request (2025 era).
        var negotiatedVersion: String?
        var failure: String?
        /// Per tool, the arguments its schema mirrors into headers: (path, token).
        var parameterHeaders: [String: [(path: [String], token: String)]] = [:]
    }

    /// The channel to `settings.url`, its headers' `${NAME}` read from `environment` now.
    init(_ settings: ToolServerSettings, environment: [String: String] = ProcessInfo.processInfo.environment) throws(MCPToolError) {
        let resolved: [String: String]
        do {
            resolved = try settings.resolvedHeaders(environment: environment)
        } catch {
            throw MCPToolError(error.message, hint: error.hint)
        }
        url = settings.url ?? ""
        headers = resolved.sorted { $0.key < $1.key }.map { HTTPHeader(name: $0.key, value: $0.value) }
        secrets = Self.secrets(settings, resolved: resolved, environment: environment)
    }

    /// What the headers carry that no message may show: each value whole, its words of 8
    /// characters or more (the token of `Bearer <token>`), and the value of each variable named.
    static func secrets(_ settings: ToolServerSettings, resolved: [String: String], environment: [String: String]) -> [String] {
        var secrets = Set(resolved.values)
        for value in resolved.values {
            for word in value.split(separator: " ") where word.count >= 8 { secrets.insert(String(word)) }
        }
        for variable in settings.headerVariables {
            if let value = environment[variable], value.count >= 4 { secrets.insert(value) }
        }
        // A credential in the URL itself (`?access_token=…`, `user:password@`): a server that
        // echoes its request, or a message that names the URL, must not show it either.
        secrets.formUnion(ModelForwarder.secrets(inURL: settings.url ?? ""))
        return secrets.sorted()
    }

    // MARK: Requests

    func request(
        _ method: String, params: JSONValue?, within duration: Duration, on clock: any Clock<Duration>, endsServerWhenAbandoned: Bool
    ) async -> JSONRPCPeer.Answer {
        let (id, session, negotiated, failure, parameters) = state.withLock { state in
            state.sent += 1
            let tool = method == "tools/call" ? params?["name"]?.stringValue : nil
            return (
                "agent-eval-\(state.sent)", state.sessionId, state.negotiatedVersion, state.failure,
                tool.flatMap { state.parameterHeaders[$0] } ?? []
            )
        }
        if let failure { return .failure(.failed(failure)) }
        var message = JSONObject([("jsonrpc", "2.0"), ("id", .string(id)), ("method", .string(method))])
        if let params { message["params"] = params }
        var headers = requestHeaders(method: method, params: params, session: session, negotiated: negotiated)
        if method == "tools/call", let arguments = params?["arguments"] {
            headers += Self.parameterHeaders(parameters, arguments: arguments)
        }
        let exchange = exchange(within: duration, on: clock)
        let (reading, ending) = await exchange.send(
            url: url, headers: headers, body: JSONWriter.encode(JSONValue.object(message)),
            into: Reading(id: .string(id), sentSession: session != nil)
        ) { [self] part, reading in
            try reading.take(part) { request in answerServer(request, clock: clock) }
        }
        switch ending {
        case .complete:
            let answer = answer(of: reading, exchange: exchange)
            if method == "initialize", case .success(let result) = answer, (200..<300).contains(reading.status) {
                state.withLock { state in
                    state.sessionId = reading.header(Self.sessionHeader)
                    state.negotiatedVersion = result["protocolVersion"]?.stringValue
                }
            }
            if method == "tools/list", case .success(let result) = answer { learnParameterHeaders(result) }
            return answer
        case .timedOut:
            if session != nil { cancel(id, clock: clock) }
            return .failure(.timedOut)
        case .cancelled:
            if session != nil { cancel(id, clock: clock) }
            return .failure(.cancelled)
        case .tooLarge:
            return .failure(.failed("the server's answer is larger than \(Self.answerLimit >> 20) MiB; the rest was not read"))
        case .failed(let why):
            return .failure(.failed(why))
        }
    }

    func notify(_ method: String, params: JSONValue?) async throws {
        let (session, negotiated) = state.withLock { ($0.sessionId, $0.negotiatedVersion) }
        var message = JSONObject([("jsonrpc", "2.0"), ("method", .string(method))])
        if let params { message["params"] = params }
        let exchange = exchange(within: .seconds(30), on: LiveClock())
        let (reading, ending) = await exchange.send(
            url: url, headers: requestHeaders(method: method, params: params, session: session, negotiated: negotiated),
            body: JSONWriter.encode(JSONValue.object(message)), into: Reading(id: nil, sentSession: session != nil)
        ) { part, reading in try reading.take(part) { _ in } }
        switch ending {
        case .complete where (200..<300).contains(reading.status): return
        case .complete: throw MCPToolError(exchange.redact("answered \(method) with HTTP \(reading.status)\(Self.preview(reading.body))"))
        case .failed(let why): throw MCPToolError(why)
        case .timedOut: throw MCPToolError("did not take \(method) within 30 s")
        case .cancelled: throw CancellationError()
        case .tooLarge: throw MCPToolError("answered \(method) with more than \(Self.answerLimit >> 20) MiB")
        }
    }

    var failure: String? { state.withLock { $0.failure } }
    func kill() {}

    /// Deletes a 2025-era session (the server may refuse with 405, which is as good), within 2 s.
    func stop() async {
        let (session, negotiated) = state.withLock { state -> (String?, String?) in
            defer {
                state.sessionId = nil
                if state.failure == nil { state.failure = "the session was closed" }
            }
            return (state.sessionId, state.negotiatedVersion)
        }
        guard let session else { return }
        var headers = self.headers + [HTTPHeader(name: Self.sessionHeader, value: session)]
        if let negotiated { headers.append(HTTPHeader(name: "mcp-protocol-version", value: negotiated)) }
        _ = await exchange(within: .seconds(2), on: LiveClock()).send(method: "DELETE", url: url, headers: headers, body: [], into: 0) {
            _, _ in
        }
    }

    var stderrMark: Int { 0 }
    func stderr(since mark: Int) -> String? { nil }
    func settleStderr() async {}
    var strayAnswers: (count: Int, last: String?) { (0, nil) }
    var lastErrorLine: String? { nil }
    var isProcess: Bool { false }
    var startHint: String {
        let shown = secrets.reduce(url) { $0.replacingOccurrences(of: $1, with: "[redacted]") }
        return "is the server running, and does it serve MCP at \(shown)?"
    }

    // MARK: The wire

    private func exchange(within duration: Duration, on clock: any Clock<Duration>) -> HTTPExchange {
        let (seconds, attoseconds) = duration.components
        let ms = max(1, Int(seconds) * 1_000 + Int(attoseconds / 1_000_000_000_000_000))
        return HTTPExchange(
            limits: RequestLimits(
                timeoutMs: ms, connectTimeoutMs: min(ms, 10_000), idleTimeoutMs: ms, maxReplyBytes: Self.answerLimit,
                maxLineBytes: Self.answerLimit),
            secrets: secrets, clock: clock)
    }

    /// The headers of one message: what the transport asks for, the agent file's, the session's,
    /// and what mirrors the body (its version, method and name).
    private func requestHeaders(method: String, params: JSONValue?, session: String?, negotiated: String?) -> [HTTPHeader] {
        var headers = [
            HTTPHeader(name: "accept", value: "application/json, text/event-stream"),
            HTTPHeader(name: "content-type", value: "application/json"),
        ]
        headers += self.headers
        if let session { headers.append(HTTPHeader(name: Self.sessionHeader, value: session)) }
        if let version = MCPEra.envelope(of: params)?[MCPEra.protocolVersionKey]?.stringValue ?? negotiated {
            headers.append(HTTPHeader(name: "mcp-protocol-version", value: version))
        }
        headers.append(HTTPHeader(name: "mcp-method", value: method))
        let nameKey = ["tools/call": "name", "prompts/get": "name", "resources/read": "uri"][method]
        if let nameKey, let name = params?[nameKey]?.stringValue {
            headers.append(HTTPHeader(name: "mcp-name", value: Self.headerValue(name)))
        }
        return headers
    }

    /// A value as a header carries it: as it is when it is printable ASCII without spaces at its
    /// ends, else `=?base64?…?=` (the transport's rule, so the server recovers the exact text).
    static func headerValue(_ text: String) -> String {
        let plain =
            text.utf8.allSatisfy { (0x20...0x7E).contains($0) } && text.first != " " && text.last != " "
            && !(text.hasPrefix("=?base64?") && text.hasSuffix("?="))
        return plain ? text : "=?base64?\(Data(text.utf8).base64EncodedString())?="
    }

    /// `Mcp-Param-<token>` for each marked argument present: a boolean as `true`/`false`, a
    /// number or a string as its text; objects, lists and nulls are not mirrored.
    static func parameterHeaders(_ marked: [(path: [String], token: String)], arguments: JSONValue) -> [HTTPHeader] {
        marked.compactMap { mark in
            var value: JSONValue? = arguments
            for key in mark.path { value = value?.objectValue?[key] }
            let text: String
            switch value {
            case .bool(let flag)?: text = flag ? "true" : "false"
            case .int(let number)?: text = String(number)
            case .string(let string)?: text = string
            case .double(let number)?: text = String(decoding: JSONWriter.encode(JSONValue.double(number)), as: UTF8.self)
            default: return nil
            }
            return HTTPHeader(name: "Mcp-Param-\(mark.token)", value: headerValue(text))
        }
    }

    /// Keeps, per tool of a `tools/list` page, the arguments its schema marks `x-mcp-header` on a
    /// chain of `properties` from its root, for the tool's calls.
    private func learnParameterHeaders(_ result: JSONValue) {
        var found: [String: [(path: [String], token: String)]] = [:]
        for tool in result["tools"]?.arrayValue ?? [] {
            guard let name = tool["name"]?.stringValue, let schema = tool["inputSchema"] else { continue }
            var marks: [(path: [String], token: String)] = []
            func walk(_ schema: JSONValue, _ path: [String]) {
                for member in schema["properties"]?.objectValue.map({ Array($0) }) ?? [] {
                    let path = path + [member.key]
                    if let token = member.value["x-mcp-header"]?.stringValue, !token.isEmpty { marks.append((path, token)) }
                    walk(member.value, path)
                }
            }
            walk(schema, [])
            if !marks.isEmpty { found[name] = marks }
        }
        guard !found.isEmpty else { return }
        state.withLock { state in state.parameterHeaders.merge(found) { $1 } }
    }

    /// What one answer said, as the peer over stdio would say it. An error's message and data go
    /// through the exchange's redaction (a server may echo the token it was sent), and carry the
    /// HTTP status of an answer that was not a success (`data.httpStatus`).
    private func answer(of reading: Reading, exchange: HTTPExchange) -> JSONRPCPeer.Answer {
        switch readAnswer(of: reading, exchange: exchange) {
        case .failure(.remote(var error)):
            error.message = exchange.redact(error.message)
            if let data = error.data {
                let text = exchange.redact(String(decoding: JSONWriter.encode(data), as: UTF8.self))
                error.data = (try? JSONParser.parse(Array(text.utf8))) ?? .string(text)
            }
            if !(200..<300).contains(reading.status), reading.status != 0 {
                var data = error.data?.objectValue ?? (error.data.map { JSONObject([("data", $0)]) } ?? JSONObject())
                data["httpStatus"] = .int(reading.status)
                error.data = .object(data)
            }
            return .failure(.remote(error))
        case let other:
            return other
        }
    }

    private func readAnswer(of reading: Reading, exchange: HTTPExchange) -> JSONRPCPeer.Answer {
        if let message = reading.answer { return JSONRPCPeer.answer(of: message) ?? .failure(.failed("the server's answer is malformed")) }
        if reading.isStream {
            return .failure(.failed("the server's event stream ended without the answer (HTTP \(reading.status))"))
        }
        let status = reading.status
        let message = try? JSONParser.parse(reading.body)
        if status == 404, reading.sentSession {
            let why = "the server no longer knows the session (HTTP 404); the next call opens a new one"
            state.withLock { state in if state.failure == nil { state.failure = why } }
            return .failure(.failed(why))
        }
        // A JSON-RPC answer, whatever the status (a modern server's errors come on a 400 or a 404).
        // An error in the body of a plain answer can only be this POST's, whatever id it names
        // (`null`, an SDK's "server-error"): it is read as that error. A result is kept only when
        // it is one — JSON-RPC 2.0, to this request, on a success status: a result for another
        // id, or on a 500, is nothing to keep, as on the event stream and over stdio.
        if let message, let answer = JSONRPCPeer.answer(of: message) {
            guard case .success = answer else { return answer }
            guard message["jsonrpc"] == "2.0" else {
                return .failure(
                    .failed(
                        exchange.redact("the server's answer is not JSON-RPC 2.0 (no \"jsonrpc\": \"2.0\")\(Self.preview(reading.body))")))
            }
            if let id = reading.id, message["id"] != id {
                return .failure(
                    .failed(
                        exchange.redact(
                            "the server answered request \(JSONWriter.encodeString(message["id"] ?? .null)), not this one (\(JSONWriter.encodeString(id)))"
                        )))
            }
            if !(200..<300).contains(status) {
                return .failure(
                    .failed(
                        exchange.redact(
                            "the server answered HTTP \(status) with a result: a result on a status that is no success is no answer to keep\(Self.preview(reading.body))"
                        )))
            }
            return answer
        }
        if status == 202 { return .failure(.failed("the server answered the request with 202 Accepted, which carries no answer")) }
        if (200..<300).contains(status) {
            return .failure(
                .failed(
                    exchange.redact(
                        "the server answered with something that is not a JSON-RPC answer (HTTP \(status), \(reading.header("content-type") ?? "no content type"))\(Self.preview(reading.body))"
                    )
                ))
        }
        if status == 429 || (500...599).contains(status) {
            // Busy or broken for now: a failure to try again later, never an answer to keep.
            return .failure(.failed(exchange.redact("the server answered HTTP \(status)\(Self.preview(reading.body))")))
        }
        let advice =
            status == 401 || status == 403
            ? " (the server wants credentials: give them under the server's headers:, e.g. Authorization: \"Bearer ${TOKEN}\")"
            : HTTPModelClient.redirectNote(status: status, location: reading.header("location"))
        return .failure(
            .remote(
                JSONRPCPeer.RemoteError(
                    code: status == 404 ? -32601 : -32600,
                    message: "the server answered HTTP \(status)\(advice)\(Self.preview(reading.body))")))
    }

    static func preview(_ body: [UInt8]) -> String {
        let text = String(decoding: body.prefix(300), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? "" : ": \(text)\(body.count > 300 ? "…" : "")"
    }

    /// Answers a server's request that came inside a stream, with a POST of its own (not waited
    /// for: the stream goes on being read): `ping` answered, anything else refused.
    private func answerServer(_ request: JSONValue, clock: any Clock<Duration>) {
        guard let id = request["id"], let method = request["method"]?.stringValue else { return }
        var reply = JSONObject([("jsonrpc", "2.0"), ("id", id)])
        if method == "ping" {
            reply["result"] = [:]
        } else {
            reply["error"] = ["code": -32601, "message": .string("agent-eval does not take \(method)")]
        }
        post(.object(reply), clock: clock)
    }

    /// Tells a 2025-era server a request was given up (`notifications/cancelled`), not waiting.
    private func cancel(_ id: String, clock: any Clock<Duration>) {
        post(
            [
                "jsonrpc": "2.0", "method": "notifications/cancelled",
                "params": ["requestId": .string(id), "reason": "agent-eval stopped waiting for the answer"],
            ], clock: clock)
    }

    private func post(_ message: JSONValue, clock: any Clock<Duration>) {
        let (session, negotiated) = state.withLock { ($0.sessionId, $0.negotiatedVersion) }
        let headers = requestHeaders(method: message["method"]?.stringValue ?? "", params: nil, session: session, negotiated: negotiated)
            .filter { $0.name != "mcp-method" || message["method"] != nil }
        let exchange = exchange(within: .seconds(10), on: clock)
        let url = self.url
        Task { _ = await exchange.send(url: url, headers: headers, body: JSONWriter.encode(message), into: 0) { _, _ in } }
    }

    /// One answer as it arrives: its head, then a JSON body, or an event stream read until the
    /// answer to this request comes (the server's requests in it handed to `serverAsks`, its
    /// notifications dropped).
    struct Reading: Sendable {
        let id: JSONValue?
        var status = 0
        var headers: [HTTPHeader] = []
        var body: [UInt8] = []
        var stream: ServerSentEventParser?
        var answer: JSONValue?
        /// The request carried a session id (so a 404 means the server forgot it).
        let sentSession: Bool

        init(id: JSONValue?, sentSession: Bool) {
            self.id = id
            self.sentSession = sentSession
        }

        var isStream: Bool { stream != nil }

        func header(_ name: String) -> String? {
            headers.first { $0.name.lowercased() == name }?.value
        }

        mutating func take(_ part: TransportPart, serverAsks: (JSONValue) -> Void) throws {
            switch part {
            case .head(let status, let headers):
                self.status = status
                self.headers = headers
                if (200..<300).contains(status), header("content-type")?.lowercased().hasPrefix("text/event-stream") == true {
                    stream = ServerSentEventParser(maxLineBytes: StreamableHTTPChannel.answerLimit)
                }
            case .chunk(let bytes):
                guard var parser = stream else {
                    body += bytes
                    return
                }
                let events: [ServerSentEvent]
                do {
                    events = try parser.feed(bytes)
                } catch {
                    throw HTTPExchange.Unreadable("the server sent an event longer than \(error.limit >> 20) MiB")
                }
                stream = parser
                for event in events where (event.name.isEmpty || event.name == "message") && !event.data.isEmpty {
                    guard let message = try? JSONParser.parse(Array(event.data.utf8)), message["jsonrpc"] == "2.0" else {
                        throw HTTPExchange.Unreadable(
                            "the server sent an event that is not a JSON-RPC message: \(event.data.prefix(200))")
                    }
                    if message["method"] != nil {
                        if message["id"] != nil { serverAsks(message) }
                        continue
                    }
                    if let id, message["id"] == id {
                        answer = message
                        throw RequestPolicy.EnoughRead()
                    }
                }
            }
        }
    }
}
