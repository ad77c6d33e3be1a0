import Foundation
import TestSupport
import Testing

/// A CLI call whose whole output is checked in under `Fixtures/cli/<name>.txt`.
struct GoldenCall: Sendable, CustomStringConvertible {
    let name: String
    let arguments: [String]
    /// Files copied into the sandbox first (from, to), for commands that change a file.
    var copies: [(String, String)] = []

    var description: String { name }
}

@Suite("CLI output against checked-in expectations")
struct GoldenOutputTests {
    static let calls = [
        GoldenCall(name: "log-cat-support-sample", arguments: ["log", "cat", "Fixtures/samples/support-sample.jsonl.gz"]),
        GoldenCall(name: "log-cat-research-sample-torn", arguments: ["log", "cat", "Fixtures/samples/research-sample-torn.jsonl.gz"]),
        GoldenCall(
            name: "log-cat-kinds",
            arguments: ["log", "cat", "--kind", "tool_intended", "--kind", "tool_completed", "Fixtures/samples/research-sample.jsonl.gz"]),
        GoldenCall(name: "log-verify-support-sample", arguments: ["log", "verify", "Fixtures/samples/support-sample.jsonl.gz"]),
        GoldenCall(
            name: "log-verify-research-sample-torn", arguments: ["log", "verify", "Fixtures/samples/research-sample-torn.jsonl.gz"]),
        GoldenCall(
            name: "log-verify-json-research-sample", arguments: ["log", "verify", "--json", "Fixtures/samples/research-sample.jsonl.gz"]),
        GoldenCall(name: "log-verify-missing", arguments: ["log", "verify", "Fixtures/samples/no-such-run.jsonl.gz"]),
        GoldenCall(name: "run-evalcases", arguments: ["run", "EvalCases/", "--out", "runs", "--jobs", "2"]),
        GoldenCall(name: "run-failing", arguments: ["run", "Fixtures/eval/failing", "--out", "runs"]),
        GoldenCall(name: "run-json-failing", arguments: ["run", "Fixtures/eval/failing", "--out", "runs", "--json"]),
        GoldenCall(name: "replay-support-refund", arguments: ["replay", "--plain", "Fixtures/runs/support-refund.jsonl.gz"]),
        GoldenCall(name: "replay-json-research-budget", arguments: ["replay", "--json", "Fixtures/runs/research-budget.jsonl.gz"]),
        GoldenCall(name: "replay-step-json", arguments: ["replay", "Fixtures/runs/support-refund.jsonl.gz", "--step", "2", "--json"]),
        GoldenCall(name: "replay-corrupt-missing", arguments: ["replay", "Fixtures/runs/no-such-run.jsonl.gz"]),
        GoldenCall(
            name: "diff-support-research",
            arguments: ["diff", "Fixtures/runs/support-refund.jsonl.gz", "Fixtures/runs/research-budget.jsonl.gz"]),
        GoldenCall(
            name: "diff-json-support-research",
            arguments: ["diff", "--json", "Fixtures/runs/support-refund.jsonl.gz", "Fixtures/runs/research-budget.jsonl.gz"]),
        GoldenCall(
            name: "rerun-stricter",
            arguments: ["rerun", "Fixtures/runs/support-refund.jsonl.gz", "--agent", "Fixtures/agents/support-stricter/agent.yaml"]),
        GoldenCall(
            name: "rerun-json-stricter",
            arguments: [
                "rerun", "--json", "Fixtures/runs/support-refund.jsonl.gz", "--agent", "Fixtures/agents/support-stricter/agent.yaml",
            ]),
        GoldenCall(
            name: "exec-support",
            arguments: [
                "exec", "--agent", "Fixtures/agents/support/agent.yaml", "--input", "Order A-1042 arrived broken.", "--log",
                "runs/support.jsonl.gz", "--run-id", "run-golden",
            ]),
        GoldenCall(
            name: "exec-json-research",
            arguments: [
                "exec", "--agent", "Fixtures/agents/research/agent.yaml", "--input", "zstd?", "--log", "runs/research.jsonl.gz", "--run-id",
                "run-golden", "--json",
            ]),
        GoldenCall(name: "exec-bad-agent", arguments: ["exec", "--agent", "Fixtures/agents/none.yaml", "--input", "x"]),
        GoldenCall(
            name: "log-repair-json-torn", arguments: ["log", "repair", "--json", "torn.jsonl.gz"],
            copies: [("Fixtures/samples/research-sample-torn.jsonl.gz", "torn.jsonl.gz")]),
    ]

    static var packageDirectory: URL { FixtureLogs.directory.deletingLastPathComponent().deletingLastPathComponent() }

    @Test("the output is exactly the checked-in expectation", arguments: calls)
    func golden(call: GoldenCall) async throws {
        let rendered = try await CLISandbox.with { sandbox in
            for (from, to) in call.copies {
                try FileManager.default.copyItem(atPath: sandbox.directory.path(from), toPath: sandbox.directory.path(to))
            }
            let result = try await sandbox.run(call.arguments)
            return sandbox.normalized(
                """
                $ agent-eval \(call.arguments.joined(separator: " "))
                \(result.stdoutText)--- stderr ---
                \(result.stderr)--- exit \(result.status) ---

                """)
        }
        let expectedURL = Self.packageDirectory.appendingPathComponent("Fixtures/cli/\(call.name).txt")
        if FixtureLogs.isUpdating {
            try FileManager.default.createDirectory(
                at: expectedURL.deletingLastPathComponent(), withIntermediateDirectories: true)
            try rendered.write(to: expectedURL, atomically: true, encoding: .utf8)
        }
        let expected = try String(contentsOf: expectedURL, encoding: .utf8)
        #expect(rendered == expected, "rewrite with AGENT_EVAL_UPDATE_FIXTURES=1 if the change is intended")
    }
}
