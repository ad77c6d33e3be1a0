import Foundation
public import TraceCore
import TraceLog

/// The reports of `agent-eval run --shard i/n` jobs (run on several machines: a CI matrix is the
/// distributed engine) merged into one results document, with one summary and one baseline
/// comparison, rendered by the same code as a single report (JSON, JUnit).
///
/// Rules (docs/eval-results.md): every input is a version 1 results document of the same suite
/// (its `suite` identity) and the same shard count, each shard once, with the same k; a case
/// may appear in one input only; either every input was compared with a baseline or none was.
/// An unsharded run's report is shard 1/1. The merge must hold the whole suite — every shard,
/// and together the suite's cases — or it throws `incompleteSuite`, unless `allowsPartial`:
/// then the merged report says in `partial` what it lacks. A report that does not record its
/// shard and suite (an older agent-eval wrote it) cannot show that nothing is missing, so it
/// merges only as partial. Cases are ordered by file, then line, then id — the order of a
/// single run over the same case files. The merged `duration_ms` is the longest input's
/// (shards run side by side).
public struct ResultsMerge: Sendable {
    /// The merged document.
    public let report: JSONValue
    /// The inputs, in the order given.
    public let inputs: [String]
    /// `sha256:` of what was merged, whatever the files' order or white space: each report's
    /// canonical JSON hashed, the hashes sorted, joined by newlines and hashed (a merged suite
    /// run's identity in the catalog).
    public let inputsDigest: String
    /// The merged suite's counts.
    public let counts: ReportCounts
    /// What fails the merged suite (its verdict and exit status).
    public let failOn: FailOn
    /// What the merged report lacks of its suite ("shard 2/2 is missing"); nil when it holds
    /// the whole suite. Only a merge that allows partial results has one.
    public let partial: String?

    /// Reads one results document, with a precise error for a file that cannot be one.
    /// Reads a results document and checks it is one (its `schema` and `version`).
    public static func readReport(_ path: String) throws(EvalError) -> JSONValue {
        let report = try read(path)
        guard report["schema"]?.stringValue == "agent-eval/results", report["version"]?.intValue == 1,
            report["cases"]?.arrayValue != nil
        else {
            throw EvalError(
                .badReport, "\(path) is not an agent-eval results report (version 1, with \"schema\": \"agent-eval/results\" and cases)",
                location: SourceLocation(path: path), hint: "write the report with `agent-eval run … --json-out FILE`")
        }
        return report
    }

    public static func read(_ path: String) throws(EvalError) -> JSONValue {
        try JSONFile.read(
            path, as: "valid JSON", code: .badReport,
            hint:
                "give the reports `agent-eval run … --json-out FILE` wrote; one cut short (a job that died writing it) must be written again"
        )
    }

