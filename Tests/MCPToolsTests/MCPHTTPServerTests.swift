import AgentRuntime
import Foundation
import Replay
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

@testable import MCPTools

/// MCP servers at a URL (Streamable HTTP), against real servers on 127.0.0.1 that each test
/// starts: the `mcp` 2.x server of `scripts/mcp_http_server.py` (both eras on one endpoint) and
/// `scripts/mcp_legacy_server.py --http` (2025 only, with sessions).
@Suite("MCP servers over HTTP", .ownThread)
struct MCPHTTPServerTests {
    static func settings(_ url: String, headers: [String: String] = [:], callTimeoutMs: Int = 30_000) -> ToolServerSettings {
        ToolServerSettings(
            name: "web", command: [], directory: FileManager.default.currentDirectoryPath, callTimeoutMs: callTimeoutMs, url: url,
            headers: headers)
    }

    /// The requests the server logged: method, path and headers (lower-case names) each.
    static func requests(_ path: String) throws -> [JSONValue] {
        guard let data = FileManager.default.contents(atPath: path) else { return [] }
        return try data.split(separator: 0x0A).map { try JSONParser.parse(Array($0)) }
    }

    @Test(
        "2026-07-28 over HTTP: found by the probe, every POST names its version, method and tool, a marked argument is mirrored, a streamed answer is read",
        .tags(.python), .needsPython)
    func modern() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let log = directory.path("requests.jsonl")
        let server = try await MCPTestServers.httpServer(requestLog: log)
        defer { server.stop() }
        let connection = try await MCPServers().connect(Self.settings("http://127.0.0.1:\(server.port)/mcp"))
        #expect((connection as? MCPConnection)?.era == .stateless)
        #expect(connection.identity.protocolVersion == "2026-07-28")
        #expect(connection.identity.serverName == "http-test-server")
        #expect(connection.tools.map(\.name) == ["add", "route", "chatty", "visit", "slow"])
        #expect(connection.tools.allSatisfy { $0.sideEffect == .read })

        let sum = try await connection.call("add", ["a": 2, "b": 3])
        #expect(sum.status == .ok)
        #expect(sum.output?["structuredContent"]?["result"] == 5)
        #expect(sum.output?["resultType"] == nil)
        // The server refuses a call whose Mcp-Param-Region differs from the argument: these pass.
        for region in ["eu-west", "Zürich", " padded "] {
            let routed = try await connection.call("route", ["region": .string(region), "query": "q"])
            #expect(routed.status == .ok, "\(String(describing: routed.error))")
            #expect(routed.output?["structuredContent"]?["result"] == .string("q in \(region)"))
        }
        // Two log messages first, so the answer comes at the end of an event stream.
        let chatty = try await connection.call("chatty", ["text": "hi"])
        #expect(chatty.output?["structuredContent"]?["result"] == "echo: hi")
        await connection.close()

