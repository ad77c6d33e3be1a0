import Foundation
import TestSupport
import Testing

/// The exit codes every command documents, for success, damaged input and usage errors: the
/// contract CI relies on (0 passed, 1 failed / damaged / diverged, 2 could not run, 64 usage).
@Suite("Exit codes")
struct ExitCodeTests {
    struct Row: Sendable, CustomStringConvertible {
        var arguments: [String]
        var status: Int32
        var description: String { "\(arguments.joined(separator: " ")) → \(status)" }
        init(_ status: Int32, _ arguments: String...) {
            self.status = status
            self.arguments = arguments
        }
    }

    static let good = "GOOD"
    static let corrupt = "CORRUPT"
    static let notGzip = "NOTGZIP"
    /// A case file over the good log, and one over the corrupt log.
    static let goodCase = "GOODCASE"
    static let corruptCase = "CORRUPTCASE"
    /// Where `view` writes its page.
    static let page = "PAGE"
    static let agent = ExampleRuns.agentPath("support")

    static let rows: [Row] = [
        // Success.
        Row(0, "replay", good), Row(0, "replay", "--step", "1", good), Row(0, "replay", "--json", good),
        Row(0, "diff", good, good), Row(0, "log", "cat", good), Row(0, "log", "verify", good), Row(0, "log", "repair", good),
        Row(0, "replay", "--rerun", "--agent", agent, good), Row(0, "rerun", good, "--agent", agent), Row(0, "run", goodCase),
        Row(0, "view", good, "--out", page), Row(0, "diff", good, good, "--html", page),
        // Damaged or unreadable input: replay, diff, cat and re-run cannot run (2); verify and
        // repair report the damage as their verdict (1), and cannot run on a file that is not a log (2).
        Row(2, "run", corruptCase), Row(2, "rerun", corrupt, "--agent", agent), Row(2, "replay", corrupt),
        Row(2, "replay", "--step", "1", corrupt), Row(2, "replay", "--json", corrupt),
        Row(2, "diff", good, corrupt), Row(2, "diff", notGzip, good), Row(2, "log", "cat", corrupt),
        Row(1, "log", "verify", corrupt), Row(2, "log", "verify", notGzip), Row(1, "log", "repair", corrupt),
        Row(2, "log", "repair", notGzip), Row(2, "replay", "--rerun", "--agent", agent, corrupt),
        Row(2, "exec", "--agent", agent, "--resume", corrupt, "--approve", "call-3"), Row(2, "replay", "missing.jsonl.gz"),
        Row(2, "view", corrupt, "--out", page), Row(2, "view", "missing.jsonl.gz", "--out", page),
        // Usage errors.
        Row(64, "replay"), Row(64, "replay", "--bogus", good), Row(64, "diff", good), Row(64, "log", "verify"),
        Row(64, "log", "cat", "--kind", "tool_complete", good), Row(64, "exec"), Row(64, "run"),
        Row(64, "run", "EvalCases", "--repeat", "0"), Row(64, "frobnicate"), Row(64, "view"),
        Row(64, "view", good, "--step", "99", "--out", page),
    ]

    @Test("each command exits with its documented code", arguments: rows)
    func exitCode(_ row: Row) async throws {
        try await TemporaryDirectory.with { directory in
            let good = directory.path("good.jsonl.gz")
            try FileManager.default.copyItem(
                atPath: ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path, toPath: good)
            var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: good)))
            bytes[40] ^= 0x10
            try Data(bytes).write(to: URL(fileURLWithPath: directory.path("corrupt.jsonl.gz")))
            try "not a log\n".write(toFile: directory.path("notgz.jsonl.gz"), atomically: true, encoding: .utf8)
            for (name, log) in [("good-case.yaml", "good.jsonl.gz"), ("corrupt-case.yaml", "corrupt.jsonl.gz")] {
                try "caseId: \(name)\nlogs: \(log)\nexpected: {toolsNotCalled: [delete_customer]}\n".write(
                    toFile: directory.path(name), atomically: true, encoding: .utf8)
            }
            let arguments = row.arguments.map { argument in
                switch argument {
                case Self.good: good
                case Self.corrupt: directory.path("corrupt.jsonl.gz")
                case Self.notGzip: directory.path("notgz.jsonl.gz")
                case Self.goodCase: directory.path("good-case.yaml")
                case Self.corruptCase: directory.path("corrupt-case.yaml")
                case Self.page: directory.path("page.html")
                default: argument
                }
            }
            let result = try await agentEval(arguments, environment: ["AGENT_EVAL_CATALOG": directory.path("catalog.sqlite")])
            #expect(result.status == row.status, "stderr: \(result.stderr)")
            if row.status == 2 {
                // `run` explains a case that could not run in its report on standard output.
                let explanation = row.arguments.first == "run" ? result.stdoutText : result.stderr
                #expect(explanation.contains("error: "), "\(explanation)")
            }
        }
    }
}
