import Foundation
public import TraceCore

/// The outcome of a suite run, ready to be rendered for people (console, Markdown) and for
/// machines (JSON, JUnit). Rendering lives here so every report says the same thing.
public struct EvalReport: Sendable {
    public var results: [CaseResult]
    /// Baseline comparison per case id, when a baseline was read.
    public var comparisons: [String: BaselineComparison]
    public var hasBaseline: Bool
    /// k of pass@k and pass^k.
    public var k: Int
    public var durationSeconds: Double
    /// What fails the run, for `exitStatus`.
    public var failOn: FailOn
    /// The suite the results are (a shard of), and which shard; `results merge` checks with
    /// them that it was given every shard of one suite. Absent from reports made without a
    /// session.
    public var suite: SuiteIdentity?
    public var shard: EvalSession.Shard?
    /// With `--repeat auto`: the attempts and model calls run and saved.
    public var adaptive: AdaptiveRepeats.Savings?
    /// The signal (SIGINT, SIGTERM) that stopped the suite before its cases were done: the exit
    /// status is then 128 + the signal, in the report as on the command line, and no verdict
    /// was reached (nor may a baseline be written from it).
    public var interruptedBy: Int32?

    public init(
        results: [CaseResult], comparisons: [String: BaselineComparison] = [:], hasBaseline: Bool = false, k: Int = 1,
        durationSeconds: Double = 0, failOn: FailOn = .any, suite: SuiteIdentity? = nil, shard: EvalSession.Shard? = nil
    ) {
        self.results = results
        self.comparisons = comparisons
        self.hasBaseline = hasBaseline
        self.k = k
        self.durationSeconds = durationSeconds
        self.failOn = failOn
        self.suite = suite
        self.shard = shard
    }

    /// The exit status CI gets: 2 when a case could not run, 1 when a case failed or
    /// regressed (as `failOn` says), 0 otherwise.
    public var exitStatus: Int32 { interruptedBy.map { 128 + $0 } ?? counts.exitStatus(failOn: failOn) }

    /// The gate's counts, from the report's own case entries (`ReportCounts`).
    /// Made from the members of each case's entry that `ReportCounts` reads (`countedEntry`), not
    /// the whole entries with every run: the exit status, the summary line and the page's title
    /// each ask for the counts, and building 50,000 cases' entries each time kept an interrupted
    /// `run` of that many cases busy for seconds after the signal.
    public var counts: ReportCounts { ReportCounts(entries: results.map(countedEntry), compared: hasBaseline) }

    /// The members of a case's entry (`caseJSON`) that decide the counts: its outcome, its
    /// quarantine and its baseline status.
    func countedEntry(_ result: CaseResult) -> JSONValue {
        var object = ObjectBuilder()
        object.set("outcome", Self.outcome(result))
        object.set("quarantine", result.evalCase.quarantine?.json)
        if let comparison = comparisons[result.id] { object.set("baseline", ["status": .string(comparison.status.rawValue)] as JSONValue) }
        return object.json
    }

    /// `agent-eval replay <log> --step N`: the command to look at a failure.
    public static func replayCommand(log: String, step: Int?) -> String {
        "agent-eval replay \(ShellWords.quoted(log))" + (step.map { " --step \($0)" } ?? "")
    }

    /// `report.html#log=<log>&step=N`: the run's view in the report page, at the step.
    public static func pageLink(page: String, log: String, step: Int?) -> String {
        var allowed = CharacterSet.urlFragmentAllowed
        // URLSearchParams reads `+` as a space.
        allowed.remove(charactersIn: "&=#%+")
        let encoded = log.addingPercentEncoding(withAllowedCharacters: allowed) ?? log
        return page + "#log=" + encoded + (step.map { "&step=\($0)" } ?? "")
    }

    /// A case's outcome word: `pass`, `flaky_pass`, `flaky_fail`, `fail` or `error`.
    public static func outcome(_ result: CaseResult) -> String { result.outcome.rawValue }

    /// A run's "pass", "fail" or "error".
    public static func outcome(_ run: RunResult) -> String {
        run.error != nil ? "error" : (run.passed ? "pass" : "fail")
    }

    /// A run's failed expectations as the report lists them, each with the command to look at it.
    public static func failureEntries(_ run: RunResult) -> [JSONValue] {
        run.failures.map { failure in
            var entry = failure.fields
            entry.set("replay", replayCommand(log: failure.log ?? run.logPath, step: failure.step))
            return entry.json
        }
    }

