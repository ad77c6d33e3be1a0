import ConfigFile
import EvalEngine
import Foundation
import TestSupport
import Testing
import TraceCore

#if canImport(FoundationXML)
    import FoundationXML
#endif

/// The gate teams live with: attempts and their outcome rule, harness failures kept apart,
/// baselines that only grow, exact tests of a falling pass rate, quarantine — and every report
/// agreeing with the exit status.
@Suite("The gate")
struct GateTests {
    /// An attempt: passed, failed, or could not run.
    enum Attempt { case pass, fail, error }

    static func live(
        _ id: String, _ attempts: [Attempt], minPassRate: Double = 1, quarantine: QuarantineEntry? = nil, tools: [String] = ["lookup"],
        stop: StopReason = .success
    ) -> CaseResult {
        var evalCase = EvalCase(
            id: id, input: "x", source: .live(agent: "a.yaml", approve: [], deny: []), expected: Expectations(),
            location: SourceLocation(path: "cases/\(id).yaml", line: 3, column: 1))
        evalCase.minPassRate = minPassRate
        evalCase.quarantine = quarantine
        return CaseResult(
            evalCase: evalCase,
            runs: attempts.enumerated().map { index, attempt in
                var summary = RunSummary()
                summary.tools = tools
                summary.stopReason = stop
                summary.tokens = 100
                let failures =
                    attempt == .fail
                    ? [ExpectationFailure(expectation: "toolsCalled", expected: "refund is called", actual: "it was not", step: 2)] : []
                let error = attempt == .error ? DiagnosticRecord(EvalError(.badCase, "the model endpoint refused the connection")) : nil
                return RunResult(
                    logPath: "runs/\(id)-\(index + 1).jsonl.gz", repeatIndex: index + 1, failures: failures, notes: [], error: error,
                    summary: summary)
            })
    }

    static func entry(_ id: String, until: String) -> QuarantineEntry {
        QuarantineEntry(
            caseId: id, owner: "alice", reason: "#42", until: until, location: SourceLocation(path: "q.yaml", line: 2, column: 5))
    }

    static let passes = [Attempt](repeating: .pass, count: 10)

    @Test(
        "a mix of passes and failures is flaky_pass at or above the case's minPassRate, flaky_fail below it; recorded logs are never flaky")
    func outcomeRule() {
        let mixed: [Attempt] = [.pass, .pass, .pass, .pass, .fail]
        #expect(Self.live("a", mixed).outcome == .flakyFail)
        #expect(!Self.live("a", mixed).passed)
        #expect(Self.live("a", mixed, minPassRate: 0.8).outcome == .flakyPass)
        #expect(Self.live("a", mixed, minPassRate: 0.8).passed)
        #expect(Self.live("a", mixed, minPassRate: 0.81).outcome == .flakyFail)
        #expect(Self.live("a", [.pass, .pass]).outcome == .pass)
        #expect(Self.live("a", [.fail, .fail]).outcome == .fail)
        var recorded = Self.live("r", mixed, minPassRate: 0.5)
        recorded.evalCase.source = .recorded(patterns: ["*.gz"])
        #expect(recorded.outcome == .fail, "each recorded log must pass")
    }

