import AgentRuntime
import Foundation
import TraceCore

/// How `MCPConnection` speaks with one server: a process it started, over stdio
/// (`ProcessChannel`), or an endpoint over Streamable HTTP (`StreamableHTTPChannel`). Either way a
/// request's answer is a `JSONRPCPeer.Answer`, so finding the era, listing tools and calling
/// them are written once, above this.
protocol MCPChannel: Sendable {
    /// Sends a request and waits for its answer within `duration` on `clock`. With
    /// `endsServerWhenAbandoned`, a wait given up (the deadline passed, the caller was
    /// cancelled) ends a server process at once, which also ends a write it never read.
    func request(
        _ method: String, params: JSONValue?, within duration: Duration, on clock: any Clock<Duration>, endsServerWhenAbandoned: Bool
    ) async -> JSONRPCPeer.Answer

    /// Sends a notification; throws when the server cannot take it.
    func notify(_ method: String, params: JSONValue?) async throws

    /// Why no more requests can go through this channel (the process ended; the HTTP server
    /// forgot the session), once that is so: the next call opens another.
    var failure: String? { get }

    /// Ends a server process at once (its group killed); over HTTP, nothing: the server is not ours.
    func kill()

    /// Ends the conversation the way the protocol says (a process's input closed; an HTTP
    /// session deleted).
    func stop() async

    /// Where the server's stderr stands, for a call's share of it (`stderr(since:)`); 0 over HTTP.
    var stderrMark: Int { get }
    func stderr(since mark: Int) -> String?
    /// Waits (briefly) until what the server wrote to stderr so far is read, before a call takes
    /// its share: nothing to wait for over HTTP.
    func settleStderr() async
    /// Answers the server gave to requests never sent (or given up on): how many so far, and the
    /// last one's id; none over HTTP, where such an answer is an error of its request.
    var strayAnswers: (count: Int, last: String?) { get }
    /// The server's last line on stderr, for a failed start.
    var lastErrorLine: String? { get }

    /// True when this client started the server: a probe may end it, and it can be started again.
    var isProcess: Bool { get }
    /// What to try when the server did not start: run its command by hand, or reach its URL.
    var startHint: String { get }
}

/// A server process over stdio: `JSONLinesProcess`, the `JSONRPCPeer` on it, and the task that
/// reads its messages (the server's `ping` answered, its other requests refused: this client
/// offers no sampling, elicitation or roots).
struct ProcessChannel: MCPChannel {
    let server: JSONLinesProcess
    let peer: JSONRPCPeer
    let reader: Task<Void, Never>
    let command: [String]

    /// Starts the server process and its reader.
    init(_ settings: ToolServerSettings) throws(MCPToolError) {
        let server: JSONLinesProcess
        do {
            server = try JSONLinesProcess(
                command: settings.command, directory: settings.directory, environment: settings.environment, name: settings.name)
        } catch {
            throw MCPToolError(error.message)
        }
        let peer = JSONRPCPeer(server: server, idPrefix: "agent-eval")
        self.server = server
        self.peer = peer
        command = settings.command
        reader = Task {
            await peer.readMessages { method, _ in
                // The protocol lets either side ping (until 2026-07-28, which dropped it).
                method == "ping" ? .success([:]) : .failure(.methodNotFound(method))
            }
        }
    }

    func request(
        _ method: String, params: JSONValue?, within duration: Duration, on clock: any Clock<Duration>, endsServerWhenAbandoned: Bool
    ) async -> JSONRPCPeer.Answer {
        let server = self.server
        return await peer.request(
            method, params: params, within: duration, on: clock, abandon: endsServerWhenAbandoned ? { @Sendable in server.kill() } : nil)
    }

    func notify(_ method: String, params: JSONValue?) async throws {
        do {
            try await peer.notify(method, params: params)
        } catch {
            throw MCPToolError(server.failure ?? "\(error)")
        }
    }

    var failure: String? { server.failure }
    func kill() { server.kill() }

    /// Stops the server (its input closed, 2 s to exit, then its group killed) and its reader —
    /// cancelled, not waited out: a process outside the group that inherited the server's
    /// stdout may hold the pipe open after the server is gone.
    func stop() async {
        await server.stop()
        reader.cancel()
        await reader.value
    }

    var stderrMark: Int { server.stderrMark }
    func stderr(since mark: Int) -> String? { server.stderr(since: mark) }
    func settleStderr() async { await server.settleStderr() }
    var strayAnswers: (count: Int, last: String?) { peer.strayAnswers }
    var lastErrorLine: String? { server.lastErrorLine }
    var isProcess: Bool { true }
    var startHint: String { "run its command by hand to see why: \(ShellWords.command(command))" }
}
