import Foundation
import Recording
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// `agent-eval record -- COMMAND` on agents written as plain loops on the official openai and
/// anthropic SDKs (Fixtures/external/raw_sdk_agent.py, from PyPI), against the local model server:
/// the gateway records their trajectory without a line of instrumentation, replays it offline
/// from a cassette, and keeps their keys out of every file.
@Suite("record: any agent through the model gateway", .tags(.python), .needsPython, .ownThread)
struct RecordCommandTests {
    static let key = "sk-test-PLANTED-0123456789abcdef"
    static let agent = ExampleRuns.fixtures.appendingPathComponent("external/raw_sdk_agent.py").path

    static func python() async throws -> String { try await PythonEnvironment.agents.path() + "/bin/python" }

    /// The upstream options for a scenario of the local model server.
    static func upstreams(_ server: LocalModelServer, _ scenario: String) -> [String] {
        let base = server.baseURL(scenario)
        return ["--upstream", "openai=\(base)", "--upstream", "anthropic=\(String(base.dropLast("/v1".count)))"]
    }

    /// The events of a log, read by the project's reader.
    static func events(_ path: String) throws -> [Event] {
        var events: [Event] = []
        _ = try LogReader(path: path).forEachEvent { events.append($0.event) }
        return events
    }

    static func decisions(_ events: [Event]) -> [DecisionMade] {
        events.compactMap { event -> DecisionMade? in
            if case .decisionMade(let made) = event.payload { return made }
            return nil
        }
    }

    /// The state a replay of the log rebuilds.
    static func state(_ path: String) throws -> RunState {
        var state = RunState()
        for event in try events(path) { _ = RunState.reduce(into: &state, event) }
        return state
    }

    static func trajectory(_ events: [Event]) -> [String] {
        events.compactMap { event in
            switch event.payload {
            case .toolIntended(let intent): return "intent \(intent.tool) \(JSONWriter.encodeString(intent.arguments))"
            case .toolCompleted(let result): return "result \(result.tool) \(result.status.rawValue)"
            case .runStopped(let stop): return "stop \(stop.reason.rawValue) \(stop.answer ?? stop.error ?? "")"
            default: return nil
            }
        }
    }

    static let refundTrajectory = [
        #"intent lookup_order {"order_id":"A-1042"}"#, "result lookup_order ok", #"intent refund_order {"amount":25,"order_id":"A-1042"}"#,
        "result refund_order ok", "stop success Refunded 25 EUR for order A-1042.",
    ]

