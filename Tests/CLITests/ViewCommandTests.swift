import Foundation
import TestSupport
import Testing
import TraceCore

/// `agent-eval view`, `run --html`, `diff --html` and `results merge --html` as a user calls
/// them: the page is written where asked (or beside the working directory), the output says
/// where and how to open it, and bad input is refused before a page is written.
@Suite("agent-eval view and --html")
struct ViewCommandTests {
    static let supportLog = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path

    /// The JSON document embedded in a page (uncompressed pages only).
    static func pageData(_ path: String) throws -> JSONValue {
        let html = try String(contentsOfFile: path, encoding: .utf8)
        let marker = "data-encoding=\"json\">"
        let start = try #require(html.range(of: marker), "the page embeds uncompressed JSON")
        let end = try #require(html[start.upperBound...].range(of: "</script>"))
        return try JSONParser.parse(Array(html[start.upperBound..<end.lowerBound].utf8))
    }

    @Test("view writes <log name>.html in the working directory and prints its link")
    func viewDefaults() async throws {
        try await TemporaryDirectory.with { directory in
            let result = try await agentEval(["view", Self.supportLog, "--step", "2"], in: directory.url)
            #expect(result.status == 0, "\(result.stderr)")
            let page = directory.path("support-refund.html")
            #expect(FileManager.default.fileExists(atPath: page))
            #expect(result.stdoutText.hasPrefix("wrote support-refund.html (5 steps, 25 events, "))
            #expect(result.stdoutText.contains("open: file://\(page)#step-2\n"))
            let data = try Self.pageData(page)
            #expect(data["view"] == "run")
            #expect(data["run"]?["steps"]?.arrayValue?.count == 5)
            #expect(data["run"]?["run_id"] == "run-support-refund")
        }
    }