    // MARK: Console

    /// The lines of one case for the console: a headline, and for a failed case every failed
    /// expectation with what was expected, what happened and the command to look at it.
    public func consoleLines(for result: CaseResult) -> [String] {
        Self.consoleLines(for: result, comparison: comparisons[result.id], hasBaseline: hasBaseline, failOn: failOn)
    }

    /// The lines of one case, from its result and baseline comparison alone (while a suite
    /// is still running). `verbose` lists every run, passing ones too, with its notes and
    /// what each judge said. With `page` (the file `run --html` writes), each `look:` line is
    /// followed by a `view:` link into that page.
    public static func consoleLines(
        for result: CaseResult, comparison: BaselineComparison?, hasBaseline: Bool, verbose: Bool = false, page: String? = nil,
        failOn: FailOn = .any
    ) -> [String] {
        let outcome = result.outcome
        // ✔ only for a case the gate passes: a passing outcome that regressed (unless only
        // failures fail the run) or whose quarantine expired fails it, and is marked so.
        let expired = result.evalCase.quarantine?.isExpiredNow == true
        let held = result.evalCase.quarantine != nil && !expired
        let failsGate = expired || !held && comparison?.status == .regressed && failOn != .failure
        var headline = outcome == .error ? "! " : (outcome.passes && !failsGate ? "✔ " : "✘ ")
        headline += result.id
        var facts: [String] = []
        let runs = result.runs.count
        let kind = result.evalCase.expected.pipeline == nil ? "" : "pipeline "
        // A recorded log is checked once, or judged once per repeat when the case has rubrics.
        let logs = Set(result.runs.map(\.logPath)).count
        let rounds = result.evalCase.isLive || logs == 0 ? 1 : runs / logs
        if result.evalCase.isLive {
            facts.append(runs == 1 ? "1 live \(kind)run" : "\(runs) live \(kind)runs")
        } else {
            facts.append(logs == 1 ? "1 \(kind)log" : "\(logs) \(kind)logs")
            if rounds > 1 { facts.append("judged \(rounds) times") }
        }
        if runs > 1 {
            let counts = result.counts
            facts.append("\(counts.fraction) passed")
            if counts.attempts < runs { facts.append("\(runs - counts.attempts) could not run") }
            if outcome == .flakyPass || outcome == .flakyFail {
                let rule = result.evalCase.minPassRate < 1 ? " (min \(Int((result.evalCase.minPassRate * 100).rounded()))%)" : ""
                facts.append(outcome.rawValue.replacingOccurrences(of: "_", with: " ") + rule)
            } else if result.evalCase.isLive || rounds > 1 {
                facts.append(result.stability.rawValue.replacingOccurrences(of: "_", with: " "))
            }
        }
        if let comparison, comparison.status != .unchanged, comparison.status != .notRun, comparison.status != .new || hasBaseline {
            facts.append(comparison.status.rawValue.replacingOccurrences(of: "_", with: " "))
        }
        if let quarantine = result.evalCase.quarantine {
            facts.append(quarantine.isExpiredNow ? "quarantine expired \(quarantine.until)" : "quarantined")
        }
        headline += "  (" + facts.joined(separator: ", ") + ")"
        var lines = [headline]
        if let error = result.error {
            lines.append("    error: \(error)")
            if let hint = error.hint { lines.append("    hint: \(hint)") }
            return lines
        }
        if let quarantine = result.evalCase.quarantine {
            if quarantine.isExpiredNow {
                lines.append("    quarantine expired: \(quarantine.sentence) (\(quarantine.location))")
                lines.append(
                    "    hint: the case fails the gate until the quarantine ends (\(quarantine.releaseAdvice)) or its until is extended"
                )
            } else if outcome != .error && (!outcome.passes || comparison?.status == .regressed) {
                lines.append("    quarantined, not failing the gate: \(quarantine.sentence)")
            }
        }
        for regression in comparison?.regressions ?? [] {
            lines.append("    regression: \(regression.message)")
        }
        if comparison?.status == .notSignificant, let passRate = comparison?.passRate {
            if passRate.pValue < passRate.alpha {
                lines.append(
                    "    not a regression: \(passRate.sentence); significant, but a fall of \(Int((passRate.drop * 100).rounded())) "
                        + "points is less than --min-drop (\(Int((passRate.minDrop * 100).rounded())))")
            } else {
                lines.append("    not a regression yet: \(passRate.sentence); more attempts (--repeat) can tell")
            }
        }
        for disagreement in result.judgeDisagreements {
            lines.append("    judge: \(disagreement.message)")
        }
        // A run that passed without finishing (allowUnfinished) says so: its pass covers what it recorded.
        // (`outcome`, worked out once above: the case's outcome counts every run, and asking for
        // it per run made printing a case of 1,000 logs cost 1,000,000 copies of a run's result.)
        for run in result.runs
        where verbose || !run.passed || !run.notes.isEmpty && !outcome.passes || run.notes.contains(where: \.isWarning)
            || run.summary.tear != nil || run.summary.stopName == nil
        {
            lines.append("    \(run.repeatIndex > 0 ? "\(run.label): \(run.logPath)" : run.logPath)")
            if let error = run.error {
                lines.append("      error: \(error)")
                if let hint = error.hint { lines.append("      hint: \(hint)") }
                continue
            }
            for failure in run.failures {
                lines.append("      ✘ \(failure.expectation): expected \(failure.expected)")
                lines.append("          happened: \(failure.actual)")
                lines.append("          look: \(Self.replayCommand(log: failure.log ?? run.logPath, step: failure.step))")
                if let page {
                    lines.append("          view: \(Self.pageLink(page: page, log: failure.log ?? run.logPath, step: failure.step))")
                }
            }
            for note in run.notes { lines.append("      \(note.isWarning ? "warning" : "note"): \(note.message)") }
            if verbose {
                for judgement in run.judgements {
                    let mark = judgement.passed.map { $0 ? "✔" : "✘" } ?? "!"
                    let said = judgement.reason ?? judgement.error ?? ""
                    lines.append(
                        "      judge \(mark) \(judgement.expectation)\(judgement.callId.map { " (\($0))" } ?? "") by \(judgement.judge): \(said)"
                    )
                }
            }
        }
        return lines
    }