    /// Merges documents read from `inputs` (path, document), in that order. Without
    /// `allowsPartial`, documents that do not hold their whole suite are an error.
    /// `failOn` nil: what the reports' verdicts were decided under, when they agree (`any`
    /// for reports without a verdict).
    public init(
        _ documents: [(path: String, report: JSONValue)], allowsPartial: Bool = false, failOn: FailOn? = nil, allowsNoBaseline: Bool = false
    ) throws(EvalError) {
        let decided = Set(documents.compactMap { $0.report["verdict"]?["fail_on"]?.stringValue.flatMap(FailOn.init(rawValue:)) })
        if failOn == nil && decided.count > 1 {
            throw EvalError(
                .badReport,
                "the reports were gated differently (--fail-on \(decided.map(\.rawValue).sorted().joined(separator: ", ")))",
                hint: "give the merge --fail-on regression|failure|any, or run every shard with the same --fail-on")
        }
        let failOn = failOn ?? decided.first ?? .any
        self.failOn = failOn
        inputs = documents.map(\.path)
        inputsDigest = ContentHash.sha256(
            Array(documents.map { ContentHash.sha256(JSONWriter.encode($0.report)) }.sorted().joined(separator: "\n").utf8))
        guard !documents.isEmpty else {
            throw EvalError(.badReport, "no reports to merge", hint: "give the JSON reports of every shard, e.g. shard-*.json")
        }
        var k: (value: Int, path: String)?
        var baseline: (present: Bool, path: String)?
        var owner: [String: String] = [:]
        var cases: [(file: String, line: Int, id: String, entry: JSONValue)] = []
        var durationMs = 0
        var shards = ShardSet()
        for (path, report) in documents {
            func bad(_ message: String, hint: String? = "write the report with `agent-eval run … --json-out FILE`") -> EvalError {
                EvalError(.badReport, message, location: SourceLocation(path: path), hint: hint)
            }
            guard report["schema"]?.stringValue == "agent-eval/results" else {
                throw bad("\(path) is not an agent-eval results report (no \"schema\": \"agent-eval/results\")")
            }
            guard let version = report["version"]?.intValue, version == 1 else {
                throw bad(
                    "\(path) is a results report of version \(report["version"].map { JSONWriter.encodeString($0) } ?? "none"); "
                        + "this agent-eval reads version 1", hint: "merge with the agent-eval version that wrote the reports")
            }
            guard let entries = report["cases"]?.arrayValue, let summary = report["summary"]?.objectValue else {
                throw bad("\(path) has no \"cases\" list or no \"summary\"")
            }
            // Which suite and shard first: reports of another suite or a shard given twice are
            // the mistake behind most of the mismatches found below.
            try shards.add(report, from: path)
            let reportK = report["k"]?.intValue ?? 1
            if let k, k.value != reportK {
                throw bad(
                    "\(path) was run with k = \(reportK) and \(k.path) with k = \(k.value)",
                    hint: "run every shard with the same --repeat and --k")
            }
            k = k ?? (reportK, path)
            let compared = summary["regressed"] != nil
            if let baseline, baseline.present != compared {
                let (with, without) = compared ? (path, baseline.path) : (baseline.path, path)
                throw bad(
                    "\(with) was compared with a baseline and \(without) was not", hint: "run every shard with the same --baseline")
            }
            baseline = baseline ?? (compared, path)
            durationMs = max(durationMs, summary["duration_ms"]?.intValue ?? 0)
            for (index, entry) in entries.enumerated() {
                guard let id = entry["case_id"]?.stringValue, let outcome = entry["outcome"]?.stringValue else {
                    throw bad("\(path): cases[\(index)] has no \"case_id\" or no \"outcome\"")
                }
                if let derived = Self.outcomesOfAttempts(entry), !derived.contains(outcome) {
                    // The gate counts outcomes: one that its own attempts contradict (an edited
                    // or damaged report) would pass a case that failed.
                    throw bad(
                        "\(path): case \(id) says its outcome is \"\(outcome)\", but its attempts make it "
                            + derived.sorted().map { "\"\($0)\"" }.joined(separator: " or "),
                        hint: "the report was edited or damaged; run the shard again and merge the report it writes")
                }
                if let first = owner[id] {
                    throw bad(
                        "case \(id) is in both \(first) and \(path)",
                        hint: "each case belongs to one shard: merge the reports of one suite run, each shard once")
                }
                owner[id] = path
                cases.append((entry["file"]?.stringValue ?? "", entry["line"]?.intValue ?? 0, id, entry))
            }
        }
        let gap = shards.gap(caseIds: cases.map(\.id))
        if let gap, !allowsPartial { throw gap.error }
        partial = gap?.reason
        cases.sort { ($0.file, $0.line, $0.id) < ($1.file, $1.line, $1.id) }
        counts = ReportCounts(entries: cases.map(\.entry), compared: baseline?.present == true)
        if failOn == .regression, !allowsNoBaseline, !cases.isEmpty {
            // The run's own rule: a regression gate with nothing to compare against would pass
            // every case as new, failing ones too.
            let compared = cases.contains {
                let status = $0.entry["baseline"]?["status"]?.stringValue
                return status != nil && status != BaselineComparison.Status.new.rawValue
            }
            if !compared {
                throw EvalError(
                    .missingBaseline,
                    baseline?.present == true
                        ? "--fail-on regression needs a baseline to compare with, and the shards' baseline held none of the "
                            + "\(cases.count == 1 ? "case" : "\(cases.count) cases")"
                        : "--fail-on regression needs a baseline to compare with, and the shards were run without one",
                    hint:
                        "run every shard with --baseline DIR (or --baseline-branch), or pass --allow-no-baseline to count every case as new"
                )
            }
        }
        // A whole merge stands for one unsharded run (shard 1/1), so it can be merged again.
        var root = EvalReport.document(
            k: k?.value ?? 1, counts: counts, failOn: failOn, durationMs: durationMs, cases: cases.map(\.entry), suite: shards.suite,
            shard: gap == nil && shards.suite != nil ? .whole : nil)
        root.set("merged_from", JSONValue.array(inputs.map { .string($0) }))
        root.set("shards", shards.json)
        root.set("partial", partial)
        report = root.json
    }

    /// Reads and merges the files at `paths`.
    public init(paths: [String], allowsPartial: Bool = false, failOn: FailOn? = nil, allowsNoBaseline: Bool = false) throws(EvalError) {
        var documents: [(path: String, report: JSONValue)] = []
        for path in paths { documents.append((path, try Self.read(path))) }
        try self.init(documents, allowsPartial: allowsPartial, failOn: failOn, allowsNoBaseline: allowsNoBaseline)
    }

