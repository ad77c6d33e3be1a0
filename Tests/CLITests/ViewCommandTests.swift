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
    func viewDefaults() throws {
        try TemporaryDirectory.with { directory in
            let result = try agentEval(["view", Self.supportLog, "--step", "2"], in: directory.url)
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

    @Test("view --json says what was written")
    func viewJSON() throws {
        try TemporaryDirectory.with { directory in
            let page = directory.path("pages/run.html")
            let result = try agentEval(["view", Self.supportLog, "--out", page, "--json"])
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
    func viewDamaged() throws {
        try TemporaryDirectory.with { directory in
            let log = directory.path("long.jsonl.gz")
            var corpus = SyntheticCorpus()
            try corpus.writeDamagedRun(to: log, events: 1_000)
            let page = directory.path("long.html")
            let result = try agentEval(["view", log, "--out", page])
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
    func viewMissingStep() throws {
        try TemporaryDirectory.with { directory in
            let page = directory.path("run.html")
            let result = try agentEval(["view", Self.supportLog, "--step", "12", "--out", page])
            #expect(result.status == 64)
            #expect(result.stderr.contains("has no step 12"))
            #expect(!FileManager.default.fileExists(atPath: page))
        }
    }

    @Test("run --html writes the report page with the runs its failures point at")
    func runHTML() throws {
        try TemporaryDirectory.with { directory in
            let page = directory.path("report.html")
            let result = try agentEval(
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
            let json = try agentEval(
                ["run", "Fixtures/eval/failing", "--out", directory.path("runs2"), "--no-catalog", "--json", "--html", page],
                in: repositoryRoot)
            #expect(try JSONParser.parse(json.stdout)["schema"] == "agent-eval/results")
            #expect(json.stderr.contains("report page written: \(page)"))
        }
    }

    @Test("diff --html writes both runs and the diff; the terminal output stays the same")
    func diffHTML() throws {
        try TemporaryDirectory.with { directory in
            let research = ExampleRuns.directory.appendingPathComponent("research-budget.jsonl.gz").path
            let page = directory.path("diff.html")
            let plain = try agentEval(["diff", Self.supportLog, research])
            let result = try agentEval(["diff", Self.supportLog, research, "--html", page])
            #expect(result.status == 1)
            #expect(result.stdoutText == plain.stdoutText + "wrote \(page): file://\(page)\n")
            let data = try Self.pageData(page)
            #expect(data["view"] == "diff")
            #expect(data["diff"]?["first_divergence"]?["path"] != nil)
            #expect(data["left"]?["log"] == .string(Self.supportLog) && data["right"]?["log"] == .string(research))
        }
    }

    @Test("results merge --html makes one page of the shards' reports")
    func mergeHTML() throws {
        try TemporaryDirectory.with { directory in
            for index in 1...2 {
                let shard = try agentEval(
                    [
                        "run", "Fixtures/eval/failing", "--shard", "\(index)/2", "--json-out", directory.path("shard-\(index).json"),
                        "--no-catalog", "--quiet", "--out", directory.path("runs-\(index)"),
                    ], in: repositoryRoot)
                #expect(shard.status == 1 || shard.status == 0, "\(shard.stderr)")
            }
            let page = directory.path("all.html")
            let merged = try agentEval(
                ["results", "merge", directory.path("shard-1.json"), directory.path("shard-2.json"), "--html", page], in: repositoryRoot)
            #expect(merged.status == 1, "\(merged.stderr)")
            let data = try Self.pageData(page)
            #expect(data["results"]?["cases"]?.arrayValue?.count == 5)
            #expect((data["runs"]?.arrayValue?.count ?? 0) == 3)
        }
    }
}
