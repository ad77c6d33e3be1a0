import Foundation
import TestSupport
import Testing
import TraceCore

/// A log that holds no run, is not whole, does not check out, or is a pipeline's is never
/// reported as a clean result: not by diff, audit, index or log cat.
@Suite("Logs that are not a whole run are never green")
struct NotARunTests {
    static let conformance = ExampleRuns.fixtures.appendingPathComponent("conformance")
    static let pipelineRun = ExampleRuns.fixtures.appendingPathComponent("pipelines/recorded/triage-recovery")

    /// A gzip file with one whole member and no line, made by the real gzip.
    static func eventless(in directory: TemporaryDirectory) async throws -> String {
        let plain = directory.path("empty.jsonl")
        try Data().write(to: URL(fileURLWithPath: plain))
        #expect(try await Subprocess.run(gzipPath, ["-n", plain]).status == 0)
        return plain + ".gz"
    }

    @Test("diff: a log whose digests and events do not check out is not the same trajectory; a pipeline log is refused")
    func diff() async throws {
        let valid = Self.conformance.appendingPathComponent("valid-support-sample.jsonl.gz").path
        let edited = Self.conformance.appendingPathComponent("intent-names-another-tool.jsonl.gz").path
        let text = try await agentEval(["diff", valid, edited])
        #expect(text.status == 1, "\(text.stdoutText)")
        #expect(
            text.stdoutText.hasPrefix("B does not check out (replay shows where):\n  the state digest recorded at seq "),
            "\(text.stdoutText)")
        #expect(text.stdoutText.contains("the same steps, but not the same trajectory: a log does not check out"))
        let json = try JSONParser.parse(try await agentEval(["diff", valid, edited, "--json"]).stdout)
        #expect(json["same"] == false && json["problems"]?["left"] == [])
        #expect((json["problems"]?["right"]?.arrayValue?.count ?? 0) >= 2, "the digest, and the intents naming another tool")
        #expect(try await agentEval(["diff", valid, valid]).status == 0)

        let pipeline = Self.pipelineRun.appendingPathComponent("pipeline.jsonl.gz").path
        let refused = try await agentEval(["diff", pipeline, valid])
        #expect(refused.status == 2 && refused.stdout.isEmpty)
        #expect(refused.stderr.contains("is a pipeline log: diff compares two runs' trajectories"), "\(refused.stderr)")
    }

    @Test("audit: a log with no event, a torn log and pipeline logs alone fail; in a folder a pipeline log is skipped with a note")
    func audit() async throws {
        try await TemporaryDirectory.with { directory in
            let policy = directory.path("allow.yaml")
            try "policy: {default: allow}\n".write(toFile: policy, atomically: true, encoding: .utf8)
            let empty = try await Self.eventless(in: directory)
            let noEvent = try await agentEval(["audit", "--policy", policy, empty])
            #expect(noEvent.status == 2 && noEvent.stderr.contains("the log holds no event"), "\(noEvent.stdoutText)\(noEvent.stderr)")

            let torn = Self.conformance.appendingPathComponent("torn-tail.jsonl.gz").path
            let tornAudit = try await agentEval(["audit", "--policy", policy, torn])
            #expect(tornAudit.status == 2)
            #expect(
                tornAudit.stdoutText.contains("4 calls, all allowed — up to a tear: the log is torn after seq 22"),
                "\(tornAudit.stdoutText)")
            #expect(tornAudit.stderr.contains("agent-eval log repair"))

            let pipeline = Self.pipelineRun.appendingPathComponent("pipeline.jsonl.gz").path
            let alone = try await agentEval(["audit", "--policy", policy, pipeline])
            #expect(alone.status == 2 && alone.stderr.contains("is a pipeline log"), "\(alone.stderr)")
            let folder = try await agentEval(["audit", "--policy", policy, Self.pipelineRun.path])
            #expect(folder.status == 0, "\(folder.stderr)")
            #expect(folder.stdoutText.contains("classify_with_agent-1.jsonl.gz: 1 call, all allowed"), "\(folder.stdoutText)")
            #expect(folder.stderr.contains("triage-recovery/pipeline.jsonl.gz: a pipeline log"), "\(folder.stderr)")

            // --json: a log that could not be read is in the array with its error, not left out.
            let edited = Self.conformance.appendingPathComponent("edited-event.jsonl.gz").path
            let good = Self.conformance.appendingPathComponent("valid-support-sample.jsonl.gz").path
            let json = try await agentEval(["audit", "--policy", policy, "--json", edited, good])
            #expect(json.status == 2)
            let entries = try #require(try JSONParser.parse(json.stdout).arrayValue)
            #expect(entries.count == 2 && entries.first?["log"]?.stringValue?.hasSuffix("edited-event.jsonl.gz") == true)
            #expect(entries.first?["error"]?["code"] == "log.broken_chain")
            #expect(entries.last?["error"] == nil && (entries.last?["calls"]?.intValue ?? 0) > 0, "\(entries.last ?? .null)")
        }
    }

    @Test("index marks a log with no event damaged, and log cat fails on it, as verify does")
    func indexAndCat() async throws {
        try await TemporaryDirectory.with { directory in
            let empty = try await Self.eventless(in: directory)
            #expect(try await agentEval(["log", "verify", empty]).status == 1)
            let cat = try await agentEval(["log", "cat", empty])
            #expect(cat.status == 2 && cat.stdout.isEmpty && cat.stderr.contains("the log holds no event"), "\(cat.stderr)")
            let index = try await agentEval(["index", empty, "--catalog", directory.path("catalog.sqlite"), "--json"])
            #expect(index.status == 0, "\(index.stderr)")
            let row = try #require(
                index.stdoutText.split(separator: "\n").compactMap { try? JSONParser.parse(Array($0.utf8)) }.first { $0["path"] != nil })
            #expect(row["status"] == "damaged", "\(row)")
            #expect(row["problem"]?.stringValue?.contains("the log holds no event") == true, "\(row)")
        }
    }
}
