import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// `agent-eval fork` of a run `agent-eval record` recorded: the example order agent (a plain
/// Python loop on Chat Completions, standard library only) run again through the gateway, its
/// parent's cassette answering up to the fork point, the local model server after it.
@Suite("fork of a recorded run: the command again, the parent's cassette up to the fork point", .ownThread)
struct RecordedForkTests {
    static let agent = repositoryRoot.appendingPathComponent("Sources/agent-eval/Templates/init-external-python/agents/order_agent.py").path
    static let request = "Order A-1001: where is it?"

    /// Records the parent live against the server's refund scenario (look up, refund, answer),
    /// keeping its cassette; returns the log.
    static func recordParent(_ server: LocalModelServer, in directory: TemporaryDirectory) async throws -> String {
        let log = directory.path("parent.jsonl.gz")
        let recorded = try await agentEval(
            [
                "record", "--no-catalog", "--log", log, "--cassette", directory.path("cassette"), "--record", "all", "--upstream",
                "openai=\(server.baseURL("refund"))", "--", "python3", agent, request,
            ], environment: ["OPENAI_API_KEY": "sk-test"])
        try #require(recorded.status == 0, "\(recorded.stderr)")
        return log
    }

    static func recorded(_ path: String) throws -> [RecordedEvent] {
        var options = LogReader.Options(hashesLines: true)
        options.isStrict = true
        return try LogReader(path: path, options: options).readAll().events
    }

