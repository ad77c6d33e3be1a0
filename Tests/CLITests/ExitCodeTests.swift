import Foundation
import TestSupport
import Testing
import TraceCore

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
        Row(0, "view", good, "--output", page), Row(0, "view", good, "-o", page), Row(0, "view", good, "--out", page),
        Row(0, "diff", good, good, "--html", page),
        // Damaged or unreadable input: replay, diff, cat and re-run cannot run (2); verify and
        // repair report the damage as their verdict (1), and cannot run on a file that is not a log (2).
        Row(2, "run", corruptCase), Row(2, "rerun", corrupt, "--agent", agent), Row(2, "replay", corrupt),
        Row(2, "replay", "--step", "1", corrupt), Row(2, "replay", "--json", corrupt),
        Row(2, "diff", good, corrupt), Row(2, "diff", notGzip, good), Row(2, "log", "cat", corrupt),
        Row(1, "log", "verify", corrupt), Row(2, "log", "verify", notGzip), Row(1, "log", "repair", corrupt),
        Row(2, "log", "repair", notGzip), Row(2, "replay", "--rerun", "--agent", agent, corrupt),
        Row(2, "exec", "--agent", agent, "--resume", corrupt, "--approve", "call-3"), Row(2, "replay", "missing.jsonl.gz"),
        Row(2, "view", corrupt, "--output", page), Row(2, "view", "missing.jsonl.gz", "--output", page),
        // Usage errors.
        Row(64, "replay"), Row(64, "replay", "--bogus", good), Row(64, "diff", good), Row(64, "log", "verify"),
        Row(64, "log", "cat", "--kind", "tool_complete", good), Row(64, "exec"), Row(64, "run"),
        Row(64, "run", "EvalCases", "--repeat", "0"), Row(64, "frobnicate"), Row(64, "view"),
        Row(64, "view", good, "--step", "99", "--output", page),
    ]

    /// With `--json`, standard output holds one JSON document whatever happens: the command's
    /// own (a report, damage included), or, when it fails before it has one, the error document.
    static let jsonRows: [Row] = [
        // The error document: nothing else to print.
        Row(2, "log", "verify", "missing.jsonl.gz", "--json"), Row(2, "log", "verify", notGzip, "--json"),
        Row(2, "diff", good, notGzip, "--json"), Row(64, "log", "verify", "--json"), Row(64, "frobnicate", "--json"),
        Row(64, "run", "EvalCases", "--repeat", "0", "--json"), Row(64, "replay", "--json", "--bogus", good),
        Row(2, "approve", "missing.jsonl.gz", "--json"), Row(2, "deny", "missing.jsonl.gz", "mcp-1", "--json"),
        Row(2, "log", "cat", "missing.jsonl.gz", "--jsonl"),
        // Their own document, passed or failed.
        Row(0, "log", "verify", good, "--json"), Row(1, "log", "verify", corrupt, "--json"), Row(2, "replay", "--json", corrupt),
        Row(2, "run", corruptCase, "--json"),
    ]

    @Test(
        "with --json, standard output holds one document: the command's own, or the error document when it fails before it has one",
        arguments: jsonRows)
    func jsonOnFailure(_ row: Row) async throws {
        try await withLogs { directory, arguments in
            let result = try await agentEval(arguments(row), environment: ["AGENT_EVAL_CATALOG": directory.path("catalog.sqlite")])
            #expect(result.status == row.status, "stderr: \(result.stderr)")
            let lines = result.stdoutText.split(separator: "\n")
            #expect(lines.count == 1, "stdout: \(result.stdoutText)")
            let document = try JSONParser.parse(Array((lines.first ?? "").utf8))
            let isErrorDocument = document["schema"]?.stringValue == "agent-eval/error"
            // replay and run print their report even when they cannot run; log verify reports damage.
            let hasOwnDocument = ["replay", "run"].contains(row.arguments[0]) || (row.arguments[0] == "log" && row.status < 2)
            let expectsErrorDocument = row.status == 64 || !hasOwnDocument
            #expect(isErrorDocument == expectsErrorDocument, "stdout: \(result.stdoutText)")
            if isErrorDocument {
                #expect(document["exit_code"]?.intValue == Int(row.status))
                #expect(document["version"]?.intValue == 1)
                let message = document["error"]?["message"]?.stringValue ?? ""
                // `error` is the first of `errors`: every error the command reported, in order.
                #expect(document["errors"]?.arrayValue?.first == document["error"], "stdout: \(result.stdoutText)")
                #expect(!message.isEmpty && (document["error"]?["code"]?.stringValue ?? "").contains("."))
                // The same error as standard error's text (the parser words usage errors itself).
                #expect(result.stderr.contains(row.status == 64 ? "rror" : message), "stderr: \(result.stderr)")
            }
        }
    }

    @Test("a file that cannot be written is said in the system's words, not Foundation's sentence or types")
    func fileErrorsInWords() async throws {
        let log = fixture("support-sample.jsonl.gz")
        for command in [
            ["case", "from-log", log, "--out", "/proc/agent-eval-nope.yaml"], ["export", "otlp", log, "--out", "/proc/agent-eval-x.json"],
        ] {
            let result = try await agentEval(command)
            #expect(result.status == 2, "\(command): \(result.stderr)")
            #expect(result.stderr.contains("cannot write /proc/agent-eval-"), "\(result.stderr)")
            #expect(!result.stderr.contains("The operation could not be completed") && !result.stderr.contains("NSCocoaErrorDomain"))
        }
    }

    @Test("run --json over bad case files: the error document lists every problem in order, the first as its error")
    func jsonListsEveryError() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory.path("bad"), withIntermediateDirectories: true)
            try "caseId: a\nlogs: [\n".write(toFile: directory.path("bad/a.yaml"), atomically: true, encoding: .utf8)
            try "caseId: b\nlogs: b.jsonl.gz\nexpected: {toolsCalled: 3}\n".write(
                toFile: directory.path("bad/b.yaml"), atomically: true, encoding: .utf8)
            let result = try await agentEval(
                ["run", directory.path("bad"), "--json"], environment: ["AGENT_EVAL_CATALOG": directory.path("catalog.sqlite")])
            #expect(result.status == 2, "stderr: \(result.stderr)")
            let document = try JSONParser.parse(result.stdout)
            let places = (document["errors"]?.arrayValue ?? []).map { error in
                "\(error["location"]?["path"]?.stringValue ?? ""):\(error["location"]?["line"]?.intValue ?? 0)"
            }
            #expect(places == [directory.path("bad/a.yaml") + ":3", directory.path("bad/b.yaml") + ":3"], "\(result.stdoutText)")
            #expect(document["error"] == document["errors"]?.arrayValue?.first)
        }
    }

    @Test("--json after `--` belongs to the recorded command: a record that cannot start it prints no document")
    func jsonAfterDoubleDash() async throws {
        try await TemporaryDirectory.with { directory in
            // (`--json out.json` would be a usage error of agent-eval's own: here it is the program's.)
            let arguments = ["record", "--out", directory.path("runs"), "--", directory.path("no-such-program"), "--json", "out.json"]
            let result = try await agentEval(arguments, environment: ["AGENT_EVAL_CATALOG": directory.path("catalog.sqlite")])
            #expect(result.status == 2, "stderr: \(result.stderr)")
            #expect(result.stdout.isEmpty, "stdout: \(result.stdoutText)")
            // The reason once, not repeated after the command line.
            #expect(
                result.stderr.contains("error: cannot start \(directory.path("no-such-program")): No such file or directory\n"),
                "\(result.stderr)")
            // Given to record itself, it prints the error document.
            let asked = try await agentEval(
                ["record", "--out", directory.path("runs"), "--json", "--", directory.path("no-such-program")],
                environment: ["AGENT_EVAL_CATALOG": directory.path("catalog.sqlite")])
            let document = try JSONParser.parse(asked.stdout)
            #expect(asked.status == 2 && document["error"]?["code"]?.stringValue == "record.command_failed", "\(asked.stdoutText)")
        }
    }

    /// A directory with the good, corrupt and not-gzip logs and a case file over each log, and
    /// the function that puts their paths into a row's arguments.
    private func withLogs(_ body: (TemporaryDirectory, (Row) -> [String]) async throws -> Void) async throws {
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
            try await body(directory) { row in
                row.arguments.map { argument in
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
            }
        }
    }

    @Test("each command exits with its documented code", arguments: rows)
    func exitCode(_ row: Row) async throws {
        try await withLogs { directory, arguments in
            let arguments = arguments(row)
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
