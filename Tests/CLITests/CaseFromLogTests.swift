import Foundation
import TestSupport
import Testing

/// `agent-eval case from-log`: the case it drafts runs, and passes, against the log it was
/// drafted from — a run that finished or one that did not.
@Suite("Drafting a case from a log")
struct CaseFromLogTests {
    static let runs = FixtureLogs.directory.deletingLastPathComponent().appendingPathComponent("runs")

    @Test("a conversation: the draft pins what each user turn got, and its commented user, uncommented, runs the conversation again live")
    func conversation() async throws {
        try await TemporaryDirectory.with { directory in
            let ran = try await agentEval(
                ["run", "EvalCases/support/refund-conversation.yaml", "--no-catalog", "--out", directory.path("runs")], in: repositoryRoot)
            #expect(ran.status == 0, "\(ran.stdoutText)\(ran.stderr)")
            let log = directory.path("runs/support-refund-conversation-1.jsonl.gz")
            let draft = try await agentEval(["case", "from-log", log, "--output", directory.path("draft.yaml")])
            #expect(draft.status == 0, "\(draft.stderr)")
            let text = try String(contentsOfFile: directory.path("draft.yaml"), encoding: .utf8)
            #expect(text.contains("  turns:\n    1: {maxToolCalls: 0}\n    2: {toolsCalled: [\"lookup_order\"]}\n"), "\(text)")
            // Turn 4 ("great, thanks!") ended the conversation unanswered: nothing of it to pin.
            #expect(!text.contains("\n    4: "), "\(text)")
            let recorded = try await agentEval(["run", directory.path("draft.yaml"), "--no-catalog", "--out", directory.path("out")])
            #expect(recorded.status == 0, "\(recorded.stdoutText)\(recorded.stderr)")
            // Live: the agent file for logs:, the commented user uncommented.
            let agent = repositoryRoot.appendingPathComponent("Fixtures/agents/support-chat/agent.yaml").path
            let live = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
                if line.hasPrefix("logs: ") { return "agent: \(agent)" }
                if line.hasPrefix("#   ") || line.hasPrefix("#     ") || line == "# user:" { return String(line.dropFirst(2)) }
                return String(line)
            }.joined(separator: "\n")
            try live.write(toFile: directory.path("live.yaml"), atomically: true, encoding: .utf8)
            let again = try await agentEval(["run", directory.path("live.yaml"), "--no-catalog", "--out", directory.path("live")])
            #expect(again.status == 0, "\(live)\n\(again.stdoutText)\(again.stderr)")
        }
    }

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

    @Test(
        "a log run would refuse to grade (edited, its digests not rebuilt; events that contradict each other) drafts no case: exit 2, saying why",
        arguments: ["edited-with-chain-recomputed.jsonl.gz", "intent-names-another-tool.jsonl.gz"])
    func untrustedLog(sample: String) async throws {
        try await TemporaryDirectory.with { directory in
            let log = repositoryRoot.appendingPathComponent("Fixtures/conformance/\(sample)").path
            let draft = try await agentEval(["case", "from-log", log, "--out", directory.path("draft.yaml")])
            #expect(draft.status == 2, "\(draft.stdoutText)\(draft.stderr)")
            #expect(draft.stderr.contains("no case is drafted from it"), "\(draft.stderr)")
            #expect(!FileManager.default.fileExists(atPath: directory.path("draft.yaml")))
        }
    }
}
