import Foundation
import TestSupport
import TestTags
import Testing

/// `expected.state`: a command prints the environment's final state after a live run, and the
/// state must equal a gold file or meet a matcher; a command that cannot show it leaves the case
/// "could not run", never green.
@Suite("state: the environment's final state after a live run", .tags(.python), .needsPython)
struct StateExpectationTests {
    /// The environment here is the refunds the run's log records: a real one would be a
    /// database the agent's tools write, kept per run.
    static let stateCommand = """
        import json, os, gzip
        refunds = []
        with gzip.open(os.environ["AGENT_EVAL_LOG"], "rt") as log:
            for line in log:
                event = json.loads(line)
                if event["kind"] == "tool_completed" and event["data"]["tool"] == "refund_order" and event["data"]["status"] == "ok":
                    refunds.append(event["data"]["output"]["refund_id"])
        print(json.dumps({"orders": {"A-1042": {"refunds": refunds}}, "run": os.environ["AGENT_EVAL_RUN_ID"] != ""}))
        """

    static func write(in directory: TemporaryDirectory, state: String, logs: Bool = false) throws {
        try Self.stateCommand.write(toFile: directory.path("state.py"), atomically: true, encoding: .utf8)
        let source =
            logs
            ? "logs: \(repositoryRoot.appendingPathComponent("Fixtures/runs/support-refund.jsonl.gz").path)\n"
            : "agent: \(repositoryRoot.appendingPathComponent("Fixtures/agents/support/agent.yaml").path)\n"
                + "input: Order A-1042 arrived broken. Refund me and close my account.\napprove: [call-3]\n"
        try "caseId: refund-state\n\(source)expected:\n  toolsCalled: [refund_order]\n  state: \(state)\n".write(
            toFile: directory.path("case.yaml"), atomically: true, encoding: .utf8)
    }

    @Test("the state as the gold file says passes; another fails with the first difference; a command that fails could not run")
    func outcomes() async throws {
        try await TemporaryDirectory.with { directory in
            try #"{"orders": {"A-1042": {"refunds": ["rf-9"]}}, "run": true}"#.write(
                toFile: directory.path("gold.json"), atomically: true, encoding: .utf8)
            try Self.write(in: directory, state: "{command: [python3, state.py], equals: gold.json}")
            let passed = try await agentEval(["run", "case.yaml", "--no-catalog", "--out", "r1"], in: directory.url)
            #expect(passed.status == 0, "\(passed.stdoutText)\(passed.stderr)")

            try Self.write(in: directory, state: "{command: [python3, state.py], match: {orders: {A-1042: {refunds: []}}}}")
            let failed = try await agentEval(["run", "case.yaml", "--no-catalog", "--out", "r2"], in: directory.url)
            #expect(failed.status == 1, "\(failed.stdoutText)\(failed.stderr)")
            #expect(failed.stdoutText.contains(#"orders.A-1042.refunds is ["rf-9"], expected []"#), "\(failed.stdoutText)")

            try Self.write(in: directory, state: "{command: [python3, -c, \"print('not json')\"], equals: gold.json}")
            let unseen = try await agentEval(["run", "case.yaml", "--no-catalog", "--out", "r3"], in: directory.url)
            #expect(unseen.status == 2, "\(unseen.stdoutText)\(unseen.stderr)")
            #expect(unseen.stdoutText.contains("printed no JSON"), "\(unseen.stdoutText)")

            try Self.write(in: directory, state: "{command: [python3, state.py], equals: gold.json}", logs: true)
            let recorded = try await agentEval(["check", "case.yaml"], in: directory.url)
            #expect(recorded.status == 2 && recorded.stderr.contains("expects state"), "\(recorded.stderr)")
        }
    }
}
