import Foundation
import TestSupport
import TestTags
import Testing
import TraceCore

/// `agent-eval fork` as a user runs it: exit codes like `diff`, the diff from the fork point,
/// `--json`, the catalog's `runs --forks-of`, and bad input.
@Suite("agent-eval fork and rerun --mode prefix", .ownThread)
struct ForkCommandTests {
    static let parent = repositoryRoot.appendingPathComponent("Fixtures/runs/support-refund.jsonl.gz").path
    static let agent = ExampleRuns.agentPath("support")

    @Test("no edit: exit 0 and the shared prefix; a replaced result: exit 1 at its step; the catalog lists the forks")
    func forks() async throws {
        try await TemporaryDirectory.with { directory in
            let catalog = ["AGENT_EVAL_CATALOG": directory.path("catalog.sqlite")]
            let same = try await agentEval(
                ["fork", Self.parent, "--agent", Self.agent, "--at", "1", "--out", directory.path("runs")], environment: catalog)
            #expect(same.status == 0, "\(same.stderr)")
            #expect(same.stdoutText.contains("from run-support-refund after its step 1 (12 events copied, nothing run again)"))
            #expect(same.stdoutText.contains("same trajectory"))
            #expect(same.stdoutText.contains("= 0–0      the shared prefix"))

            try #"{"order_id": "A-1042", "status": "lost"}"#.write(toFile: directory.path("lost.json"), atomically: true, encoding: .utf8)
            let edited = try await agentEval(
                [
                    "fork", Self.parent, "--agent", Self.agent, "--result", "call-1=@\(directory.path("lost.json"))", "--out",
                    directory.path("runs"), "--json",
                ], environment: catalog)
            #expect(edited.status == 1, "\(edited.stderr)")
            let report = try JSONParser.parse(edited.stdout)
            #expect(report["same_trajectory"] == false)
            #expect(report["forked"]?["step"] == 1)
            #expect(report["forked"]?["parent_run_id"] == "run-support-refund")
            #expect(
                report["forked"]?["edits"] == [["kind": "result", "call_id": "call-1", "value": ["order_id": "A-1042", "status": "lost"]]])
            #expect(report["diff"]?["first_divergence"]?["path"] == "call-1 lookup_order output")
            let log = try #require(report["log"]?.stringValue)
            #expect(FileManager.default.fileExists(atPath: log))
            #expect(try await agentEval(["replay", log, "--plain"]).stdoutText.contains("edit    result of call-1 replaced by"))

            // Exported, the next decision's input shows the result the fork's model saw.
            let export = try await agentEval(["export", "otlp", log, "--out", "-", "--include-content"])
            #expect(export.status == 0, "\(export.stderr)")
            let spans =
                try JSONParser.parse(export.stdout)["resourceSpans"]?.arrayValue?.first?["scopeSpans"]?.arrayValue?.first?["spans"]?
                .arrayValue ?? []
            func attribute(_ span: JSONValue, _ key: String) -> String? {
                (span["attributes"]?.arrayValue ?? []).first { $0["key"]?.stringValue == key }?["value"]?["stringValue"]?.stringValue
            }
            let root = try #require(spans.first { attribute($0, "gen_ai.operation.name") == "invoke_agent" })
            #expect(attribute(root, "agent_eval.forked_from") == "run-support-refund")
            let second = try #require(spans.filter { attribute($0, "gen_ai.operation.name") == "chat" }.dropFirst().first)
            #expect(attribute(second, "gen_ai.input.messages")?.contains(#""response":{"order_id":"A-1042","status":"lost"}"#) == true)

            let forks = try await agentEval(["runs", "--forks-of", "run-support-refund", "--json"], environment: catalog)
            #expect(forks.status == 0, "\(forks.stderr)")
            let rows = try JSONParser.parse(forks.stdout).arrayValue ?? []
            #expect(rows.count == 2)
            #expect(rows.allSatisfy { $0["forked_from"] == "run-support-refund" && $0["fork_step"] == 1 })
            let none = try await agentEval(["runs", "--forks-of", "run-nobody", "--json"], environment: catalog)
            #expect(try JSONParser.parse(none.stdout) == [])
        }
    }

    @Test("rerun --mode prefix: exit 0 never live, 1 live from where the stricter policy parts, the new run kept; usage errors")
    func rerunPrefix() async throws {
        try await TemporaryDirectory.with { directory in
            let same = try await agentEval([
                "rerun", Self.parent, "--agent", Self.agent, "--mode", "prefix", "--log", directory.path("same.jsonl.gz"),
            ])
            #expect(same.status == 0, "\(same.stderr)")
            #expect(same.stdoutText.hasPrefix("never went live: the log answered every request"))
            let stricter = ExampleRuns.agentPath("support-stricter")
            let live = try await agentEval([
                "rerun", Self.parent, "--agent", stricter, "--mode", "prefix", "--log", directory.path("live.jsonl.gz"), "--json",
            ])
            #expect(live.status == 1, "\(live.stderr)")
            let report = try JSONParser.parse(live.stdout)
            #expect(report["mode"] == "prefix" && report["went_live"]?["decision"] == 3)
            #expect(report["diff"]?["first_divergence"]?["path"] == "call-3 refund_order verdict")
            #expect(FileManager.default.fileExists(atPath: directory.path("live.jsonl.gz")))
            let badMode = try await agentEval(["rerun", Self.parent, "--agent", Self.agent, "--mode", "loose"])
            #expect(badMode.status == 64 && badMode.stderr.contains("--mode takes strict or prefix"))
            let strictModel = try await agentEval(["rerun", Self.parent, "--agent", Self.agent, "--model", "openai:gpt-4o-mini"])
            #expect(strictModel.status == 64 && strictModel.stderr.contains("they go with --mode prefix"))
        }
    }

    @Test("a fork that cannot be made exits 2 and writes nothing; a malformed edit is a usage error")
    func badInput() async throws {
        try await TemporaryDirectory.with { directory in
            let out = directory.path("runs")
            let pastTheEnd = try await agentEval(["fork", Self.parent, "--agent", Self.agent, "--at", "9", "--out", out, "--no-catalog"])
            #expect(pastTheEnd.status == 2 && pastTheEnd.stderr.contains("--at 9: the parent has steps 0 to 4"))
            let unknownCall = try await agentEval(["fork", Self.parent, "--agent", Self.agent, "--error", "call-7=boom", "--out", out])
            #expect(unknownCall.status == 2 && unknownCall.stderr.contains(#"the parent has no call "call-7""#))
            #expect(unknownCall.stderr.contains("hint: its calls: call-1 (lookup_order, step 1)"))
            // A fixture file that is not a list of responses: its file and line are named.
            try "- when: {order_id: A-1}\n  outptu: {}\n".write(toFile: directory.path("bad.yaml"), atomically: true, encoding: .utf8)
            let fixture = try await agentEval([
                "fork", Self.parent, "--agent", Self.agent, "--at", "1", "--tool-fixture", "lookup_order=@\(directory.path("bad.yaml"))",
                "--out", out,
            ])
            #expect(fixture.status == 2 && fixture.stderr.contains("bad.yaml:2"), "\(fixture.stderr)")
            #expect(!FileManager.default.fileExists(atPath: out))
            let noAgent = try await agentEval(["fork", Self.parent, "--at", "1"])
            #expect(noAgent.status == 64 && noAgent.stderr.contains("give the agent file to continue with"))
            let noPoint = try await agentEval(["fork", Self.parent, "--agent", Self.agent, "--input", "x"])
            #expect(noPoint.status == 64 && noPoint.stderr.contains("say where to fork: --at STEP"))
            let twice = try await agentEval([
                "fork", Self.parent, "--agent", Self.agent, "--decision", #"2={"answer": "a"}"#, "--decision", #"2={"answer": "b"}"#,
                "--out", out,
            ])
            #expect(twice.status == 2 && twice.stderr.contains("two edits change the model's reply"))
            #expect(!FileManager.default.fileExists(atPath: out))
            let badDecision = try await agentEval(["fork", Self.parent, "--agent", Self.agent, "--decision", "x={}"])
            #expect(badDecision.status == 64 && badDecision.stderr.contains("STEP must be a step number"))
        }
    }
}