    @Test("an attempt that could not run is a harness error, counted in neither passes nor failures, and never moves a baseline")
    func harnessErrorsApart() throws {
        let result = Self.live("h", [.pass, .pass, .error, .fail])
        #expect(result.outcome == .error)
        #expect(result.counts == PassCounts(passes: 2, attempts: 3))
        let report = EvalReport(results: [result])
        #expect(report.exitStatus == 2)
        #expect(report.json["cases"]?.arrayValue?.first?["attempts"] == ["passed": 2, "failed": 1, "could_not_run": 1])
        // pass^k, pass@k and stability over the attempts that ran, as the pass rate: attempts
        // that could not run make no case flaky and no draw a failure.
        let halfRan = Self.live("c", [.pass, .error, .pass, .pass, .error, .pass])
        #expect(halfRan.passRate == 1 && halfRan.passHatK(4) == 1 && halfRan.passAtK(4) == 1)
        #expect(halfRan.stability == .stablePass)
        #expect(EvalReport(results: [halfRan], k: 5).json["cases"]?.arrayValue?.first?["pass_hat_k"] == nil, "fewer than k attempts ran")
        try TemporaryDirectory.with { directory in
            let before = Self.live("h", Self.passes)
            try Baseline.write([before], to: directory.path("base"))
            let text = try String(contentsOfFile: directory.path("base/h.json"), encoding: .utf8)
            let update = try Baseline.write([result], to: directory.path("base"))
            #expect(update.skipped == ["h"] && update.written.isEmpty)
            #expect(try String(contentsOfFile: directory.path("base/h.json"), encoding: .utf8) == text)
            // Compared with its baseline, a case that could not run says nothing of quality.
            let comparison = BaselineComparison.compare(
                result, with: try Baseline.read(for: [result.evalCase], from: directory.path("base"))["h"])
            #expect(comparison.status == .notRun)
            #expect(!comparison.regressions.contains { $0.kind == .nowFails || $0.kind == .passRateDropped })
        }
    }