    /// The closing summary line: the verdict.
    public var summaryLine: String { counts.verdict(failOn: failOn) + String(format: " (%.2f s)", durationSeconds) }

    // MARK: JSON

    /// The versioned machine-readable report (docs/eval-results.md).
    public var json: JSONValue {
        let cases = results.map(caseJSON)
        var document = Self.document(
            k: k, counts: ReportCounts(entries: cases, compared: hasBaseline), failOn: failOn,
            durationMs: Int((durationSeconds * 1000).rounded()), cases: cases, suite: suite, shard: shard)
        document.set("adaptive", adaptive?.json)
        if let signal = interruptedBy, case .object(var members) = counts.verdictJSON(failOn: failOn) {
            // Stopped before its cases were done: what ran is reported, but the gate decided nothing.
            members["status"] = "error"
            members["exit_status"] = .int(Int(128 + signal))
            members["interrupted_by"] = .string([1: "SIGHUP", 2: "SIGINT", 15: "SIGTERM"][signal] ?? "signal \(signal)")
            document.set("verdict", JSONValue.object(members))
        }
        return document.json
    }

    /// The results document's members (a merged report adds its own).
    static func document(
        k: Int, counts: ReportCounts, failOn: FailOn, durationMs: Int, cases: [JSONValue], suite: SuiteIdentity?,
        shard: EvalSession.Shard?
    ) -> ObjectBuilder {
        var summary = ObjectBuilder()
        summary.set("cases", counts.cases)
        summary.set("passed", counts.passed)
        summary.set("flaky_passed", counts.flakyPassed)
        summary.set("failed", counts.failed)
        summary.set("errors", counts.errors)
        summary.set("quarantined", counts.quarantined)
        summary.set("quarantines_expired", counts.expiredQuarantines)
        if let baseline = counts.baseline {
            summary.set("regressed", baseline.regressed)
            summary.set("known_failures", baseline.knownFailures)
            summary.set("not_significant", baseline.notSignificant)
            summary.set("new", baseline.new)
            summary.set("new_failing", counts.unvouchedFailures)
        }
        summary.set("duration_ms", durationMs)
        var root = ObjectBuilder()
        root.set("schema", "agent-eval/results")
        root.set("version", 1)
        root.set("verdict", counts.verdictJSON(failOn: failOn))
        root.set("k", k)
        root.set("shard", shard)
        root.set("suite", suite)
        root.set("summary", summary.json)
        // Each case says whether it fails the gate under this verdict's `fail_on`: the rule the
        // exit status counts, so that a reader (the pytest plugin, a dashboard) takes the
        // engine's answer case by case instead of keeping a copy of the rule. A merge decides
        // it again under its own `fail_on`.
        root.set("cases", JSONValue.array(cases.map { Self.gated($0, failOn: failOn) }))
        return root
    }

