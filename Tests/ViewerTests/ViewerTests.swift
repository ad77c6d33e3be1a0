import Foundation
import Pipelines
import Replay
import TestSupport
import Testing
import TraceCore
import TraceLog
import Viewer

/// The pages' data and markup, without a browser: what the page embeds is the replay, report
/// and diff documents themselves, embedded so no log content can end the script element or
/// expand a placeholder, compressed when large, and allowed to run only as the viewer's own script.
@Suite("Viewer pages")
struct ViewerTests {
    static let repository = ExampleRuns.fixtures.deletingLastPathComponent()
    static let assets = repository.appendingPathComponent("Sources/Viewer/Assets").path
    static let supportLog = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path

    /// The embedded data element's encoding and text.
    static func embedded(_ page: [UInt8]) throws -> (encoding: String, text: String) { try PageData.embedded(page) }

    @Test("a run's page holds exactly the replay document's steps, and the tools summed from the rebuilt state")
    func runDocument() throws {
        let view = try RunView.make(log: Self.supportLog)
        var steps: [JSONValue] = []
        let result = try Replayer(path: Self.supportLog).replay { step, _ in
            steps.append(step.json)
            return true
        }
        #expect(view.document["steps"] == .array(steps))
        #expect(view.document["schema"] == "agent-eval/replay")
        #expect(view.document["final_state"] == StateSummary(result.state).json)
        #expect(view.stepCount == steps.count && view.eventCount == result.state.eventCount)
        let tools = try #require(view.document["summary"]?["tools"]?.arrayValue)
        #expect(tools.map { $0["tool"]?.stringValue } == ["delete_customer", "get_customer", "lookup_order", "refund_order"])
        let delete = try #require(tools.first)
        #expect(delete["denied"] == 1 && delete["executed"] == 0 && delete["attempts"] == 0)
    }

    @Test("a pipeline's page holds the pipeline show document and each agent attempt's run, and is green only when it succeeded")
    func pipelineDocument() throws {
        let recorded = Self.repository.appendingPathComponent("Fixtures/pipelines/recorded/triage-recovery")
        let log = recorded.appendingPathComponent("pipeline.jsonl.gz").path
        let view = try PipelineRunView.make(log: log)
        #expect(view.document["view"] == "pipeline")
        #expect(view.document["pipeline"] == (try PipelineReplay(log: log)).json(log: log))
        let child = recorded.appendingPathComponent("tasks/classify_with_agent-1.jsonl.gz").path
        #expect(view.embedded == [child] && view.leftOut.isEmpty)
        #expect(view.document["runs"]?.arrayValue?.first?["run"] == (try RunView.make(log: child)).document)
        #expect(view.isOK && view.status == "succeeded" && view.taskCount == 5)
        #expect(view.page.title == "pipeline triage-recovery (pipe-triage-recovery)")

        // The same log cut before pipeline_stopped: the tasks ran, the pipeline did not succeed.
        try TemporaryDirectory.with { directory in
            let cut = directory.path("pipeline.jsonl.gz")
            let events = try PipelineReplay(log: log).events.dropLast()
            try LogWriter.withWriter(creating: cut, runId: "pipe-triage-recovery") { writer in
                for event in events { try writer.append(event.payload, step: event.step, timeUs: event.timeUs) }
            }
            let interrupted = try PipelineRunView.make(log: cut, eventBudget: 0)
            #expect(!interrupted.isOK && interrupted.document["summary"]?["outcome"] == "interrupted")
            #expect(interrupted.embedded.isEmpty && interrupted.leftOut == [directory.path("tasks/classify_with_agent-1.jsonl.gz")])
        }
    }

