import Foundation
public import TraceCore

/// The Markdown comment a pull request gets (`agent-eval results comment`), from the head
/// branch's results document and, when given, the base branch's: the verdict in one line (the
/// one the exit status was decided with), then what a reviewer acts on first — regressions with
/// the failing step and the `look:` command, cases newly failing or newly flaky against the base,
/// cases that could not run, fixed ones, quarantined ones and quarantines ending soon — and
/// tokens and time against the base. It does not post: CI does, with `gh` or the GitLab API
/// (docs/ci.md).
public struct PullRequestComment: Sendable {
    public var head: JSONValue
    public var base: JSONValue?
    /// Where the HTML report of the head run is (a CI artifact's URL).
    public var reportLink: String?
    /// At most this many cases listed per section; the rest are counted.
    public var maxCases: Int
    /// Quarantines ending within this many days are listed as ending soon.
    public var expiringWithinDays: Int
    /// Today, `YYYY-MM-DD` (UTC).
    public var today: String

    /// A hidden marker at the top, so a CI script can find and replace its earlier comment.
    public static let marker = "<!-- agent-eval results comment -->"

    public init(
        head: JSONValue, base: JSONValue? = nil, reportLink: String? = nil, maxCases: Int = 20, expiringWithinDays: Int = 7,
        today: String = QuarantineEntry.today()
    ) {
        self.head = head
        self.base = base
        self.reportLink = reportLink
        self.maxCases = maxCases
        self.expiringWithinDays = expiringWithinDays
        self.today = today
    }

    struct Case {
        var entry: JSONValue
        var id: String { entry["case_id"]?.stringValue ?? "?" }
        var outcome: String { entry["outcome"]?.stringValue ?? "error" }
        var passes: Bool { CaseOutcome(reported: outcome)?.passes == true }
    }

