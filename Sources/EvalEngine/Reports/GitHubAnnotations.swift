import Foundation
public import TraceCore

/// GitHub Actions workflow commands (`::error file=…,line=…,title=…::message`) for a results
/// document: each case that fails the gate (`ReportCounts.failsGate`) or could not run is an
/// error at its case file's line, so the pull request's diff shows it where the case is
/// written; a quarantined, flaky-passing, known or unconfirmed failure is a warning there.
public enum GitHubAnnotations {
    /// The lines, in case order; none for a suite with nothing to point at.
    public static func lines(from report: JSONValue) -> [String] {
        let failOn = report["verdict"]?["fail_on"]?.stringValue.flatMap(FailOn.init(rawValue:)) ?? .any
        var lines: [String] = []
        for entry in report["cases"]?.arrayValue ?? [] {
            let caseId = entry["case_id"]?.stringValue ?? "?"
            let outcome = entry["outcome"]?.stringValue ?? "error"
            let status = entry["baseline"]?["status"]?.stringValue
            let passes = CaseOutcome(reported: outcome)?.passes == true
            let level: String
            var what: String
            if outcome == "error" {
                level = "error"
                what = "could not run: " + (entry["error"]?.stringValue ?? firstRunError(entry) ?? "see the report")
            } else if ReportCounts.failsGate(entry, failOn: failOn) {
                level = "error"
                what = summary(entry, outcome: outcome, status: status)
            } else if !passes || outcome == "flaky_pass" || status == BaselineComparison.Status.regressed.rawValue
                || entry["quarantine"] != nil && !passes
            {
                level = "warning"
                what = summary(entry, outcome: outcome, status: status)
                if let quarantine = entry["quarantine"] {
                    what =
                        "quarantined (owner \(quarantine["owner"]?.stringValue ?? "?"), until \(quarantine["until"]?.stringValue ?? "?")): "
                        + what
                } else if !passes, failOn == .regression {
                    what += " (not a regression)"
                }
            } else {
                continue
            }
            var properties = ["file=" + property(entry["file"]?.stringValue ?? "")]
            if let line = entry["line"]?.intValue, line > 0 { properties.append("line=\(line)") }
            properties.append("title=" + property("agent-eval: \(caseId) \(outcome.replacingOccurrences(of: "_", with: " "))"))
            lines.append("::\(level) \(properties.joined(separator: ","))::\(message(what))")
        }
        return lines
    }

    /// What went wrong, in one message: the expiry, regressions, then each failed expectation
    /// with its `look:` command.
    static func summary(_ entry: JSONValue, outcome: String, status: String?) -> String {
        var parts: [String] = []
        if let quarantine = entry["quarantine"], quarantine["expired"]?.boolValue == true {
            parts.append(
                "quarantine ended \(quarantine["until"]?.stringValue ?? "?") (owner \(quarantine["owner"]?.stringValue ?? "?")): release or extend it"
            )
        }
        if let attempts = entry["attempts"], entry["source"]?.stringValue == "live" {
            let passed = attempts["passed"]?.intValue ?? 0
            let total = passed.addingSaturating(attempts["failed"]?.intValue ?? 0)
            if total > 1 { parts.append("\(passed)/\(total) attempts passed") }
        }
        for regression in entry["baseline"]?["regressions"]?.arrayValue ?? [] {
            parts.append("regression: " + (regression["message"]?.stringValue ?? ""))
        }
        var seen = Set<String>()
        for run in entry["runs"]?.arrayValue ?? [] {
            for failure in run["failures"]?.arrayValue ?? [] {
                let text =
                    "\(failure["expectation"]?.stringValue ?? ""): expected \(failure["expected"]?.stringValue ?? ""); "
                    + "happened: \(failure["actual"]?.stringValue ?? "")\nlook: \(failure["replay"]?.stringValue ?? "")"
                if seen.insert(text).inserted { parts.append(text) }
            }
        }
        if status == BaselineComparison.Status.notSignificant.rawValue {
            parts.append("fails now, but the fall from the baseline is not significant: more attempts (--repeat) can tell")
        }
        return parts.isEmpty ? outcome : parts.joined(separator: "\n")
    }

    static func firstRunError(_ entry: JSONValue) -> String? {
        entry["runs"]?.arrayValue?.lazy.compactMap { $0["error"]?.stringValue }.first
    }

    /// A workflow command's message: `%`, CR and LF escaped.
    static func message(_ text: String) -> String {
        text.replacingOccurrences(of: "%", with: "%25").replacingOccurrences(of: "\r", with: "%0D").replacingOccurrences(
            of: "\n", with: "%0A")
    }

    /// A workflow command's property value: also `:` and `,` escaped.
    static func property(_ text: String) -> String {
        message(text).replacingOccurrences(of: ":", with: "%3A").replacingOccurrences(of: ",", with: "%2C")
    }
}