    @Test(
        "the three model APIs, streamed and whole, record the same trajectory as an ordinary, verifiable log",
        arguments: ["chat", "responses", "anthropic"], [false, true])
    func recordsEachAPI(api: String, stream: Bool) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let log = directory.path("run.jsonl.gz")
        let result = try await agentEval(
            ["record", "--no-catalog", "--log", log, "--json"] + Self.upstreams(server, "refund")
                + ["--", try await Self.python(), Self.agent, "--api", api] + (stream ? ["--stream"] : []) + [
                    "Order A-1042 arrived broken."
                ],
            environment: ["OPENAI_API_KEY": Self.key, "ANTHROPIC_API_KEY": Self.key])
        #expect(result.status == 0, "\(result.stderr)")
        let summary = try JSONParser.parse(Array(result.stdout))
        #expect(summary["stop_reason"] == "success")
        #expect(summary["requests"] == 3)
        let events = try Self.events(log)
        #expect(Self.trajectory(events) == Self.refundTrajectory)
        guard case .runStarted(let start)? = events.first?.payload else {
            Issue.record("the log does not start with run_started")
            return
        }
        #expect(start.goal == "Order A-1042 arrived broken.")
        #expect(start.tools.map(\.name) == ["lookup_order", "refund_order"])
        #expect(start.source?.format == "gateway")
        let decisions = Self.decisions(events)
        #expect(decisions.map(\.format) == Array(repeating: api == "anthropic" ? "anthropic.messages" : "openai.chat", count: 3))
        #expect(decisions.allSatisfy { $0.usage != nil })
        // Every answer from its streamed or whole form, and each step's state digest checked.
        let verify = try await agentEval(["log", "verify", log])
        #expect(verify.status == 0, "\(verify.stdout)\(verify.stderr)")
        let gzip = try await Subprocess.run("/usr/bin/env", ["gzip", "-t", log])
        #expect(gzip.status == 0)
        let replay = try await agentEval(["replay", log])
        #expect(replay.status == 0, "\(replay.stderr)")
        #expect(replay.stdoutText.contains("all match the rebuilt state"))
    }

    @Test("a cassette recorded live (a 429 first) replays offline with no server and no key; a changed agent is a miss at its step")
    func cassetteReplaysOffline() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        let cassette = directory.path("cassette")
        let python = try await Self.python()
        let command = ["--", python, Self.agent, "--api", "chat", "Order A-1042 arrived broken."]
        let live = try await agentEval(
            ["record", "--no-catalog", "--log", directory.path("live.jsonl.gz"), "--cassette", cassette, "--record", "new"]
                + Self.upstreams(server, "refund-429") + command, environment: ["OPENAI_API_KEY": Self.key])
        #expect(live.status == 0, "\(live.stderr)")
        let liveEvents = try Self.events(directory.path("live.jsonl.gz"))
        let firstDecision = Self.decisions(liveEvents).first
        #expect(firstDecision?.attempts.map(\.status) == [429], "the 429 the SDK retried is recorded with the decision it led to")

        // Recorded again live: the server's call ids are new, the requests match the recordings.
        let recorded = try FileManager.default.contentsOfDirectory(atPath: cassette).sorted()
        let again = try await agentEval(
            ["record", "--no-catalog", "--log", directory.path("again.jsonl.gz"), "--cassette", cassette, "--record", "new"]
                + Self.upstreams(server, "refund") + command, environment: ["OPENAI_API_KEY": Self.key])
        #expect(again.status == 0, "\(again.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: cassette).sorted() == recorded)
        server.stop()

        // Offline: the server is gone and there is no key; the cassette answers.
        let offline = try await agentEval(
            [
                "record", "--no-catalog", "--log", directory.path("offline.jsonl.gz"), "--cassette", cassette, "--upstream",
                "openai=http://127.0.0.1:9/v1",
            ]
                + command, environment: ["OPENAI_API_KEY": ""])
        #expect(offline.status == 0, "\(offline.stderr)")
        #expect(Self.trajectory(try Self.events(directory.path("offline.jsonl.gz"))) == Self.trajectory(liveEvents))

        // The agent's code changed (its refund tool now fails): its next request is new.
        let changed = try await agentEval(
            [
                "record", "--no-catalog", "--log", directory.path("changed.jsonl.gz"), "--cassette", cassette, "--upstream",
                "openai=http://127.0.0.1:9/v1",
            ]
                + command.dropLast() + ["--fail-refund", "Order A-1042 arrived broken."], environment: ["OPENAI_API_KEY": ""])
        #expect(changed.status == 1)
        #expect(changed.stderr.contains("cassette miss at step 2"), "\(changed.stderr)")
        #expect(changed.stderr.contains(#"differs at messages[5].content"#), "\(changed.stderr)")
        #expect(changed.stderr.contains("look: agent-eval replay"), "\(changed.stderr)")
        let stop = try Self.events(directory.path("changed.jsonl.gz")).last
        guard case .runStopped(let stopped)? = stop?.payload else {
            Issue.record("the changed run has no stop")
            return
        }
        #expect(stopped.reason == .blocked)

        // A recording whose status no HTTP answer has (a hand edit): refused when read, naming it;
        // the gateway once passed it on as its answer's status line, which trapped.
        for name in try FileManager.default.contentsOfDirectory(atPath: cassette) where name.hasSuffix(".json.gz") {
            let path = (cassette as NSString).appendingPathComponent(name)
            var recording = try #require(
                try JSONParser.parse(try GzipData.decompress(Array(try Data(contentsOf: URL(fileURLWithPath: path))), path: path))
                    .objectValue)
            var response = try #require(recording["response"]?.objectValue)
            response["status"] = -1
            recording["response"] = .object(response)
            let gzip = try await Subprocess.run(gzipPath, ["-n", "-c"], input: JSONWriter.encode(.object(recording)))
            try Data(gzip.stdout).write(to: URL(fileURLWithPath: path))
        }
        let damaged = try await agentEval(
            [
                "record", "--no-catalog", "--log", directory.path("damaged.jsonl.gz"), "--cassette", cassette, "--upstream",
                "openai=http://127.0.0.1:9/v1",
            ]
                + command, environment: ["OPENAI_API_KEY": ""])
        #expect(damaged.status == 1 || damaged.status == 2, "\(damaged.status): \(damaged.stderr)")
        #expect(damaged.stderr.contains("has the HTTP status -1, which no answer has (100 to 599)"), "\(damaged.stderr)")
    }

    @Test(
        "a key in a tool call's arguments: recorded, the cassette keeps it redacted, and the agent's request that sends its placeholder back replays"
    )
    func aKeyTheModelGaveReplays() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        let cassette = directory.path("cassette")
        let command = ["--", try await Self.python(), Self.agent, "--api", "chat", "Order A-1042 arrived broken."]
        let recorded = try await agentEval(
            ["record", "--no-catalog", "--log", directory.path("live.jsonl.gz"), "--cassette", cassette, "--record", "new"]
                + Self.upstreams(server, "refund-keyed") + command, environment: ["OPENAI_API_KEY": Self.key])
        #expect(recorded.status == 0, "\(recorded.stderr)")
        server.stop()
        for name in try FileManager.default.contentsOfDirectory(atPath: cassette) where name.hasSuffix(".json.gz") {
            let path = (cassette as NSString).appendingPathComponent(name)
            let text = String(
                decoding: try GzipData.decompress(Array(try Data(contentsOf: URL(fileURLWithPath: path))), path: path), as: UTF8.self)
            #expect(!text.contains("ABCDEFGHIJKLMNOPQRST"), "\(name) keeps the key")
        }
        let offline = try await agentEval(
            [
                "record", "--no-catalog", "--log", directory.path("offline.jsonl.gz"), "--cassette", cassette, "--upstream",
                "openai=http://127.0.0.1:9/v1",
            ]
                // A machine whose environment holds a secret-named variable with a value the
                // requests hold: the keys are not this machine's, so they still match.
                + command, environment: ["OPENAI_API_KEY": "", "AGENT_EVAL_TEST_SECRET_TOKEN": "arrived broken"])
        #expect(offline.status == 0, "\(offline.stderr)")
        #expect(!offline.stderr.contains("cassette miss"), "\(offline.stderr)")
        // The same calls; the key is a placeholder in both logs (found by its member's name in the
        // live run's arguments, by its pattern in the replayed answer: the same code, another rule).
        func unruled(_ lines: [String]) -> [String] {
            // (The logs keep each placeholder's rule and code; only the cassette's key drops them.)
            lines.map { $0.replacing(/\[redacted:[^\]]*?:([0-9a-f]{8})\]/) { "[redacted:\($0.1)]" } }
        }
        let live = Self.trajectory(try Self.events(directory.path("live.jsonl.gz")))
        #expect(unruled(Self.trajectory(try Self.events(directory.path("offline.jsonl.gz")))) == unruled(live))
        #expect(live.contains { $0.contains("[redacted:") } && !live.joined().contains("ABCDEFGHIJKLMNOPQRST"), "\(live)")
    }

    @Test("two conversations at once are told apart: each call gets its own result, and the log holds both")
    func parallelConversations() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let log = directory.path("run.jsonl.gz")
        let result = try await agentEval(
            ["record", "--no-catalog", "--log", log] + Self.upstreams(server, "refund")
                + ["--", try await Self.python(), Self.agent, "--api", "chat", "--stream", "--parallel", "Order A-1042 arrived broken."],
            environment: ["OPENAI_API_KEY": Self.key])
        #expect(result.status == 0, "\(result.stderr)")
        let events = try Self.events(log)
        let summaries = events.compactMap { event -> String? in
            if case .contextBuilt(let packet) = event.payload { return packet.stateSummary }
            return nil
        }
        #expect(summaries.count == 6)
        #expect(summaries.filter { $0.hasPrefix("conversation 1,") }.count == 3)
        #expect(summaries.filter { $0.hasPrefix("conversation 2,") }.count == 3)
        let state = try Self.state(log)
        #expect(state.calls.count == 4)
        #expect(state.calls.allSatisfy { $0.lastResult?.status == .ok }, "every call has its own result")
        #expect(state.stop?.reason == .success)
    }

    @Test("a key the upstream echoes in an error, or the command line holds, reaches neither the log, its name nor the summary")
    func keysStayOut() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let log = directory.path("run.jsonl.gz")
        let result = try await agentEval(
            ["record", "--no-catalog", "--log", log, "--json"] + Self.upstreams(server, "forbidden")
                + ["--", "/usr/bin/env", "COPY_OF_KEY=\(Self.key)", try await Self.python(), Self.agent, "--api", "chat", "Order A-1042."],
            environment: ["OPENAI_API_KEY": Self.key])
        #expect(result.status == 1, "the agent fails on the 403: \(result.stderr)")
        let summary = try JSONParser.parse(Array(result.stdout))
        #expect(summary["stop_reason"] == "blocked")
        let why = summary["error"]?.stringValue ?? ""
        #expect(why.contains("HTTP 403") && why.contains("[redacted]"), "\(why)")
        let text = String(decoding: try await Subprocess.run("/usr/bin/env", ["gzip", "-dc", log]).stdout, as: UTF8.self)
        #expect(!text.contains(Self.key) && !result.stdoutText.contains(Self.key))
        #expect(text.contains("[redacted]"))
        #expect(text.contains("[redacted:env:OPENAI_API_KEY:"), "the command line's copy is redacted by the log writer")

        // A key in the URL's query (Azure's api-key, a gateway's key=) that the upstream echoes
        // back with the URL: redacted in the log and the summary, as a header's is.
        let queryKey = "QUERYKEY0123456789abcdef"
        let inQuery = """
            import json, os, sys, urllib.request, urllib.error
            url = os.environ["OPENAI_BASE_URL"] + "/chat/completions?api-version=2024-10-21&api-key=\(queryKey)"
            body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "Order A-1042."}]}).encode()
            try:
                urllib.request.urlopen(urllib.request.Request(url, data=body, headers={"content-type": "application/json"}))
            except urllib.error.HTTPError as error:
                error.read()  # the whole answer taken (what it says is the agent's to print, not agent-eval's)
                sys.exit(1)
            """
        try inQuery.write(toFile: directory.path("query_agent.py"), atomically: true, encoding: .utf8)
        let queryLog = directory.path("query.jsonl.gz")
        let queryRun = try await agentEval(
            ["record", "--no-catalog", "--log", queryLog, "--json"] + Self.upstreams(server, "forbidden")
                + ["--", try await Self.python(), directory.path("query_agent.py")])
        #expect(queryRun.status == 1, "\(queryRun.stderr)")
        let queryText = String(decoding: try await Subprocess.run("/usr/bin/env", ["gzip", "-dc", queryLog]).stdout, as: UTF8.self)
        #expect(queryText.contains("api-version=2024-10-21"), "the echo reached the log: \(queryText)")
        #expect(
            !queryText.contains(queryKey) && !queryRun.stdoutText.contains(queryKey) && !queryRun.stderr.contains(queryKey), "\(queryText)")

        // Without --log, the file is named after the script the command runs, not its variables.
        let named = try await agentEval(
            ["record", "--no-catalog", "--out", directory.path("runs"), "--json"] + Self.upstreams(server, "refund")
                + ["--", "/usr/bin/env", "COPY_OF_KEY=\(Self.key)", try await Self.python(), Self.agent, "Order A-1042."],
            environment: ["OPENAI_API_KEY": Self.key])
        #expect(named.status == 0, "\(named.stderr)")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path("runs"))
        #expect(names.count == 1 && names.allSatisfy { $0.hasPrefix("raw_sdk_agent-run-") && !$0.contains(Self.key) }, "\(names)")

        // A key the agent puts in the request body, under a member named api_key (no pattern
        // knows its shape, no variable holds it): redacted in the log and in the cassette's
        // stored request, undeclared.
        let bodyKey = "9f8e7d6c5b4a39281706f5e4d3c2b1a0"
        let inBody = """
            import openai
            client = openai.OpenAI()
            messages = [{"role": "user", "content": "Order A-1042."}]
            reply = client.chat.completions.create(model="m", messages=messages, extra_body={"api_key": "\(bodyKey)"})
            print(reply.choices[0].message.content)
            """
        try inBody.write(toFile: directory.path("body_agent.py"), atomically: true, encoding: .utf8)
        let bodyLog = directory.path("body.jsonl.gz")
        let cassette = directory.path("cassette")
        let inBodyRun = try await agentEval(
            ["record", "--no-catalog", "--log", bodyLog, "--cassette", cassette, "--record", "new"] + Self.upstreams(server, "refund")
                + ["--", try await Self.python(), directory.path("body_agent.py")], environment: ["OPENAI_API_KEY": Self.key])
        #expect(inBodyRun.status == 0, "\(inBodyRun.stderr)")
        let bodyText = String(decoding: try await Subprocess.run("/usr/bin/env", ["gzip", "-dc", bodyLog]).stdout, as: UTF8.self)
        #expect(!bodyText.contains(bodyKey) && bodyText.contains("[redacted:member:api_key:"), "\(bodyText)")
        let recordings = try FileManager.default.contentsOfDirectory(atPath: cassette).filter { $0.hasSuffix(".json.gz") }
        #expect(recordings.count == 1)
        for file in recordings {
            let stored = try await Subprocess.run("/usr/bin/env", ["gzip", "-dc", cassette + "/" + file])
            #expect(stored.status == 0 && !stored.stdoutText.contains(bodyKey), "\(stored.stdoutText)")
            // Kept as the cassette keys it: the secret a placeholder of no rule or code, the same
            // wherever the cassette is replayed (docs/record.md, "Matching requests").
            #expect(stored.stdoutText.contains(#""api_key":"[redacted:secret]""#), "\(stored.stdoutText)")
        }
    }

    @Test("upstream failures reach the agent as they were and are recorded so: a 500 its SDK retried, a stream cut mid-way")
    func upstreamFailures() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let python = try await Self.python()
        // A 500 first: the SDK retries it, and the decision carries the failed attempt.
        let retried = directory.path("retried.jsonl.gz")
        let first = try await agentEval(
            ["record", "--no-catalog", "--log", retried] + Self.upstreams(server, "server-error")
                + ["--", python, Self.agent, "--api", "chat", "--stream", "Hello."], environment: ["OPENAI_API_KEY": Self.key])
        #expect(first.status == 0, "\(first.stderr)")
        let decisions = Self.decisions(try Self.events(retried))
        #expect(decisions.count == 1)
        #expect(decisions.first?.attempts.map(\.status) == [500])
        #expect(try Self.state(retried).stop?.answer == "after the 500")
        // A 500 the agent does not retry as it was: it asks again another way (a shorter
        // context). The failed request is not the answered one's retry, and still in the log.
        let rephrased = directory.path("rephrased.jsonl.gz")
        let agent = """
            import openai
            client = openai.OpenAI(max_retries=0)
            def ask(text):
                stream = client.chat.completions.create(model="m", messages=[{"role": "user", "content": text}], stream=True)
                return "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
            try:
                ask("a long context " * 40)
            except openai.InternalServerError:
                pass
            print(ask("short"))
            """
        // A server of its own: the scenario fails only the first request it gets.
        let fresh = try LocalModelServer()
        defer { fresh.stop() }
        let again = try await agentEval(
            ["record", "--no-catalog", "--log", rephrased] + Self.upstreams(fresh, "server-error") + ["--", python, "-c", agent],
            environment: ["OPENAI_API_KEY": Self.key])
        #expect(again.status == 0, "\(again.stderr)")
        let rephrasedDecisions = Self.decisions(try Self.events(rephrased))
        #expect(rephrasedDecisions.count == 1)
        #expect(rephrasedDecisions.first?.attempts.map(\.status) == [500], "the failed request it followed is recorded with it")
        // A stream cut after two chunks: the agent's connection is cut too (its SDK fails), and
        // the stop says which request failed and how.
        let cut = directory.path("cut.jsonl.gz")
        let second = try await agentEval(
            ["record", "--no-catalog", "--log", cut, "--json"] + Self.upstreams(server, "dropped")
                + ["--", python, Self.agent, "--api", "chat", "--stream", "Hello."], environment: ["OPENAI_API_KEY": Self.key])
        #expect(second.status == 1, "the SDK does not retry a stream that broke off: \(second.stderr)")
        let summary = try JSONParser.parse(Array(second.stdout))
        #expect(summary["stop_reason"] == "blocked")
        #expect(summary["error"]?.stringValue?.contains("the last model request failed") == true, "\(summary)")
        let verify = try await agentEval(["log", "verify", cut])
        #expect(verify.status == 0, "\(verify.stdoutText)")
        // No decision carries the cut request: it is kept in the log before the stop, not only in the stop's words.
        let cutEvents = try Self.events(cut)
        let unanswered = cutEvents.compactMap { event -> ContentStored? in
            guard case .contentStored(let content) = event.payload, content.mediaType == ExchangeRecorder.unansweredMediaType else {
                return nil
            }
            return content
        }
        #expect(unanswered.count == 1 && Self.decisions(cutEvents).allSatisfy { $0.attempts.isEmpty })
        let kept = try JSONParser.parse(unanswered.first?.bytes ?? []).arrayValue ?? []
        #expect(kept.count == 1 && kept.first?["attempt"]?["error"]?.stringValue?.isEmpty == false, "\(kept)")
        if case .runStopped = cutEvents.last?.payload {} else { Issue.record("the log ends with its stop") }
    }

    /// An agent that makes N (its argument) streamed requests through OPENAI_BASE_URL with no SDK,
    /// reading each answer whole, whatever it is, and going on past any failure.
    static let asker = """
        import json, os, sys, urllib.request
        for number in range(int(sys.argv[1])):
            body = {"model": "m", "stream": True, "messages": [{"role": "user", "content": "question %d" % number}]}
            request = urllib.request.Request(
                os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=json.dumps(body).encode(),
                headers={"content-type": "application/json", "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
            try:
                with urllib.request.urlopen(request) as answer:
                    answer.read()
            except Exception as error:
                print("request %d: %s" % (number, error), file=sys.stderr)
        """

    @Test(
        "a request the gateway could not read was still made: it counts against --max-requests; a reply without usage counts an estimate against --max-tokens; a command that exits 0 after its last request failed does not pass"
    )
    func unreadableRequestsCount() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        try Self.asker.write(toFile: directory.path("asker.py"), atomically: true, encoding: .utf8)
        let python = try await Self.python()
        // Four requests answered with a page of HTML (billed, unreadable), under --max-requests 2:
        // the third is refused and the command stopped.
        let html = try LocalModelServer()
        defer { html.stop() }
        let budget = try await agentEval(
            ["record", "--no-catalog", "--log", directory.path("budget.jsonl.gz"), "--max-requests", "2", "--json"]
                + Self.upstreams(html, "html") + ["--", python, directory.path("asker.py"), "4"],
            environment: ["OPENAI_API_KEY": Self.key])
        #expect(budget.status == 1, "\(budget.stderr)")
        #expect(try JSONParser.parse(Array(budget.stdout))["stop_reason"] == "budget_exhausted", "\(budget.stdoutText)")
        #expect(try html.requests().count == 2, "the upstream was asked twice, no more")
        // One request, whose answer ends before its end marker: the command exits 0, and the
        // error says a request came and could not be recorded.
        let cut = try LocalModelServer()
        defer { cut.stop() }
        let unread = try await agentEval(
            ["record", "--no-catalog", "--log", directory.path("unread.jsonl.gz")] + Self.upstreams(cut, "cut-clean")
                + ["--", python, directory.path("asker.py"), "1"], environment: ["OPENAI_API_KEY": Self.key])
        #expect(unread.status == 1, "\(unread.stderr)")
        #expect(unread.stderr.contains("none of the 1 model request it made through the gateway was answered"), "\(unread.stderr)")
        // A whole answer, then one cut short: the last request failed, so the command's exit 0 is no pass.
        let then = try LocalModelServer()
        defer { then.stop() }
        let lastFailed = try await agentEval(
            ["record", "--no-catalog", "--log", directory.path("last.jsonl.gz"), "--json"] + Self.upstreams(then, "answer-then-cut")
                + ["--", python, directory.path("asker.py"), "2"], environment: ["OPENAI_API_KEY": Self.key])
        #expect(lastFailed.status == 1, "\(lastFailed.stderr)")
        #expect(lastFailed.stderr.contains("the run's last model request failed"), "\(lastFailed.stderr)")
        #expect(try Self.state(directory.path("last.jsonl.gz")).stop?.isModelFailure == true)
        // What the cut stream had passed to the agent is in the log with the failure.
        let stored = try Self.events(directory.path("last.jsonl.gz")).compactMap { event -> ContentStored? in
            if case .contentStored(let content) = event.payload { return content }
            return nil
        }
        let partial = stored.first { $0.mediaType == ExchangeRecorder.partialReplyMediaType }
        #expect(partial?.body.contains("never finished") == true, "\(stored)")
        let unanswered = stored.first { $0.mediaType == ExchangeRecorder.unansweredMediaType }
        #expect(unanswered?.body.contains("\"partial_reply\":\"\(partial?.hash ?? "-")\"") == true, "\(stored)")
        // Replies that carry no usage (a stream asked without include_usage): --max-tokens counts
        // four bytes of request and reply as a token, so a loop of them is still stopped.
        let unmetered = try LocalModelServer()
        defer { unmetered.stop() }
        let tokens = try await agentEval(
            ["record", "--no-catalog", "--log", directory.path("tokens.jsonl.gz"), "--max-tokens", "100", "--json"]
                + Self.upstreams(unmetered, "empty") + ["--", python, directory.path("asker.py"), "5"],
            environment: ["OPENAI_API_KEY": Self.key])
        #expect(tokens.status == 1, "\(tokens.stderr)")
        #expect(try JSONParser.parse(Array(tokens.stdout))["stop_reason"] == "budget_exhausted", "\(tokens.stdoutText)")
        #expect(tokens.stderr.contains("carried no token usage, so --max-tokens counted one token per four bytes"), "\(tokens.stderr)")
        #expect(try unmetered.requests().count < 5)
        // A stream that says its finish reason, then ends without [DONE]: whole to the SDKs, and
        // recorded as the answer the agent got, not as a failed request.
        let noMarker = try LocalModelServer()
        defer { noMarker.stop() }
        let whole = try await agentEval(
            ["record", "--no-catalog", "--log", directory.path("whole.jsonl.gz")] + Self.upstreams(noMarker, "no-done")
                + ["--", python, directory.path("asker.py"), "1"], environment: ["OPENAI_API_KEY": Self.key])
        #expect(whole.status == 0, "\(whole.stderr)")
        let wholeState = try Self.state(directory.path("whole.jsonl.gz"))
        #expect(
            wholeState.stop?.reason == .success && wholeState.stop?.answer == "whole without its marker",
            "\(String(describing: wholeState.stop))")
    }

    @Test(
        "an agent that closes its connection before the answer's end did not get the reply: the log holds a failed attempt, not the upstream's whole answer"
    )
    func agentLeavesMidAnswer() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        // Reads 300 bytes of the first answer and hangs up; then asks again and reads it all.
        let agent = """
            import http.client, json, os, time, urllib.parse
            base = urllib.parse.urlparse(os.environ["OPENAI_BASE_URL"])
            def ask(text, limit=None):
                connection = http.client.HTTPConnection(base.hostname, base.port)
                body = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": text}]})
                headers = {"content-type": "application/json", "authorization": "Bearer " + os.environ["OPENAI_API_KEY"]}
                connection.request("POST", base.path + "/chat/completions", body, headers)
                answer = connection.getresponse()
                data = answer.read(limit) if limit else answer.read()
                connection.close()
                return data
            ask("the first question", 300)
            time.sleep(3)
            ask("the second question")
            """
        try agent.write(toFile: directory.path("leaver.py"), atomically: true, encoding: .utf8)
        let server = try LocalModelServer()
        defer { server.stop() }
        let log = directory.path("left.jsonl.gz")
        let result = try await agentEval(
            ["record", "--no-catalog", "--log", log] + Self.upstreams(server, "slow-then-quick")
                + ["--", try await Self.python(), directory.path("leaver.py")], environment: ["OPENAI_API_KEY": Self.key])
        #expect(result.status == 0, "\(result.stderr)")
        let decisions = Self.decisions(try Self.events(log))
        #expect(decisions.count == 1, "only the answer the agent read whole is a decision: \(decisions.count)")
        let failed = decisions.first?.attempts.first?.error ?? ""
        #expect(failed.contains("the agent's connection closed before the answer was passed on whole"), "\(decisions)")
        #expect(try Self.state(log).stop?.answer == "the second answer")
    }

    @Test("a --timeout that ends the command while the model is still answering says so: the model had not answered, not the agent")
    func timeoutWithTheModelAnswering() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        try Self.asker.write(toFile: directory.path("asker.py"), atomically: true, encoding: .utf8)
        let log = directory.path("timeout.jsonl.gz")
        let result = try await agentEval(
            ["record", "--no-catalog", "--log", log, "--timeout", "2"] + Self.upstreams(server, "hang")
                + ["--", try await Self.python(), directory.path("asker.py"), "1"], environment: ["OPENAI_API_KEY": Self.key])
        #expect(result.status == 1, "\(result.stderr)")
        let stop = try Self.state(log).stop
        #expect(stop?.limit == .timeout)
        #expect(
            stop?.error?.hasPrefix("model failed: 1 model request still unanswered when the command ran longer than 2 s") == true,
            "\(String(describing: stop))")
    }

    @Test("bad input: no command, an unknown upstream, a command that does not exist")
    func badInput() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let none = try await agentEval(["record", "--no-catalog"])
        #expect(none.status == 64)
        #expect(none.stderr.contains("give the command to record after --"))
        let forever = try await agentEval(["record", "--no-catalog", "--timeout", "\(Int.max)", "--", "true"])
        #expect(
            forever.status == 64 && forever.stderr.contains("--timeout must be from 1 second to 31536000 (a year)"), "\(forever.stderr)")
        let upstream = try await agentEval(["record", "--no-catalog", "--upstream", "gemini=http://x", "--", "true"])
        #expect(upstream.status == 64)
        #expect(upstream.stderr.contains("--upstream takes openai=URL or anthropic=URL"))
        let missing = try await agentEval([
            "record", "--no-catalog", "--out", directory.path("runs"), "--", directory.path("no-such-agent"),
        ])
        #expect(missing.status == 2)
        #expect(missing.stderr.contains("cannot start"), "\(missing.stderr)")
        let miss = try await agentEval(["record", "--no-catalog", "--cassette", directory.path("nothing"), "--", "true"])
        #expect(miss.status == 2)
        #expect(miss.stderr.contains("does not exist"), "\(miss.stderr)")
        // A command that exits 0 without asking the model: recorded as blocked, and not a pass.
        let idle = try await agentEval(["record", "--no-catalog", "--log", directory.path("idle.jsonl.gz"), "--", "true"])
        #expect(idle.status == 1, "\(idle.stderr)")
        #expect(idle.stderr.contains("exited 0 without a model request through the gateway"), "\(idle.stderr)")
        #expect(idle.stderr.contains("recorded: blocked"), "\(idle.stderr)")
        // A request the gateway refuses (a member named twice) is counted and named: the agent is
        // told why, and the run is not said to have made no request.
        let script = directory.path("twice.py")
        try """
        import os, urllib.request, urllib.error
        body = b'{"model": "m", "messages": [{"role": "user", "content": "a"}], "messages": []}'
        request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
                                         headers={"content-type": "application/json"})
        try:
            urllib.request.urlopen(request)
        except urllib.error.HTTPError as error:
            print(error.code, error.read().decode())
        """.write(toFile: script, atomically: true, encoding: .utf8)
        let twice = try await agentEval(["record", "--no-catalog", "--log", directory.path("twice.jsonl.gz"), "--", "python3", script])
        #expect(twice.status == 1, "\(twice.stdoutText)\(twice.stderr)")
        #expect(twice.stdoutText.contains("400") && twice.stdoutText.contains("duplicate member name"), "\(twice.stdoutText)")
        #expect(twice.stderr.contains("the gateway refused its request before any reached a model"), "\(twice.stderr)")
        #expect(twice.stderr.contains("duplicate member name"), "\(twice.stderr)")
    }
}

