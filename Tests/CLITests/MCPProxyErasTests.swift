import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// `agent-eval mcp-proxy` between clients of both MCP eras — the official `mcp` 2.x package's
/// `Client` in its default `auto` mode (a `server/discover` probe), pinned to 2026-07-28, and in
/// `legacy` mode (`initialize`) — and real servers: `mcp-server-time` from PyPI, and a server whose
/// tool asks for input over several rounds (scripts/mcp_rounds_server.py, `requestState` sealed by
/// the SDK). The gate holds in both eras, and a multi-round call is one call.
@Suite("mcp-proxy in both eras of MCP: gated, and multi-round calls are one call", .tags(.python), .needsPython, .ownThread)
struct MCPProxyErasTests {
    static let noConversions = """
        policy:
          name: time-policy
          default: allow
          rules:
            - id: no-conversions
              when: {tool: convert_time}
              verdict: deny
              reason: conversions are not needed here

        """

    static let transfers = """
        policy:
          name: transfers
          default: allow
          rules:
            - id: large-transfers
              when:
                tool: transfer
                arguments: {amount: {min: 101}}
              verdict: deny
              reason: transfers over 100 are made by a person

        """

    static func rounds(_ directory: TemporaryDirectory) async throws -> [String] {
        try await PythonEnvironment.mcp.script("mcp_rounds_server.py", ["--journal", directory.path("journal")])
    }

