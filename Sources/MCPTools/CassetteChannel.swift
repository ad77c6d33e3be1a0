import AgentRuntime
import Foundation
import ModelClients
import Synchronization
import TraceCore

/// An MCP server's conversation through a cassette (docs/mcp.md, "Cassettes"): what the server
/// answered, recorded beside the model's interactions, so a run with MCP tools replays offline
/// with no server installed.
///
/// - `--record none`: no server is started or reached; every request is answered from the
///   cassette, and one it does not hold is an error naming the nearest recording. (A
///   `server/discover` probe it does not hold is taken as unanswered, as a 2025 server may
///   leave it, so a cassette recorded from such a server replays.)
/// - `new`: the server runs; its opening (`server/discover`, `initialize`, `tools/list`) goes
///   to it, and a `tools/call` the cassette holds is answered from it, not sent (and so is the
///   polling of a task such a call made). What the server answers is recorded: a task's polls
///   under one key, so the last — its end — is what a replay finds.
/// - `all`: everything goes to the server and is recorded again.
///
/// A request is keyed by the server's name, its method, its params and the protocol version —
/// never its JSON-RPC id, the client's name (`clientInfo`) or anything else of `_meta` but the
/// version and the client's capabilities; a `tools/call` made again with the same params in one
/// connection is told apart by its occurrence. Answers (results and JSON-RPC errors) are
/// recorded; a timeout, a server that failed, or an error that came with an HTTP error status is
/// not.
final class CassetteChannel: MCPChannel {
    let cassette: Cassette
    let server: String
    /// The server itself; nil when the cassette answers alone (`none`).
    let live: (any MCPChannel)?
    private let secrets: [String]
    /// The version `initialize` agreed (2025 era), for the keys of the requests after it.
    private let negotiated = Mutex<String?>(nil)
    /// The tasks of calls answered from the cassette: polled there too.
    private let replayedTasks = Mutex<Set<String>>([])

    /// How often each `tools/call` was made in one connection (kept across its restarts): the
    /// second call with the same params is another recording, not the first one's answer.
    final class Counts: Sendable {
        private let counts = Mutex<[String: Int]>([:])

        init() {}

        func next(_ key: JSONValue) -> Int {
            let text = String(decoding: JSONWriter.encode(key), as: UTF8.self)
            return counts.withLock { counts in
                counts[text, default: 0] += 1
                return counts[text] ?? 1
            }
        }
    }

    private let counts: Counts

    init(cassette: Cassette, settings: ToolServerSettings, live: (any MCPChannel)?, counts: Counts) {
        self.counts = counts
        self.cassette = cassette
        server = settings.name
        self.live = live
        let environment = ProcessInfo.processInfo.environment
        secrets =
            settings.headers.isEmpty
            ? []
            : StreamableHTTPChannel.secrets(
                settings, resolved: (try? settings.resolvedHeaders(environment: environment)) ?? [:], environment: environment)
    }

    var provider: String { Self.provider(server) }

    /// What a server's recordings are filed under: `mcp-<its agent file key>`.
    static func provider(_ server: String) -> String { "mcp-\(server)" }

    /// What a request is recorded under: its method, its params without what varies from run to
    /// run, and the protocol version it was sent in.
    func key(_ method: String, params: JSONValue?) -> JSONValue {
        var kept = params?.objectValue ?? JSONObject()
        if let meta = kept["_meta"]?.objectValue {
            let stays = JSONObject(
                meta.filter { [MCPEra.protocolVersionKey, MCPEra.clientCapabilitiesKey].contains($0.key) }.map { ($0.key, $0.value) })
            kept["_meta"] = stays.isEmpty ? nil : .object(stays)
        }
        if method == "initialize" { kept["clientInfo"] = nil }
        let version = MCPEra.envelope(of: params)?[MCPEra.protocolVersionKey]?.stringValue ?? negotiated.withLock { $0 }
        var key = ObjectBuilder()
        key.set("server", server)
        key.set("method", method)
        key.set("params", JSONValue.object(kept))
        key.set("protocol_version", version)
        return key.json
    }