    /// Whether the merged report lacks part of its suite (`partial` says what).
    public var isPartial: Bool { partial != nil }

    public var hasBaseline: Bool { counts.baseline != nil }

    /// The exit status of the merged suite, as `EvalReport.exitStatus`.
    public var exitStatus: Int32 { counts.exitStatus(failOn: failOn) }

    public var junit: String { EvalReport.junit(from: report) }

    /// The closing summary line; a partial merge's starts with what it lacks, so it cannot be
    /// read as the whole suite's.
    public var summaryLine: String {
        (partial.map { "PARTIAL (\($0)): " } ?? "") + counts.verdict(failOn: failOn)
            + " (merged from \(inputs.count) report\(inputs.count == 1 ? "" : "s"))"
    }

    /// The outcomes a case entry's `attempts` can give by the documented rule
    /// (`CaseResult.outcome`): `error` when any attempt could not run, else from the passes and
    /// failures, its attempts repeats when the case is live or has `min_pass_rate` — or when a
    /// recorded case set `minPassRate: 1`, which the report does not write, so a recorded case
    /// without it may be either. Nil for an entry without readable counts, or one whose outcome
    /// is `error` (a case-level problem: its attempts may all have passed).
    static func outcomesOfAttempts(_ entry: JSONValue) -> Set<String>? {
        guard entry["outcome"]?.stringValue != CaseOutcome.error.rawValue, let attempts = entry["attempts"],
            let passed = attempts["passed"]?.intValue, let failed = attempts["failed"]?.intValue,
            let couldNotRun = attempts["could_not_run"]?.intValue, passed >= 0, failed >= 0, couldNotRun >= 0
        else { return nil }
        if couldNotRun > 0 { return [CaseOutcome.error.rawValue] }
        let minPassRate = entry["min_pass_rate"]?.doubleValue
        let counts = PassCounts(passes: passed, attempts: passed + failed)
        let repeats = entry["source"]?.stringValue == "live" || minPassRate != nil
        var outcomes: Set = [CaseResult.outcome(of: counts, minPassRate: minPassRate ?? 1, repeats: repeats).rawValue]
        if !repeats { outcomes.insert(CaseResult.outcome(of: counts, minPassRate: 1, repeats: true).rawValue) }
        return outcomes
    }

    /// Console lines for every case that did not pass or regressed: its outcome, errors,
    /// regressions and failed expectations with the command to look at each.
    public var problemLines: [String] {
        var lines: [String] = []
        for entry in report["cases"]?.arrayValue ?? [] {
            let outcome = entry["outcome"]?.stringValue ?? "?"
            let status = entry["baseline"]?["status"]?.stringValue
            let passes = CaseOutcome(reported: outcome)?.passes == true
            guard !passes || status == BaselineComparison.Status.regressed.rawValue || entry["quarantine"] != nil else { continue }
            let mark = outcome == "error" ? "! " : (passes ? "✔ " : "✘ ")
            var facts = [outcome]
            if let status, status != BaselineComparison.Status.unchanged.rawValue {
                facts.append(status.replacingOccurrences(of: "_", with: " "))
            }
            lines.append(mark + (entry["case_id"]?.stringValue ?? "?") + "  (" + facts.joined(separator: ", ") + ")")
            if let error = entry["error"]?.stringValue { lines.append("    error: \(error)") }
            for regression in entry["baseline"]?["regressions"]?.arrayValue ?? [] {
                lines.append("    regression: \(regression["message"]?.stringValue ?? "")")
            }
            if let quarantine = entry["quarantine"] {
                let expired = quarantine["expired"]?.boolValue == true
                lines.append(
                    "    \(expired ? "quarantine expired" : "quarantined"): owner \(quarantine["owner"]?.stringValue ?? "?"), until "
                        + "\(quarantine["until"]?.stringValue ?? "?"): \(quarantine["reason"]?.stringValue ?? "")")
            }
            for run in entry["runs"]?.arrayValue ?? [] where run["outcome"]?.stringValue != "pass" {
                lines.append("    \(run["log"]?.stringValue ?? "")")
                if let error = run["error"]?.stringValue { lines.append("      error: \(error)") }
                for failure in run["failures"]?.arrayValue ?? [] {
                    lines.append(
                        "      ✘ \(failure["expectation"]?.stringValue ?? ""): expected \(failure["expected"]?.stringValue ?? "")")
                    lines.append("          happened: \(failure["actual"]?.stringValue ?? "")")
                    lines.append("          look: \(failure["replay"]?.stringValue ?? "")")
                }
            }
        }
        return lines
    }
}
