import Foundation
import TestSupport
import Testing

/// `agent-eval case from-log`: the case it drafts runs, and passes, against the log it was
/// drafted from — a run that finished or one that did not.
@Suite("Drafting a case from a log")
struct CaseFromLogTests {
    static let runs = FixtureLogs.directory.deletingLastPathComponent().appendingPathComponent("runs")

    @Test("a finished run: the draft pins its tools, order, arguments and stop, and passes against its log")
    func finishedRun() async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.copyItem(
                atPath: Self.runs.appendingPathComponent("support-refund.jsonl.gz").path, toPath: directory.path("refund.jsonl.gz"))
            let draft = try await agentEval([
                "case", "from-log", directory.path("refund.jsonl.gz"), "--output", directory.path("refund.yaml"),
            ])
            #expect(draft.status == 0 && draft.stderr.isEmpty, "\(draft.stderr)")
            let text = try String(contentsOfFile: directory.path("refund.yaml"), encoding: .utf8)
            #expect(text.contains("logs: refund.jsonl.gz\nexpected:\n"), "\(text)")
            #expect(text.contains("stopReason: ") && !text.contains("allowUnfinished"), "\(text)")
            let run = try await agentEval(["run", directory.path("refund.yaml"), "--out", directory.path("out")])
            #expect(run.status == 0, "\(run.stdoutText)\(run.stderr)")
            // --out refuses to overwrite a case.
            let again = try await agentEval(["case", "from-log", directory.path("refund.jsonl.gz"), "--out", directory.path("refund.yaml")])
            #expect(again.status == 2 && again.stderr.contains("refund.yaml exists already"), "\(again.stderr)")
        }
    }

    @Test(
        "a run that did not finish: the draft allows it and pins neither a stop nor what it never called, and passes; the warning says so",
        arguments: ["research-sample-torn.jsonl.gz", "research-sample-torn-v3.jsonl.gz"])
    func unfinishedRun(sample: String) async throws {
        try await TemporaryDirectory.with { directory in
            try FileManager.default.copyItem(
                atPath: FixtureLogs.directory.appendingPathComponent(sample).path, toPath: directory.path("torn.jsonl.gz"))
            let draft = try await agentEval(["case", "from-log", directory.path("torn.jsonl.gz"), "--out", directory.path("torn.yaml")])
            #expect(draft.status == 0)
            #expect(draft.stderr.contains("does not end with run_stopped (the run did not finish): the case sets allowUnfinished: true"))
            let text = try String(contentsOfFile: directory.path("torn.yaml"), encoding: .utf8)
            #expect(text.contains("\nallowUnfinished: true\nexpected:\n"), "\(text)")
            #expect(!text.contains("stopReason") && !text.contains("toolsNotCalled"), "\(text)")
            let run = try await agentEval(["run", directory.path("torn.yaml"), "--out", directory.path("out")])
            #expect(run.status == 0, "\(run.stdoutText)\(run.stderr)")
            #expect(run.stdoutText.contains("did not finish"), "\(run.stdoutText)")
        }
    }
}
