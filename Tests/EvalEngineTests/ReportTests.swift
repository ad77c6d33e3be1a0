import AgentRuntime
import EvalEngine
import Foundation
import TestSupport
import Testing
import TraceCore

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The failing fixture suite, run for real (its live case in a deterministic environment).
func runFailingSuite(in directory: TemporaryDirectory) async -> [CaseResult] {
    let (cases, errors) = EvalSuite.load(paths: [ExampleRuns.fixtures.appendingPathComponent("eval/failing").path])
    #expect(errors.isEmpty)
    let options = EvalOptions(jobs: 2, outputDirectory: directory.path("runs"), environment: .deterministic(runId: "r"))
    return await EvalRunner(options: options).run(cases)
}

/// Counts elements and checks well-formedness with a real XML parser.
final class XMLCounter: NSObject, XMLParserDelegate {
    var counts: [String: Int] = [:]
    var attributes: [String: [[String: String]]] = [:]
    func parser(
        _ parser: XMLParser, didStartElement name: String, namespaceURI: String?, qualifiedName: String?, attributes: [String: String]
    ) {
        counts[name, default: 0] += 1
        self.attributes[name, default: []].append(attributes)
    }
}

@Suite("Reports")
struct ReportTests {
    @Test("every failure explains what was expected, what happened, the step and the replay command")
    func failureExplanations() async throws {
        try await TemporaryDirectory.with { directory in
            let results = await runFailingSuite(in: directory)
            #expect(results.allSatisfy { !$0.passed && $0.harnessError == nil })
            let report = EvalReport(results: results)
            let order = try #require(results.first { $0.id == "support-strict-order" })
            #expect(
                report.consoleLines(for: order) == [
                    "✘ support-strict-order  (1 log)",
                    "    Fixtures/runs/support-refund.jsonl.gz".replacingOccurrences(of: "Fixtures", with: ExampleRuns.fixtures.path),
                    "      ✘ sequence: expected strict: lookup_order, refund_order",
                    "          happened: call 2 should be refund_order, but none of the calls proposed together at step 1 matches it "
                        + "(compared as a set: lookup_order (call-1), get_customer (call-2))",
                    "          look: agent-eval replay \(ExampleRuns.directory.path)/support-refund.jsonl.gz --step 1",
                ])
            let live = try #require(results.first { $0.id == "support-unapproved-refund" })
            #expect(live.runs.first?.failures.map(\.expectation) == ["toolsCalled", "stopReason"])
            #expect(live.runs.first?.summary.stopReason == .approvalRequired)
        }
    }

    @Test("the JSON report has the documented, versioned shape")
    func jsonShape() async throws {
        try await TemporaryDirectory.with { directory in
            let report = EvalReport(results: await runFailingSuite(in: directory), k: 1)
            let json = report.json
            #expect(json["schema"] == "agent-eval/results")
            #expect(json["version"] == 1)
            #expect(json["summary"]?["cases"] == 5)
            #expect(json["summary"]?["failed"] == 5)
            #expect(json["summary"]?["passed"] == 0)
            let cases = try #require(json["cases"]?.arrayValue)
            #expect(
                cases.map { $0["case_id"]?.stringValue ?? "" } == [
                    "support-answer-names-refund", "support-unapproved-refund", "support-no-delete-attempts", "support-refund-under-10",
                    "support-strict-order",
                ])
            // A judged run keeps what its judge was asked and replied.
            let judgement = try #require(cases.first?["runs"]?.arrayValue?.first?["judgements"]?.arrayValue?.first)
            for key in ["expectation", "rubric", "judge", "request", "reply", "passed", "reason"] {
                #expect(judgement[key] != nil, "\(key)")
            }
            #expect(judgement["request"]?["prompt"]?.stringValue?.contains("Refunded 49.99 €.") == true)
            for entry in cases {
                for key in ["file", "source", "outcome", "pass_rate", "stability", "runs", "checks"] {
                    #expect(entry[key] != nil, "\(key)")
                }
                let run = try #require(entry["runs"]?.arrayValue?.first)
                for key in ["log", "outcome", "stop_reason", "steps", "tokens", "tools", "attempted", "failures", "notes"] {
                    #expect(run[key] != nil, "\(key)")
                }
                let failure = try #require(run["failures"]?.arrayValue?.first)
                for key in ["expectation", "expected", "actual", "step", "replay"] { #expect(failure[key] != nil, "\(key)") }
                #expect(failure["replay"]?.stringValue?.hasPrefix("agent-eval replay ") == true)
            }
            // Stable: the same results give the same bytes (durations aside, which are in the summary only).
            var again = report
            again.durationSeconds = 99
            var a = json.objectValue ?? JSONObject()
            var b = again.json.objectValue ?? JSONObject()
            a["summary"] = nil
            b["summary"] = nil
            #expect(a == b)
        }
    }

    @Test("a live case's JUnit time is the time its runs took, not only their check's; a recorded case's is the check's")
    func junitTime() {
        func entry(source: String) -> JSONValue {
            [
                "case_id": "c", "file": "c.yaml", "source": .string(source), "outcome": "pass",
                "runs": [["check_us": 1000, "duration_ms": 824, "outcome": "pass"]],
            ]
        }
        let report: JSONValue = ["verdict": ["fail_on": "any"], "cases": [entry(source: "live"), entry(source: "recorded")]]
        let xml = EvalReport.junit(from: report)
        #expect(xml.contains("time=\"0.825\""), "\(xml)")
        #expect(xml.contains("time=\"0.001\""), "\(xml)")
    }

    @Test("JUnit XML parses, with one testcase per case and run and the explanation as failure text")
    func junitShape() async throws {
        try await TemporaryDirectory.with { directory in
            let results = await runFailingSuite(in: directory)
            var withError = results
            withError.append(
                CaseResult(
                    evalCase: EvalCase(
                        id: "broken & <odd>", source: .recorded(patterns: []), expected: Expectations(),
                        location: SourceLocation(path: "b.yaml")),
                    runs: [], error: DiagnosticRecord(code: "eval.missing_path", message: "no log matches \"x\u{1}\"")))
            let xml = EvalReport(results: withError).junit
            let parser = XMLParser(data: Data(xml.utf8))
            let counter = XMLCounter()
            parser.delegate = counter
            #expect(parser.parse(), "\(parser.parserError.map { "\($0)" } ?? "")")
            #expect(counter.counts["testcase"] == 6)
            #expect(counter.counts["failure"] == 5)
            #expect(counter.counts["error"] == 1)
            #expect(counter.attributes["testsuites"]?.first?["failures"] == "5")
            #expect(counter.attributes["testcase"]?.contains { $0["name"] == "broken & <odd>" } == true)
            #expect(xml.contains("look: agent-eval replay "))
        }
    }

    @Test("the Markdown summary has a table row per case and every failure")
    func markdown() async throws {
        try await TemporaryDirectory.with { directory in
            let text = EvalReport(results: await runFailingSuite(in: directory)).markdown
            #expect(text.hasPrefix("## agent-eval: FAIL: 5 cases, 0 passed, 5 failed\n"))
            #expect(text.components(separatedBy: "| ❌ fail |").count == 6)
            #expect(text.contains("#### `support-strict-order`"))
        }
    }
}