        let posts = try Self.requests(log).filter { $0["method"] == "POST" }
        #expect(posts.count == 7)  // discover, tools/list, add, route ×3, chatty
        #expect(posts.allSatisfy { $0["headers"]?["mcp-protocol-version"] == "2026-07-28" })
        #expect(posts.compactMap { $0["headers"]?["mcp-method"]?.stringValue }.first == "server/discover")
        let calls = posts.filter { $0["headers"]?["mcp-method"] == "tools/call" }
        #expect(calls.compactMap { $0["headers"]?["mcp-name"]?.stringValue } == ["add", "route", "route", "route", "chatty"])
        #expect(calls[2]["headers"]?["mcp-param-region"]?.stringValue?.hasPrefix("=?base64?") == true)
        #expect(posts.allSatisfy { $0["headers"]?["mcp-session-id"] == nil })
    }

    @Test(
        "the 2025 era over HTTP: a session from initialize on every request, a server's question inside a stream refused, the session deleted at the end",
        .tags(.python), .needsPython)
    func handshake() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let log = directory.path("requests.jsonl")
        let server = try await MCPTestServers.httpServer(requestLog: log)
        defer { server.stop() }
        var servers = MCPServers()
        servers.era = .handshake
        let connection = try await servers.connect(Self.settings("http://127.0.0.1:\(server.port)/mcp"))
        #expect(connection.identity.protocolVersion == "2025-11-25")
        #expect(connection.identity.serverName == "http-test-server")
        #expect(connection.tools.count == 5)
        let sum = try await connection.call("add", ["a": 2, "b": 3])
        #expect(sum.output?["structuredContent"]?["result"] == 5)
        // The server asks the client to open a page in the middle of the call: refused, and the
        // call still ends with the server's answer.
        let visit = try await connection.call("visit", ["url": "https://example.com"])
        #expect(visit.status == .ok)
        #expect(
            visit.output?["structuredContent"]?["result"]?.stringValue?.hasPrefix("not visited") == true,
            "\(String(describing: visit.output))")
        await connection.close()

        let requests = try Self.requests(log)
        let session = requests.compactMap { $0["headers"]?["mcp-session-id"]?.stringValue }.first
        #expect(session != nil)
        let afterInitialize = requests.dropFirst()
        #expect(afterInitialize.allSatisfy { $0["headers"]?["mcp-session-id"]?.stringValue == session })
        #expect(afterInitialize.allSatisfy { $0["headers"]?["mcp-protocol-version"] == "2025-11-25" })
        #expect(requests.last?["method"] == "DELETE")
    }

    @Test(
        "a 2025-only server over HTTP: the probe's 400 makes it a 2025 server; a session it forgot is opened again at the next call",
        .tags(.python), .needsPython)
    func legacy() async throws {
        let server = try await MCPTestServers.legacyHTTPServer()
        defer { server.stop() }
        let connection = try await MCPServers().connect(Self.settings("http://127.0.0.1:\(server.port)/mcp"))
        #expect((connection as? MCPConnection)?.era == .handshake)
        #expect(connection.identity.protocolVersion == "2025-06-18")
        #expect(connection.identity.serverName == "legacy-server")
        let first = try await connection.call("greet", ["name": "ada"])
        #expect(first.output?["content"]?.arrayValue?.first?["text"] == "hello, ada")

        // The server drops the session: the next call fails (retryable), the one after opens a new one.
        #expect(try await connection.call("forget", [:]).status == .ok)
        let lost = try await connection.call("greet", ["name": "bob"])
        #expect(lost.status == .error)
        #expect(lost.isRetryable == true)
        #expect(lost.error?.contains("no longer knows the session (HTTP 404)") == true, "\(String(describing: lost.error))")
        let again = try await connection.call("greet", ["name": "bob"])
        #expect(again.output?["content"]?.arrayValue?.first?["text"] == "hello, bob", "\(String(describing: again.error))")
        await connection.close()
    }

    @Test(
        "over HTTP: nothing listening, a refused token, a call past its timeout, an answer as one JSON object",
        .tags(.python), .needsPython)
    func failures() async throws {
        // Nothing listens on a port just freed.
        let free = try LocalPort.free()
        await #expect {
            _ = try await MCPServers().connect(Self.settings("http://127.0.0.1:\(free)/mcp"))
        } throws: { error in
            let error = error as? any Diagnostic
            return error?.message.contains("could not be reached: could not connect to 127.0.0.1:\(free) (connection refused)") == true
                && error?.hint?.contains("is the server running") == true
        }

        // A header's variable that is not set: said when the server is to be reached.
        await #expect {
            _ = try await MCPServers().connect(
                Self.settings("http://127.0.0.1:\(free)/mcp", headers: ["Authorization": "Bearer ${AGENT_EVAL_NO_SUCH_TOKEN}"]))
        } throws: { error in
            let error = error as? any Diagnostic
            return error?.message == "headers.Authorization names ${AGENT_EVAL_NO_SUCH_TOKEN}, which is not set in the environment"
                && error?.hint?.contains("export AGENT_EVAL_NO_SUCH_TOKEN") == true
        }

        let server = try await MCPTestServers.httpServer(["--json-response", "--token", "s3cret-token-value"])
        defer { server.stop() }
        let url = "http://127.0.0.1:\(server.port)/mcp"
        await #expect {
            _ = try await MCPServers().connect(Self.settings(url, headers: ["Authorization": "Bearer wrong-token-value"]))
        } throws: { error in
            let message = (error as? any Diagnostic)?.message ?? ""
            return message.contains("HTTP 401") && message.contains("wants credentials") && !message.contains("wrong-token-value")
        }
        let connection = try await MCPServers().connect(Self.settings(url, headers: ["Authorization": "Bearer s3cret-token-value"]))
        #expect(try await connection.call("add", ["a": 1, "b": 1]).output?["structuredContent"]?["result"] == 2)

        let slow = try await connection.call("slow", ["ms": 5_000], timeoutMs: 300)
        #expect(slow.status == .error)
        #expect(slow.isRetryable == true)
        #expect(slow.error?.contains("did not answer within 300 ms; the request was given up") == true, "\(String(describing: slow.error))")
        // The server is not ours to stop: the next call goes to it as before.
        #expect(try await connection.call("add", ["a": 2, "b": 2]).output?["structuredContent"]?["result"] == 4)
        await connection.close()
    }

    @Test(
        "a run with a server at a URL: its tools are called and recorded, its era logged, the token in its headers never reaches the log",
        .tags(.python), .needsPython)
    func run() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let token = "tok-\(UUID().uuidString)"
        let server = try await MCPTestServers.httpServer(["--token", token])
        defer { server.stop() }
        setenv("AGENT_EVAL_TEST_MCP_AUTH", token, 1)
        defer { unsetenv("AGENT_EVAL_TEST_MCP_AUTH") }
        try """
        name: web
        model: {script: web.model.yaml}
        mcp_servers:
          calc:
            url: http://127.0.0.1:\(server.port)/mcp
            headers: {Authorization: "Bearer ${AGENT_EVAL_TEST_MCP_AUTH}"}
        """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
        try """
        name: web-script
        decisions:
          - tool_calls:
              - {name: add, arguments: {a: 20, b: 22}}
              - {name: route, arguments: {region: "\(token)", query: where}}
          - answer: "20 + 22 is 42."
        """.write(toFile: directory.path("web.model.yaml"), atomically: true, encoding: .utf8)
        let agent = try AgentFile.load(path: directory.path("agent.yaml"), servers: MCPServers())
        let log = directory.path("run.jsonl.gz")
        let outcome = try await AgentRuntime(agent: agent).run(goal: "What is 20 + 22?", log: log)
        #expect(outcome.stop.reason == .success, "\(String(describing: outcome.stop.error))")

        let events = try LogReader(path: log).readAll().events.map(\.event)
        guard case .runStarted(let started) = events.first?.payload else {
            Issue.record("no run_started")
            return
        }
        #expect(started.toolServers.map(\.serverName) == ["http-test-server"])
        #expect(started.toolServers.map(\.protocolVersion) == ["2026-07-28"])
        let state = RunState(folding: events)
        #expect(state.calls.map(\.tool) == ["add", "route"])
        #expect(state.calls.allSatisfy { $0.results.last?.status == .ok })
        // The token was sent as a header and echoed by the tool: the log holds neither.
        let text = try await Subprocess.run("/bin/sh", ["-c", "gzip -dc '\(log)'"])
        #expect(!text.stdoutText.contains(token))
        #expect(text.stdoutText.contains("[redacted:env:AGENT_EVAL_TEST_MCP_AUTH:"))
    }
}