    @Test("a damaged log's page keeps the steps before the damage and says where reading stopped")
    func damagedLog() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("torn.jsonl.gz")
            var corpus = SyntheticCorpus()
            try corpus.writeDamagedRun(to: path, events: 3_000)
            let view = try RunView.make(log: path)
            let error = try #require(view.error)
            #expect(view.stepCount > 0 && view.stepCount < 500)
            #expect(view.document["error"]?["code"]?.stringValue == (error as any Diagnostic).diagnosticCode)
            #expect(view.document["steps"]?.arrayValue?.count == view.stepCount)
        }
    }

    @Test("planted markup cannot end the data element, and a {{placeholder}} in a log is not expanded")
    func escaping() throws {
        let planted = "</script><script>window.__pwned=1</script><!-- {{script}} {{data}}"
        let data: JSONValue = ["view": "run", "run": ["steps": [], "summary": ["goal": .string(planted)]]]
        let page = try HTMLPage(title: planted, data: data).render(with: try ViewerAssets.load(from: Self.assets))
        let html = String(decoding: page, as: UTF8.self)
        #expect(html.components(separatedBy: "<script").count - 1 == 2, "only the data element and the viewer's script")
        #expect(html.components(separatedBy: "</script>").count - 1 == 2)
        #expect(html.contains("<title>&lt;/script&gt;&lt;script&gt;window.__pwned=1&lt;/script&gt;&lt;!-- {{script}} {{data}}</title>"))
        let (encoding, text) = try Self.embedded(page)
        #expect(encoding == "json")
        #expect(!text.contains("<"))
        #expect(try JSONParser.parse(Array(text.utf8)) == data)
    }

    @Test("large data is embedded gzip-compressed, and the real gzip reads it back to the same document")
    func compression() async throws {
        let view = try RunView.make(log: Self.supportLog)
        let data: JSONValue = ["view": "run", "run": view.document]
        let page = try HTMLPage(title: "t", data: data).render(with: try ViewerAssets.load(from: Self.assets), compressionThreshold: 1_000)
        let (encoding, text) = try Self.embedded(page)
        #expect(encoding == "gzip+base64")
        let compressed = try #require(Base64.decode(text))
        try await TemporaryDirectory.with { directory in
            let path = directory.path("data.json.gz")
            try Data(compressed).write(to: URL(fileURLWithPath: path))
            let gzip = try await Subprocess.run("/bin/sh", ["-c", "gzip -dc '\(path)'"])
            #expect(gzip.status == 0, "\(gzip.stderr)")
            #expect(try JSONParser.parse(gzip.stdout) == data)
        }
    }

    @Test("the page's Content-Security-Policy allows its own script by hash, and no network at all")
    func contentSecurityPolicy() async throws {
        let assets = try ViewerAssets.load(from: Self.assets)
        let html = String(decoding: try HTMLPage(title: "t", data: ["view": "run"]).render(with: assets), as: UTF8.self)
        let hash = try await Subprocess.run(
            "/usr/bin/env",
            [
                "python3", "-c",
                "import base64,hashlib,sys; print(base64.b64encode(hashlib.sha256(open(sys.argv[1],'rb').read()).digest()).decode())",
                Self.assets + "/viewer.js",
            ])
        let expected = "'sha256-" + hash.stdoutText.trimmingCharacters(in: .whitespacesAndNewlines) + "'"
        #expect(html.contains("default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src \(expected)\""))
        #expect(html.contains("<script>" + assets.script + "</script>"))
        // The SVG namespace is a name, not an address; nothing else may look like one.
        let addresses = html.replacingOccurrences(of: "'http://www.w3.org/2000/svg'", with: "")
        #expect(!addresses.contains("http://") && !addresses.contains("https://"), "nothing is fetched")
    }

    @Test("a report's page embeds failing cases' runs first and leaves the rest out past the event budget")
    func reportRuns() throws {
        let results: JSONValue = [
            "schema": "agent-eval/results",
            "cases": [
                ["case_id": "ok", "outcome": "pass", "runs": [["log": .string(Self.supportLog), "failures": []]]],
                [
                    "case_id": "bad", "outcome": "fail",
                    "runs": [
                        [
                            "log": .string(ExampleRuns.directory.appendingPathComponent("research-budget.jsonl.gz").path),
                            "failures": [["expectation": "x", "step": 2]],
                        ]
                    ],
                ],
                ["case_id": "gone", "outcome": "fail", "runs": [["log": "/nonexistent/run.jsonl.gz", "failures": []]]],
            ],
        ]
        let all = ReportView.make(results: results)
        #expect(all.embedded == [ExampleRuns.directory.appendingPathComponent("research-budget.jsonl.gz").path, Self.supportLog])
        #expect(all.leftOut == ["/nonexistent/run.jsonl.gz"])
        let small = ReportView.make(results: results, eventBudget: 1)
        #expect(small.embedded.count == 1 && small.leftOut.count == 2)
        #expect(small.document["runs_left_out"]?.arrayValue?.contains(.string(Self.supportLog)) == true)
    }

    @Test("a report's page lists a pipeline case's pipeline log for its own page and embeds its tasks' runs, never the pipeline as a run")
    func reportPipelines() throws {
        let recorded = Self.repository.appendingPathComponent("Fixtures/pipelines/recorded/triage-recovery")
        let pipeline = recorded.appendingPathComponent("pipeline.jsonl.gz").path
        let child = recorded.appendingPathComponent("tasks/classify_with_agent-1.jsonl.gz").path
        let results: JSONValue = [
            "schema": "agent-eval/results",
            "cases": [
                [
                    "case_id": "pipe", "outcome": "fail",
                    "runs": [["log": .string(pipeline), "failures": [["expectation": "tasks.x", "log": .string(child), "step": 1]]]],
                ]
            ],
        ]
        let view = ReportView.make(results: results)
        #expect(view.document["pipelines"] == [.string(pipeline)])
        #expect(view.embedded == [child])
        let logs = view.document["runs"]?.arrayValue?.compactMap { $0["log"]?.stringValue } ?? []
        #expect(!logs.contains(pipeline))
    }

    @Test("a diff's page names the call and the argument where the runs part")
    func diffDivergence() throws {
        try TemporaryDirectory.with { directory in
            for (name, cents) in [("a", 4999), ("b", 2500)] {
                try LogWriter.withWriter(creating: directory.path("\(name).jsonl.gz"), runId: "run-\(name)") { writer in
                    _ = try SampleRun.recordSupportRun(into: writer, refundCents: cents)
                }
            }
            let view = try DiffView.make(left: directory.path("a.jsonl.gz"), right: directory.path("b.jsonl.gz"))
            let first = try #require(view.document["diff"]?["first_divergence"])
            #expect(first["call_id"] == "call-2")
            #expect(first["field"] == "arguments.amount_cents")
            #expect(first["left"] == "4999" && first["right"] == "2500")
            #expect(view.document["left"]?["steps"]?.arrayValue?.count == view.document["right"]?["steps"]?.arrayValue?.count)
        }
    }
}