/// `agent-eval pipeline fork` as a user runs it: the fork beside its parent, what changed,
/// `--json`, `pipeline show` of the fork, and a task the pipeline does not have.
@Suite("agent-eval pipeline fork", .ownThread)
struct PipelineForkCommandTests {
    @Test("a fork at a task: beside the parent, every task as before; an unknown task: exit 2 naming the tasks")
    func forksAPipelineRun() async throws {
        try await TemporaryDirectory.with { directory in
            let file = repositoryRoot.appendingPathComponent("Fixtures/pipelines/release-notes/pipeline.yaml").path
            let parent = try await agentEval(
                ["pipeline", "run", file, "--out", directory.path("runs"), "--run-id", "pipe-parent", "--json"])
            #expect(parent.status == 0, "\(parent.stderr)")
            let parentDirectory = directory.path("runs/release-notes-pipe-parent")

            let fork = try await agentEval(["pipeline", "fork", parentDirectory, "--at", "lint", "--run-id", "pipe-fork", "--json"])
            #expect(fork.status == 0, "\(fork.stderr)")
            let report = try JSONParser.parse(fork.stdout)
            #expect(report["parent"] == "pipe-parent")
            #expect(report["run"] == "pipe-fork")
            #expect(report["changes"] == [])
            #expect(report["log"] == .string(directory.path("runs/release-notes-pipe-fork/pipeline.jsonl.gz")))
            #expect(report["state"]?["forked"]?["parent_run_id"] == "pipe-parent")

            let show = try await agentEval(["pipeline", "show", directory.path("runs/release-notes-pipe-fork")])
            #expect(show.status == 0, "\(show.stdoutText)")
            #expect(show.stdoutText.contains("fork of pipe-parent"))
            #expect(show.stdoutText.contains("rolled back to lint: discarded lint, publish"))

            let unknown = try await agentEval(["pipeline", "fork", parentDirectory, "--at", "lnit"])
            #expect(unknown.status == 2)
            #expect(unknown.stderr.contains("the pipeline has no task \"lnit\""))
            #expect(unknown.stderr.contains("tasks: collect, write, lint, publish"))
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path("runs")).count == 2)
        }
    }
}
