import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore

/// `agent-eval case from-evalset` on eval sets written by Google ADK's own models (google-adk from
/// PyPI), run against the refund agent through the recording gateway and the local model server.
@Suite("case from-evalset: Google ADK eval sets as cases", .tags(.python), .needsPython, .ownThread)
struct CaseFromEvalSetTests {
    @Test(
        "ADK's eval set (snake_case and camelCase) and its older test file become cases that run: the refund passes, a wrong expectation fails"
    )
    func convertsAndRuns() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let sets = scratch.path("adk")
        let made = try await Subprocess.run(
            try await PythonEnvironment.adk.path() + "/bin/python", [PythonEnvironment.scriptPath("adk_evalsets.py"), sets])
        #expect(made.status == 0, "\(made.stderr)")
        let python = try await RecordCommandTests.python()
        let agent = [python, RecordCommandTests.agent, "--api", "chat", "{input}"]
        for (file, out) in [("shop.evalset.json", "snake"), ("shop.camel.json", "camel")] {
            let converted = try await agentEval(["case", "from-evalset", sets + "/" + file, "--out", scratch.path(out), "--"] + agent)
            #expect(converted.status == 1, "the scenario is left out without --user-model: \(converted.stderr)")
            #expect(
                converted.stderr.contains("eval case \"refund scenario\" is a conversation scenario")
                    && converted.stderr.contains("--user-model"), "\(converted.stderr)")
            let names = try FileManager.default.contentsOfDirectory(atPath: scratch.path(out)).sorted()
            #expect(names == ["greeting.yaml", "refund-damaged-order.yaml", "refund-events.yaml", "two-turns.yaml"])
        }
        // A command holds the two-turn conversation by reading the turns on its standard input.
        let commandTurns = try String(contentsOfFile: scratch.path("snake/two-turns.yaml"), encoding: .utf8)
        #expect(commandTurns.contains("# The program reads the user's turns on its standard input"), "\(commandTurns)")
        #expect(!commandTurns.contains("{input}"), "\(commandTurns)")
        #expect(commandTurns.contains("  opening: \"Where is order A-1042?\"\n"), "\(commandTurns)")
        #expect(
            try String(contentsOfFile: scratch.path("snake/refund-damaged-order.yaml"), encoding: .utf8).replacingOccurrences(
                of: "shop.evalset.json", with: "")
                == String(contentsOfFile: scratch.path("camel/refund-damaged-order.yaml"), encoding: .utf8).replacingOccurrences(
                    of: "shop.camel.json", with: ""))
        let check = try await agentEval(["check", scratch.path("snake")])
        #expect(check.status == 0, "\(check.stdoutText)\(check.stderr)")
        // The refund agent below answers one input: the conversation is not for it.
        try FileManager.default.removeItem(atPath: scratch.path("snake/two-turns.yaml"))
        try FileManager.default.removeItem(atPath: scratch.path("camel/two-turns.yaml"))

        // With an agent file, the two-turn case is a conversation case: the user says each
        // invocation's text in its turn, and each turn's tool uses are checked in that turn.
        try EvidenceMatrixTests.agentFile(baseURL: "http://127.0.0.1:9/v1").write(
            toFile: scratch.path("agent.yaml"), atomically: true, encoding: .utf8)
        let conversation = try await agentEval(
            [
                "case", "from-evalset", sets + "/shop.evalset.json", "--out", scratch.path("agents"), "--agent", scratch.path("agent.yaml"),
                "--user-model", "openai:customer-model",
            ])
        #expect(conversation.status == 0, "\(conversation.stderr)")
        // ADK's conversation_scenario: a model plays the user, the plan its task, ADK's persona who it is.
        let scenario = try String(contentsOfFile: scratch.path("agents/refund-scenario.yaml"), encoding: .utf8)
        #expect(scenario.contains("  opening: \"hi, my order arrived broken\"\n"), "\(scenario)")
        #expect(scenario.contains("    task: \"Get a refund for order A-1042."), "\(scenario)")
        #expect(scenario.contains("  model: \"openai:customer-model\"\n"), "\(scenario)")
        #expect(scenario.contains("  persona: \"A Novice is trying to solve a problem"), "\(scenario)")
        #expect(
            scenario.contains("###STOP###") && !scenario.contains("stop_signal"), "ADK's stop signal is the user's stop token: \(scenario)")
        #expect(scenario.contains("  stopReason: user_stop"), "\(scenario)")
        let twoTurns = try String(contentsOfFile: scratch.path("agents/two-turns.yaml"), encoding: .utf8)
        #expect(twoTurns.contains("  opening: \"Where is order A-1042?\"\n"), "\(twoTurns)")
        #expect(twoTurns.contains("    - {after: {turn: 2}, say: \"Then refund it.\"}\n"), "\(twoTurns)")
        #expect(twoTurns.contains("    2: {sequence: {mode: strict, calls: [{tool: \"refund_order\""), "\(twoTurns)")
        #expect(twoTurns.contains("  answer: {similarTo: \"Refunded.\", min: 0.8}"), "\(twoTurns)")
        let checkAgents = try await agentEval(["check", scratch.path("agents")])
        #expect(checkAgents.status == 0, "\(checkAgents.stdoutText)\(checkAgents.stderr)")

        let server = try LocalModelServer()
        defer { server.stop() }
        let run = try await agentEval(
            ["run", scratch.path("snake"), "--no-catalog", "--json", "--out", scratch.path("runs")],
            environment: ["OPENAI_BASE_URL": server.baseURL("refund"), "OPENAI_API_KEY": RecordCommandTests.key])
        #expect(run.status == 1, "the greeting case fails: the refund agent looks an order up for any input")
        let report = try JSONParser.parse(Array(run.stdout))
        let outcomes = Dictionary(
            uniqueKeysWithValues: (report["cases"]?.arrayValue ?? []).compactMap { entry in
                entry["case_id"]?.stringValue.map { ($0, entry["outcome"]?.stringValue ?? "") }
            })
        #expect(outcomes == ["refund-damaged-order": "pass", "refund-events": "pass", "greeting": "fail"], "\(run.stdoutText)")

        // ADK's older test file: the same refund case.
        let older = try await agentEval(["case", "from-evalset", sets + "/shop.test.json", "--out", scratch.path("older"), "--"] + agent)
        #expect(older.status == 0, "\(older.stderr)")
        let olderCase = try String(contentsOfFile: scratch.path("older/shop-1.yaml"), encoding: .utf8)
        #expect(olderCase.contains(#"- {tool: "refund_order", arguments: {"match":{"amount":25,"order_id":"A-1042"},"mode":"exact"}}"#))
        #expect(olderCase.contains(#"answer: {similarTo: "Refunded 25 EUR for order A-1042.", min: 0.8}"#))
    }

    @Test("usage: the agent is given one way; a file that is no eval set is named")
    func usage() async throws {
        let scratch = try TemporaryDirectory()
        defer { scratch.remove() }
        let none = try await agentEval(["case", "from-evalset", "x.json", "--out", scratch.path("o")])
        #expect(none.status == 64 && none.stderr.contains("give how the cases run their agent"))
        try Data(#"{"name": "not an eval set"}"#.utf8).write(to: URL(fileURLWithPath: scratch.path("other.json")))
        let other = try await agentEval([
            "case", "from-evalset", scratch.path("other.json"), "--out", scratch.path("o"), "--agent", "a.yaml",
        ])
        #expect(other.status == 2 && other.stderr.contains("is not an ADK eval set"), "\(other.stderr)")
        // Two eval ids that clean to one case id: two files, two ids; text outside ASCII escaped.
        let clash =
            #"{"eval_set_id": "s", "eval_cases": ["#
            + #"{"eval_id": "a b", "conversation": [{"user_content": {"parts": [{"text": "caf\u00e9\u2028x \"q\""}]}, "final_response": {"parts": [{"text": "ok"}]}}]},"#
            + #"{"eval_id": "a/b", "conversation": [{"user_content": {"parts": [{"text": "hi"}]}, "final_response": {"parts": [{"text": "ok"}]}}]}]}"#
        try Data(clash.utf8).write(to: URL(fileURLWithPath: scratch.path("clash.json")))
        let both = try await agentEval([
            "case", "from-evalset", scratch.path("clash.json"), "--out", scratch.path("clash"), "--agent", "a.yaml",
        ])
        #expect(both.status == 0, "\(both.stderr)")
        #expect(try FileManager.default.contentsOfDirectory(atPath: scratch.path("clash")).sorted() == ["a-b-2.yaml", "a-b.yaml"])
        #expect(try String(contentsOfFile: scratch.path("clash/a-b-2.yaml"), encoding: .utf8).contains(#"caseId: "a-b-2""#))
        let first = try String(contentsOfFile: scratch.path("clash/a-b.yaml"), encoding: .utf8)
        #expect(first.contains(#"input: "caf\u00E9\u2028x \"q\"""#), "\(first)")
        let loads = try await agentEval(["check", scratch.path("clash")])
        #expect(!loads.stderr.contains("not valid YAML"), "\(loads.stderr)")
        // Eval ids too long for a file name: each is a case, its id cut with a digest of the whole.
        let long = String(repeating: "refund-a-broken-order-", count: 14)
        let longSet =
            #"{"eval_set_id": "s", "eval_cases": ["#
            + #"{"eval_id": "\#(long)1", "conversation": [{"user_content": {"parts": [{"text": "hi"}]}, "final_response": {"parts": [{"text": "ok"}]}}]},"#
            + #"{"eval_id": "\#(long)2", "conversation": [{"user_content": {"parts": [{"text": "hi"}]}, "final_response": {"parts": [{"text": "ok"}]}}]},"#
            + #"{"eval_id": "short", "conversation": [{"user_content": {"parts": [{"text": "hi"}]}, "final_response": {"parts": [{"text": "ok"}]}}]}]}"#
        try Data(longSet.utf8).write(to: URL(fileURLWithPath: scratch.path("long.json")))
        let longOnes = try await agentEval([
            "case", "from-evalset", scratch.path("long.json"), "--out", scratch.path("long"), "--agent", "a.yaml",
        ])
        #expect(longOnes.status == 0, "\(longOnes.stderr)")
        let files = try FileManager.default.contentsOfDirectory(atPath: scratch.path("long")).sorted()
        #expect(files.count == 3 && files.contains("short.yaml"), "\(files)")
        #expect(files.allSatisfy { $0.utf8.count <= 125 }, "\(files)")
        let checked = try await agentEval(["check", scratch.path("long")])
        #expect(!checked.stderr.contains("not valid YAML") && !checked.stderr.contains("caseId"), "\(checked.stderr)")
    }
}
