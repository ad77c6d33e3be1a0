import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// The example support agent against a real OpenAI-compatible and Anthropic-compatible
/// server on 127.0.0.1, through the CLI: recorded into a cassette, then replayed from it with
/// the server stopped. A planted API key reaches the server and no file.
@Suite("exec against a local model server, and from a cassette", .ownThread, .serialized)
struct ModelServerCommandTests {
    static let key = "sk-test-PLANTED-fedcba9876543210"

    @Test("exec records a provider's run, then replays it from the cassette offline", arguments: ["openai", "anthropic"])
    func recordThenReplay(provider: String) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        let agent = ExampleRuns.agentPath("support")
        let cassette = directory.path("cassette")
        let environment = [(provider == "openai" ? "OPENAI_API_KEY" : "ANTHROPIC_API_KEY"): Self.key]
        let common = [
            "exec", "--agent", agent, "--input", "Where is order A-1042?", "--model", "\(provider):local-model", "--cassette", cassette,
        ]
        let live = try await agentEval(
            common + ["--base-url", server.baseURL("agent"), "--record", "new", "--log", directory.path("live.jsonl.gz"), "--json"],
            environment: environment)
        server.stop()
        #expect(live.status == 0, "\(live.stderr)")

        // The server is gone: only the cassette can answer, and it answers the same.
        let replayed = try await agentEval(
            common + ["--base-url", "http://127.0.0.1:9/v1", "--log", directory.path("replayed.jsonl.gz"), "--json"], environment: [:])
        #expect(replayed.status == 0, "\(replayed.stderr)")