    public var markdown: String {
        let cases = (head["cases"]?.arrayValue ?? []).map { Case(entry: $0) }
        let baseCases = Dictionary(
            (base?["cases"]?.arrayValue ?? []).map { ($0["case_id"]?.stringValue ?? "?", Case(entry: $0)) }, uniquingKeysWith: { a, _ in a }
        )
        let failOn = head["verdict"]?["fail_on"]?.stringValue.flatMap(FailOn.init(rawValue:)) ?? .any
        let hasBaseline = head["summary"]?["regressed"] != nil
        let counts = ReportCounts(entries: cases.map(\.entry), compared: hasBaseline)
        let status = counts.exitStatus(failOn: failOn)
        // One shard's report is not the suite's: never a green check for the whole change.
        let shard = head["shard"].flatMap { shard in
            shard["index"]?.intValue.flatMap { index in shard["count"]?.intValue.map { (index, $0) } }
        }
        let isOneShard = (shard?.1 ?? 1) > 1
        // Nor is a partial merge (`results merge --allow-partial`): some shards are missing.
        let isPartial = head["partial"]?.stringValue != nil
        let icon = (isOneShard || isPartial) && status == 0 ? "⚠️" : ["✅", "❌", "⚠️"][Int(status)]
        var lines = [Self.marker, "### \(icon) agent-eval: \(counts.verdict(failOn: failOn))", ""]
        if let partial = head["partial"]?.stringValue {
            lines.append("> **Partial:** \(partial); the verdict covers only the cases merged.")
            lines.append("")
        }
        if let (index, count) = shard, isOneShard {
            let total = head["suite"]?["cases"]?.intValue.map { " of its \($0)" } ?? ""
            lines.append(
                "> **One shard:** this is shard \(index)/\(count) of the suite (\(cases.count) case\(cases.count == 1 ? "" : "s")\(total)); "
                    + "the verdict covers only its cases. Merge every shard's report with `agent-eval results merge` for the suite's.")
            lines.append("")
        }

        func section(_ title: String, _ picked: [Case], note: String? = nil, body: (Case) -> [String]) {
            guard !picked.isEmpty else { return }
            lines.append("#### \(title) (\(picked.count))")
            if let note { lines.append(note) }
            lines.append("")
            for item in picked.prefix(maxCases) { lines.append(contentsOf: body(item)) }
            if picked.count > maxCases { lines.append("- … and \(picked.count - maxCases) more in the report") }
            lines.append("")
        }
        let regressed = cases.filter { $0.entry["baseline"]?["status"]?.stringValue == BaselineComparison.Status.regressed.rawValue }
        section("Regressions", regressed) { item in
            var body = ["- **`\(item.id)`** (\(Self.words(item.outcome)))\(Self.place(item.entry))"]
            for regression in item.entry["baseline"]?["regressions"]?.arrayValue ?? [] {
                // It names tools and stops from the runs: their text, escaped.
                body.append("  - \(Self.inline(regression["message"]?.stringValue ?? ""))")
            }
            body.append(contentsOf: Self.failures(item.entry))
            return body
        }
        // Against the base branch's report: what changed in this pull request. Each failing
        // case is listed once, in the first section that fits it.
        let regressedIds = Set(regressed.map(\.id))
        let newlyFlaky = cases.filter { item in
            guard item.outcome.hasPrefix("flaky"), let before = baseCases[item.id] else { return false }
            return before.outcome == "pass" && !regressedIds.contains(item.id)
        }
        section("Newly flaky", newlyFlaky, note: "Every attempt passed on the base branch.") { item in
            ["- **`\(item.id)`** — \(Self.attempts(item.entry))\(Self.place(item.entry))"] + Self.failures(item.entry)
        }
        let flakyIds = Set(newlyFlaky.map(\.id))
        // With a base: failing now, and passing there or not there at all (a new case).
        let newlyFailing = cases.filter { item in
            guard base != nil, !item.passes, item.outcome != "error", item.entry["quarantine"] == nil else { return false }
            if let before = baseCases[item.id], !before.passes { return false }
            return !regressedIds.contains(item.id) && !flakyIds.contains(item.id)
        }
        section("Newly failing", newlyFailing, note: "The gate passed them on the base branch, or they are new.") { item in
            let new = baseCases[item.id] == nil ? ", new case" : ""
            return ["- **`\(item.id)`** (\(Self.words(item.outcome))\(new))\(Self.place(item.entry))"] + Self.failures(item.entry)
        }
        let shown = regressedIds.union(flakyIds).union(newlyFailing.map(\.id))
        let otherFailing = cases.filter { item in
            !item.passes && item.outcome != "error" && item.entry["quarantine"] == nil && !shown.contains(item.id)
        }
        // "Still" only against a base that failed them too; without one, what failed is all that is known.
        section(base == nil ? "Failing" : "Still failing", otherFailing) { item in
            let status = item.entry["baseline"]?["status"]?.stringValue.map { ", \(Self.words($0))" } ?? ""
            return ["- `\(item.id)` (\(Self.words(item.outcome))\(status))\(Self.place(item.entry))"] + Self.failures(item.entry)
        }
        section("Could not run", cases.filter { $0.outcome == "error" }, note: "A harness problem, not the agent's quality.") { item in
            let error = item.entry["error"]?.stringValue ?? GitHubAnnotations.firstRunError(item.entry) ?? "see the report"
            return ["- `\(item.id)`: \(Self.inline(error))"]
        }
        let fixed = cases.filter { item in
            if item.entry["baseline"]?["status"]?.stringValue == BaselineComparison.Status.fixed.rawValue { return true }
            guard let before = baseCases[item.id] else { return false }
            return !before.passes && before.outcome != "error" && item.passes
        }
        section("Fixed", fixed) { item in ["- `\(item.id)`"] }
        let quarantined = cases.filter { $0.entry["quarantine"] != nil }
        let ending = quarantined.filter { item in
            guard let until = item.entry["quarantine"]?["until"]?.stringValue else { return false }
            return QuarantineEntry.days(from: today, to: until).map { $0 <= expiringWithinDays } ?? false
        }
        section("Quarantined", quarantined) { item in
            let quarantine = item.entry["quarantine"]
            let until = quarantine?["until"]?.stringValue ?? "?"
            var flag = ""
            if quarantine?["expired"]?.boolValue == true {
                flag = " — **expired: fails the gate**"
            } else if ending.contains(where: { $0.id == item.id }) {
                flag = " — **ends soon**"
            }
            return [
                "- `\(item.id)` (\(Self.words(item.outcome))): owner \(quarantine?["owner"]?.stringValue ?? "?"), until \(until)\(flag): "
                    + Self.inline(quarantine?["reason"]?.stringValue ?? "")
            ]
        }
        lines.append(contentsOf: costLines(cases: cases))
        if let reportLink { lines.append("[The full report](\(reportLink))") }
        while lines.last == "" { lines.removeLast() }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Tokens and time of the head run, against the base run when given.
    func costLines(cases: [Case]) -> [String] {
        func totals(_ document: JSONValue?) -> (tokens: Int, durationMs: Int, attempts: Int) {
            var totals = (tokens: 0, durationMs: 0, attempts: 0)
            for entry in document?["cases"]?.arrayValue ?? [] {
                for run in entry["runs"]?.arrayValue ?? [] {
                    // Reports are files from elsewhere (a CI artifact): totals saturate, never trap.
                    totals.tokens = totals.tokens.addingSaturating(run["tokens"]?.intValue ?? 0)
                    totals.durationMs = totals.durationMs.addingSaturating(run["duration_ms"]?.intValue ?? 0)
                    totals.attempts += 1
                }
            }
            return totals
        }
        let now = totals(head)
        guard now.attempts > 0 else { return [] }
        var line = "**Tokens:** \(now.tokens)"
        if let base {
            let before = totals(base)
            line += " (base \(before.tokens)\(Self.change(now.tokens, before.tokens)))"
            line +=
                " · **agent time:** \(Self.seconds(now.durationMs)) (base \(Self.seconds(before.durationMs))\(Self.change(now.durationMs, before.durationMs)))"
        } else {
            line += " · **agent time:** \(Self.seconds(now.durationMs))"
        }
        line += " · \(now.attempts) attempt\(now.attempts == 1 ? "" : "s")"
        return [line, ""]
    }

    static func change(_ now: Int, _ before: Int) -> String {
        guard before > 0 else { return "" }
        let percent = Int(saturating: ((Double(now) - Double(before)) / Double(before) * 100).rounded())
        return percent == 0 ? ", same" : ", \(percent > 0 ? "+" : "")\(percent)%"
    }

    static func seconds(_ ms: Int) -> String { String(format: "%.1f s", Double(ms) / 1000) }

    static func words(_ text: String) -> String { text.replacingOccurrences(of: "_", with: " ") }

    static func attempts(_ entry: JSONValue) -> String {
        let passed = entry["attempts"]?["passed"]?.intValue ?? 0
        return "\(passed)/\(passed.addingSaturating(entry["attempts"]?["failed"]?.intValue ?? 0)) attempts passed"
    }

    static func place(_ entry: JSONValue) -> String {
        guard let file = entry["file"]?.stringValue, !file.isEmpty else { return "" }
        return " — `\(file)\(entry["line"]?.intValue.map { ":\($0)" } ?? "")`"
    }

    /// The failed expectations of the case's first failing run (at most `failuresListed`, then how
    /// many more): what was expected, what happened at which step, and the command to look at each.
    static func failures(_ entry: JSONValue) -> [String] {
        for run in entry["runs"]?.arrayValue ?? [] {
            guard let failures = run["failures"]?.arrayValue, !failures.isEmpty else { continue }
            var lines: [String] = []
            for failure in failures.prefix(failuresListed) {
                let step = failure["step"]?.intValue.map { " at step \($0)" } ?? ""
                lines.append(
                    "  - ✘ `\(failure["expectation"]?.stringValue ?? "")`\(step): expected \(inline(failure["expected"]?.stringValue ?? "")); "
                        + "happened: \(inline(failure["actual"]?.stringValue ?? ""))")
                lines.append("    look: `\(failure["replay"]?.stringValue ?? "")`")
            }
            if failures.count > failuresListed {
                lines.append("  - and \(failures.count - failuresListed) more failed expectations (the report lists all)")
            }
            return lines
        }
        return []
    }

    /// How many failed expectations a case lists in the comment.
    static let failuresListed = 5

    /// Text from a run on one line, with nothing Markdown would read as a table, a tag or a code
    /// span, and no `@` mention a forge would notify (`@everyone`, `@org/team`: a
    /// zero-width space after the `@` keeps the text and drops the ping).
    static func inline(_ text: String) -> String {
        // By scalar: a mark that combines with `|` or a backtick must not hide it.
        var flat = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n", "\r": flat.append(" ")
            case "|", "`", "\\":
                flat.append("\\")
                flat.append(scalar)
            case "<": flat.append(contentsOf: "&lt;".unicodeScalars)
            case "@": flat.append(contentsOf: "@\u{200B}".unicodeScalars)
            default: flat.append(scalar)
            }
        }
        let line = String(flat)
        return line.count > 300 ? String(line.prefix(300)) + "…" : line
    }

}