    /// `entry` with its `fails_gate` member set as `ReportCounts.failsGate` decides it.
    static func gated(_ entry: JSONValue, failOn: FailOn) -> JSONValue {
        guard case .object(var members) = entry else { return entry }
        members["fails_gate"] = .bool(ReportCounts.failsGate(entry, failOn: failOn))
        return .object(members)
    }

    func caseJSON(_ result: CaseResult) -> JSONValue {
        var object = ObjectBuilder()
        object.set("case_id", result.id)
        object.set("file", result.evalCase.location.path)
        if result.evalCase.location.line > 0 { object.set("line", result.evalCase.location.line) }
        object.set("description", result.evalCase.description)
        object.set("tags", JSONValue.array(result.evalCase.tags.map { .string($0) }))
        object.set("source", result.evalCase.isLive ? "live" : "recorded")
        object.set("outcome", Self.outcome(result))
        object.set("error", result.error?.description)
        object.set("diagnostic", result.error?.json)
        object.set("checks", result.evalCase.expected.count)
        object.set("pass_rate", result.passRate)
        let counts = result.counts
        var attempts = ObjectBuilder()
        attempts.set("passed", counts.passes)
        attempts.set("failed", counts.attempts - counts.passes)
        attempts.set("could_not_run", result.runs.count - counts.attempts)
        object.set("attempts", attempts.json)
        if result.evalCase.minPassRate < 1 { object.set("min_pass_rate", result.evalCase.minPassRate) }
        object.set("quarantine", result.evalCase.quarantine?.json)
        // Over the attempts that ran: with fewer than k of them there is no k to draw.
        if counts.attempts >= k {
            object.set("pass_at_k", result.passAtK(k))
            object.set("pass_hat_k", result.passHatK(k))
        }
        object.set("stability", result.stability.rawValue)
        let disagreements = result.judgeDisagreements
        if !disagreements.isEmpty { object.set("judge_disagreements", JSONValue.array(disagreements.map(\.json))) }
        if let comparison = comparisons[result.id] {
            var baseline = ObjectBuilder()
            baseline.set("status", comparison.status.rawValue)
            baseline.set(
                "regressions",
                JSONValue.array(comparison.regressions.map { ["kind": .string($0.kind.rawValue), "message": .string($0.message)] }))
            baseline.set("pass_rate", comparison.passRate?.json)
            object.set("baseline", baseline.json)
        }
        object.set("runs", JSONValue.array(result.runs.map(runJSON)))
        return object.json
    }

    func runJSON(_ run: RunResult) -> JSONValue {
        var object = ObjectBuilder()
        object.set("log", run.logPath)
        if run.repeatIndex > 0 { object.set("repeat", run.repeatIndex) }
        object.set("outcome", Self.outcome(run))
        object.set("error", run.error?.description)
        object.set("diagnostic", run.error?.json)
        object.set("stop_reason", run.summary.stopReason)
        object.set("limit", run.summary.limit)
        object.set("steps", run.summary.steps)
        object.set("tokens", run.summary.tokens)
        object.set("user_turns", run.summary.userTurns)
        object.set("user_tokens", run.summary.userTokens)
        object.set("duration_ms", run.summary.durationMs)
        object.set("tools", JSONValue.array(run.summary.tools.map { .string($0) }))
        object.set("attempted", JSONValue.array(run.summary.attempted.map { .string($0) }))
        object.set("pipeline_status", run.summary.pipelineStatus)
        if !run.summary.tasks.isEmpty { object.set("tasks", JSONValue.array(run.summary.tasks.map { .string($0) })) }
        object.set("tear", run.summary.tear)
        object.set("check_us", run.checkDurationUs)
        object.set("failures", JSONValue.array(Self.failureEntries(run)))
        object.set("notes", JSONValue.array(run.notes.filter { !$0.isWarning }.map { .string($0.message) }))
        let warnings = run.notes.filter(\.isWarning)
        if !warnings.isEmpty { object.set("warnings", JSONValue.array(warnings.map { .string($0.message) })) }
        if !run.judgements.isEmpty { object.set("judgements", JSONValue.array(run.judgements.map(\.json))) }
        return object.json
    }