/// `agent-eval fork` of runs recorded from agents on the official SDKs (from PyPI): the three
/// model APIs, streamed and whole — the parent's cassette answers up to the fork point, and a
/// replaced result reaches the model where each API carries it.
@Suite("fork of a recorded run on the official SDKs", .tags(.python), .needsPython, .ownThread)
struct RecordedSDKForkTests {
    /// Records the parent live against the server's refund scenario, keeping its cassette.
    static func recordParent(_ command: [String], server: LocalModelServer, keys: [String: String], in directory: TemporaryDirectory)
        async throws -> (log: String, cassette: String)
    {
        let parent = directory.path("parent.jsonl.gz")
        let cassette = directory.path("cassette")
        let recorded = try await agentEval(
            ["record", "--no-catalog", "--log", parent, "--cassette", cassette, "--record", "all"]
                + RecordCommandTests.upstreams(server, "refund") + command, environment: keys)
        try #require(recorded.status == 0, "\(recorded.stderr)")
        return (parent, cassette)
    }

    @Test(
        "no edit: the parent again from its cassette; a replaced result: what the model is shown and what the log records",
        arguments: [("chat", true), ("responses", false), ("responses", true), ("anthropic", false), ("anthropic", true)])
    func forksEachAPI(api: String, stream: Bool) async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            let python = try await RecordCommandTests.python()
            let command =
                ["--", python, RecordCommandTests.agent, "--api", api] + (stream ? ["--stream"] : []) + ["Order A-1042 arrived broken."]
            let keys = ["OPENAI_API_KEY": RecordCommandTests.key, "ANTHROPIC_API_KEY": RecordCommandTests.key]
            let (parent, cassette) = try await Self.recordParent(command, server: server, keys: keys, in: directory)
            if api == "chat" && stream {
                // A folder that holds no cassette is refused before the command runs again.
                try FileManager.default.createDirectory(atPath: directory.path("empty"), withIntermediateDirectories: true)
                let refused = try await agentEval(
                    ["fork", parent, "--at", "0", "--parent-cassette", directory.path("empty"), "--log", directory.path("no.jsonl.gz")]
                        + command)
                #expect(refused.status == 2, "\(refused.stderr)")
                #expect(refused.stderr.contains("holds no cassette (no index.json)"), "\(refused.stderr)")
                #expect(!FileManager.default.fileExists(atPath: directory.path("no.jsonl.gz")))
            }