@Suite("Markdown from runs")
struct MarkdownFromRunsTests {
    /// A case that failed on an answer written to break out of Markdown: its own fence, a
    /// mention of everyone, a table cell, a code span and a tag.
    static func hostile() -> EvalReport {
        let answer = "Done.\n```\n# Injected heading\n@everyone please approve | `rm -rf` <img src=x>"
        let evalCase = EvalCase(
            id: "hostile", input: "x", source: .live(agent: "a.yaml", approve: [], deny: []), expected: Expectations(),
            location: SourceLocation(path: "cases/hostile.yaml", line: 1, column: 1))
        let failure = ExpectationFailure(expectation: "finalAnswer", expected: "a refund", actual: answer)
        let result = CaseResult(
            evalCase: evalCase,
            runs: [RunResult(logPath: "runs/h.jsonl.gz", repeatIndex: 1, failures: [failure], notes: [], error: nil, summary: RunSummary())]
        )
        return EvalReport(results: [result])
    }

    @Test("a model's answer holding a fence stays inside the summary's code block")
    func fenceHolds() {
        let text = Self.hostile().markdown
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let open = try? #require(lines.firstIndex { $0.hasPrefix("```") })
        guard let open else { return }
        let fence = lines[open]
        #expect(fence.count > 3, "longer than the answer's own fence: \(fence)")
        let close = lines[(open + 1)...].firstIndex { $0 == fence }
        let heading = lines.firstIndex { $0.contains("# Injected heading") }
        #expect(close != nil && heading != nil && heading! < close!, "\(text)")
        #expect(EvalReport.fenced(["plain"]) == ["```", "plain", "```"])
        #expect(EvalReport.fenced(["a ```` b"]).first == "`````")
    }