    @Test("no edit: at each step the fork's trajectory is the parent's; its log copies the parent's prefix and verifies")
    func noEditIsTheParent() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            let parent = try await Self.recordParent(server, in: directory)
            let parentEvents = try Self.recorded(parent)
            for step in [0, 1] {
                let log = directory.path("fork-\(step).jsonl.gz")
                // After the fork point the parent's cassette answers too: the same answers, offline.
                let fork = try await agentEval([
                    "fork", parent, "--at", "\(step)", "--parent-cassette", directory.path("cassette"), "--cassette",
                    directory.path("cassette"), "--log", log, "--no-catalog", "--json", "--", "python3", Self.agent, Self.request,
                ])
                #expect(fork.status == 0, "step \(step): \(fork.stderr)")
                let report = try JSONParser.parse(fork.stdout)
                #expect(report["same_trajectory"] == true)
                #expect(report["forked"]?["step"] == .int(step))
                #expect(report["forked"]?["agent"]?["name"] == "order_agent")
                let events = try Self.recorded(log)
                let head = try #require(report["forked"]?["parent_head"]?.stringValue)
                let copied = try #require(parentEvents.firstIndex { $0.hash == head }) + 1
                #expect(report["copied_events"] == .int(copied))
                for (copy, original) in zip(events.prefix(copied), parentEvents.prefix(copied)) {
                    #expect(copy.event.kind == original.event.kind && copy.event.step == original.event.step)
                    #expect(copy.event.timeUs == original.event.timeUs)
                    // Each step's digest is of the fork's own state, which holds its run id.
                    if original.event.kind != "step_ended" { #expect(copy.event.payload == original.event.payload) }
                }
                #expect(events[copied].event.kind == "run_forked")
                // Its times go on from the parent's: the fork took as long as it worked.
                #expect(zip(events, events.dropFirst()).allSatisfy { $0.event.timeUs <= $1.event.timeUs })
                #expect(try LogVerifier.verify(path: log).isIntact)
                #expect(try await Subprocess.run(gzipPath, ["-t", log]).status == 0)
                #expect(!FileManager.default.fileExists(atPath: log + ".fork-prefix"), "the prefix recorded apart is removed")
            }
            // The model's last reply ended the run: with no edit, nothing to continue.
            let last = try await agentEval([
                "fork", parent, "--at", "2", "--parent-cassette", directory.path("cassette"), "--log", directory.path("fork-2.jsonl.gz"),
                "--no-catalog", "--", "python3", Self.agent, Self.request,
            ])
            #expect(last.status == 2)
            #expect(last.stderr.contains("nothing to continue"), "\(last.stderr)")
        }
    }

    @Test("a replaced result is what every later request shows the model, under the model --model names; the diff shows it")
    func resultEditReachesTheModel() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            let parent = try await Self.recordParent(server, in: directory)
            let call = try #require(
                Self.recorded(parent).compactMap { recorded -> String? in
                    if case .toolIntended(let intent) = recorded.event.payload { return intent.callId }
                    return nil
                }.first)
            let before = try server.requests().count
            let log = directory.path("fork.jsonl.gz")
            let fork = try await agentEval(
                [
                    "fork", parent, "--result", #"\#(call)={"order_id": "A-1042", "status": "lost"}"#, "--parent-cassette",
                    directory.path("cassette"), "--upstream", "openai=\(server.baseURL("refund"))", "--model", "gpt-5", "--log", log,
                    "--no-catalog", "--json", "--", "python3", Self.agent, Self.request,
                ], environment: ["OPENAI_API_KEY": "sk-test"])
            #expect(fork.status == 1, "\(fork.stderr)")
            #expect(!fork.stderr.contains("never shown"), "\(fork.stderr)")
            let report = try JSONParser.parse(fork.stdout)
            // The fork point is the call's step: the model's next reply is asked of it, shown the edit.
            #expect(report["forked"]?["step"] == 0)
            // The parent's lookup failed ({"error": "no such order"}); the model was shown a result.
            #expect(report["diff"]?["first_divergence"]?["path"] == .string("\(call) lookup_order results"))
            #expect(report["stop"]?["reason"] == "success")
            // `diff` of the two logs sees it too: a recorded run's results come a step after their call.
            let diff = try await agentEval(["diff", parent, log])
            #expect(diff.status == 1 && diff.stdoutText.contains("\(call) lookup_order results"), "\(diff.stdoutText)")

            // Only the requests past the fork point reached the server, each with the edit and the model.
            let sent = try server.requests().dropFirst(before)
            #expect(sent.count == 2)
            for request in sent {
                let body = try #require(request["body"] as? [String: Any])
                #expect(body["model"] as? String == "gpt-5")
                let messages = try #require(body["messages"] as? [[String: Any]])
                let toolMessage = try #require(messages.first { $0["tool_call_id"] as? String == call })
                #expect(toolMessage["content"] as? String == #"{"order_id":"A-1042","status":"lost"}"#)
            }

            // The result the program sent back was recorded as the model was shown it; the log is whole.
            var events: [Event] = []
            _ = try LogReader(path: log).forEachEvent { events.append($0.event) }
            let state = RunState(folding: events)
            #expect(state.call(id: call)?.results.last?.output == ["order_id": "A-1042", "status": "lost"])
            #expect(state.anomalies.isEmpty, "\(state.anomalies)")
            let replay = try await agentEval(["replay", log, "--plain"])
            #expect(replay.status == 0, "\(replay.stderr)")
            #expect(replay.stdoutText.contains("edit    result of \(call) replaced by"))
            #expect(replay.stdoutText.contains("all match the rebuilt state"))
        }
    }

    @Test("a command that does not retrace its parent: exit 2 naming the difference, nothing written; bad requests refused")
    func refusals() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            let parent = try await Self.recordParent(server, in: directory)
            let log = directory.path("fork.jsonl.gz")
            let other = try await agentEval([
                "fork", parent, "--at", "1", "--parent-cassette", directory.path("cassette"), "--cassette", directory.path("cassette"),
                "--log", log, "--no-catalog", "--", "python3", Self.agent, "Order A-1002: where is it?",
            ])
            #expect(other.status == 2)
            #expect(other.stderr.contains("did not retrace its parent: its model request of step 0 is not the parent's"), "\(other.stderr)")
            #expect(other.stderr.contains("\"Order A-1002: where is it?\""))
            #expect(!FileManager.default.fileExists(atPath: log) && !FileManager.default.fileExists(atPath: log + ".fork-prefix"))

            let runs = directory.path("runs")
            let decision = try await agentEval([
                "fork", parent, "--decision", #"2={"answer": "no"}"#, "--parent-cassette", directory.path("cassette"), "--out", runs, "--",
                "python3", Self.agent, Self.request,
            ])
            #expect(decision.status == 64)
            #expect(decision.stderr.contains("--decision cannot be applied to a run recorded by agent-eval record"))
            let noCassette = try await agentEval(["fork", parent, "--at", "0", "--out", runs, "--", "python3", Self.agent, Self.request])
            #expect(noCassette.status == 64)
            #expect(noCassette.stderr.contains("--parent-cassette DIR"))
            let withAgent = try await agentEval(["fork", parent, "--at", "0", "--agent", ExampleRuns.agentPath("support"), "--out", runs])
            #expect(withAgent.status == 2)
            #expect(withAgent.stderr.contains("was recorded by agent-eval record"))
            #expect(!FileManager.default.fileExists(atPath: runs), "nothing written")
        }
    }

    @Test("past the fork point a cassette without the answer stops the fork as a cassette miss, in a whole log")
    func missPastTheForkPoint() async throws {
        try await TemporaryDirectory.with { directory in
            let server = try LocalModelServer()
            defer { server.stop() }
            let parent = try await Self.recordParent(server, in: directory)
            try FileManager.default.createDirectory(atPath: directory.path("empty"), withIntermediateDirectories: true)
            let log = directory.path("fork.jsonl.gz")
            let fork = try await agentEval([
                "fork", parent, "--at", "0", "--parent-cassette", directory.path("cassette"), "--cassette", directory.path("empty"),
                "--log", log, "--no-catalog", "--json", "--", "python3", Self.agent, Self.request,
            ])
            #expect(fork.status == 1, "\(fork.stderr)")
            let report = try JSONParser.parse(fork.stdout)
            #expect(report["stop"]?["reason"] == "blocked")
            #expect(report["stop"]?["error"]?.stringValue?.hasPrefix("cassette miss at step 1") == true, "\(report["stop"] ?? .null)")
            #expect(try LogVerifier.verify(path: log).isIntact)
        }
    }
}