    /// The rounds the log keeps, in order: `call_id round from`, and each message.
    static func rounds(_ events: [Event]) throws -> [(line: String, message: JSONValue)] {
        try events.compactMap { event in
            guard case .contentStored(let stored) = event.payload, stored.mediaType == "application/vnd.agent-eval.mcp-round+json" else {
                return nil
            }
            let round = try JSONParser.parse(try #require(stored.bytes))
            return (
                "\(round["call_id"]?.stringValue ?? "?") \(round["round"]?.intValue ?? 0) \(round["from"]?.stringValue ?? "?")",
                round["message"] ?? .null
            )
        }
    }

    static func verdicts(_ events: [Event]) -> [String] {
        events.compactMap { event in
            guard case .verdictGiven(let verdict) = event.payload else { return nil }
            return "\(verdict.callId) \(verdict.verdict.rawValue) \(verdict.rule ?? "")"
        }
    }

    /// `agent-eval mcp-proxy --no-catalog --log LOG FLAGS -- SERVER` with the directory's
    /// `requests.jsonl` on its input, kept open until `count` answers came (up to 60 s: a client
    /// that hangs up takes no answers); its answers by request id, and its log's events.
    static func proxied(answers count: Int, flags: [String], server: [String], log: String, in directory: TemporaryDirectory)
        async throws -> ([Int: JSONValue], [Event])
    {
        let proxy = ([try agentEvalBinary(), "mcp-proxy", "--no-catalog", "--log", log] + flags + ["--"] + server)
            .map(ShellWords.quoted).joined(separator: " ")
        let script = """
            : > answers.jsonl
            (cat requests.jsonl; i=0; while [ $i -lt 600 ] && [ "$(wc -l < answers.jsonl)" -lt \(count) ]; do sleep 0.1; i=$((i+1)); done) \\
                | \(proxy) > answers.jsonl
            """
        let result = try await Subprocess.run("/bin/sh", ["-c", script], in: directory.url)
        #expect(result.status == 0, "\(result.stderr)")
        var answers: [Int: JSONValue] = [:]
        for line in try String(contentsOfFile: directory.path("answers.jsonl"), encoding: .utf8).split(separator: "\n") {
            let message = try JSONParser.parse(Array(line.utf8))
            if let id = message["id"]?.intValue { answers[id] = message }
        }
        return (answers, try MCPProxyCommandTests.events(directory.path(log)))
    }

    static func results(_ events: [Event]) -> [String: ToolCompleted] {
        var results: [String: ToolCompleted] = [:]
        for event in events {
            if case .toolCompleted(let result) = event.payload { results[result.callId] = result }
        }
        return results
    }

    @Test(
        "a client of either era is gated: an allowed call passes, a denial is a tool error the client reads (with resultType for a 2026-07-28 client), the log names the era"
    )
    func bothEras() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try Self.noConversions.write(toFile: directory.path("time.policy.yaml"), atomically: true, encoding: .utf8)
        let time = try await PythonEnvironment.mcp.path() + "/bin/mcp-server-time"
        for mode in ["auto", "2026-07-28", "legacy"] {
            let log = directory.path("\(mode).jsonl.gz")
            let plan: JSONValue = [
                "mode": .string(mode),
                "calls": [
                    ["tool": "get_current_time", "arguments": ["timezone": "UTC"]],
                    ["tool": "convert_time", "arguments": ["source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"]],
                ],
            ]
            let command = try await MCPProxyCommandTests.client(
                plan, proxy: ["--log", log, "--policy", "time.policy.yaml"], server: [time])
            let (lines, result) = try await MCPProxyCommandTests.run(command, in: directory)
            #expect(result.status == 0, "\(mode): \(result.stderr)")
            #expect(lines.count == 3, "\(mode): \(lines)")
            #expect(lines.first?["tools"] == ["get_current_time", "convert_time"], "\(mode)")
            #expect(lines.dropFirst().map { $0["is_error"] } == [false, true], "\(mode): the client raised instead of reading: \(lines)")
            #expect(
                lines.last?["text"]?.stringValue
                    == "agent-eval policy denied this call: conversions are not needed here (rule no-conversions)",
                "\(mode)")
            let events = try MCPProxyCommandTests.events(log)
            #expect(
                MCPProxyCommandTests.trajectory(events) == [
                    "verdict get_current_time allow", #"intent get_current_time {"timezone":"UTC"}"#, "result get_current_time ok",
                    "verdict convert_time deny", "stop success",
                ], "\(mode)")
            guard case .runStarted(let started) = events.first?.payload else {
                Issue.record("\(mode): the log does not begin with run_started")
                continue
            }
            let server = try #require(started.toolServers.first)
            #expect(server.serverName == "mcp-time", "\(mode)")
            if mode == "legacy" {
                #expect(server.protocolVersion != nil && server.protocolVersion != "2026-07-28", "\(mode): \(server)")
            } else {
                #expect(server.protocolVersion == "2026-07-28", "\(mode): \(server)")
            }
            #expect(try await agentEval(["log", "verify", log]).status == 0)
        }
    }

    @Test(
        "a call the server asks for input on is one call over 0, 1 or 3 rounds: judged once, every round kept with its requestState as sent; the eighth question ends it"
    )
    func multiRound() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let log = directory.path("rounds.jsonl.gz")
        let plan: JSONValue = [
            "mode": "auto",
            "calls": [
                ["tool": "transfer", "arguments": ["account": "a", "amount": 5, "rounds": 0]],
                ["tool": "transfer", "arguments": ["account": "b", "amount": 6, "rounds": 1]],
                ["tool": "transfer", "arguments": ["account": "c", "amount": 7, "rounds": 3]],
                ["tool": "transfer", "arguments": ["account": "d", "amount": 8, "rounds": 9]],
            ],
        ]
        let command = try await MCPProxyCommandTests.client(plan, proxy: ["--log", log], server: try await Self.rounds(directory))
        let (lines, result) = try await MCPProxyCommandTests.run(command, in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            lines.dropFirst().map { $0["text"]?.stringValue ?? "\($0)" } == [
                "transferred 5 to a after 0 confirmations", "transferred 6 to b after 1 confirmations",
                "transferred 7 to c after 3 confirmations",
                "agent-eval mcp-proxy: the server asked for input on round 8 of the call; agent-eval mcp-proxy ends a call after 8 rounds",
            ])
        #expect(MCPProxyCommandTests.journal(directory) == ["transfer a 5", "transfer b 6", "transfer c 7"])
        #expect(result.stderr.contains("tool calls: 4 (4 forwarded, 0 denied or refused)"), "\(result.stderr)")

        let events = try MCPProxyCommandTests.events(log)
        #expect(Self.verdicts(events) == ["mcp-1 allow default", "mcp-2 allow default", "mcp-3 allow default", "mcp-4 allow default"])
        let rounds = try Self.rounds(events)
        var expected = ["mcp-2 1 server", "mcp-2 2 client"]
        for round in 1...3 { expected += ["mcp-3 \(round) server", "mcp-3 \(round + 1) client"] }
        for round in 1...7 { expected += ["mcp-4 \(round) server", "mcp-4 \(round + 1) client"] }
        #expect(rounds.map(\.line) == expected)
        // Each retry carries the state its server's question gave, exactly, and its answers.
        for (question, retry) in zip(rounds, rounds.dropFirst()) where question.line.hasSuffix("server") {
            let state = try #require(question.message["result"]?["requestState"]?.stringValue)
            #expect(retry.message["params"]?["requestState"]?.stringValue == state)
            #expect(question.message["result"]?["inputRequests"]?.objectValue?.isEmpty == false)
            #expect(retry.message["params"]?["inputResponses"]?.objectValue?.isEmpty == false)
        }
        let results = Self.results(events)
        #expect(["mcp-1", "mcp-2", "mcp-3"].map { results[$0]?.status } == [.ok, .ok, .ok])
        #expect(results["mcp-4"]?.status == .error)
        #expect(results["mcp-4"]?.error?.contains("ends a call after 8 rounds") == true)
        let replay = try await agentEval(["replay", "--no-catalog", log])
        #expect(replay.status == 0, "\(replay.stderr)")
        #expect(replay.stdoutText.contains("all match the rebuilt state"))
    }

    @Test(
        "a continuation cannot walk around a verdict: one of a denied call, or with other arguments, is refused and recorded; a tampered requestState reaches the server unchanged"
    )
    func continuationsHeld() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try Self.transfers.write(toFile: directory.path("transfers.policy.yaml"), atomically: true, encoding: .utf8)
        let log = directory.path("held.jsonl.gz")
        let plan: JSONValue = [
            "mode": "auto", "list": false,
            "calls": [
                // Denied, then retried as if the server had asked for input.
                ["tool": "transfer", "arguments": ["account": "a", "amount": 500, "rounds": 1]],
                [
                    "tool": "transfer", "manual": true, "answer": true, "request_state": "1",
                    "arguments": ["account": "a", "amount": 500, "rounds": 1],
                ],
                // Allowed for 5; the retry asks for 500 with the real state.
                [
                    "tool": "transfer", "manual": true, "arguments": ["account": "b", "amount": 5, "rounds": 1],
                    "then": ["arguments": ["account": "b", "amount": 500, "rounds": 1]],
                ],
                // The state altered on the way back.
                ["tool": "transfer", "manual": true, "arguments": ["account": "c", "amount": 7, "rounds": 1], "then": ["tamper": true]],
                ["tool": "transfer", "manual": true, "arguments": ["account": "d", "amount": 8, "rounds": 1], "then": [:]],
                // Two calls wait; the second is retried with the first one's state.
                ["tool": "transfer", "manual": true, "arguments": ["account": "e", "amount": 9, "rounds": 1]],
                [
                    "tool": "transfer", "manual": true, "arguments": ["account": "f", "amount": 9, "rounds": 1],
                    "then": ["state_of": 5],
                ],
            ],
        ]
        let command = try await MCPProxyCommandTests.client(
            plan, proxy: ["--log", log, "--policy", "transfers.policy.yaml"], server: try await Self.rounds(directory))
        let (lines, result) = try await MCPProxyCommandTests.run(command, in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        let refused =
            "agent-eval mcp-proxy refused this call: it carries inputResponses or requestState, but no call of transfer with these "
            + "arguments waits for input in this session: only a call the server asked for input can be continued"
        #expect(lines.count == 7, "\(lines)")
        let texts: [String] = lines.map { (line: JSONValue) -> String in
            if let text = line["text"]?.stringValue ?? line["exception"]?.stringValue { return text }
            if let keys = line["input_required"] { return "asks \(JSONWriter.encodeString(keys))" }
            return "\(line)"
        }
        let expected: [String] = [
            "agent-eval policy denied this call: transfers over 100 are made by a person (rule large-transfers)", refused, refused,
            "MCPError: Invalid or expired requestState", "transferred 8 to d after 1 confirmations", #"asks ["confirm-1"]"#, refused,
        ]
        #expect(texts == expected)
        #expect(MCPProxyCommandTests.journal(directory) == ["transfer d 8"], "only the honest call reached its end")

        let events = try MCPProxyCommandTests.events(log)
        #expect(
            Self.verdicts(events) == [
                "mcp-1 deny large-transfers", "mcp-2 deny mcp.continuation", "mcp-3 allow default", "mcp-4 deny mcp.continuation",
                "mcp-5 allow default", "mcp-6 allow default", "mcp-7 allow default", "mcp-8 allow default", "mcp-9 deny mcp.continuation",
            ])
        let rounds = try Self.rounds(events)
        #expect(
            rounds.map(\.line) == [
                "mcp-3 1 server", "mcp-5 1 server", "mcp-5 2 client", "mcp-6 1 server", "mcp-6 2 client", "mcp-7 1 server",
                "mcp-8 1 server",
            ])
        let given = try #require(rounds[1].message["result"]?["requestState"]?.stringValue)
        #expect(rounds[2].message["params"]?["requestState"]?.stringValue == given + "x", "the tampered state is kept as it was sent")
        let results = Self.results(events)
        #expect(results["mcp-5"]?.error == "JSON-RPC error -32602: Invalid or expired requestState")
        #expect(results["mcp-6"]?.status == .ok)
        #expect(
            results["mcp-3"]?.error
                == "the server asked for input on round 1 and the client did not retry the call before the session ended"
        )
        guard case .runStarted(let started) = events.first?.payload else {
            Issue.record("the log does not begin with run_started")
            return
        }
        // The client never listed: the proxy did, with the client's envelope.
        #expect(started.tools.map(\.name) == ["transfer", "sign_in", "summarize", "visit", "balance"])
        #expect(started.tools.map(\.sideEffect) == [.write, .read, .read, .read, .read])
        #expect(try await agentEval(["log", "verify", log]).status == 0)
    }

    @Test(
        "a 2026-07-28 client and a server of the 2025 era only: the client's probe is refused and it falls back; a server the probe ends is answered for and started again"
    )
    func legacyServer() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        for flags in [[], ["--exit-before-initialize"]] {
            let log = directory.path("legacy\(flags.count).jsonl.gz")
            let plan: JSONValue = ["mode": "auto", "calls": [["tool": "greet", "arguments": ["name": "Ada"]]]]
            let command = try await MCPProxyCommandTests.client(
                plan, proxy: ["--log", log], server: try await MCPTestServers.legacyServer(flags))
            let (lines, result) = try await MCPProxyCommandTests.run(command, in: directory)
            #expect(result.status == 0, "\(flags): \(result.stderr)")
            #expect(lines.first?["tools"] == ["greet"], "\(flags): \(lines)")
            #expect(lines.dropFirst().map { $0["text"]?.stringValue ?? "\($0)" } == ["hello, Ada"], "\(flags)")
            #expect(result.stderr.contains("it was started again") == !flags.isEmpty, "\(flags): \(result.stderr)")
            let events = try MCPProxyCommandTests.events(log)
            #expect(
                MCPProxyCommandTests.trajectory(events) == [
                    "verdict greet allow", #"intent greet {"name":"Ada"}"#, "result greet ok", "stop success",
                ], "\(flags)")
            guard case .runStarted(let started) = events.first?.payload else {
                Issue.record("the log does not begin with run_started")
                continue
            }
            #expect(started.toolServers.first?.protocolVersion == "2025-06-18", "\(flags)")
            #expect(started.toolServers.first?.serverName == "legacy-server", "\(flags)")
        }
    }

    @Test(
        "through the proxy, a 2026-07-28 result without resultType, or with structuredContent its tool's outputSchema does not take, is recorded error, as the MCP tools record it — never ok"
    )
    func resultsReadAsTheToolsReadThem() async throws {
        let envelope =
            #""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/clientCapabilities":{}}"#
        let modern = [
            #"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{\#(envelope)}}"#,
            #"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{\#(envelope)}}"#,
            #"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"},\#(envelope)}}"#,
        ]
        let legacy = [
            #"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}"#,
            #"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            #"{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{}}"#,
            #"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}"#,
        ]
        for (mode, requests, says) in [
            ("no-result-type", modern, "without the resultType a 2026-07-28 result carries"),
            ("struct-mismatch", legacy, "the result does not follow the tool's outputSchema: structuredContent.n"),
        ] {
            let directory = try TemporaryDirectory()
            defer { directory.remove() }
            try (requests.joined(separator: "\n") + "\n").write(toFile: directory.path("requests.jsonl"), atomically: true, encoding: .utf8)
            let (answers, events) = try await Self.proxied(
                answers: 3, flags: [], server: ["python3", PythonEnvironment.scriptPath("mcp_malformed_server.py"), "--mode", mode],
                log: "odd.jsonl.gz", in: directory)
            // The client gets the answer as the server gave it; the log says what it was.
            #expect(answers[3]?["result"] != nil, "\(mode): \(answers)")
            let result = try #require(Self.results(events).values.first, "\(mode): no result recorded")
            #expect(result.status == .error, "\(mode): \(result)")
            #expect(result.error?.contains(says) == true, "\(mode): \(String(describing: result.error))")
        }
    }

    @Test("a connection that only probes the server with server/discover writes no run, and says so")
    func loneProbe() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let time = try await PythonEnvironment.mcp.path() + "/bin/mcp-server-time"
        let probe =
            #"{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#
        let result = try await Subprocess.run(
            try agentEvalBinary(), ["mcp-proxy", "--no-catalog", "--out", "runs", "--json-out", "proxy.json", "--", time],
            input: Array((probe + "\n").utf8), in: directory.url)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stderr.contains("log: none written (the client only probed the server with server/discover)"), "\(result.stderr)")
        #expect(!FileManager.default.fileExists(atPath: directory.path("runs")), "no run, no runs folder")
        let summary = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: directory.path("proxy.json")))))
        #expect(summary["log"] == .null)
        #expect(summary["calls"] == 0)

        // The proxy's own request ids are not the client's to use.
        let mine = #"{"jsonrpc":"2.0","id":"agent-eval-proxy-1","method":"tools/list","params":{}}"#
        let refused = try await Subprocess.run(
            try agentEvalBinary(), ["mcp-proxy", "--no-catalog", "--out", "runs", "--", time], input: Array((mine + "\n").utf8),
            in: directory.url)
        #expect(refused.status == 0, "\(refused.stderr)")
        #expect(refused.stdoutText.contains("request ids that begin agent-eval-proxy are the proxy's own"), "\(refused.stdoutText)")
    }

    @Test(
        "input_requests: the questions a server may ask are judged in both eras — sampling denied, URL elicitation only to a listed host — and refused before the client sees them"
    )
    func questionsJudged() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // The file holds input_requests alone: the calls are allowed, only the questions judged.
        try """
        input_requests:
          sampling: deny
          elicitation:
            form: allow
            url: [auth.example.com]

        """.write(toFile: directory.path("questions.policy.yaml"), atomically: true, encoding: .utf8)
        // 2026-07-28: the questions come as a call's inputRequests.
        let log = directory.path("modern.jsonl.gz")
        let plan: JSONValue = [
            "mode": "auto",
            "calls": [
                ["tool": "sign_in", "arguments": ["url": "https://auth.example.com/login"]],
                ["tool": "sign_in", "arguments": ["url": "https://evil.example.net/login"]],
                ["tool": "summarize", "arguments": ["text": "a long story"]],
                ["tool": "transfer", "arguments": ["account": "a", "amount": 5, "rounds": 1]],
            ],
        ]
        let command = try await MCPProxyCommandTests.client(
            plan, proxy: ["--log", log, "--policy", "questions.policy.yaml"], server: try await Self.rounds(directory))
        let (lines, result) = try await MCPProxyCommandTests.run(command, in: directory)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(
            lines.dropFirst().map { $0["text"]?.stringValue ?? "\($0)" } == [
                "signed in at https://auth.example.com/login",
                "agent-eval mcp-proxy refused the server's question: the server asked for elicitation/create (input request \"sign-in\") "
                    + "on round 1: the policy file allows URL elicitation only to auth.example.com, and this one sends the user to "
                    + "evil.example.net (input_requests.elicitation.url)",
                "agent-eval mcp-proxy refused the server's question: the server asked for sampling/createMessage (input request "
                    + "\"summary\") on round 1: the policy file allows no sampling (input_requests.sampling)",
                "transferred 5 to a after 1 confirmations",
            ])
        let events = try MCPProxyCommandTests.events(log)
        let results = Self.results(events)
        #expect(["mcp-1", "mcp-2", "mcp-3", "mcp-4"].map { results[$0]?.status } == [.ok, .error, .error, .ok])
        #expect(results["mcp-3"]?.error?.hasSuffix("(input_requests.sampling)") == true)
        // The refused questions are kept (the server asked them); no retry followed them.
        #expect(
            try Self.rounds(events).map(\.line) == [
                "mcp-1 1 server", "mcp-1 2 client", "mcp-2 1 server", "mcp-3 1 server", "mcp-4 1 server", "mcp-4 2 client",
            ])

        // 2025: the question is a request to the client in the middle of the call.
        let older: JSONValue = [
            "calls": [
                ["tool": "visit", "arguments": ["url": "https://auth.example.com/login"]],
                ["tool": "visit", "arguments": ["url": "https://evil.example.net/login"]],
            ]
        ]
        let legacy = try await MCPProxyCommandTests.client(
            older, proxy: ["--log", directory.path("legacy.jsonl.gz"), "--policy", "questions.policy.yaml"],
            server: try await Self.rounds(directory))
        let (answers, finished) = try await MCPProxyCommandTests.run(legacy, in: directory)
        #expect(finished.status == 0, "\(finished.stderr)")
        let texts = answers.dropFirst().map { $0["text"]?.stringValue ?? "\($0)" }
        #expect(texts.count == 2)
        // The allowed one reached the client (the 2025 test client offers no elicitation).
        #expect(texts.first == "not visited: Elicitation not supported", "\(texts)")
        #expect(
            texts.last
                == "not visited: agent-eval mcp-proxy refused elicitation/create: the policy file allows URL elicitation only to "
                + "auth.example.com, and this one sends the user to evil.example.net (input_requests.elicitation.url)")
        #expect(finished.stderr.contains("which was refused"), "\(finished.stderr)")
        // The client's answer to the allowed question, and the refusal of the other, are each
        // kept beside the request they answer.
        let stored = try MCPProxyCommandTests.events(directory.path("legacy.jsonl.gz")).compactMap { event -> ContentStored? in
            guard case .contentStored(let stored) = event.payload else { return nil }
            return stored
        }
        #expect(
            stored.map(\.mediaType) == [
                "application/vnd.mcp.server-request+json", "application/vnd.mcp.client-answer+json",
                "application/vnd.mcp.server-request+json", "application/vnd.agent-eval.mcp-refusal+json",
            ])
        if stored.count == 4 {
            let request = try JSONParser.parse(try #require(stored[0].bytes))
            let answer = try JSONParser.parse(try #require(stored[1].bytes))
            #expect(answer["id"] == request["id"] && answer["error"]?["message"] == "Elicitation not supported", "\(answer)")
        }
    }

    @Test(
        "with a policy on questions, inputRequests the proxy cannot read (a list, an unknown method, no method) end the call unjudged, never passed on; with none they pass"
    )
    func unreadableQuestions() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // The file holds input_requests alone: the calls are allowed, only the questions judged.
        try """
        input_requests:
          sampling: deny

        """.write(toFile: directory.path("questions.policy.yaml"), atomically: true, encoding: .utf8)
        let server = try await PythonEnvironment.mcp.script("mcp_odd_questions_server.py", [])
        let envelope =
            #""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#
        let input =
            ["ask_list", "ask_unknown", "ask_no_method", "plain"].enumerated().map { number, tool in
                #"{"jsonrpc":"2.0","id":\#(number + 1),"method":"tools/call","params":{"name":"\#(tool)","arguments":{},\#(envelope)}}"#
            }.joined(separator: "\n") + "\n"
        try input.write(toFile: directory.path("requests.jsonl"), atomically: true, encoding: .utf8)
        func run(_ flags: [String], log: String) async throws -> ([Int: JSONValue], [Event]) {
            try await Self.proxied(answers: 4, flags: flags, server: server, log: log, in: directory)
        }
        let (judged, events) = try await run(["--policy", "questions.policy.yaml"], log: "judged.jsonl.gz")
        let texts = (1...4).map { judged[$0]?["result"]?["content"]?.arrayValue?.first?["text"]?.stringValue ?? "\(judged[$0] ?? .null)" }
        #expect(
            texts == [
                "agent-eval mcp-proxy refused the server's question: the server's inputRequests on round 1 are an array, not an object "
                    + "of questions: not judged, so not passed on",
                "agent-eval mcp-proxy refused the server's question: the server asked for tasks/create (input request \"q\") on round 1: "
                    + "the policy file judges questions, and this one's method (tasks/create) is not one it knows (input_requests)",
                "agent-eval mcp-proxy refused the server's question: the server asked for a question that names no method (input request "
                    + "\"q\") on round 1: the policy file judges questions, and this one's method (none) is not one it knows (input_requests)",
                "plain answer",
            ])
        #expect((1...3).allSatisfy { judged[$0]?["result"]?["isError"] == true && judged[$0]?["result"]?["inputRequests"] == nil })
        #expect((1...4).allSatisfy { judged[$0]?["result"]?["resultType"] == "complete" })
        let results = Self.results(events)
        #expect(["mcp-1", "mcp-2", "mcp-3", "mcp-4"].map { results[$0]?.status } == [.error, .error, .error, .ok])
        // What the server asked is kept, though it never reached the client.
        #expect(try Self.rounds(events).map(\.line) == ["mcp-1 1 server", "mcp-2 1 server", "mcp-3 1 server"])

        // No policy on questions: the proxy judges none, and passes them on as they came.
        let (passed, _) = try await run([], log: "passed.jsonl.gz")
        #expect((1...3).map { passed[$0]?["result"]?["resultType"] } == ["input_required", "input_required", "input_required"])
        #expect(passed[1]?["result"]?["inputRequests"]?.arrayValue?.count == 1)
    }

    @Test(
        "under agent-eval record, a 3-round call is one verdict, one intent and one result in the run's log with its six rounds, and a denied call never reaches the server"
    )
    func roundsInsideRecord() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try Self.transfers.write(toFile: directory.path("transfers.policy.yaml"), atomically: true, encoding: .utf8)
        let log = directory.path("run.jsonl.gz")
        let plan: JSONValue = [
            "mode": "auto",
            "calls": [
                ["tool": "transfer", "arguments": ["account": "a", "amount": 5, "rounds": 3]],
                ["tool": "transfer", "arguments": ["account": "b", "amount": 500, "rounds": 1]],
                ["tool": "balance", "arguments": ["account": "a"]],
            ],
        ]
        let client = try await PythonEnvironment.mcp.script(
            "mcp_proxy_client.py",
            [JSONWriter.encodeString(plan), "--", try agentEvalBinary(), "mcp-proxy", "--policy", "transfers.policy.yaml", "--"]
                + (try await Self.rounds(directory)))
        let recorded = try await Subprocess.run(
            try agentEvalBinary(), ["record", "--no-catalog", "--log", log, "--"] + client, in: directory.url)
        #expect(recorded.status == 0, "\(recorded.stderr)")
        let answers = recorded.stdoutText.split(separator: "\n").compactMap { try? JSONParser.parse(Array($0.utf8)) }
        #expect(
            answers.dropFirst().map { $0["text"]?.stringValue ?? "\($0)" }.prefix(2) == [
                "transferred 5 to a after 3 confirmations",
                "agent-eval policy denied this call: transfers over 100 are made by a person (rule large-transfers)",
            ])
        // The proxy wrote into the run record made: its one log.
        #expect(!FileManager.default.fileExists(atPath: directory.path("runs")))
        let events = try MCPProxyCommandTests.events(log)
        #expect(
            MCPProxyCommandTests.trajectory(events).dropLast() == [
                "verdict transfer allow", #"intent transfer {"account":"a","amount":5,"rounds":3}"#, "result transfer ok",
                "verdict transfer deny", "verdict balance allow", #"intent balance {"account":"a"}"#, "result balance ok",
            ])
        #expect(
            try Self.rounds(events).map(\.line) == [
                "mcp-1 1 server", "mcp-1 2 client", "mcp-1 2 server", "mcp-1 3 client", "mcp-1 3 server", "mcp-1 4 client",
            ])
        #expect(MCPProxyCommandTests.journal(directory) == ["transfer a 5"], "the denied transfer never reached the server")
        #expect(try await agentEval(["log", "verify", log]).status == 0)
    }

    @Test("input_requests with a mistake: exit 2, each error at its line and column")
    func questionsMistaken() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try """
        policy:
          default: allow
        input_requests:
          sampling: maybe
          elicitation: {url: 5, sound: allow}

        """.write(toFile: directory.path("bad.yaml"), atomically: true, encoding: .utf8)
        let result = try await agentEval(["mcp-proxy", "--no-catalog", "--policy", "bad.yaml", "--", "true"], in: directory.url)
        #expect(result.status == 2)
        #expect(result.stderr.contains("bad.yaml:4:"), "\(result.stderr)")
        #expect(result.stderr.contains("input_requests.sampling must be one of \"allow\", \"deny\""), "\(result.stderr)")
        #expect(result.stderr.contains("bad.yaml:5:"), "\(result.stderr)")
        #expect(result.stderr.contains("sound"), "\(result.stderr)")
    }

    @Test(
        "a call the server answers with a task stays open until the client's tasks/get finds the task ended: its result (or error) is the call's; a task's refused question cancels it; a task still running ends with the session"
    )
    func tasks() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try """
        policy:
          name: tasks
          default: allow
        input_requests:
          elicitation: deny

        """.write(toFile: directory.path("tasks.policy.yaml"), atomically: true, encoding: .utf8)
        let server = try await PythonEnvironment.mcp.script("mcp_tasks_server.py", [])
        let envelope =
            #""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}"#
        func call(_ id: Int, _ tool: String, _ arguments: String = "{}") -> String {
            #"{"jsonrpc":"2.0","id":\#(id),"method":"tools/call","params":{"name":"\#(tool)","arguments":\#(arguments),\#(envelope)}}"#
        }
        func task(_ id: Int, _ method: String, _ taskId: String, _ more: String = "") -> String {
            #"{"jsonrpc":"2.0","id":\#(id),"method":"\#(method)","params":{"taskId":"\#(taskId)"\#(more),\#(envelope)}}"#
        }
        let requests = [
            call(1, "report", #"{"polls":1}"#), task(2, "tasks/get", "task-1"), task(3, "tasks/get", "task-1"),
            call(4, "doomed"), task(5, "tasks/get", "task-2"),
            call(6, "asking"), task(7, "tasks/get", "task-3"),
            task(8, "tasks/update", "task-99", #","inputResponses":{"q":{"action":"accept"}}"#),
            call(9, "endless"),
            // A task whose question is refused, and that the server runs to its end regardless:
            // the call ended at the refusal, so the result never reaches the client.
            call(10, "stubborn"), task(11, "tasks/get", "task-5"), task(12, "tasks/get", "task-5"),
        ]
        try (requests.joined(separator: "\n") + "\n").write(toFile: directory.path("requests.jsonl"), atomically: true, encoding: .utf8)
        let (answers, events) = try await Self.proxied(
            answers: 12, flags: ["--policy", "tasks.policy.yaml"], server: server, log: "tasks.jsonl.gz", in: directory)
        #expect(answers[1]?["result"]?["resultType"] == "task")
        #expect(answers[2]?["result"]?["status"] == "working")
        #expect(answers[3]?["result"]?["status"] == "completed")
        #expect(answers[5]?["result"]?["status"] == "failed")
        // The task's question is not the client's to see: the task is told cancelled.
        #expect(answers[7]?["result"]?["status"] == "cancelled")
        #expect(answers[7]?["result"]?["inputRequests"] == nil)
        #expect(answers[7]?["result"]?["statusMessage"]?.stringValue?.contains("refused the server's question") == true)
        #expect(answers[8]?["error"]?["code"] == -32602)
        #expect(answers[9]?["result"]?["taskId"] == "task-4")
        #expect(answers[11]?["result"]?["status"] == "cancelled")
        #expect(answers[12]?["result"]?["status"] == "cancelled", "\(String(describing: answers[12]))")
        #expect(answers[12]?["result"]?["result"] == nil, "\(String(describing: answers[12]))")
        #expect(answers[12]?["result"]?["statusMessage"]?.stringValue?.contains("refused the server's question") == true)

        let results = Self.results(events)
        #expect(results["mcp-1"]?.status == .ok)
        #expect(results["mcp-1"]?.output?["content"]?.arrayValue?.first?["text"] == "report ready after 1 polls")
        #expect(results["mcp-2"]?.error == "JSON-RPC error -32603: the job crashed")
        #expect(results["mcp-3"]?.error?.contains("the server asked for elicitation/create (input request \"go-on\") on round 2") == true)
        #expect(
            results["mcp-4"]?.error == "the session ended while its task task-4 was still running (the client did not poll it to its end)")
        #expect(results["mcp-5"]?.error?.contains("the server asked for elicitation/create (input request \"go-on\") on round 2") == true)
        #expect(
            Self.verdicts(events) == [
                "mcp-1 allow default", "mcp-2 allow default", "mcp-3 allow default", "mcp-4 allow default", "mcp-5 allow default",
            ])
        #expect(
            try Self.rounds(events).map(\.line) == [
                "mcp-1 1 server", "mcp-2 1 server", "mcp-3 1 server", "mcp-3 2 server", "mcp-4 1 server", "mcp-5 1 server",
                "mcp-5 2 server",
            ])
    }

    @Test(
        "a client that closes its end with calls in flight: each call's outcome is still recorded — its answer, or the timeout's error — not cut off"
    )
    func closedWithCallsInFlight() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try await PythonEnvironment.mcp.script("mcp_failure_server.py", [])
        let envelope =
            #""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#
        let requests = [
            #"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"ms":1500},\#(envelope)}}"#,
            #"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"hang","arguments":{},\#(envelope)}}"#,
        ]
        try (requests.joined(separator: "\n") + "\n").write(toFile: directory.path("requests.jsonl"), atomically: true, encoding: .utf8)
        // The client's input ends as soon as the two calls are written. The calls' time counts from
        // the moment they reach the server, which may still be importing its SDK: 10 s, so that
        // a 1.5 s call answers within it on a machine loaded by the whole suite (3 s once did not).
        let result = try await Subprocess.run(
            "/bin/sh",
            [
                "-c",
                ([try agentEvalBinary(), "mcp-proxy", "--no-catalog", "--log", "closed.jsonl.gz", "--call-timeout", "10", "--"] + server)
                    .map(ShellWords.quoted).joined(separator: " ") + " < requests.jsonl > answers.jsonl",
            ], in: directory.url)
        #expect(result.status == 0, "\(result.stderr)")
        let results = Self.results(try MCPProxyCommandTests.events(directory.path("closed.jsonl.gz")))
        #expect(results["mcp-1"]?.status == .ok, "\(String(describing: results["mcp-1"]))")
        #expect(results["mcp-1"]?.output?["structuredContent"]?["result"] == "slept 1500 ms")
        #expect(results["mcp-2"]?.error?.contains("did not answer within 10 s") == true, "\(String(describing: results["mcp-2"]))")
    }

    @Test(
        "subscriptions/listen through the proxy: the listen stream's frames pass, and a tool the server adds after a list change is judged with what the server says of it"
    )
    func toolListChangeWhileListening() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try """
        policy:
          name: reads
          default: deny
          rules:
            - {id: reads, verdict: allow, when: {side_effect: read}}

        """.write(toFile: directory.path("reads.policy.yaml"), atomically: true, encoding: .utf8)
        let server = try await PythonEnvironment.mcp.script("mcp_listing_server.py", [])
        let envelope =
            #""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#
        let listen =
            #"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"toolsListChanged":true},\#(envelope)}}"#
        let unlock = #"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"unlock","arguments":{},\#(envelope)}}"#
        let inventory = #"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"inventory","arguments":{},\#(envelope)}}"#
        try [listen, unlock, inventory].enumerated().forEach { index, line in
            try (line + "\n").write(toFile: directory.path("request-\(index + 1).jsonl"), atomically: true, encoding: .utf8)
        }
        let proxy =
            ([try agentEvalBinary(), "mcp-proxy", "--no-catalog", "--log", "listen.jsonl.gz", "--policy", "reads.policy.yaml", "--"]
            + server)
            .map(ShellWords.quoted).joined(separator: " ")
        // Each request once the answer before it came (the listen stream's acknowledgement first).
        let script = """
            : > answers.jsonl
            until_has() { i=0; while [ $i -lt 600 ] && ! grep -q "$1" answers.jsonl; do sleep 0.1; i=$((i+1)); done; }
            (cat request-1.jsonl; until_has subscriptions/acknowledged; cat request-2.jsonl; until_has '"id":2,'; \\
             cat request-3.jsonl; until_has '"id":3,') | \(proxy) > answers.jsonl
            """
        let result = try await Subprocess.run("/bin/sh", ["-c", script], in: directory.url)
        #expect(result.status == 0, "\(result.stderr)")
        let lines = try String(contentsOfFile: directory.path("answers.jsonl"), encoding: .utf8).split(separator: "\n").map {
            try JSONParser.parse(Array($0.utf8))
        }
        // The stream's frames reach the client as the server sent them, tagged with the listen request's id.
        let changed = lines.first { $0["method"] == "notifications/tools/list_changed" }
        #expect(changed?["params"]?["_meta"]?["io.modelcontextprotocol/subscriptionId"] == 1)
        let third = lines.first { $0["id"] == 3 }
        #expect(third?["result"]?["content"]?.arrayValue?.first?["text"] == "3 widgets", "\(String(describing: third))")
        let events = try MCPProxyCommandTests.events(directory.path("listen.jsonl.gz"))
        // Listed again after the change, the new tool is a read the policy allows (unknown, it would be a write, denied).
        #expect(Self.verdicts(events) == ["mcp-1 allow reads", "mcp-2 allow reads"])
    }
}