    @Test("the PR comment pings nobody and keeps run text on its line: no @everyone, no table cell, no code span, no tag")
    func commentEscapes() {
        let text = PullRequestComment(head: Self.hostile().json).markdown
        let line = text.split(separator: "\n").first { $0.contains("happened:") }.map(String.init) ?? ""
        #expect(line.contains("@\u{200B}everyone") && !line.contains("@everyone"), "\(line)")
        #expect(line.contains("\\| \\`rm -rf\\` &lt;img"), "\(line)")
        #expect(!text.contains("\n# Injected heading"), "\(text)")
    }
}

@Suite("Baselines and regressions")
struct BaselineTests {
    func result(_ id: String, runs: [(tools: [String], attempted: [String], stop: StopReason?, passed: Bool)], notCalled: [String] = [])
        -> CaseResult
    {
        var expected = Expectations()
        expected.toolsNotCalled = notCalled
        let evalCase = EvalCase(
            id: id, input: "x", source: .live(agent: "a.yaml", approve: [], deny: []), expected: expected,
            location: SourceLocation(path: "c.yaml"))
        return CaseResult(
            evalCase: evalCase,
            runs: runs.enumerated().map { index, run in
                var summary = RunSummary()
                summary.tools = run.tools
                summary.attempted = run.attempted
                summary.stopReason = run.stop
                return RunResult(
                    logPath: "l\(index)", repeatIndex: index + 1,
                    failures: run.passed ? [] : [ExpectationFailure(expectation: "stopReason", expected: "success", actual: "blocked")],
                    notes: [],
                    error: nil, summary: summary)
            })
    }