    @Test("view of a conversation draws it as a chat: each turn, what the agent said, the calls between; its ending is no problem")
    func viewConversation() async throws {
        try await TemporaryDirectory.with { directory in
            let ran = try await agentEval(
                ["run", "EvalCases/support/refund-conversation.yaml", "--no-catalog", "--out", directory.path("runs")], in: repositoryRoot)
            #expect(ran.status == 0, "\(ran.stdoutText)\(ran.stderr)")
            let page = directory.path("conversation.html")
            let result = try await agentEval(
                ["view", directory.path("runs/support-refund-conversation-1.jsonl.gz"), "--out", page], in: directory.url)
            #expect(result.status == 0, "\(result.stderr)")
            let run = try #require(try Self.pageData(page)["run"])
            let chat = try #require(run["summary"]?["conversation"]?.arrayValue)
            #expect(
                chat.map {
                    $0["speaker"]?.stringValue
                        ?? ($0["calls"]?.arrayValue?.compactMap { $0["tool"]?.stringValue }.joined(separator: ",") ?? "?")
                }
                    == ["user", "agent", "user", "lookup_order", "agent", "user", "refund_order", "agent", "user"])
            #expect(chat.last?["ends"] == "user_stop" && chat.first?["source"] == "opening")
            let problems = run["steps"]?.arrayValue?.flatMap { $0["problems"]?.arrayValue ?? [] } ?? []
            #expect(problems.isEmpty, "a user's stop is how the conversation ended, not a problem: \(problems)")
        }
    }

    @Test("view --json says what was written")
    func viewJSON() async throws {
        try await TemporaryDirectory.with { directory in
            let page = directory.path("pages/run.html")
            let result = try await agentEval(["view", Self.supportLog, "--out", page, "--json"])
            #expect(result.status == 0, "\(result.stderr)")
            let document = try JSONParser.parse(result.stdout)
            #expect(document["schema"] == "agent-eval/view")
            #expect(document["html"] == .string(page))
            #expect(document["url"] == .string("file://" + page))
            #expect(document["steps"] == 5 && document["events"] == 25)
            let bytes = try #require(document["bytes"]?.intValue)
            #expect(bytes == (try FileManager.default.attributesOfItem(atPath: page)[.size] as? Int))
        }
    }

    @Test("a damaged log: the page shows the steps before the damage, the error names the log, exit 2")
    func viewDamaged() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("long.jsonl.gz")
            var corpus = SyntheticCorpus()
            try corpus.writeDamagedRun(to: log, events: 1_000)
            let page = directory.path("long.html")
            let result = try await agentEval(["view", log, "--out", page])
            #expect(result.status == 2)
            #expect(result.stderr.contains("error: "), "\(result.stderr)")
            #expect(result.stderr.contains(log))
            #expect(result.stderr.contains("note: the page shows the "))
            let data = try Self.pageData(page)
            #expect(data["run"]?["error"] != nil)
            #expect((data["run"]?["steps"]?.arrayValue?.count ?? 0) > 0)
        }
    }

    @Test("view refuses a step the log does not have, before writing anything")
    func viewMissingStep() async throws {
        try await TemporaryDirectory.with { directory in
            let page = directory.path("run.html")
            let result = try await agentEval(["view", Self.supportLog, "--step", "12", "--out", page])
            #expect(result.status == 64)
            #expect(result.stderr.contains("has no step 12"))
            #expect(!FileManager.default.fileExists(atPath: page))
        }
    }

    static let recordedRun = ExampleRuns.fixtures.appendingPathComponent("pipelines/recorded/triage-recovery")
    static let recordedPipeline = recordedRun.appendingPathComponent("pipeline.jsonl.gz").path
    static let recordedChild = recordedRun.appendingPathComponent("tasks/classify_with_agent-1.jsonl.gz").path

    @Test("view of a pipeline log draws the pipeline: its tasks, what each needs, and each agent attempt's run linked")
    func viewPipeline() async throws {
        try await TemporaryDirectory.with { directory in
            let result = try await agentEval(["view", Self.recordedPipeline], in: directory.url)
            #expect(result.status == 0, "\(result.stderr)")
            // pipeline run writes <out>/<pipeline>-<id>/pipeline.jsonl.gz: the page is named after the run's directory.
            let page = directory.path("triage-recovery.html")
            #expect(
                result.stdoutText.hasPrefix(
                    "wrote triage-recovery.html (pipeline triage-recovery succeeded, 5 tasks, 1 child run, 15 events, "))
            #expect(result.stdoutText.contains("open: file://\(page)\n"))
            let html = try String(contentsOfFile: page, encoding: .utf8)
            #expect(!html.contains("belongs in a pipeline log"), "a pipeline log is never judged as a run's log")
            let data = try Self.pageData(page)
            #expect(data["view"] == "pipeline")
            let pipeline = try #require(data["pipeline"])
            #expect(pipeline["status"] == "succeeded")
            let plan = try #require(pipeline["plan"]?.arrayValue)
            #expect(plan.map { $0["id"]?.stringValue } == ["fetch", "classify", "classify_with_agent", "enrich", "report"])
            #expect(plan.last?["needs"] == ["classify", "enrich"])
            let tasks = try #require(pipeline["state"]?["tasks"]?.arrayValue)
            #expect(tasks.map { $0["status"]?.stringValue } == ["succeeded", "succeeded", "succeeded", "skipped", "succeeded"])
            #expect(tasks[1]["attempts"]?.arrayValue?.count == 2, "classify failed twice before its fallback ran")
            #expect(data["summary"]?["ok"] == true && data["summary"]?["outcome"] == "succeeded")
            // The agent attempt's child run is in the page, linked from its attempt.
            let child = Self.recordedChild
            #expect(data["summary"]?["child_logs"] == [["task": "classify_with_agent", "attempt": 1, "log": .string(child)]])
            let runs = try #require(data["runs"]?.arrayValue)
            #expect(runs.map { $0["log"]?.stringValue } == [child])
            #expect(runs.first?["run"]?["schema"] == "agent-eval/replay")
            #expect((runs.first?["run"]?["steps"]?.arrayValue?.count ?? 0) > 0)
            #expect(runs.first?["run"]?["summary"]?["stop_reason"] == "success")

            let json = try await agentEval(["view", Self.recordedPipeline, "--out", directory.path("p.html"), "--json"])
            #expect(json.status == 0, "\(json.stderr)")
            let document = try JSONParser.parse(json.stdout)
            #expect(document["view"] == "pipeline" && document["status"] == "succeeded" && document["tasks"] == 5)
            #expect(document["runs"] == [.string(child)] && document["runs_left_out"] == [])
        }
    }

    @Test("a pipeline whose child log is missing or damaged: pipeline show lists it (exit 1), view writes the page and exits 2")
    func pipelineChildLogProblems() async throws {
        try await TemporaryDirectory.with { directory in
            let run = directory.path("triage-recovery")
            try FileManager.default.copyItem(atPath: Self.recordedRun.path, toPath: run)
            let show = try await agentEval(["pipeline", "show", run])
            #expect(show.status == 0 && !show.stdoutText.contains("CHILD LOGS"), "\(show.stdoutText)\(show.stderr)")
            let child = run + "/tasks/classify_with_agent-1.jsonl.gz"
            // Damaged: a byte of its first gzip member changed.
            var bytes = Array(try Data(contentsOf: URL(fileURLWithPath: child)))
            bytes[40] ^= 0x55
            try Data(bytes).write(to: URL(fileURLWithPath: child))
            let damaged = try await agentEval(["pipeline", "show", run])
            #expect(damaged.status == 1)
            #expect(
                damaged.stdoutText.contains("CHILD LOGS:\n  task classify_with_agent attempt 1: its log \(child) is not intact"),
                "\(damaged.stdoutText)")
            try FileManager.default.removeItem(atPath: child)
            let missing = try await agentEval(["pipeline", "show", run, "--json"])
            #expect(missing.status == 1)
            #expect(
                try JSONParser.parse(missing.stdout)["child_log_problems"] == [
                    .string("task classify_with_agent attempt 1: its log \(child) is missing")
                ])
            let view = try await agentEval(["view", run, "--out", directory.path("p.html")])
            #expect(view.status == 2)
            #expect(view.stderr.contains("error: task classify_with_agent attempt 1: its log \(child) is missing"), "\(view.stderr)")
            #expect(try Self.pageData(directory.path("p.html"))["summary"]?["ok"] == false)
        }
    }

    @Test("a failed pipeline's page says it failed, and where; --step is for runs, not pipelines")
    func viewFailedPipeline() async throws {
        try await TemporaryDirectory.with { directory in
            let agent = ExampleRuns.fixtures.appendingPathComponent("pipelines/triage-recovery/triage.agent.yaml").path
            let file = directory.path("broken.yaml")
            try """
            pipeline: broken
            input: {tickets: [{id: T-1, text: charged twice}, {id: T-2, text: app crashes}]}
            tasks:
              - id: classify
                agent: \(agent)
                goal: 'Classify: {{tickets}}'
                inputs: {tickets: $input.tickets}
              - id: publish
                command: [sh, -c, 'cat >/dev/null; echo publisher down >&2; exit 3']
                inputs: {classes: classify}

            """.write(toFile: file, atomically: true, encoding: .utf8)
            let ran = try await agentEval(["pipeline", "run", file, "--out", directory.path("runs"), "--run-id", "p1"])
            #expect(ran.status == 1, "\(ran.stderr)")
            let run = directory.path("runs/broken-p1")

            // The run's directory, as pipeline show takes it.
            let result = try await agentEval(["view", run], in: directory.url)
            #expect(result.status == 0, "\(result.stderr)")
            #expect(result.stdoutText.hasPrefix("wrote broken-p1.html (pipeline broken failed at publish, 2 tasks, 1 child run, "))
            let data = try Self.pageData(directory.path("broken-p1.html"))
            #expect(data["view"] == "pipeline")
            #expect(data["summary"]?["ok"] == false, "a failed pipeline's page is never green")
            #expect(data["summary"]?["outcome"] == "failed")
            #expect(data["pipeline"]?["state"]?["stop"]?["task"] == "publish")
            #expect(data["pipeline"]?["status"] == "failed at publish")
            let tasks = try #require(data["pipeline"]?["state"]?["tasks"]?.arrayValue)
            #expect(tasks.map { $0["status"]?.stringValue } == ["succeeded", "failed"])
            #expect(data["runs"]?.arrayValue?.first?["log"] == .string(run + "/tasks/classify-1.jsonl.gz"))

            let step = try await agentEval(["view", run + "/pipeline.jsonl.gz", "--step", "2", "--out", directory.path("s.html")])
            #expect(step.status == 64)
            #expect(step.stderr.contains("is a pipeline log: it has tasks, not steps"), "\(step.stderr)")
            #expect(!FileManager.default.fileExists(atPath: directory.path("s.html")))
        }
    }

    @Test("run --html writes the report page with the runs its failures point at")
    func runHTML() async throws {
        try await TemporaryDirectory.with { directory in
            let page = directory.path("report.html")
            let result = try await agentEval(
                ["run", "Fixtures/eval/failing", "--out", directory.path("runs"), "--no-catalog", "--quiet", "--html", page],
                in: repositoryRoot)
            #expect(result.status == 1, "\(result.stderr)")
            #expect(result.stdoutText.contains("report page written: \(page) (3 runs embedded)"))
            #expect(result.stdoutText.contains("          view: \(page)#log=Fixtures/runs/support-refund.jsonl.gz&step=2\n"))
            let data = try Self.pageData(page)
            #expect(data["view"] == "report")
            #expect(data["results"]?["summary"]?["failed"] == 5)
            let embedded = Set((data["runs"]?.arrayValue ?? []).compactMap { $0["log"]?.stringValue })
            for entry in data["results"]?["cases"]?.arrayValue ?? [] {
                for run in entry["runs"]?.arrayValue ?? [] {
                    for failure in run["failures"]?.arrayValue ?? [] {
                        let log = failure["log"]?.stringValue ?? run["log"]?.stringValue ?? ""
                        #expect(embedded.contains(log), "the run of \(entry["case_id"]?.stringValue ?? "?") is in the page")
                    }
                }
            }
            // With --json, standard output holds only the report.
            let json = try await agentEval(
                ["run", "Fixtures/eval/failing", "--out", directory.path("runs2"), "--no-catalog", "--json", "--html", page],
                in: repositoryRoot)
            #expect(try JSONParser.parse(json.stdout)["schema"] == "agent-eval/results")
            #expect(json.stderr.contains("report page written: \(page)"))
        }
    }

    @Test("diff --html writes both runs and the diff; the terminal output stays the same")
    func diffHTML() async throws {
        try await TemporaryDirectory.with { directory in
            let research = ExampleRuns.directory.appendingPathComponent("research-budget.jsonl.gz").path
            let page = directory.path("diff.html")
            let plain = try await agentEval(["diff", Self.supportLog, research])
            let result = try await agentEval(["diff", Self.supportLog, research, "--html", page])
            #expect(result.status == 1)
            #expect(result.stdoutText == plain.stdoutText + "wrote \(page): file://\(page)\n")
            let data = try Self.pageData(page)
            #expect(data["view"] == "diff")
            #expect(data["diff"]?["first_divergence"]?["path"] != nil)
            #expect(data["left"]?["log"] == .string(Self.supportLog) && data["right"]?["log"] == .string(research))
        }
    }

    @Test("results merge --html makes one page of the shards' reports")
    func mergeHTML() async throws {
        try await TemporaryDirectory.with { directory in
            for index in 1...2 {
                let shard = try await agentEval(
                    [
                        "run", "Fixtures/eval/failing", "--shard", "\(index)/2", "--json-out", directory.path("shard-\(index).json"),
                        "--no-catalog", "--quiet", "--out", directory.path("runs-\(index)"),
                    ], in: repositoryRoot)
                #expect(shard.status == 1 || shard.status == 0, "\(shard.stderr)")
            }
            let page = directory.path("all.html")
            let merged = try await agentEval(
                ["results", "merge", directory.path("shard-1.json"), directory.path("shard-2.json"), "--html", page], in: repositoryRoot)
            #expect(merged.status == 1, "\(merged.stderr)")
            let data = try Self.pageData(page)
            #expect(data["results"]?["cases"]?.arrayValue?.count == 5)
            #expect((data["runs"]?.arrayValue?.count ?? 0) == 3)
        }
    }
}