    @Test("a run adds to a live case's baseline and never removes from it; --replace-baseline starts over")
    func baselinesOnlyGrow() throws {
        try TemporaryDirectory.with { directory in
            let base = directory.path("base")
            try Baseline.write([Self.live("g", [.pass, .pass, .pass], tools: ["lookup", "refund"])], to: base)
            try Baseline.write([Self.live("g", [.pass, .fail], tools: ["lookup"], stop: .budgetExhausted)], to: base)
            let evalCase = Self.live("g", []).evalCase
            var read = try #require(try Baseline.read(for: [evalCase], from: base)["g"])
            #expect(read.counts == PassCounts(passes: 4, attempts: 5))
            #expect(read.toolsSeen == ["lookup", "refund"], "a run that did not call refund does not remove it")
            #expect(read.stopReasonsSeen == ["budget_exhausted", "success"])
            #expect(read.outcome == "flaky_fail")
            let json = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: base + "/g.json"))))
            #expect(json["passes"] == 4 && json["runs"] == 5, "the sample size behind the entry")
            try Baseline.write([Self.live("g", [.pass])], to: base, replacing: true)
            read = try #require(try Baseline.read(for: [evalCase], from: base)["g"])
            #expect(read.counts == PassCounts(passes: 1, attempts: 1))
            // A file from before baselines kept their passes (when a case that could not run was
            // written as a failure) is replaced by the next update, not added to.
            var legacy = try JSONParser.parse(Array(try Data(contentsOf: URL(fileURLWithPath: base + "/g.json"))))
            if case .object(var members) = legacy {
                members["passes"] = nil
                members["outcome"] = "fail"
                members["pass_rate"] = 0.0
                members["runs"] = 3
                legacy = .object(members)
            }
            try JSONWriter.encodePretty(legacy).write(toFile: base + "/g.json", atomically: true, encoding: .utf8)
            try Baseline.write([Self.live("g", [.pass, .pass])], to: base)
            read = try #require(try Baseline.read(for: [evalCase], from: base)["g"])
            #expect(read.counts == PassCounts(passes: 2, attempts: 2))
        }
    }

    @Test("a fall of a repeated case's pass rate is a regression only when the exact test says so and it is at least --min-drop")
    func exactRegressions() throws {
        let baseline = Baseline(Self.live("f", Self.passes))
        func compare(_ attempts: [Attempt], _ policy: RegressionPolicy = RegressionPolicy()) -> BaselineComparison {
            BaselineComparison.compare(Self.live("f", attempts), with: baseline, policy: policy)
        }
        let worse: [Attempt] = [.pass, .pass, .pass] + [Attempt](repeating: .fail, count: 7)
        let dropped = compare(worse)
        #expect(dropped.status == .regressed)
        // A flaky pass that regressed fails the gate, and its console line says so with ✘.
        let flakyRegressed = Self.live("f", worse, minPassRate: 0.3)
        let regressedReport = EvalReport(
            results: [flakyRegressed], comparisons: ["f": BaselineComparison.compare(flakyRegressed, with: baseline)], hasBaseline: true)
        #expect(flakyRegressed.passed && regressedReport.exitStatus == 1)
        #expect(regressedReport.consoleLines(for: flakyRegressed).first?.hasPrefix("✘ f") == true)
        var onlyFailures = regressedReport
        onlyFailures.failOn = .failure
        #expect(onlyFailures.exitStatus == 0 && onlyFailures.consoleLines(for: flakyRegressed).first?.hasPrefix("✔ f") == true)
        let rate = try #require(dropped.passRate)
        #expect(
            abs(rate.pValue - PassRateTest.fisher.pValue(baseline: PassCounts(passes: 10, attempts: 10), current: rate.current)) < 1e-15)
        #expect(rate.pValue < 0.01)
        #expect(dropped.regressions.first?.message.contains("pass rate 3/10") == true)
        #expect(dropped.regressions.first?.message.contains("vs 10/10 in the baseline") == true)

        // 8 of 10 after 10 of 10: p = 0.24 — noise at this sample size; not a regression.
        let noise = compare([Attempt](repeating: .pass, count: 8) + [.fail, .fail])
        #expect(noise.status == .notSignificant)
        #expect(noise.regressions.isEmpty)
        // Barnard's test is more powerful: 7 of 10 is significant by it (p = 0.044), not by Fisher's (0.105).
        let seven = [Attempt](repeating: .pass, count: 7) + [.fail, .fail, .fail]
        #expect(compare(seven).status == .notSignificant)
        #expect(compare(seven, RegressionPolicy(test: .barnard)).status == .regressed)
        // A significant fall smaller than --min-drop is not one.
        #expect(compare(worse, RegressionPolicy(minDrop: 0.8)).status == .notSignificant)
        #expect(compare(worse, RegressionPolicy(alpha: 0.0001)).status == .notSignificant)
        // One attempt now, whatever the baseline's sample: passed, fails now, regressed — a
        // single attempt can never be significant, and the gate must not wave it through.
        let single = BaselineComparison.compare(Self.live("s", [.fail]), with: Baseline(Self.live("s", [.pass])))
        #expect(single.regressions.map(\.kind) == [.nowFails])
        #expect(single.passRate == nil)
        #expect(BaselineComparison.compare(Self.live("f", [.fail]), with: baseline).regressions.map(\.kind) == [.nowFails])
        // A case that could not run is compared with nothing, even what its other attempts did.
        let broken = BaselineComparison.compare(Self.live("f", [.pass, .error], tools: ["lookup", "delete"]), with: baseline)
        #expect(broken.status == .notRun && broken.regressions.isEmpty)
        // A stop reason no baseline attempt ended with is a regression of a live case; one any did is not.
        let other = BaselineComparison.compare(Self.live("f", Self.passes, stop: .budgetExhausted), with: baseline)
        #expect(other.regressions.map(\.kind) == [.stopReasonChanged])
    }

    @Test("the quarantine file is read with every problem at its line, and a case quarantined twice is an error")
    func quarantineFile() throws {
        try TemporaryDirectory.with { directory in
            let path = directory.path("quarantine.yaml")
            try """
            quarantine:
              - case: a
                owner: alice
                reason: "#42"
                until: 2026-02-30
              - case: b
                owner: bob
                until: 2999-01-01
              - case: a
                owner: carol
                reason: again
                until: 2999-01-01
                extra: 1
            """.write(toFile: path, atomically: true, encoding: .utf8)
            #expect(throws: ConfigErrors.self) { try QuarantineFile.load(path: path) }
            do throws(ConfigErrors) {
                _ = try QuarantineFile.load(path: path)
            } catch {
                let messages = error.errors.map(\.description)
                #expect(
                    messages.contains { $0.contains("quarantine.yaml:5:12") && $0.contains("YYYY-MM-DD, found \"2026-02-30\"") },
                    "\(messages)")
                #expect(messages.contains { $0.contains("quarantine.yaml:6:5") && $0.contains("reason") }, "\(messages)")
                #expect(messages.contains { $0.contains("quarantine.yaml:13:5") && $0.contains("extra") }, "\(messages)")
            }
            // A case id the case files could not have is refused where it is written.
            try "quarantine:\n  - {case: \"bad id!\", owner: o, reason: r, until: 2999-01-01}\n".write(
                toFile: directory.path("odd.yaml"), atomically: true, encoding: .utf8)
            do throws(ConfigErrors) {
                _ = try QuarantineFile.load(path: directory.path("odd.yaml"))
                Issue.record("a case id with a space and ! was read")
            } catch {
                #expect(error.errors.first?.description.contains("odd.yaml:2:") == true)
                #expect(error.errors.first?.message.contains("case \"bad id!\" may only hold letters") == true, "\(error.errors)")
            }
            var file = QuarantineFile(path: path, entries: [Self.entry("b", until: "2999-01-01"), Self.entry("a", until: "2000-01-01")])
            try file.save()
            let read = try QuarantineFile.load(path: path)
            #expect(read.entries.map(\.caseId) == ["a", "b"], "sorted by case id")
            #expect(read.entry(for: "a")?.isExpired() == true)
            #expect(read.entry(for: "b")?.isExpired() == false)
            file = read
            var cases = [Self.live("a", [.pass]).evalCase]
            cases[0].quarantine = Self.entry("a", until: "2999-01-01")
            let problems = file.apply(to: &cases)
            #expect(problems.count == 1)
            #expect(problems.first?.message.contains("quarantined both in its file") == true)
        }
    }

    @Test("a held quarantine keeps a failing or regressed case from failing the gate; an expired one fails it whatever it did")
    func quarantineGate() {
        let held = Self.entry("q", until: "2999-12-31")
        let expired = Self.entry("q", until: "2001-01-01")
        var report = EvalReport(results: [Self.live("ok", [.pass]), Self.live("q", [.fail, .fail], quarantine: held)])
        #expect(report.exitStatus == 0)
        #expect(report.counts.quarantined == 1 && report.counts.failed == 0)
        #expect(report.summaryLine.hasPrefix("PASS: 2 cases, 1 passed, 0 failed, 1 quarantined"))
        report = EvalReport(results: [Self.live("q", [.pass], quarantine: expired)])
        #expect(report.exitStatus == 1)
        #expect(report.counts.expiredQuarantines == 1 && report.counts.failed == 1)
        report.failOn = .regression
        #expect(report.exitStatus == 1, "an expired quarantine fails under every --fail-on")
        // The console marks what the gate does: a passing case whose quarantine expired is ✘.
        #expect(report.consoleLines(for: report.results[0]).first?.hasPrefix("✘ q") == true)
        // A harness error is one whether or not the case is quarantined.
        #expect(EvalReport(results: [Self.live("q", [.error], quarantine: held)]).exitStatus == 2)
        // The counts come from the few members that decide them, and agree with the whole entries.
        let mixed = EvalReport(results: [
            Self.live("ok", [.pass]), Self.live("bad", [.fail]), Self.live("flaky", [.pass, .fail]), Self.live("err", [.error]),
            Self.live("q", [.fail, .fail], quarantine: held),
        ])
        let whole = ReportCounts(entries: mixed.json["cases"]?.arrayValue ?? [], compared: mixed.hasBaseline)
        #expect(mixed.counts == whole)
    }

    /// Reports of every kind of suite, under every --fail-on.
    static func scenarios() -> [(name: String, report: EvalReport)] {
        let baseline = Baseline(Self.live("r", Self.passes))
        let regressedResult = Self.live("r", [.pass, .pass] + [Attempt](repeating: .fail, count: 8))
        let suites: [(String, [CaseResult], [String: BaselineComparison])] = [
            ("all pass", [Self.live("a", [.pass]), Self.live("b", [.pass, .pass])], [:]),
            ("flaky pass", [Self.live("a", [.pass, .pass, .pass, .fail], minPassRate: 0.75)], [:]),
            ("flaky fail", [Self.live("a", [.pass, .fail])], [:]),
            ("error", [Self.live("a", [.pass]), Self.live("e", [.error])], [:]),
            ("quarantined", [Self.live("q", [.fail], quarantine: Self.entry("q", until: "2999-01-01"))], [:]),
            ("expired", [Self.live("q", [.pass], quarantine: Self.entry("q", until: "2000-01-01"))], [:]),
            (
                "regressed", [regressedResult, Self.live("k", [.fail])],
                [
                    "r": BaselineComparison.compare(regressedResult, with: baseline),
                    "k": BaselineComparison.compare(Self.live("k", [.fail]), with: Baseline(Self.live("k", [.fail]))),
                ]
            ),
        ]
        return suites.flatMap { name, results, comparisons in
            FailOn.allCases.map { failOn in
                (
                    "\(name), --fail-on \(failOn.rawValue)",
                    EvalReport(results: results, comparisons: comparisons, hasBaseline: !comparisons.isEmpty, failOn: failOn)
                )
            }
        }
    }

    @Test("every report says what the exit status says: console, JSON, JUnit, Markdown, HTML data, annotations, the PR comment")
    func reportsAgree() throws {
        for (name, report) in Self.scenarios() {
            let status = report.exitStatus
            let word = ["PASS", "FAIL", "ERROR"][Int(status)]
            #expect(report.summaryLine.hasPrefix(word + ": "), "\(name): \(report.summaryLine)")
            let json = report.json
            #expect(json["verdict"]?["exit_status"]?.intValue == Int(status), "\(name)")
            #expect(json["verdict"]?["line"]?.stringValue?.hasPrefix(word + ": ") == true, "\(name)")
            // A merged report of the one shard decides the same.
            // (A merge under --fail-on regression of reports compared with no baseline is an error
            // unless told to count every case as new, as the run is: `mergeNeedsABaseline`.)
            let merged = try ResultsMerge([("r.json", json)], allowsPartial: true, failOn: report.failOn, allowsNoBaseline: true)
            #expect(merged.exitStatus == status, "\(name): merged")
            // JUnit: an <error> exactly when the status is 2, a <failure> exactly when it is 1.
            let counter = XMLCounter()
            let parser = XMLParser(data: Data(report.junit.utf8))
            parser.delegate = counter
            #expect(parser.parse(), "\(name): JUnit is well-formed")
            let failures = Int(counter.attributes["testsuites"]?.first?["failures"] ?? "") ?? -1
            let errors = Int(counter.attributes["testsuites"]?.first?["errors"] ?? "") ?? -1
            #expect((errors > 0) == (status == 2), "\(name): JUnit errors \(errors)")
            if status != 2 { #expect((failures > 0) == (status == 1), "\(name): JUnit failures \(failures)") }
            #expect(report.junit.contains("<property name=\"verdict\" value=\"\(word): "), "\(name)")
            #expect(report.markdown.hasPrefix("## agent-eval: \(word): "), "\(name)")
            let annotations = GitHubAnnotations.lines(from: json)
            #expect(annotations.contains { $0.hasPrefix("::error ") } == (status != 0), "\(name): \(annotations)")
            let comment = PullRequestComment(head: json).markdown
            #expect(comment.contains("agent-eval: \(word): "), "\(name)")
        }
    }

    @Test(
        "the PR comment leads with the verdict, then regressions with their step and look: command, newly flaky, fixed, quarantines ending")
    func pullRequestComment() throws {
        let baseline = Baseline(Self.live("r", Self.passes))
        let regressed = Self.live("r", [.pass] + [Attempt](repeating: .fail, count: 9))
        let head = EvalReport(
            results: [
                regressed, Self.live("flaky", [.pass, .fail, .pass]), Self.live("fixed", [.pass]),
                Self.live("q", [.fail], quarantine: Self.entry("q", until: QuarantineEntry.today(Date().addingTimeInterval(3 * 86_400)))),
            ],
            comparisons: ["r": BaselineComparison.compare(regressed, with: baseline)], hasBaseline: true)
        let base = EvalReport(results: [Self.live("r", [.pass]), Self.live("flaky", [.pass]), Self.live("fixed", [.fail])])
        let text = PullRequestComment(head: head.json, base: base.json, reportLink: "https://ci.example/report.html").markdown
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        #expect(lines[0] == PullRequestComment.marker)
        #expect(lines[1] == "### ❌ agent-eval: \(head.counts.verdict(failOn: .any))")
        let regressions = try #require(lines.firstIndex(of: "#### Regressions (1)"))
        let flaky = try #require(lines.firstIndex(of: "#### Newly flaky (1)"))
        let fixed = try #require(lines.firstIndex(of: "#### Fixed (1)"))
        #expect(regressions < flaky && flaky < fixed)
        #expect(text.contains("- **`r`** (flaky fail) — `cases/r.yaml:3`"))
        #expect(text.contains("  - pass rate 1/10 (95% CI 2%–40%) vs 10/10 in the baseline (72%–100%): Fisher p &lt; 0.0001"))
        #expect(text.contains("  - ✘ `toolsCalled` at step 2: expected refund is called; happened: it was not"))
        #expect(text.contains("    look: `agent-eval replay runs/r-2.jsonl.gz --step 2`"))
        #expect(text.contains("— **ends soon**"))
        #expect(text.contains("**Tokens:** 1500 (base 300, +400%)"))
        #expect(text.hasSuffix("[The full report](https://ci.example/report.html)\n"))

        // flaky_pass on the base, flaky_fail now: newly failing (listed once, never lost).
        let worse = EvalReport(results: [Self.live("w", [.pass, .fail], minPassRate: 0.5), Self.live("x", [.pass, .pass, .fail])])
        let before = EvalReport(results: [
            Self.live("w", [.pass, .pass], minPassRate: 0.5), Self.live("x", [.pass, .pass, .fail], minPassRate: 0.6),
        ])
        let second = PullRequestComment(head: worse.json, base: before.json).markdown
        #expect(second.contains("#### Newly failing (1)"))
        #expect(second.contains("- **`x`** (flaky fail)"))
        #expect(second.contains("#### Newly flaky (1)"))
        #expect(second.components(separatedBy: "`x`").count == 2 && second.components(separatedBy: "`w`").count == 2)
    }

    @Test("a merge is gated as its shards were, unless told otherwise; shards gated differently need --fail-on")
    func mergeKeepsFailOn() throws {
        // A known failure: it fails the gate under --fail-on any, not under regression.
        let known = Self.live("k", [.fail])
        var report = EvalReport(
            results: [known], comparisons: ["k": BaselineComparison.compare(known, with: Baseline(Self.live("k", [.fail])))],
            hasBaseline: true, failOn: .regression)
        #expect(try ResultsMerge([("a.json", report.json)], allowsPartial: true).exitStatus == 0)
        #expect(try ResultsMerge([("a.json", report.json)], allowsPartial: true, failOn: .any).exitStatus == 1)
        report.comparisons = [:]
        report.hasBaseline = false
        let regression = report.json
        report.results = [Self.live("j", [.pass])]
        report.failOn = .any
        #expect(throws: EvalError.self) { try ResultsMerge([("a.json", regression), ("b.json", report.json)], allowsPartial: true) }
    }

    @Test(
        "a merge under --fail-on regression of shards compared with no baseline, or with one that holds none of their cases, is an error, not a pass of a failing case"
    )
    func mergeNeedsABaseline() throws {
        let failing = EvalReport(results: [Self.live("a-fails", [.fail]), Self.live("b-passes", [.pass])])
        for failOn: FailOn? in [.regression, nil] {
            let report = EvalReport(results: failing.results, failOn: failOn ?? .regression)
            #expect {
                _ = try ResultsMerge([("shard.json", report.json)], allowsPartial: true, failOn: .regression)
            } throws: { error in
                (error as? EvalError)?.code == .missingBaseline && (error as? EvalError)?.message.contains("run without one") == true
            }
        }
        // Compared, but every case new: the baseline held none of them.
        let newOnly = EvalReport(
            results: failing.results,
            comparisons: Dictionary(uniqueKeysWithValues: failing.results.map { ($0.id, BaselineComparison.compare($0, with: nil)) }),
            hasBaseline: true, failOn: .regression)
        #expect {
            _ = try ResultsMerge([("shard.json", newOnly.json)], allowsPartial: true, failOn: .regression)
        } throws: { error in
            (error as? EvalError)?.message.contains("held none of the 2 cases") == true
        }
        // Told to count every case as new, the merge is decided as the run with --allow-no-baseline
        // is: a failing case no baseline vouches for fails it.
        #expect(
            try ResultsMerge([("shard.json", failing.json)], allowsPartial: true, failOn: .regression, allowsNoBaseline: true).exitStatus
                == 1)
        let passing = EvalReport(results: [Self.live("b-passes", [.pass])])
        #expect(
            try ResultsMerge([("shard.json", passing.json)], allowsPartial: true, failOn: .regression, allowsNoBaseline: true).exitStatus
                == 0)
        // Under another --fail-on no baseline is needed: the failing case fails the merge.
        #expect(try ResultsMerge([("shard.json", failing.json)], allowsPartial: true, failOn: .any).exitStatus == 1)
    }

    @Test(
        "one failing attempt in a live case's baseline does not make it a known failure: a case that mostly passed regresses when one attempt fails now"
    )
    func flakyBaselineStillPasses() throws {
        // Eight updates of one attempt each, one of them failing: 7 of 8 passes, flaky_fail by the default minPassRate.
        var baseline = Baseline(Self.live("c", [.pass]))
        for attempt: Attempt in [.pass, .pass, .fail, .pass, .pass, .pass, .pass] { baseline = baseline.adding(Self.live("c", [attempt])) }
        #expect(baseline.outcome == "flaky_fail" && baseline.counts.passes == 7 && baseline.counts.attempts == 8)
        let broken = BaselineComparison.compare(Self.live("c", [.fail]), with: baseline)
        #expect(broken.status == .regressed, "\(broken.status)")
        #expect(broken.regressions.first?.message == "passed in 7 of 8 baseline attempts, fails now")
        // A case that mostly failed before stays a known failure.
        var failing = Baseline(Self.live("d", [.fail]))
        for attempt: Attempt in [.fail, .pass, .fail] { failing = failing.adding(Self.live("d", [attempt])) }
        #expect(BaselineComparison.compare(Self.live("d", [.fail]), with: failing).status == .knownFailure)
        // A recorded case's logs check the same every time: one of three failing before and now
        // is the known failure it was, however many of its logs passed.
        func recorded(_ attempts: [Attempt]) -> CaseResult {
            var result = Self.live("r", attempts)
            result.evalCase.source = .recorded(patterns: [])
            return result
        }
        #expect(
            BaselineComparison.compare(recorded([.fail, .pass, .pass]), with: Baseline(recorded([.pass, .pass, .fail]))).status
                == .knownFailure)
    }

    @Test("GitHub annotations point at the case file's line and escape what workflow commands would misread")
    func annotations() {
        var odd = Self.live("odd", [.fail])
        odd.evalCase.location = SourceLocation(path: "cases/a,b:c.yaml", line: 7, column: 1)
        let lines = GitHubAnnotations.lines(from: EvalReport(results: [Self.live("ok", [.pass]), odd]).json)
        #expect(lines.count == 1)
        #expect(lines[0].hasPrefix("::error file=cases/a%2Cb%3Ac.yaml,line=7,title=agent-eval%3A odd fail::toolsCalled: expected"))
        #expect(lines[0].contains("%0Alook: agent-eval replay"))
        #expect(!lines[0].contains("\n"))
        let quarantined = GitHubAnnotations.lines(
            from: EvalReport(results: [Self.live("q", [.fail], quarantine: Self.entry("q", until: "2999-01-01"))]).json)
        #expect(quarantined.first?.hasPrefix("::warning ") == true)
    }
}
