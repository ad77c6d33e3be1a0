import Foundation
import TestSupport
import Testing
import TraceCore

/// What a command says of the files it is given: a folder where a file goes, a file that is not
/// there, a report that is one shard of a suite.
@Suite("Files given to commands")
struct CommandInputTests {
    static let support = ExampleRuns.fixtures.appendingPathComponent("runs/support-refund.jsonl.gz").path

    @Test("a folder given as a file to read or write is said to be a folder, by every command; a missing --file is not an empty list")
    func foldersAndMissingFiles() async throws {
        try await TemporaryDirectory.with { directory in
            let folder = directory.path("folder")
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
            let runs: [[String]] = [
                ["audit", "--policy", folder, Self.support], ["results", "merge", folder], ["results", "comment", folder],
                ["quarantine", "list", "--file", folder], ["quarantine", "add", "x", "--owner", "a", "--reason", "b", "--file", folder],
                ["export", "otlp", Self.support, "--out", folder], ["diff", Self.support, Self.support, "--html", folder],
            ]
            for arguments in runs {
                let result = try await agentEval(arguments)
                #expect(result.status == 2, "\(arguments): \(result.stderr)")
                #expect(result.stderr.contains("\(folder): it is a folder, not a file"), "\(arguments): \(result.stderr)")
                #expect(!result.stderr.contains("NSCocoaErrorDomain"), "\(arguments): \(result.stderr)")
            }
            let missing = try await agentEval(["quarantine", "list", "--file", directory.path("nope.yaml"), "--fail-on-expired"])
            #expect(missing.status == 2 && missing.stderr.contains("the quarantine file \(directory.path("nope.yaml")) does not exist"))
            // A report that is not JSON is named with its line.
            try "{\"cases\":\n".write(toFile: directory.path("bad.json"), atomically: true, encoding: .utf8)
            let bad = try await agentEval([
                "export", "otlp", Self.support, "--out", directory.path("o.json"), "--results", directory.path("bad.json"),
            ])
            #expect(bad.status == 2 && bad.stderr.contains("--> \(directory.path("bad.json")):2:1"), "\(bad.stderr)")
        }
    }

    @Test("an input that holds nothing to work on says why the command failed: an empty ATIF list, a judge label's log with no answer")
    func emptyInputsSayWhy() async throws {
        try await TemporaryDirectory.with { directory in
            try "[]".write(toFile: directory.path("empty.json"), atomically: true, encoding: .utf8)
            let imported = try await agentEval([
                "import", "atif", directory.path("empty.json"), "--out", directory.path("o"), "--no-catalog",
            ])
            #expect(imported.status == 2)
            #expect(imported.stderr.contains("error: \(directory.path("empty.json")) held no run to import"), "\(imported.stderr)")

            let torn = ExampleRuns.fixtures.appendingPathComponent("conformance/torn-tail.jsonl.gz").path
            try """
            cases: [\(repositoryRoot.appendingPathComponent("EvalCases/support").path)]
            labels:
              - {case: support-refund-answer-judged, log: \(torn), verdict: pass}
            """.write(toFile: directory.path("labels.yaml"), atomically: true, encoding: .utf8)
            let calibrated = try await agentEval(["judge", "calibrate", directory.path("labels.yaml")])
            #expect(calibrated.status == 2)
            #expect(calibrated.stderr.contains("no verdict on \(torn): answer.rubric: no answer to grade"), "\(calibrated.stderr)")
        }
    }

    @Test("a report written to a pipe or a device goes into it: the pipe stays a pipe (a rename over /dev/null replaced the device)")
    func reportIntoAPipe() async throws {
        try await TemporaryDirectory.with { directory in
            let fifo = directory.path("report.fifo")
            #expect(mkfifo(fifo, 0o600) == 0)
            // A reader that does not block, so that the command's open for writing does not either.
            let reader = open(fifo, O_RDONLY | O_NONBLOCK)
            #expect(reader >= 0)
            defer { close(reader) }
            let run = try await agentEval(
                ["run", "EvalCases/support/refund-recorded.yaml", "--no-catalog", "--json-out", fifo], in: repositoryRoot)
            #expect(run.status == 0, "\(run.stderr)")
            var buffer = [UInt8](repeating: 0, count: 60_000)
            let count = read(reader, &buffer, buffer.count)
            #expect(count > 0)
            #expect(try JSONParser.parse(Array(buffer.prefix(max(0, count))))["schema"] == "agent-eval/results")
            var info = stat()
            #expect(stat(fifo, &info) == 0 && info.st_mode & S_IFMT == S_IFIFO, "the pipe is still a pipe")
            // A link (as /dev/stdout is) stays a link: its target is written.
            let target = directory.path("target.html")
            try "old".write(toFile: target, atomically: true, encoding: .utf8)
            try FileManager.default.createSymbolicLink(atPath: directory.path("link.html"), withDestinationPath: target)
            let view = try await agentEval(
                ["view", "Fixtures/runs/support-refund.jsonl.gz", "--out", directory.path("link.html")], in: repositoryRoot)
            #expect(view.status == 0, "\(view.stderr)")
            #expect(lstat(directory.path("link.html"), &info) == 0 && info.st_mode & S_IFMT == S_IFLNK, "the link is still a link")
            #expect(try String(contentsOfFile: target, encoding: .utf8).lowercased().hasPrefix("<!doctype html>"))
        }
    }

    @Test("the comment on one shard's report is not a green check for the suite, and says to merge the shards")
    func shardComment() async throws {
        try await TemporaryDirectory.with { directory in
            let shard = try await agentEval(
                ["run", "EvalCases", "--shard", "1/2", "--json-out", directory.path("s1.json"), "--no-catalog"], in: repositoryRoot)
            #expect(shard.status == 0, "\(shard.stderr)")
            let comment = try await agentEval(["results", "comment", directory.path("s1.json")])
            #expect(comment.status == 0)
            #expect(comment.stdoutText.contains("### ⚠️ agent-eval: PASS: 5 cases"), "\(comment.stdoutText)")
            #expect(
                comment.stdoutText.contains("> **One shard:** this is shard 1/2 of the suite (5 cases of its 11)"), "\(comment.stdoutText)")
        }
    }
}