    func request(
        _ method: String, params: JSONValue?, within duration: Duration, on clock: any Clock<Duration>, endsServerWhenAbandoned: Bool
    ) async -> JSONRPCPeer.Answer {
        var key = key(method, params: params)
        if method == "tools/call" {
            let occurrence = counts.next(key)
            if occurrence > 1, var object = key.objectValue {
                object["occurrence"] = .int(occurrence)
                key = .object(object)
            }
        }
        // With `new`, a call the cassette holds never reaches the server, nor does the task it
        // made (whose last recorded state is its end): a task the server made is polled there.
        let replays: Bool
        switch cassette.mode {
        case .none: replays = true
        case .new:
            replays =
                method == "tools/call"
                || (method.hasPrefix("tasks/") && replayedTasks.withLock { $0.contains(params?["taskId"]?.stringValue ?? "") })
        case .all: replays = false
        }
        if replays {
            do {
                if let recorded = try cassette.answer(provider: provider, request: key) {
                    let answer = Self.answer(of: recorded)
                    if method == "tools/call", case .success(let result) = answer, let task = result["taskId"]?.stringValue {
                        replayedTasks.withLock { _ = $0.insert(task) }
                    }
                    return settle(method, answer)
                }
            } catch {
                return .failure(.failed((error as? any Diagnostic)?.message ?? "\(error)"))
            }
        }
        guard let live else {
            if method == "server/discover" { return .failure(.timedOut) }
            return .failure(.failed(cassette.missing(provider: provider, request: key)))
        }
        let answer = await live.request(
            method, params: params, within: duration, on: clock, endsServerWhenAbandoned: endsServerWhenAbandoned)
        let stored: JSONValue?
        switch answer {
        case .success(let result): stored = ["result": result]
        case .failure(.remote(let error)) where error.data?["httpStatus"] == nil:
            // A JSON-RPC error the server answered; one an HTTP status stood for is not kept.
            var object = ObjectBuilder()
            object.set("code", error.code)
            object.set("message", error.message)
            object.set("data", error.data)
            stored = ["error": object.json]
        default: stored = nil
        }
        if let stored {
            do {
                try cassette.keep(answer: stored, provider: provider, request: key, label: method, secrets: secrets)
            } catch {
                return .failure(
                    .failed(
                        "the answer could not be recorded in \(cassette.directory): \((error as? any Diagnostic)?.message ?? "\(error)")"))
            }
        }
        return settle(method, answer)
    }

    /// Notes the version an `initialize` answer agreed, for the keys of later requests.
    private func settle(_ method: String, _ answer: JSONRPCPeer.Answer) -> JSONRPCPeer.Answer {
        if method == "initialize", case .success(let result) = answer {
            negotiated.withLock { $0 = result["protocolVersion"]?.stringValue }
        }
        return answer
    }

    /// A recorded answer: `{"result": …}` or `{"error": {code, message, data}}`.
    static func answer(of recorded: JSONValue) -> JSONRPCPeer.Answer {
        if let error = recorded["error"] {
            return .failure(
                .remote(
                    JSONRPCPeer.RemoteError(
                        code: error["code"]?.intValue ?? 0, message: error["message"]?.stringValue ?? "no message", data: error["data"])))
        }
        return recorded["result"].map { .success($0) } ?? .failure(.failed("the recorded answer has neither result nor error"))
    }

    func notify(_ method: String, params: JSONValue?) async throws {
        try await live?.notify(method, params: params)
    }

    var failure: String? { live?.failure }
    func kill() { live?.kill() }
    func stop() async { await live?.stop() }
    var stderrMark: Int { live?.stderrMark ?? 0 }
    func stderr(since mark: Int) -> String? { live?.stderr(since: mark) }
    func settleStderr() async { await live?.settleStderr() }
    var strayAnswers: (count: Int, last: String?) { live?.strayAnswers ?? (0, nil) }
    var lastErrorLine: String? { live?.lastErrorLine }
    var isProcess: Bool { live?.isProcess ?? false }
    var startHint: String {
        live?.startHint ?? "record the server's answers into \(cassette.directory) with --record new (the server must run for that)"
    }
}
