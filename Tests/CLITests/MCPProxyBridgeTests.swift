import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// `agent-eval mcp-proxy --bridge` between clients and servers of different MCP eras, which the
/// specification's compatibility matrix has fail: the official `mcp` 2.x package's 2025-era
/// `ClientSession` and its `Client` in `legacy` mode against a server of 2026-07-28 only
/// (scripts/mcp_odd_questions_server.py refuses `initialize`) and a dual `mcp` 2.x server
/// (scripts/mcp_rounds_server.py); its `Client` pinned to 2026-07-28 against a 2025-only server
/// (scripts/mcp_legacy_server.py, which asks its client mid-call with `--asks`).
@Suite(
    "mcp-proxy --bridge: clients and servers of different MCP eras work together, gated and recorded", .tags(.python), .needsPython,
    .ownThread)
struct MCPProxyBridgeTests {
    /// What the log keeps of the bridge (`application/vnd.agent-eval.mcp-bridge+json`), if anything.
    static func bridged(_ events: [Event]) throws -> JSONValue? {
        for event in events {
            guard case .contentStored(let stored) = event.payload, stored.mediaType == "application/vnd.agent-eval.mcp-bridge+json" else {
                continue
            }
            return try JSONParser.parse(try #require(stored.bytes))
        }
        return nil
    }

    static func started(_ events: [Event]) throws -> RunStarted {
        guard case .runStarted(let started) = events.first?.payload else { throw TestFailure("the log does not begin with run_started") }
        return started
    }

    struct TestFailure: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    @Test(
        "the compatibility matrix: a 2025 client with a 2026-07-28-only server, and a 2026-07-28-only client with a 2025 server, fail without --bridge and work with it, gated and recorded; one era on both sides passes untranslated"
    )
    func matrix() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let modernOnly = try await MCPTestServers.modernOnlyServer()
        struct Pairing {
            var client: String
            var server: [String]
            var tool: String
            var arguments: JSONValue
            var answer: String
            /// The bridge's way in the log; nil when nothing is translated.
            var way: String?
            var serverVersion: String
            var failsWithoutBridge: Bool
            var restarts: Bool
        }
        let pairings = [
            Pairing(
                client: "session", server: modernOnly, tool: "plain", arguments: [:], answer: "plain answer",
                way: "2025 client, 2026-07-28 server", serverVersion: "2026-07-28", failsWithoutBridge: true, restarts: false),
            Pairing(
                client: "2026-07-28", server: try await MCPTestServers.legacyServer(), tool: "greet", arguments: ["name": "Ada"],
                answer: "hello, Ada", way: "2026-07-28 client, 2025 server", serverVersion: "2025-06-18", failsWithoutBridge: true,
                restarts: false),
            Pairing(
                client: "2026-07-28", server: try await MCPTestServers.legacyServer(["--exit-before-initialize"]), tool: "greet",
                arguments: ["name": "Ada"], answer: "hello, Ada", way: "2026-07-28 client, 2025 server", serverVersion: "2025-06-18",
                failsWithoutBridge: true, restarts: true),
            Pairing(
                client: "session", server: try await MCPTestServers.legacyServer(["--exit-before-initialize"]), tool: "greet",
                arguments: ["name": "Ada"], answer: "hello, Ada", way: nil, serverVersion: "2025-06-18", failsWithoutBridge: false,
                restarts: true),
            Pairing(
                client: "2026-07-28", server: try await MCPTestServers.timeServer(), tool: "get_current_time",
                arguments: ["timezone": "UTC"],
                answer: "\"timezone\": \"UTC\"", way: nil, serverVersion: "2026-07-28", failsWithoutBridge: false, restarts: false),
        ]
        for (number, pairing) in pairings.enumerated() {
            let what = "\(pairing.client) client, \(pairing.server.last ?? "") server"
            let plan: JSONValue = [
                "mode": .string(pairing.client), "calls": [["tool": .string(pairing.tool), "arguments": pairing.arguments]],
            ]
            if pairing.failsWithoutBridge {
                let plain = directory.path("plain\(number).jsonl.gz")
                let command = try await MCPProxyCommandTests.client(plan, proxy: ["--log", plain], server: pairing.server)
                let (lines, plainRun) = try await MCPProxyCommandTests.run(command, in: directory)
                #expect(
                    !lines.contains { $0["text"]?.stringValue?.contains(pairing.answer) == true },
                    "\(what): worked without --bridge: \(lines)")
                // It failed the way the matrix says: the client could not open the session.
                #expect(plainRun.status != 0, "\(what): \(lines)")
                #expect(
                    plainRun.stderr.contains("Method not found") || plainRun.stderr.contains("before initialize; exiting"),
                    "\(what): \(plainRun.stderr)")
            }
            let log = directory.path("bridged\(number).jsonl.gz")
            let command = try await MCPProxyCommandTests.client(plan, proxy: ["--log", log, "--bridge"], server: pairing.server)
            let (lines, result) = try await MCPProxyCommandTests.run(command, in: directory)
            #expect(result.status == 0, "\(what): \(result.stderr)")
            #expect(lines.first?["tools"]?.arrayValue?.contains(.string(pairing.tool)) == true, "\(what): \(lines)")
            #expect(lines.last?["is_error"] == false, "\(what): \(lines)")
            #expect(lines.last?["text"]?.stringValue?.contains(pairing.answer) == true, "\(what): \(lines)")
            #expect(result.stderr.contains("it was started again") == pairing.restarts, "\(what): \(result.stderr)")
            let events = try MCPProxyCommandTests.events(log)
            let trajectory = MCPProxyCommandTests.trajectory(events)
            #expect(trajectory.first == "verdict \(pairing.tool) allow", "\(what): \(trajectory)")
            #expect(trajectory.dropFirst(2).first == "result \(pairing.tool) ok", "\(what): \(trajectory)")
            #expect(trajectory.last == "stop success", "\(what): \(trajectory)")
            let note = try Self.bridged(events)
            #expect(note?["way"]?.stringValue == pairing.way, "\(what): \(String(describing: note))")
            if pairing.way != nil {
                #expect(note?["server_protocol_version"]?.stringValue == pairing.serverVersion, "\(what)")
            }
            let started = try Self.started(events)
            #expect(started.toolServers.first?.protocolVersion == pairing.serverVersion, "\(what): \(started.toolServers)")
            #expect(try await agentEval(["log", "verify", log]).status == 0, "\(what)")
        }
    }

    @Test(
        "a 2025 server's requests to the client mid-call reach a 2026-07-28 client as the call's input_required rounds: judged once, every round kept with its requestState, the server's ping answered, a refused question never asked, a tampered state refused"
    )
    func legacyServerAsks() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try await MCPTestServers.legacyServer(["--asks"])
        let log = directory.path("asks.jsonl.gz")
        let plan: JSONValue = [
            "mode": "2026-07-28",
            "calls": [
                ["tool": "confirm", "arguments": ["action": "deploy", "times": 3]],
                ["tool": "greet", "arguments": ["name": "Ada"]],
            ],
        ]
        let command = try await MCPProxyCommandTests.client(plan, proxy: ["--log", log, "--bridge"], server: server)
        let (lines, result) = try await MCPProxyCommandTests.run(command, in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            lines.dropFirst().map { $0["text"]?.stringValue ?? "\($0)" } == ["confirmed deploy (accept, accept, accept)", "hello, Ada"])
        let events = try MCPProxyCommandTests.events(log)
        #expect(MCPProxyErasTests.verdicts(events) == ["mcp-1 allow default", "mcp-2 allow default"])
        let rounds = try MCPProxyErasTests.rounds(events)
        #expect(
            rounds.map(\.line) == [
                "mcp-1 1 server", "mcp-1 2 client", "mcp-1 2 server", "mcp-1 3 client", "mcp-1 3 server", "mcp-1 4 client",
            ])
        for (question, retry) in zip(rounds, rounds.dropFirst()) where question.line.hasSuffix("server") {
            let state = try #require(question.message["result"]?["requestState"]?.stringValue)
            #expect(retry.message["params"]?["requestState"]?.stringValue == state)
            let asked = try #require(question.message["result"]?["inputRequests"]?.objectValue)
            #expect(asked.count == 1 && asked.first?.value["method"] == "elicitation/create", "\(asked)")
            #expect(retry.message["params"]?["inputResponses"]?[asked.first?.key ?? ""]?["action"] == "accept")
        }
        #expect(MCPProxyErasTests.results(events)["mcp-1"]?.status == .ok)

        // A policy that lets the server ask nothing: the question never reaches the client, and
        // the server is told so (its tool answers with the refusal).
        try """
        policy: {name: quiet, default: allow}
        input_requests:
          elicitation: deny

        """.write(toFile: directory.path("quiet.policy.yaml"), atomically: true, encoding: .utf8)
        let quiet = directory.path("quiet.jsonl.gz")
        let refusing = try await MCPProxyCommandTests.client(
            ["mode": "2026-07-28", "calls": [["tool": "confirm", "arguments": ["action": "deploy"]]]],
            proxy: ["--log", quiet, "--bridge", "--policy", "quiet.policy.yaml"], server: server)
        let (refused, refusedRun) = try await MCPProxyCommandTests.run(refusing, in: directory)
        #expect(refusedRun.status == 0, "\(refusedRun.stderr)")
        #expect(refused.last?["is_error"] == true, "\(refused)")
        #expect(
            refused.last?["text"]?.stringValue?.hasPrefix("not confirmed: agent-eval mcp-proxy refused elicitation/create") == true,
            "\(refused)")
        #expect(try MCPProxyErasTests.rounds(try MCPProxyCommandTests.events(quiet)).isEmpty)

        // A retry whose requestState the proxy never gave continues nothing: refused as a
        // continuation, the call still waits, and the session goes on.
        let tampered = directory.path("tampered.jsonl.gz")
        let tampering = try await MCPProxyCommandTests.client(
            [
                "mode": "2026-07-28", "list": false,
                "calls": [
                    ["tool": "confirm", "arguments": ["action": "deploy"], "manual": true, "then": ["tamper": true]],
                    ["tool": "greet", "arguments": ["name": "Ada"]],
                ],
            ], proxy: ["--log", tampered, "--bridge"], server: server)
        let (told, tamperedRun) = try await MCPProxyCommandTests.run(tampering, in: directory)
        #expect(tamperedRun.status == 0, "\(tamperedRun.stderr)")
        #expect(told.first?["is_error"] == true, "\(told)")
        #expect(
            told.first?["text"]?.stringValue?.hasSuffix(
                "its requestState is not the one agent-eval mcp-proxy --bridge gave the call of confirm that waits for input") == true,
            "\(told)")
        #expect(told.last?["text"] == "hello, Ada", "\(told)")
        let tamperedEvents = try MCPProxyCommandTests.events(tampered)
        #expect(
            MCPProxyErasTests.verdicts(tamperedEvents) == ["mcp-1 allow default", "mcp-2 deny mcp.continuation", "mcp-3 allow default"])
        let ended = MCPProxyErasTests.results(tamperedEvents)
        #expect(ended["mcp-1"]?.status == .error)
        #expect(ended["mcp-1"]?.error?.contains("did not retry the call before the session ended") == true, "\(ended)")
        #expect(ended["mcp-3"]?.status == .ok)
    }

    /// `agent-eval mcp-proxy --no-catalog --bridge --log LOG -- SERVER` fed `steps` one at a
    /// time: each line is sent once the answers before it came (up to 60 s); the answers in order.
    static func stepped(_ steps: [JSONValue], server: [String], log: String, in directory: TemporaryDirectory) async throws
        -> [JSONValue]
    {
        var script = ": > answers.jsonl\n("
        for (number, step) in steps.enumerated() {
            try (JSONWriter.encodeString(step) + "\n").write(
                toFile: directory.path("step\(number).json"), atomically: true, encoding: .utf8)
            script += "cat step\(number).json; "
            script += "i=0; while [ $i -lt 600 ] && [ \"$(wc -l < answers.jsonl)\" -lt \(number + 1) ]; do sleep 0.1; i=$((i+1)); done; "
        }
        let proxy = ([try agentEvalBinary(), "mcp-proxy", "--no-catalog", "--bridge", "--log", log, "--"] + server)
            .map(ShellWords.quoted).joined(separator: " ")
        script += ") | \(proxy) > answers.jsonl\n"
        let result = try await Subprocess.run("/bin/sh", ["-c", script], in: directory.url)
        #expect(result.status == 0, "\(result.stderr)")
        return try String(contentsOfFile: directory.path("answers.jsonl"), encoding: .utf8).split(separator: "\n")
            .map { try JSONParser.parse(Array($0.utf8)) }
    }

    @Test(
        "toward a 2025 server a requestState continues only the request it was given to: not another method's, not an altered one; a client may reuse an answered id while the server still holds the request"
    )
    func statesHeld() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let envelope: JSONValue = [
            "io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": ["elicitation": [:]],
            "io.modelcontextprotocol/clientInfo": ["name": "stepper", "version": "1"],
        ]
        let answers: JSONValue = ["elicitation-1": ["action": "accept", "content": ["ok": true]]]
        func request(_ id: Int, _ method: String, _ params: JSONValue) -> JSONValue {
            var params = params.objectValue ?? JSONObject()
            params["_meta"] = envelope
            return ["jsonrpc": "2.0", "id": .int(id), "method": .string(method), "params": .object(params)]
        }
        let confirm: JSONValue = ["name": "confirm", "arguments": ["action": "deploy"]]
        func retry(_ id: Int, state: String) -> JSONValue {
            request(
                id, "tools/call",
                ["name": "confirm", "arguments": ["action": "deploy"], "requestState": .string(state), "inputResponses": answers])
        }
        let log = directory.path("states.jsonl.gz")
        let got = try await Self.stepped(
            [
                request(1, "server/discover", [:]),
                request(2, "tools/call", confirm),
                request(3, "prompts/get", ["name": "p", "requestState": "agent-eval-bridge-2", "inputResponses": answers]),
                retry(4, state: "agent-eval-bridge-2x"),
                request(2, "tools/call", ["name": "greet", "arguments": ["name": "Ada"]]),
                retry(6, state: "agent-eval-bridge-2"),
            ], server: try await MCPTestServers.legacyServer(["--asks"]), log: log, in: directory)
        #expect(got.count == 6, "\(got)")
        guard got.count == 6 else { return }
        #expect(got[0]["result"]?["supportedVersions"] == ["2026-07-28"])
        #expect(got[1]["id"] == 2)
        #expect(got[1]["result"]?["resultType"] == "input_required", "\(got[1])")
        #expect(got[1]["result"]?["requestState"] == "agent-eval-bridge-2", "\(got[1])")
        #expect(got[2]["id"] == 3)
        #expect(got[2]["error"]?["code"] == -32602, "\(got[2])")
        #expect(got[3]["id"] == 4)
        #expect(got[3]["result"]?["isError"] == true, "\(got[3])")
        #expect(got[4]["id"] == 2)
        #expect(got[4]["result"]?["content"]?.arrayValue?.first?["text"] == "hello, Ada", "\(got[4])")
        #expect(got[5]["id"] == 6)
        #expect(got[5]["result"]?["content"]?.arrayValue?.first?["text"] == "confirmed deploy (accept)", "\(got[5])")
        #expect(got[5]["result"]?["resultType"] == "complete")
        let events = try MCPProxyCommandTests.events(log)
        #expect(
            MCPProxyErasTests.verdicts(events) == ["mcp-1 allow default", "mcp-2 deny mcp.continuation", "mcp-3 allow default"])
        let results = MCPProxyErasTests.results(events)
        #expect(["mcp-1", "mcp-3"].map { results[$0]?.status } == [.ok, .ok])
        #expect(try MCPProxyErasTests.rounds(events).map(\.line) == ["mcp-1 1 server", "mcp-1 2 client"])
    }

    @Test(
        "a 2026-07-28 server's input_required reaches a 2025 client as requests mid-call, and the proxy retries with the answers and the state: judged once, every round kept, a denied call never asks, a refused question ends the call"
    )
    func modernServerAsks() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try (MCPProxyErasTests.transfers + "input_requests:\n  sampling: deny\n").write(
            toFile: directory.path("transfers.policy.yaml"), atomically: true, encoding: .utf8)
        let log = directory.path("rounds.jsonl.gz")
        let plan: JSONValue = [
            "mode": "legacy",
            "calls": [
                ["tool": "transfer", "arguments": ["account": "c", "amount": 7, "rounds": 3]],
                ["tool": "transfer", "arguments": ["account": "d", "amount": 500, "rounds": 1]],
                ["tool": "summarize", "arguments": ["text": "a long text"]],
                ["tool": "balance", "arguments": ["account": "c"]],
            ],
        ]
        let command = try await MCPProxyCommandTests.client(
            plan, proxy: ["--log", log, "--bridge", "--policy", "transfers.policy.yaml"],
            server: try await MCPProxyErasTests.rounds(directory))
        let (lines, result) = try await MCPProxyCommandTests.run(command, in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        let texts = lines.dropFirst().map { $0["text"]?.stringValue ?? "\($0)" }
        #expect(texts.count == 4, "\(lines)")
        #expect(texts.first == "transferred 7 to c after 3 confirmations")
        #expect(
            texts.dropFirst().first == "agent-eval policy denied this call: transfers over 100 are made by a person (rule large-transfers)")
        #expect(texts.dropFirst(2).first?.hasSuffix("the policy file allows no sampling (input_requests.sampling)") == true, "\(texts)")
        #expect(texts.last?.contains("1200") == true, "\(texts)")
        #expect(MCPProxyCommandTests.journal(directory) == ["transfer c 7"])

        let events = try MCPProxyCommandTests.events(log)
        #expect(
            MCPProxyErasTests.verdicts(events) == [
                "mcp-1 allow default", "mcp-2 deny large-transfers", "mcp-3 allow default", "mcp-4 allow default",
            ])
        let rounds = try MCPProxyErasTests.rounds(events)
        #expect(
            rounds.map(\.line) == [
                "mcp-1 1 server", "mcp-1 2 client", "mcp-1 2 server", "mcp-1 3 client", "mcp-1 3 server", "mcp-1 4 client",
                "mcp-3 1 server",
            ])
        // The proxy's retries carry the server's state exactly, and the client's answers.
        for (question, retry) in zip(rounds, rounds.dropFirst()) where question.line.hasSuffix("server") && retry.line.hasSuffix("client") {
            let state = try #require(question.message["result"]?["requestState"]?.stringValue)
            #expect(retry.message["params"]?["requestState"]?.stringValue == state)
            let key = try #require(question.message["result"]?["inputRequests"]?.objectValue?.first?.key)
            #expect(retry.message["params"]?["inputResponses"]?[key]?["content"] == ["ok": true])
        }
        let results = MCPProxyErasTests.results(events)
        #expect(["mcp-1", "mcp-3", "mcp-4"].map { results[$0]?.status } == [.ok, .error, .ok])
        #expect(try Self.bridged(events)?["way"] == "2025 client, 2026-07-28 server")
        #expect(try Self.bridged(events)?["client_protocol_version"]?.stringValue?.hasPrefix("2025-") == true)
        let replay = try await agentEval(["replay", "--no-catalog", log])
        #expect(replay.status == 0, "\(replay.stderr)")
    }

    @Test(
        "the official mcp 1.x package, which speaks only the 2025 era, as both peers: its client uses a server of 2026-07-28 only and one that asks over rounds, and a 2026-07-28 client uses its server, whose elicitations mid-call become rounds"
    )
    func mcp1Peers() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let proxy = [try agentEvalBinary(), "mcp-proxy", "--no-catalog", "--bridge"]

        // The 1.x client: a modern-only server, the rounds server's transfer over two rounds, and
        // its summary, whose sampling question the client (no sampling callback) answers with an
        // error: the call ends with it.
        let rounds = try await MCPProxyErasTests.rounds(directory)
        for (number, (server, call, answer)) in [
            (try await MCPTestServers.modernOnlyServer(), ["tool": "plain", "arguments": [:]] as JSONValue, "plain answer"),
            (
                rounds, ["tool": "transfer", "arguments": ["account": "x", "amount": 5, "rounds": 2]],
                "transferred 5 to x after 2 confirmations"
            ),
            (
                rounds, ["tool": "summarize", "arguments": ["text": "a long text"]],
                "agent-eval mcp-proxy --bridge: the client answered the server's input request \"summary\" with an error"
            ),
        ].enumerated() {
            let log = directory.path("client\(number).jsonl.gz")
            let command = try await PythonEnvironment.mcp1.script(
                "mcp1_client.py", [JSONWriter.encodeString(["calls": [call]] as JSONValue), "--"] + proxy + ["--log", log, "--"] + server)
            let (lines, result) = try await MCPProxyCommandTests.run(command, in: directory)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(lines.first?["protocol_version"]?.stringValue?.hasPrefix("2025-") == true, "\(lines)")
            #expect(lines.last?["text"]?.stringValue?.hasPrefix(answer) == true, "\(lines)")
            #expect(lines.last?["is_error"] == .bool(number == 2), "\(lines)")
            let events = try MCPProxyCommandTests.events(log)
            #expect(try Self.bridged(events)?["way"] == "2025 client, 2026-07-28 server")
            #expect(MCPProxyErasTests.results(events)["mcp-1"]?.status == (number == 2 ? .error : .ok))
        }
        #expect(
            try MCPProxyErasTests.rounds(try MCPProxyCommandTests.events(directory.path("client1.jsonl.gz"))).map(\.line) == [
                "mcp-1 1 server", "mcp-1 2 client", "mcp-1 2 server", "mcp-1 3 client",
            ])

        // The 1.x server, with a 2026-07-28 client.
        let log = directory.path("server.jsonl.gz")
        let plan: JSONValue = [
            "mode": "2026-07-28",
            "calls": [
                ["tool": "greet", "arguments": ["name": "Ada"]], ["tool": "confirm", "arguments": ["action": "deploy", "times": 2]],
            ],
        ]
        let command = try await MCPProxyCommandTests.client(
            plan, proxy: ["--log", log, "--bridge"], server: try await PythonEnvironment.mcp1.script("mcp1_server.py"))
        let (lines, result) = try await MCPProxyCommandTests.run(command, in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(lines.dropFirst().map { $0["text"]?.stringValue ?? "\($0)" } == ["hello, Ada", "confirmed deploy (accept, accept)"])
        let events = try MCPProxyCommandTests.events(log)
        #expect(try Self.bridged(events)?["way"] == "2026-07-28 client, 2025 server")
        #expect(try Self.started(events).toolServers.first?.serverName == "mcp1-server")
        #expect(
            try MCPProxyErasTests.rounds(events).map(\.line) == [
                "mcp-2 1 server", "mcp-2 2 client", "mcp-2 2 server", "mcp-2 3 client",
            ])
    }
}
