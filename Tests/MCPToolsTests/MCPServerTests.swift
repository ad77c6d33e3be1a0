import AgentRuntime
import ConfigFile
import Foundation
import Replay
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

@testable import MCPTools

/// MCP servers as tools, against real servers: `mcp-server-time` and `mcp-server-git` from
/// PyPI, and a failure server written with the official `mcp` package
/// (`scripts/mcp_failure_server.py`), all installed by `scripts/mcp_venv`.
@Suite("MCP servers as tools", .ownThread)
struct MCPServerTests {
    @Test("a server that was stopped takes no more requests: a send after kill fails at once, so no request waits for it")
    func sendAfterKill() async throws {
        let server = try JSONLinesProcess(
            command: ["sleep", "30"], directory: FileManager.default.currentDirectoryPath, environment: ["PATH": "/usr/bin:/bin"],
            name: "sleeper")
        try await server.send(Data(#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#.utf8))
        server.kill()
        await #expect {
            try await server.send(Data(#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#.utf8))
        } throws: { error in
            "\(error)".contains("it was stopped")
        }
    }

    @Test("a server that dies while a process it started holds its stdout open is seen dead at once, its last line read first")
    func deadServerWithLingeringOutput() async throws {
        // The shell writes an answer, leaves a `sleep` holding the pipe, and exits 3.
        let started = ContinuousClock.now
        let server = try JSONLinesProcess(
            command: ["sh", "-c", #"sleep 120 & echo '{"jsonrpc":"2.0","id":1,"result":{}}'; exit 3"#],
            directory: FileManager.default.currentDirectoryPath, environment: ["PATH": "/usr/bin:/bin"], name: "dying")
        var lines: [String] = []
        await #expect(throws: JSONLinesProcess.ServerClosed.self) {
            for try await line in server.messages { lines.append(String(decoding: line, as: UTF8.self)) }
        }
        #expect(lines == [#"{"jsonrpc":"2.0","id":1,"result":{}}"#])
        #expect(server.failure == "the server exited with status 3", "\(server.failure ?? "no failure")")
        // Not when the sleep ends (in a run, the call's timeout): the end is the server's.
        #expect(ContinuousClock.now - started < .seconds(60))
    }

    @Test(
        "a server that stops reading its input cannot hold a send: past the stall limit it is stopped, and a kill ends a waiting send at once"
    )
    func serverThatStopsReading() async throws {
        // More than a pipe holds (64 KiB), to a server that never reads.
        let message = Data(
            #"{"jsonrpc":"2.0","id":1,"method":"ping","params":{"pad":""#.utf8 + Array(repeating: UInt8(ascii: "x"), count: 300_000)
                + #""}}"#.utf8)
        let stalled = try JSONLinesProcess(
            command: ["sleep", "30"], directory: FileManager.default.currentDirectoryPath, environment: ["PATH": "/usr/bin:/bin"],
            name: "deaf", inputStallLimitMs: 500)
        await #expect {
            try await stalled.send(message)
        } throws: { error in
            "\(error)".contains("it has not read its input for 500 ms (")
                && "\(error)".contains("bytes of a message waiting); it was stopped")
        }
        #expect(stalled.failure?.contains("has not read its input") == true)
        await #expect(throws: (any Error).self) { try await stalled.send(Data(#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#.utf8)) }

        // A send waiting on a server that does not read ends when the server is stopped.
        let waiting = try JSONLinesProcess(
            command: ["sleep", "30"], directory: FileManager.default.currentDirectoryPath, environment: ["PATH": "/usr/bin:/bin"],
            name: "deaf")
        let send = Task { try await waiting.send(message) }
        try await Task.sleep(for: .milliseconds(300))
        waiting.kill()
        await #expect { try await send.value } throws: { "\($0)".contains("it was stopped") }
    }

    @Test("a server's line with a string cut inside a character (a lone surrogate escape) is read with U+FFFD, not taken for garbage")
    func loneSurrogate() async throws {
        let server = try JSONLinesProcess(
            command: [
                "/bin/sh", "-c",
                #"printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"text":"cut \ud83d","whole":"\ud83d\ude00"}}'; sleep 30"#,
            ],
            directory: FileManager.default.currentDirectoryPath, environment: ["PATH": "/usr/bin:/bin"], name: "cutter")
        defer { server.kill() }
        var lines = server.messages.makeAsyncIterator()
        let line = try #require(try await lines.next())
        let message = try JSONParser.parse(Array(line))
        #expect(message["result"]?["text"] == "cut \u{FFFD}")
        #expect(message["result"]?["whole"] == "\u{1F600}", "a whole pair is left as it is")
    }

    @Test("a server's line nested as deep as a reader allows (512) is read on the reader's own thread; one deeper is said, not a crash")
    func deepestLine() async throws {
        func nested(_ depth: Int) -> String {
            #"{"jsonrpc":"2.0","id":1,"result":"# + String(repeating: "[", count: depth - 1) + String(repeating: "]", count: depth - 1)
                + "}"
        }
        let script = "printf '%s\\n' '\(nested(512))'; printf '%s\\n' '\(nested(600))'; sleep 30"
        let server = try JSONLinesProcess(
            command: ["/bin/sh", "-c", script], directory: FileManager.default.currentDirectoryPath, environment: ["PATH": "/usr/bin:/bin"],
            name: "deep")
        defer { server.kill() }
        var lines = server.messages.makeAsyncIterator()
        let line = try #require(try await lines.next())
        #expect(try JSONParser.parse(Array(line))["id"] == 1)
        await #expect(throws: (any Error).self) { _ = try await lines.next() }
        #expect(server.failure?.contains("nesting deeper than 512") == true, "\(server.failure ?? "")")
    }

    static func settings(_ name: String, _ command: [String], callTimeoutMs: Int = 30_000, startTimeoutMs: Int = 30_000)
        -> ToolServerSettings
    {
        ToolServerSettings(
            name: name, command: command, directory: FileManager.default.currentDirectoryPath,
            environment: ["PATH": ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin"], startTimeoutMs: startTimeoutMs,
            callTimeoutMs: callTimeoutMs)
    }

    static func request(_ tool: String, _ arguments: JSONValue = [:], timeoutMs: Int = 30_000) -> ToolRequest {
        ToolRequest(callId: "call-1", tool: tool, arguments: arguments, attempt: 1, timeoutMs: timeoutMs)
    }

    @Test(
        "mcp-server-time: its identity, its tools with schemas and read hints, and a call's structured result", .tags(.python), .needsPython
    )
    func timeServer() async throws {
        let connection = try await MCPServers().connect(Self.settings("time", try await MCPTestServers.timeServer()))
        // It speaks both eras: the probe finds 2026-07-28.
        #expect((connection as? MCPConnection)?.era == .stateless)
        #expect(connection.identity.protocolVersion == "2026-07-28")
        #expect(connection.identity.serverName == "mcp-time")
        #expect(connection.identity.kind == "mcp")
        #expect(!connection.identity.serverVersion.isEmpty)
        #expect(connection.tools.map(\.name) == ["get_current_time", "convert_time"])
        #expect(connection.tools.allSatisfy { $0.sideEffect == .read })
        #expect(connection.tools[1].inputSchema["required"] == ["source_timezone", "time", "target_timezone"])

        let outcome = try await connection.invoke(
            Self.request("convert_time", ["source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"]))
        #expect(outcome.status == .ok)
        let target = outcome.output?["structuredContent"]?["target"]?["datetime"]?.stringValue ?? ""
        #expect(target.hasSuffix("T21:00:00+09:00"), "\(String(describing: outcome.output))")
        #expect(outcome.output?["content"]?.arrayValue?.first?["type"] == "text")
        await connection.close()

        // Spoken to in the 2025 era, the same server lists the same tools, and the same call
        // records the same output (less the protocol's words: `resultType`, `_meta`).
        var servers = MCPServers()
        servers.era = .handshake
        let older = try await servers.connect(Self.settings("time", try await MCPTestServers.timeServer()))
        #expect(older.identity.protocolVersion == "2025-11-25")
        #expect(older.identity.serverName == "mcp-time")
        #expect(older.tools == connection.tools)
        let again = try await older.invoke(
            Self.request("convert_time", ["source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"]))
        #expect(again.output == outcome.output)
        #expect(outcome.output?["resultType"] == nil)
        await older.close()
    }

    @Test(
        "a server of the 2025 era only is spoken to with initialize after the probe: one that refuses the probe, and one the probe ends (started again)",
        .tags(.python), .needsPython, arguments: [[String](), ["--exit-before-initialize"]])
    func legacyServer(flags: [String]) async throws {
        let connection = try await MCPServers().connect(Self.settings("legacy", try await MCPTestServers.legacyServer(flags)))
        #expect((connection as? MCPConnection)?.era == .handshake)
        #expect(connection.identity.protocolVersion == "2025-06-18")
        #expect(connection.identity.serverName == "legacy-server")
        #expect(connection.tools.map(\.name) == ["greet"])
        let greeted = try await connection.invoke(Self.request("greet", ["name": "Ada"]))
        #expect(greeted.status == .ok, "\(greeted.error ?? "")")
        #expect(greeted.output?["content"]?.arrayValue?.first?["text"] == "hello, Ada")
        await connection.close()
    }

    @Test(
        "a server of the 2026-07-28 revision only (it refuses initialize) is found by the probe; a call that asks for input is an error that says so",
        .tags(.python), .needsPython)
    func modernOnlyServer() async throws {
        let connection = try await MCPServers().connect(Self.settings("modern", try await MCPTestServers.modernOnlyServer()))
        #expect((connection as? MCPConnection)?.era == .stateless)
        #expect(connection.identity.protocolVersion == "2026-07-28")
        #expect(connection.identity.serverName == "odd-questions-server")
        #expect(connection.tools.map(\.name) == ["ask_list", "ask_unknown", "ask_no_method", "plain"])
        let plain = try await connection.invoke(Self.request("plain"))
        #expect(plain.status == .ok, "\(plain.error ?? "")")
        #expect(plain.output?["content"]?.arrayValue?.first?["text"] == "plain answer")
        #expect(plain.output?["resultType"] == nil)
        let asked = try await connection.invoke(Self.request("ask_unknown"))
        #expect(asked.status != .ok)
        let said = "MCP server \"modern\" asked for input before it would answer (tasks/create)"
        #expect(asked.error?.contains(said) == true, "\(asked.error ?? "")")
        await connection.close()
    }

    @Test("mcp-server-git on a repository the test makes: the log of its one commit", .tags(.python), .needsPython)
    func gitServer() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let repository = directory.path("repo")
        try FileManager.default.createDirectory(atPath: repository, withIntermediateDirectories: true)
        try "hello\n".write(toFile: repository + "/README", atomically: true, encoding: .utf8)
        for arguments in [
            ["init", "-q"], ["add", "README"],
            ["-c", "user.name=Test", "-c", "user.email=test@example.com", "commit", "-q", "-m", "First commit from the test"],
        ] {
            let result = try await Subprocess.run("/usr/bin/env", ["git", "-C", repository] + arguments)
            #expect(result.status == 0, "git \(arguments): \(result.stderr)")
        }
        let connection = try await MCPServers().connect(Self.settings("git", try await MCPTestServers.gitServer(repository: repository)))
        #expect(connection.identity.serverName == "mcp-git")
        #expect(connection.tools.map(\.name).contains("git_log"))
        let outcome = try await connection.invoke(Self.request("git_log", ["repo_path": .string(repository)]))
        #expect(outcome.status == .ok, "\(outcome.error ?? "")")
        let text = outcome.output?["content"]?.arrayValue?.first?["text"]?.stringValue ?? ""
        #expect(text.contains("First commit from the test"), "\(text)")
        await connection.close()
    }

    @Test(
        "a tool that reports isError, a crash, a hang and a line that is not JSON-RPC: each a recorded error, and the next call works, in either era",
        .tags(.python), .needsPython, arguments: [MCPConnection.Era.stateless, .handshake])
    func failures(era: MCPConnection.Era) async throws {
        var servers = MCPServers()
        servers.era = era
        let connection = try await servers.connect(Self.settings("broken", try await MCPTestServers.failureServer()))
        #expect((connection as? MCPConnection)?.era == era)

        let echoed = try await connection.invoke(Self.request("echo", ["text": "héllo"]))
        #expect(echoed.status == .ok)
        #expect(echoed.output?["content"]?.arrayValue?.first?["text"]?.stringValue?.contains("\"echoed\": \"héllo\"") == true)

        let failed = try await connection.invoke(Self.request("fail", ["message": "the disk is full"]))
        #expect(failed.status == .error)
        #expect(failed.error?.contains("the disk is full") == true, "\(failed.error ?? "")")
        #expect(failed.output?["content"] != nil, "the error result is kept whole")

        let unknown = try await connection.invoke(Self.request("no_such_tool"))
        #expect(unknown.status == .error)
        #expect(unknown.error?.contains("no_such_tool") == true, "\(unknown.error ?? "")")

        #expect(try await connection.invoke(Self.request("counter")).output?["structuredContent"]?["result"] == 1)
        #expect(try await connection.invoke(Self.request("counter")).output?["structuredContent"]?["result"] == 2)

        let crashed = try await connection.invoke(Self.request("crash"))
        #expect(crashed.status == .error)
        #expect(crashed.error?.contains("exited with status 3") == true, "\(crashed.error ?? "")")
        #expect(crashed.stderr?.contains("crashing on purpose") == true)
        // A new process answers the next call: its counter starts again.
        #expect(try await connection.invoke(Self.request("counter")).output?["structuredContent"]?["result"] == 1)

        let started = ContinuousClock.now
        let hung = try await connection.invoke(Self.request("hang", timeoutMs: 1_000))
        #expect(ContinuousClock.now - started < .seconds(20))
        #expect(hung.status == .error)
        #expect(hung.isRetryable)
        #expect(hung.error?.contains("did not answer within 1000 ms; it was stopped") == true, "\(hung.error ?? "")")

        let garbled = try await connection.invoke(Self.request("garbage"))
        #expect(garbled.status == .error)
        #expect(garbled.error?.contains("not a JSON-RPC message: \"this is not json\"") == true, "\(garbled.error ?? "")")

        #expect(try await connection.invoke(Self.request("echo", ["text": "still here"])).status == .ok)

        // In the 2025 era the server may ping its client in the middle of a call; the client
        // answers. 2026-07-28 has no ping: the server's SDK refuses to send one.
        let pinged = try await connection.invoke(Self.request("ping_client", timeoutMs: 5_000))
        if era == .handshake {
            #expect(pinged.status == .ok, "\(pinged.error ?? "")")
        } else {
            #expect(pinged.error?.contains("Cannot send 'ping'") == true, "\(pinged.error ?? "")")
        }
        await connection.close()
    }

    @Test(
        "a server that exits at start, never answers, or prints a banner on stdout: a clear error at start, with its stderr",
        .tags(.python), .needsPython)
    func startFailures() async throws {
        await #expect {
            _ = try await MCPServers().connect(Self.settings("s", try await MCPTestServers.failureServer(["--exit-at-start"])))
        } throws: { error in
            let message = (error as? any Diagnostic)?.message ?? ""
            return message.contains("exited with status 2") && message.contains("refusing to start")
        }
        let started = ContinuousClock.now
        await #expect {
            _ = try await MCPServers().connect(
                Self.settings("s", try await MCPTestServers.failureServer(["--silent"]), startTimeoutMs: 1_500))
        } throws: { error in
            ((error as? any Diagnostic)?.message ?? "").contains("did not answer initialize within 1500 ms")
        }
        #expect(ContinuousClock.now - started < .seconds(20))
        await #expect {
            _ = try await MCPServers().connect(Self.settings("s", try await MCPTestServers.failureServer(["--banner"])))
        } throws: { error in
            ((error as? any Diagnostic)?.message ?? "").contains("not a JSON-RPC message: \"Welcome to the failure server!\"")
        }
        await #expect {
            _ = try await MCPServers().connect(Self.settings("s", ["/nonexistent/server"]))
        } throws: { error in
            ((error as? any Diagnostic)?.message ?? "").contains("/nonexistent/server")
        }
    }

    /// An agent file in `directory` whose tools are two MCP servers, and its scripted model.
    static func writeAgent(in directory: TemporaryDirectory, policy: String = "", decisions: String) async throws -> String {
        let time = try await MCPTestServers.timeServer().map { "\"\($0)\"" }.joined(separator: ", ")
        let broken = try await MCPTestServers.failureServer().map { "\"\($0)\"" }.joined(separator: ", ")
        try """
        name: clock
        instructions: Answer questions about time zones.
        model: {script: clock.model.yaml}
        mcp_servers:
          time:
            command: [\(time)]
          broken:
            command: [\(broken)]
            timeout_ms: 1500
            tools: [echo, hang]
        \(policy)
        """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
        try "name: clock-script\ndecisions:\n\(decisions)".write(
            toFile: directory.path("clock.model.yaml"), atomically: true, encoding: .utf8)
        return directory.path("agent.yaml")
    }

    @Test("a run records the servers and each tool's server, gates them by server in policy, and a re-run starts no server")
    func runAndRerun() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let path = try await Self.writeAgent(
            in: directory,
            policy: """
                policy:
                  default: allow
                  rules:
                    - {id: no-broken-echo, verdict: deny, reason: not today, when: {server: broken, tool: echo}}
                """,
            decisions: """
                  - tool_calls:
                      - {name: convert_time, arguments: {source_timezone: UTC, time: "12:00", target_timezone: Asia/Tokyo}}
                      - {name: echo, arguments: {text: hi}}
                  - tool_calls:
                      - {name: hang, arguments: {}}
                  - answer: It is 21:00 in Tokyo.
                """)
        let agent = try AgentFile.load(path: path, servers: MCPServers())
        let log = directory.path("run.jsonl.gz")
        let outcome = try await AgentRuntime(agent: agent).run(goal: "Noon UTC in Tokyo?", log: log)
        #expect(outcome.stop.reason == .success)

        let events = try LogReader(path: log).readAll().events.map(\.event)
        guard case .runStarted(let started) = events.first?.payload else {
            Issue.record("no run_started")
            return
        }
        #expect(started.toolServers.map(\.name) == ["time", "broken"])
        #expect(started.toolServers.map(\.serverName) == ["mcp-time", "failure-server"])
        #expect(started.tools.map(\.name) == ["get_current_time", "convert_time", "echo", "hang"])
        #expect(started.tools.map(\.server) == ["time", "time", "broken", "broken"])
        let state = RunState(folding: events)
        #expect(state.calls.map(\.tool) == ["convert_time", "echo", "hang"])
        #expect(state.calls.map { $0.verdict?.rule } == ["default", "no-broken-echo", "default"])
        #expect(state.calls[0].results.last?.status == .ok)
        #expect(state.calls[1].results.isEmpty)
        #expect(state.calls[2].results.last?.error?.contains("did not answer within 1500 ms") == true)

        // The new members are outside the state: the independent reader computes the same digests.
        let reference = ExampleRuns.fixtures.deletingLastPathComponent().appendingPathComponent("scripts/agent_eval_log.py").path
        let verified = try await Subprocess.run("/usr/bin/env", ["python3", reference, "verify", log])
        #expect(verified.stdoutText.contains("\"digest_mismatches\":[]"), "\(verified.stdoutText)")
        #expect(verified.stdoutText.contains("\"intact\":true"))

        // Loaded without anything that could start a server: the re-run still reproduces the run.
        let offline = try AgentFile.load(path: path)
        let report = try await Rerun.run(log: log, agent: offline, output: directory.path("rerun.jsonl.gz"))
        #expect(report.divergence == nil, "\(String(describing: report.divergence))")
        #expect(report.unanswered.isEmpty)
    }

    @Test("agent file mistakes about MCP servers are errors with file:line:column", .tags(.python), .needsPython)
    func agentFileErrors() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let file = directory.path("agent.yaml")
        func load(_ text: String) throws -> Agent {
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            try "name: s\ndecisions:\n  - answer: done\n".write(toFile: directory.path("m.yaml"), atomically: true, encoding: .utf8)
            return try AgentFile.load(path: file, servers: MCPServers())
        }
        // Servers over HTTP: a URL that is not http(s), a command beside a url, the old SSE
        // transport, a header's malformed ${…}, a header the client sets itself. (A variable
        // that is not set is found when the server is reached: a re-run reaches none.)
        for (text, says, line) in [
            ("  web:\n    url: ftp://127.0.0.1/mcp\n", "is not an http:// or https:// URL with a host", 5),
            ("  web:\n    url: http://127.0.0.1:9/mcp\n    command: [python3]\n", "has a url and command", 6),
            ("  web:\n    type: sse\n    url: http://127.0.0.1:9/sse\n", "the kinds are stdio (a command) and http", 5),
            (
                "  web:\n    url: http://127.0.0.1:9/mcp\n    headers: {Authorization: \"Bearer ${NOT-A-NAME}\"}\n",
                "headers.Authorization names \"${NOT-A-NAME}\", which is not a variable name", 6
            ),
            ("  web:\n    url: http://127.0.0.1:9/mcp\n    headers: {Mcp-Session-Id: x}\n", "is set by the MCP client itself", 6),
            ("  web:\n    type: http\n    command: [python3]\n", "has type http and no url", 5),
        ] {
            #expect {
                _ = try load("name: a\nmodel: {script: m.yaml}\nmcp_servers:\n" + text)
            } throws: { error in
                let error = error as? ConfigError
                return error?.message.contains(says) == true && error?.place?.line == line
            }
        }
        #expect {
            _ = try load("name: a\nmodel: {script: m.yaml}\nmcp_servers:\n  t:\n    command: [no-such-mcp-server-anywhere]\n")
        } throws: { error in
            let error = error as? ConfigError
            return error?.message.contains("is not a program on PATH") == true && error?.place?.line == 5
        }
        #expect {
            _ = try load(
                "name: a\nmodel: {script: m.yaml}\nmcp_servers:\n  t:\n    command: [python3]\npolicy:\n  rules:\n"
                    + "    - {id: r, verdict: deny, when: {server: tim}}\n")
        } throws: { error in
            (error as? ConfigError)?.message.contains("names the MCP server \"tim\"") == true
        }

        // Names only a server can answer are checked when it starts: a rule naming a tool it lacks.
        let time = try await MCPTestServers.timeServer().map { "\"\($0)\"" }.joined(separator: ", ")
        let agent = try load(
            "name: a\nmodel: {script: m.yaml}\nmcp_servers:\n  time:\n    command: [\(time)]\npolicy:\n  rules:\n"
                + "    - {id: r, verdict: deny, when: {tool: get_curent_time}}\n")
        await #expect {
            _ = try await AgentRuntime(agent: agent).run(goal: "g", log: directory.path("never.jsonl.gz"))
        } throws: { error in
            let error = error as? RuntimeError
            return error?.message.contains("names the tool \"get_curent_time\"") == true
                && error?.hint?.contains("get_current_time") == true
                && error?.place?.line == 8
        }
        #expect(!FileManager.default.fileExists(atPath: directory.path("never.jsonl.gz")), "no log for a run that never started")

        // Two servers offering the same name.
        let clash = try load(
            "name: a\nmodel: {script: m.yaml}\nmcp_servers:\n  one:\n    command: [\(time)]\n  two:\n    command: [\(time)]\n")
        await #expect {
            _ = try await AgentRuntime(agent: clash).run(goal: "g", log: directory.path("never.jsonl.gz"))
        } throws: { error in
            ((error as? RuntimeError)?.message ?? "").contains(
                "MCP server \"two\" offers a tool \"get_current_time\", and MCP server \"one\"")
        }
    }
}

extension ToolServerConnection {
    /// Calls `tool` of the server as the runtime does: one attempt of call `call-1`.
    func call(_ tool: String, _ arguments: JSONValue = [:], timeoutMs: Int = 30_000) async throws -> ToolOutcome {
        try await invoke(ToolRequest(callId: "call-1", tool: tool, arguments: arguments, attempt: 1, timeoutMs: timeoutMs))
    }
}