    // MARK: JUnit

    /// JUnit XML: one testcase per case and run (log or repeat); the failure text is the
    /// console explanation. Rendered from the JSON document, so a merged report
    /// (`ResultsMerge`) renders exactly as a single one.
    public var junit: String { Self.junit(from: json) }

    static func xml(_ text: String) -> String {
        var result = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "\n", "\t", "\r": result.unicodeScalars.append(scalar)
            default:
                // XML 1.0 cannot carry most control characters at all.
                result.unicodeScalars.append(scalar.value < 0x20 ? "\u{FFFD}" : scalar)
            }
        }
        return result
    }

    // MARK: Markdown

    /// A summary for a CI job page: a table of cases, then every failure.
    public var markdown: String {
        let counts = self.counts
        var lines = ["## agent-eval: \(counts.verdict(failOn: failOn))", ""]
        if let baseline = counts.baseline {
            lines.append(
                "**\(baseline.regressed) regressed**, \(counted(baseline.knownFailures, "known failure")), \(counts.failed) failed, \(counts.errors) could not run."
            )
            lines.append("")
        }
        lines.append("| case | outcome | passed | pass rate | stop reasons | baseline |")
        lines.append("|---|---|---|---|---|---|")
        for result in results {
            let quarantine = result.evalCase.quarantine.map { $0.isExpiredNow ? " (quarantine expired)" : " (quarantined)" } ?? ""
            let outcome = Self.markdownOutcome(result.outcome) + quarantine
            let stops = Array(Set(result.runs.compactMap { $0.summary.stopReason?.rawValue })).sorted().joined(separator: ", ")
            let baseline = comparisons[result.id]?.status.rawValue.replacingOccurrences(of: "_", with: " ") ?? "–"
            lines.append(
                "| `\(result.id)` | \(outcome) | \(result.counts.fraction) | \(Int((result.passRate * 100).rounded()))% | \(stops.isEmpty ? "–" : stops) | \(baseline) |"
            )
        }
        // A section per kind of case to look at: each case's console lines in a code block.
        func section(_ title: String, _ cases: [CaseResult]) {
            guard !cases.isEmpty else { return }
            lines.append("")
            lines.append("### \(title)")
            for result in cases {
                lines.append("")
                lines.append("#### `\(result.id)`")
                lines.append("")
                lines.append(contentsOf: Self.fenced(consoleLines(for: result).dropFirst().map { String($0.dropFirst(4)) }))
            }
        }
        section("Passed with warnings", results.filter { $0.passed && $0.runs.contains { $0.notes.contains(where: \.isWarning) } })
        section(
            "Failures and regressions",
            results.filter { !$0.passed || comparisons[$0.id]?.status == .regressed || $0.evalCase.quarantine?.isExpiredNow == true })
        return lines.joined(separator: "\n") + "\n"
    }
}

extension EvalReport {
    /// `lines` in a Markdown code block whose fence is longer than any run of backticks in them,
    /// so text from a run (a model's answer holding its own ``` fence) cannot close the block
    /// and have the rest rendered (CommonMark: a fence closes only with one as long).
    public static func fenced(_ lines: [String]) -> [String] {
        var longest = 0
        for line in lines {
            var run = 0
            for character in line {
                run = character == "`" ? run + 1 : 0
                longest = max(longest, run)
            }
        }
        let fence = String(repeating: "`", count: max(3, longest + 1))
        return [fence] + lines + [fence]
    }

    /// A case outcome with its mark, for Markdown tables.
    public static func markdownOutcome(_ outcome: CaseOutcome) -> String {
        switch outcome {
        case .pass: "✅ pass"
        case .flakyPass: "🟡 flaky pass"
        case .flakyFail: "🟠 flaky fail"
        case .fail: "❌ fail"
        case .error: "⚠️ error"
        }
    }
}