            let same = try await agentEval(
                [
                    "fork", parent, "--at", "0", "--parent-cassette", cassette, "--cassette", cassette, "--log",
                    directory.path("same.jsonl.gz"),
                    "--no-catalog", "--json",
                ] + command, environment: keys)
            #expect(same.status == 0, "\(same.stderr)")
            #expect(try JSONParser.parse(same.stdout)["same_trajectory"] == true)

            let lookup = try #require(
                RecordCommandTests.events(parent).compactMap { event -> String? in
                    if case .toolIntended(let intent) = event.payload, intent.tool == "lookup_order" { return intent.callId }
                    return nil
                }.first)
            let log = directory.path("edited.jsonl.gz")
            let edited = try await agentEval(
                [
                    "fork", parent, "--result", #"\#(lookup)={"order_id": "A-1042", "status": "lost"}"#, "--parent-cassette", cassette,
                    "--log", log, "--no-catalog", "--json",
                ] + RecordCommandTests.upstreams(server, "refund") + command,
                environment: keys)
            #expect(edited.status == 1, "\(edited.stderr)")
            #expect(!edited.stderr.contains("never shown"), "\(edited.stderr)")
            let report = try JSONParser.parse(edited.stdout)
            #expect(report["diff"]?["first_divergence"]?["path"] == .string("\(lookup) lookup_order output"))
            let state = try RecordCommandTests.state(log)
            #expect(state.call(id: lookup)?.results.last?.output == ["order_id": "A-1042", "status": "lost"])
            #expect(state.anomalies.isEmpty, "\(state.anomalies.map(\.message))")
            // The requests past the fork point carried the edit in the API's own place.
            let sent = try server.requests().compactMap { $0["body"] as? [String: Any] }.suffix(2)
            #expect(sent.count == 2)
            for body in sent {
                let text = String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self)
                #expect(text.contains("lost"), "\(text)")
            }
            #expect(try LogVerifier.verify(path: log).isIntact)
        }
    }

    @Test("two conversations at once: a fork at any step is made, whichever conversation reaches the fork point first")
    func forksParallelConversations() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            let python = try await RecordCommandTests.python()
            let command = [
                "--", python, RecordCommandTests.agent, "--api", "chat", "--stream", "--parallel", "Order A-1042 arrived broken.",
            ]
            let keys = ["OPENAI_API_KEY": RecordCommandTests.key]
            let (parent, cassette) = try await Self.recordParent(command, server: server, keys: keys, in: directory)
            // A request of the conversation ahead waits for the fork point; the order of the two
            // conversations' steps after it is the program's timing, which the diff may show. Which
            // steps hold a conversation's answer is the timing too (an answer cannot be forked
            // without an edit): every step of the first four where the model called tools.
            let callingSteps = try RecordCommandTests.state(parent).decisions.filter { decision in
                if case .valid(.toolCalls) = decision.outcome { return decision.step < 4 }
                return false
            }.map(\.step)
            #expect(callingSteps.count >= 3, "\(callingSteps)")
            for step in callingSteps {
                let log = directory.path("fork-\(step).jsonl.gz")
                let fork = try await agentEval(
                    [
                        "fork", parent, "--at", "\(step)", "--parent-cassette", cassette, "--cassette", cassette, "--log", log,
                        "--no-catalog",
                    ]
                        + command, environment: keys)
                #expect(fork.status == 0 || fork.status == 1, "step \(step): \(fork.stderr)")
                #expect(try LogVerifier.verify(path: log).isIntact, "step \(step)")
                #expect(try RecordCommandTests.state(log).stop?.reason == .success, "step \(step)")
            }
        }
    }
}