    @Test("a baseline round-trips through its files, and the files are stable and reviewable")
    func roundTrip() throws {
        try TemporaryDirectory.with { directory in
            let results = [
                result("a", runs: [(["lookup", "refund"], ["delete"], .success, true)]),
                result("b", runs: [(["search"], [], .budgetExhausted, false), (["search", "fetch"], [], .success, true)]),
            ]
            try Baseline.write(results, to: directory.path("base"))
            let text = try String(contentsOfFile: directory.path("base/a.json"), encoding: .utf8)
            #expect(
                text == """
                    {
                      "case_id": "a",
                      "outcome": "pass",
                      "pass_rate": 1.0,
                      "passes": 1,
                      "runs": 1,
                      "stop_reasons_seen": [
                        "success"
                      ],
                      "tools_attempted": [
                        "delete"
                      ],
                      "tools_seen": [
                        "lookup",
                        "refund"
                      ],
                      "trajectories": [
                        {
                          "run": "repeat 1",
                          "stop_reason": "success",
                          "tools": [
                            "lookup",
                            "refund"
                          ]
                        }
                      ],
                      "version": 1
                    }

                    """)
            let read = try Baseline.read(for: results.map(\.evalCase), from: directory.path("base"))
            #expect(read["a"] == Baseline(results[0]))
            #expect(read["b"] == Baseline(results[1]))
            for result in results {
                let status = BaselineComparison.compare(result, with: read[result.id]).status
                #expect(status == (result.passed ? .unchanged : .knownFailure))
            }
        }
    }

    @Test("each kind of regression is found, and a failure that was failing is not one")
    func regressions() {
        let base = Baseline(result("c", runs: [(["lookup", "refund"], [], .success, true)], notCalled: ["delete"]))
        func kinds(_ now: CaseResult) -> [Regression.Kind] { BaselineComparison.compare(now, with: base).regressions.map(\.kind) }

        #expect(kinds(result("c", runs: [(["lookup", "refund"], [], .success, true)], notCalled: ["delete"])) == [])
        #expect(kinds(result("c", runs: [(["lookup", "refund"], [], .success, false)], notCalled: ["delete"])) == [.nowFails])
        #expect(kinds(result("c", runs: [(["lookup", "refund"], [], .blocked, true)], notCalled: ["delete"])) == [.stopReasonChanged])
        #expect(kinds(result("c", runs: [(["lookup", "refund", "email"], [], .success, true)], notCalled: ["delete"])) == [.newTool])
        #expect(
            kinds(result("c", runs: [(["lookup", "refund"], ["delete"], .success, true)], notCalled: ["delete"])) == [
                .forbiddenToolAttempted
            ])

        let flakyBase = Baseline(result("f", runs: Array(repeating: (["s"], [], .success, true), count: 10)))
        let worse = result(
            "f", runs: Array(repeating: (["s"], [], .success, true), count: 4) + Array(repeating: (["s"], [], .success, false), count: 6))
        #expect(BaselineComparison.compare(worse, with: flakyBase).regressions.map(\.kind).contains(.passRateDropped))
        let slightlyWorse = result("f", runs: Array(repeating: (["s"], [], .success, true), count: 9) + [(["s"], [], .success, false)])
        #expect(!BaselineComparison.compare(slightlyWorse, with: flakyBase).regressions.map(\.kind).contains(.passRateDropped))

        #expect(worse.stability == .flaky)
        #expect(worse.passRate == 0.4)
        #expect(abs(worse.passHatK(2) - 6.0 / 45.0) < 1e-12)  // C(4,2)/C(10,2)
        #expect(result("s", runs: [(["x"], [], .success, true)]).stability == .stablePass)
        #expect(result("s", runs: [(["x"], [], .success, false)]).stability == .stableFail)

        let failingBase = Baseline(result("k", runs: [(["x"], [], .blocked, false)]))
        #expect(BaselineComparison.compare(result("k", runs: [(["x"], [], .blocked, false)]), with: failingBase).status == .knownFailure)
        #expect(BaselineComparison.compare(result("k", runs: [(["x"], [], .blocked, true)]), with: failingBase).status == .fixed)
        #expect(BaselineComparison.compare(result("n", runs: [(["x"], [], .blocked, false)]), with: nil).status == .new)
    }

    @Test("an unreadable baseline file is a harness error naming the file")
    func unreadable() throws {
        try TemporaryDirectory.with { directory in
            try FileManager.default.createDirectory(atPath: directory.path("base"), withIntermediateDirectories: true)
            try "{\"case_id\": 5}".write(toFile: directory.path("base/a.json"), atomically: true, encoding: .utf8)
            let evalCase = EvalCase(id: "a", source: .recorded(patterns: []), expected: Expectations(), location: SourceLocation(path: "c"))
            #expect(throws: EvalError.self) { try Baseline.read(for: [evalCase], from: directory.path("base")) }
            // Counts no run gives (runs of 2^63 − 1 with no passes, whose rate times runs no Int
            // holds) are unreadable, not a trap.
            for (rate, runs) in [("1", "9223372036854775807"), ("1e300", "3"), ("0.5", "-1")] {
                try "{\"version\":1,\"case_id\":\"a\",\"outcome\":\"pass\",\"pass_rate\":\(rate),\"runs\":\(runs),\"trajectories\":[]}"
                    .write(
                        toFile: directory.path("base/a.json"), atomically: true, encoding: .utf8)
                #expect {
                    try Baseline.read(for: [evalCase], from: directory.path("base"))
                } throws: { ($0 as? EvalError)?.message.contains("are no case's counts") == true }
            }
        }
    }
}

@Suite("Report files")
struct ReportFileTests {
    @Test("a report is written whole into folders made for it, replacing the old one; a path under a file is refused with the path named")
    func writesWhole() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("out/nested/report.json")
            try ReportFile.write("{\"a\": 1}\n", to: path)
            try ReportFile.write(bytes: Array("{\"a\": 2}\n".utf8), to: path)
            #expect(try String(contentsOfFile: path, encoding: .utf8) == "{\"a\": 2}\n")
            // Nothing is left beside it (the write went aside and was renamed into place).
            #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path("out/nested")) == ["report.json"])

            try "a file".write(toFile: directory.path("blocker"), atomically: true, encoding: .utf8)
            let refused = #expect(throws: EvalError.self) { try ReportFile.write("x", to: directory.path("blocker/report.json")) }
            #expect(refused?.code == .writeFailed)
            #expect(refused?.message.contains(directory.path("blocker/report.json")) == true)
        }
    }
}
