import Foundation
import TestSupport
import Testing

/// A CLI call whose whole output is checked in under `Fixtures/cli/<name>.txt`.
struct GoldenCall: Sendable, CustomStringConvertible {
    let name: String
    let arguments: [String]

    var description: String { name }
}

@Suite("CLI output against checked-in expectations")
struct GoldenOutputTests {
    static let calls = [
        GoldenCall(name: "log-cat-support-refund", arguments: ["log", "cat", "Fixtures/logs/support-refund.jsonl.gz"]),
        GoldenCall(name: "log-cat-research-torn", arguments: ["log", "cat", "Fixtures/logs/research-torn.jsonl.gz"]),
        GoldenCall(
            name: "log-cat-kinds",
            arguments: ["log", "cat", "--kind", "tool_intended", "--kind", "tool_completed", "Fixtures/logs/research-budget.jsonl.gz"]),
        GoldenCall(name: "log-verify-support-refund", arguments: ["log", "verify", "Fixtures/logs/support-refund.jsonl.gz"]),
        GoldenCall(name: "log-verify-research-torn", arguments: ["log", "verify", "Fixtures/logs/research-torn.jsonl.gz"]),
        GoldenCall(
            name: "log-verify-json-research-budget", arguments: ["log", "verify", "--json", "Fixtures/logs/research-budget.jsonl.gz"]),
        GoldenCall(name: "log-verify-missing", arguments: ["log", "verify", "Fixtures/logs/no-such-run.jsonl.gz"]),
    ]

    static var packageDirectory: URL { FixtureLogs.directory.deletingLastPathComponent().deletingLastPathComponent() }

    @Test("the output is exactly the checked-in expectation", arguments: calls)
    func golden(call: GoldenCall) throws {
        let result = try agentEval(call.arguments, in: Self.packageDirectory)
        let rendered = """
            $ agent-eval \(call.arguments.joined(separator: " "))
            \(result.stdoutText)--- stderr ---
            \(result.stderr)--- exit \(result.status) ---

            """
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