        let first = try Self.events(directory.path("live.jsonl.gz"))
        let second = try Self.events(directory.path("replayed.jsonl.gz"))
        #expect(first.map(\.kind) == second.map(\.kind))
        let decisions = first.compactMap { event -> DecisionMade? in
            if case .decisionMade(let made) = event.payload { return made }
            return nil
        }
        #expect(decisions.map(\.format) == [provider == "openai" ? "openai.chat" : "anthropic.messages", decisions.first?.format])
        #expect(decisions.last?.decision == .answer("Order A-1042 is delivered."))
        #expect(
            decisions.map(\.raw)
                == second.compactMap { event -> String? in
                    if case .decisionMade(let made) = event.payload { return made.raw }
                    return nil
                })

        // The key went to the server and nowhere else.
        for file in try FileManager.default.subpathsOfDirectory(atPath: directory.url.path) {
            let path = directory.path(file)
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), !isDirectory.boolValue else { continue }
            var bytes = Array(FileManager.default.contents(atPath: path) ?? Data())
            if let inflated = try? GzipData.decompress(bytes, path: path) { bytes = inflated }
            if path.hasSuffix(".jsonl.gz") { bytes = Array(try await Subprocess.run("/usr/bin/env", ["gzip", "-dc", path]).stdout) }
            #expect(!String(decoding: bytes, as: UTF8.self).contains(Self.key), "the key is in \(file)")
        }
        #expect(!live.stdoutText.contains(Self.key) && !live.stderr.contains(Self.key))
    }

    @Test("run gates a live case of the example agent against a local server, then again from the cassette with it stopped")
    func suiteRecordThenReplay() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        try FileManager.default.createDirectory(atPath: directory.path("cases"), withIntermediateDirectories: true)
        try """
        caseId: where-is-my-order
        agent: \(ExampleRuns.agentPath("support"))
        input: Where is order A-1042?
        expected:
          toolsCalled: [lookup_order]
          toolsNotCalled: [refund_order, delete_customer]
          arguments:
            lookup_order: {order_id: A-1042}
          stopReason: success
          answer: {contains: delivered}
        """.write(toFile: directory.path("cases/where.yaml"), atomically: true, encoding: .utf8)
        let common = ["run", directory.path("cases"), "--model", "anthropic:local-model", "--cassette", directory.path("cassette")]
        let live = try await agentEval(
            common + [
                "--base-url", server.baseURL("agent"), "--record", "new", "--jobs", "2", "--repeat", "2", "--out", directory.path("live"),
            ])
        server.stop()
        #expect(live.status == 0, "\(live.stdoutText)\n\(live.stderr)")
        #expect(live.stdoutText.contains("1 passed"), "\(live.stdoutText)")

        let replayed = try await agentEval(common + ["--base-url", "http://127.0.0.1:9/v1", "--out", directory.path("replayed")])
        #expect(replayed.status == 0, "\(replayed.stdoutText)\n\(replayed.stderr)")
        #expect(replayed.stdoutText.contains("1 passed"), "\(replayed.stdoutText)")
    }

    @Test(
        "the research example against the local server: exec records it, replay rebuilds it, run gates it from the cassette offline",
        arguments: ["openai", "anthropic"])
    func researchAgent(provider: String) async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        let agent = ExampleRuns.agentPath("research")
        let cassette = directory.path("cassette")
        let log = directory.path("research.jsonl.gz")
        let live = try await agentEval([
            "exec", "--agent", agent, "--input", "Is zstd faster than gzip?", "--model", "\(provider):local-model", "--base-url",
            server.baseURL("research"), "--cassette", cassette, "--record", "new", "--log", log, "--json", "--no-catalog",
        ])
        server.stop()
        #expect(live.status == 0, "\(live.stdoutText)\n\(live.stderr)")
        let summary = try JSONParser.parse(live.stdout)
        #expect(summary["stop_reason"] == "success")
        #expect(summary["answer"]?.stringValue?.contains("https://example.org/zstd-vs-gzip") == true)
        // The search backend's first attempt fails (the fixture) and is retried: both recorded.
        let results = try Self.events(log).compactMap { event -> ToolCompleted? in
            if case .toolCompleted(let result) = event.payload { return result }
            return nil
        }
        #expect(results.map(\.status) == [.error, .ok, .ok], "\(results)")

        // replay rebuilds the run from its log alone, digests checked.
        let replay = try await agentEval(["replay", log, "--json"])
        #expect(replay.status == 0, "\(replay.stderr)")

        // A case over the same agent and input, run with the server gone: the cassette answers.
        try """
        caseId: research-zstd
        agent: \(agent)
        input: Is zstd faster than gzip?
        expected:
          toolsCalled: [web_search, fetch_page]
          sequence: {mode: in_order, calls: [web_search, fetch_page]}
          stopReason: success
          answer: {contains: example.org/zstd-vs-gzip}
        """.write(toFile: directory.path("research.yaml"), atomically: true, encoding: .utf8)
        let gated = try await agentEval([
            "run", directory.path("research.yaml"), "--model", "\(provider):local-model", "--base-url", "http://127.0.0.1:9/v1",
            "--cassette",
            cassette, "--out", directory.path("replayed"), "--no-catalog",
        ])
        #expect(gated.status == 0, "\(gated.stdoutText)\n\(gated.stderr)")
        #expect(gated.stdoutText.contains("1 passed"), "\(gated.stdoutText)")
    }

    @Test("a case file names its cassette: run records into it with --record, then replays from it with the server stopped")
    func caseFileCassette() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        try FileManager.default.createDirectory(atPath: directory.path("suite/cases"), withIntermediateDirectories: true)
        // Two cases, two cassettes, each named relative to its case file.
        for (id, order) in [("a-1042", "A-1042"), ("a-2000", "A-2000")] {
            try """
            caseId: \(id)
            agent: \(ExampleRuns.agentPath("support"))
            input: Where is order \(order)?
            cassette: ../cassettes/\(id)
            expected:
              toolsCalled: [lookup_order]
            """.write(toFile: directory.path("suite/cases/\(id).yaml"), atomically: true, encoding: .utf8)
        }
        let common = ["run", directory.path("suite/cases"), "--model", "openai:local-model", "--no-catalog"]
        let live = try await agentEval(
            common + ["--base-url", server.baseURL("agent"), "--record", "new", "--out", directory.path("live")])
        server.stop()
        #expect(live.status == 0, "\(live.stdoutText)\n\(live.stderr)")
        for id in ["a-1042", "a-2000"] {
            #expect(FileManager.default.fileExists(atPath: directory.path("suite/cassettes/\(id)/index.json")), "\(id)")
        }
        let replayed = try await agentEval(common + ["--base-url", "http://127.0.0.1:9/v1", "--out", directory.path("replayed")])
        #expect(replayed.status == 0, "\(replayed.stdoutText)\n\(replayed.stderr)")
        #expect(replayed.stdoutText.contains("2 passed"), "\(replayed.stdoutText)")

        // Each cassette holds its own case's interactions: swapped, neither case finds its requests.
        let cassettes = directory.path("suite/cassettes")
        try FileManager.default.moveItem(atPath: cassettes + "/a-1042", toPath: cassettes + "/swap")
        try FileManager.default.moveItem(atPath: cassettes + "/a-2000", toPath: cassettes + "/a-1042")
        try FileManager.default.moveItem(atPath: cassettes + "/swap", toPath: cassettes + "/a-2000")
        let swapped = try await agentEval(common + ["--base-url", "http://127.0.0.1:9/v1", "--out", directory.path("swapped")])
        // A miss says nothing of the agent: could not run, with the way to record again.
        #expect(swapped.status == 2 && swapped.stdoutText.contains("2 could not run"), "\(swapped.stdoutText)")
        #expect(swapped.stdoutText.contains("--record new"), "\(swapped.stdoutText)")
        var logs: [String] = []
        let walker = FileManager.default.enumerator(atPath: directory.path("swapped"))
        while let name = walker?.nextObject() as? String {
            if name.hasSuffix(".jsonl.gz") { logs.append(directory.path("swapped/\(name)")) }
        }
        let errors = try logs.flatMap { try Self.events($0) }.compactMap { event -> String? in
            if case .runStopped(let stop) = event.payload { return stop.error }
            return nil
        }
        #expect(errors.count == 2 && errors.allSatisfy { $0.contains("no recording") }, "\(errors)")

        // --record with neither --cassette nor a case that names one records nothing: an error.
        try """
        caseId: plain
        agent: \(ExampleRuns.agentPath("support"))
        input: Where is order A-1042?
        expected: {toolsCalled: [lookup_order]}
        """.write(toFile: directory.path("plain.yaml"), atomically: true, encoding: .utf8)
        let noCassette = try await agentEval(["run", directory.path("plain.yaml"), "--record", "new", "--no-catalog"])
        #expect(noCassette.status == 64 && noCassette.stderr.contains("--record needs --cassette DIR, or cases that name a cassette"))
    }

    @Test("a request the cassette never saw is an error naming the nearest recording and the field")
    func strictReplayMiss() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        let agent = ExampleRuns.agentPath("support")
        let cassette = directory.path("cassette")
        let record = try await agentEval([
            "exec", "--agent", agent, "--input", "Where is order A-1042?", "--model", "openai:local-model", "--cassette", cassette,
            "--record", "new", "--base-url", server.baseURL("agent"), "--out", directory.path("runs"),
        ])
        server.stop()
        #expect(record.status == 0, "\(record.stderr)")
        let miss = try await agentEval([
            "exec", "--agent", agent, "--input", "Where is order A-2000?", "--model", "openai:local-model", "--cassette", cassette,
            "--out", directory.path("runs"),
        ])
        #expect(miss.status == 1, "the run stops blocked: \(miss.stderr)")
        let log = try FileManager.default.contentsOfDirectory(atPath: directory.path("runs")).filter { $0.hasSuffix(".jsonl.gz") }
            .map { directory.path("runs/\($0)") }
        let stops = try log.flatMap { try Self.events($0) }.compactMap { event -> RunStopped? in
            if case .runStopped(let stop) = event.payload { return stop }
            return nil
        }
        let error = stops.compactMap(\.error).first { $0.contains("no recording") } ?? ""
        #expect(error.contains("differs at messages[1].content"), "\(error)")
        #expect(error.contains("A-2000") && error.contains("A-1042"), "\(error)")
    }

    @Test("a missing key, a bad --model and a missing cassette are clear errors before anything runs")
    func badSetUp() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let agent = ExampleRuns.agentPath("support")
        let badModel = try await agentEval(["exec", "--agent", agent, "--input", "x", "--model", "gpt-4o", "--out", directory.path("runs")])
        #expect(badModel.status == 2)
        #expect(badModel.stderr.contains("--model \"gpt-4o\" is not provider:name"), "\(badModel.stderr)")
        let noCassette = try await agentEval([
            "exec", "--agent", agent, "--input", "x", "--model", "openai:m", "--cassette", directory.path("nothing"),
        ])
        #expect(noCassette.status == 2)
        #expect(noCassette.stderr.contains("does not exist"), "\(noCassette.stderr)")
        let record = try await agentEval(["exec", "--agent", agent, "--input", "x", "--record", "new"])
        #expect(record.status == 64)
    }

    @Test("Ctrl-C while the model is answering: the run stops interrupted, its log whole, exit 130")
    func interruptedWhileStreaming() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let log = directory.path("hang.jsonl.gz")
        let (status, errors) = try await interruptAgentEval(
            [
                "exec", "--agent", ExampleRuns.agentPath("support"), "--input", "x", "--model", "openai:local-model", "--base-url",
                server.baseURL("hang"), "--log", log,
            ], in: directory, what: "the model request"
        ) { try !server.requests().isEmpty }
        #expect(status == 130, "\(errors)")
        #expect(try LogVerifier.verify(path: log).ending == .complete)
        let stop = try Self.events(log).compactMap { event -> RunStopped? in
            if case .runStopped(let stop) = event.payload { return stop }
            return nil
        }
        #expect(stop.map(\.reason) == [.blocked])
        #expect(stop.first?.error?.hasPrefix("interrupted") == true, "\(stop.first?.error ?? "")")
        // The stop names step 1, which was cut short before its decision: the summary says so
        // instead of a bare "steps: 0" under "at step 1".
        #expect(stop.first?.error?.contains("at step 1") == true, "\(stop.first?.error ?? "")")
        let summary = try String(contentsOfFile: directory.path("stdout.txt"), encoding: .utf8)
        #expect(summary.contains("steps: 0 (step 1 was cut short before its decision), tool calls: 0"), "\(summary)")
    }

    @Test("exec --stream prints each event and the model's text as they come; with --json, one JSON object a line")
    func stream() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let common = [
            "exec", "--agent", ExampleRuns.agentPath("support"), "--input", "Where is order A-1042?", "--model", "anthropic:local-model",
            "--base-url", server.baseURL("agent"), "--stream",
        ]
        let text = try await agentEval(common + ["--log", directory.path("text.jsonl.gz")])
        #expect(text.status == 0, "\(text.stderr)")
        let lines = text.stdoutText.split(separator: "\n").map(String.init)
        #expect(lines.first?.contains("run_started") == true)
        #expect(lines.contains("model     Looking it up."), "\(text.stdoutText)")
        #expect(lines.contains("model     Order A-1042 is delivered."))
        #expect(lines.filter { $0.hasPrefix("#") }.count == (try Self.events(directory.path("text.jsonl.gz"))).count)
        #expect(lines.contains("stopped: success"))

        let json = try await agentEval(common + ["--json", "--log", directory.path("json.jsonl.gz")])
        #expect(json.status == 0, "\(json.stderr)")
        let objects = try json.stdoutText.split(separator: "\n").map { line in
            try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        }
        let streamed = objects.compactMap { $0["event"] as? [String: Any] }
        #expect(streamed.map { $0["seq"] as? Int } == (try Self.events(directory.path("json.jsonl.gz"))).map(\.sequence))
        #expect(objects.compactMap { $0["text"] as? String }.joined() == "Looking it up.Order A-1042 is delivered.")
        #expect(objects.last?["stop_reason"] as? String == "success", "the summary comes last: \(objects.last ?? [:])")
    }

    static func events(_ path: String) throws -> [Event] {
        var events: [Event] = []
        _ = try LogReader(path: path).forEachEvent { events.append($0.event) }
        return events
    }
}
