import Foundation
public import TraceCore

extension EvalReport {
    /// JUnit XML from a results document (docs/eval-results.md): one testcase per case, each
    /// attempt (log or repeat) in its properties (`attempt.N.outcome`, `.log`, `.duration_ms`,
    /// `.failed`). A testcase fails exactly when the case fails the gate the document's verdict
    /// was decided under: a quarantined case's failure and a known failure under
    /// `--fail-on regression` are `<skipped>` with the reason, a case that could not run is an
    /// `<error>`, so the file never disagrees with the exit status.
    public static func junit(from report: JSONValue) -> String {
        var cases: [String] = []
        var failures = 0
        var errors = 0
        var skipped = 0
        let failOn = report["verdict"]?["fail_on"]?.stringValue.flatMap(FailOn.init(rawValue:)) ?? .any
        for entry in report["cases"]?.arrayValue ?? [] {
            let caseId = entry["case_id"]?.stringValue ?? "?"
            let file = entry["file"]?.stringValue ?? ""
            let className = "agent-eval." + ((file as NSString).lastPathComponent as NSString).deletingPathExtension
            let runs = entry["runs"]?.arrayValue ?? []
            // The time this suite run spent on the case: checking its runs, and for a live case the
            // runs themselves (an 824 ms live run is not a 0.001 s test). A recorded log's own
            // duration was spent when it was recorded: it stays a property.
            // The shard reports merged are files from elsewhere: sums saturate, never trap.
            let checkUs = runs.reduce(0) { $0.addingSaturating($1["check_us"]?.intValue ?? 0) }
            let runMs =
                entry["source"]?.stringValue == "live" ? runs.reduce(0) { $0.addingSaturating($1["duration_ms"]?.intValue ?? 0) } : 0
            let time = String(format: "%.3f", (Double(checkUs) + Double(runMs) * 1000) / 1_000_000)
            var xmlCase = "    <testcase classname=\"\(xml(className))\" name=\"\(xml(caseId))\" time=\"\(time)\">"
            let outcome = entry["outcome"]?.stringValue ?? "error"
            var properties: [(String, String)] = [("outcome", outcome)]
            if let attempts = entry["attempts"] {
                let passed = attempts["passed"]?.intValue ?? 0
                properties.append(("attempts", "\(passed)/\(passed.addingSaturating(attempts["failed"]?.intValue ?? 0))"))
            }
            if let status = entry["baseline"]?["status"]?.stringValue { properties.append(("baseline", status)) }
            for (index, run) in runs.enumerated() {
                let prefix = "attempt.\(index + 1)."
                properties.append((prefix + "outcome", run["outcome"]?.stringValue ?? "error"))
                properties.append((prefix + "log", run["log"]?.stringValue ?? ""))
                properties.append((prefix + "duration_ms", "\(run["duration_ms"]?.intValue ?? 0)"))
                let failed = (run["failures"]?.arrayValue ?? []).compactMap { $0["expectation"]?.stringValue }
                if !failed.isEmpty { properties.append((prefix + "failed", failed.joined(separator: ", "))) }
            }
            xmlCase +=
                "\n      <properties>"
                + properties.map { "<property name=\"\(xml($0.0))\" value=\"\(xml($0.1))\"/>" }.joined() + "</properties>"
            let passes = CaseOutcome(reported: outcome)?.passes == true
            let status = entry["baseline"]?["status"]?.stringValue.flatMap(BaselineComparison.Status.init(rawValue:))
            let quarantine = entry["quarantine"]
            let expired = quarantine?["expired"]?.boolValue == true
            let regressions = entry["baseline"]?["regressions"]?.arrayValue ?? []
            let failing = runs.flatMap { run in (run["failures"]?.arrayValue ?? []).map { (run, $0) } }
            let explanation =
                (regressions.map { "regression: \($0["message"]?.stringValue ?? "")" }
                + failing.map { run, failure in
                    "\(RunResult.label(log: run["log"]?.stringValue ?? "", repeatIndex: run["repeat"]?.intValue ?? 0)): "
                        + "\(failure["expectation"]?.stringValue ?? ""): expected \(failure["expected"]?.stringValue ?? "")\n"
                        + "happened: \(failure["actual"]?.stringValue ?? "")\nlook: \(failure["replay"]?.stringValue ?? "")"
                }).joined(separator: "\n\n")
            let failsGate = ReportCounts.failsGate(entry, failOn: failOn)
            if outcome == "error" {
                errors += 1
                let holder = ([entry] + runs).first { $0["error"]?.stringValue != nil }
                let code = holder?["diagnostic"]?["code"]?.stringValue ?? "error"
                xmlCase +=
                    "\n      <error message=\"\(xml(holder?["error"]?.stringValue ?? "could not run"))\" type=\"\(xml(code))\"/>"
            } else if expired {
                failures += 1
                let until = quarantine?["until"]?.stringValue ?? "?"
                xmlCase +=
                    "\n      <failure message=\"quarantine expired on \(xml(until)): release or extend it\" type=\"quarantine\">"
                    + "\(xml(explanation))</failure>"
            } else if quarantine != nil && (!passes || status == .regressed) {
                skipped += 1
                let owner = quarantine?["owner"]?.stringValue ?? "?"
                let message = "quarantined (owner \(owner), until \(quarantine?["until"]?.stringValue ?? "?")): \(outcome)"
                xmlCase += "\n      <skipped message=\"\(xml(message))\">\(xml(explanation))</skipped>"
            } else if failsGate {
                failures += 1
                let names = Array(Set(failing.compactMap { $0.1["expectation"]?.stringValue })).sorted()
                let message =
                    status == .regressed && passes
                    ? "regressed against the baseline"
                    : "\(outcome) (\(entry["attempts"]?["passed"]?.intValue ?? 0) of \(runs.count) attempts passed)"
                        + (names.isEmpty ? "" : ": " + names.joined(separator: ", "))
                xmlCase +=
                    "\n      <failure message=\"\(xml(message))\" type=\"\(status == .regressed ? "regression" : "trajectory")\">\(xml(explanation))</failure>"
            } else if !passes || status == .regressed {
                skipped += 1
                let why = failOn == .regression ? "not a regression (--fail-on regression)" : "regressed, not failing (--fail-on failure)"
                xmlCase += "\n      <skipped message=\"\(xml(outcome)): \(xml(why))\">\(xml(explanation))</skipped>"
            }
            xmlCase += "\n    </testcase>"
            cases.append(xmlCase)
        }
        let time = String(format: "%.3f", Double(report["summary"]?["duration_ms"]?.intValue ?? 0) / 1000)
        let tests = cases.count
        // A partial merge (`results merge --allow-partial`) says so where a CI page shows the suite.
        var suiteProperties = [("verdict", report["verdict"]?["line"]?.stringValue ?? "")]
        if let partial = report["partial"]?.stringValue { suiteProperties.append(("partial", partial)) }
        cases.insert(
            "    <properties>" + suiteProperties.map { "<property name=\"\($0.0)\" value=\"\(xml($0.1))\"/>" }.joined() + "</properties>",
            at: 0)
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <testsuites name="agent-eval" tests="\(tests)" failures="\(failures)" errors="\(errors)" skipped="\(skipped)" time="\(time)">
              <testsuite name="agent-eval" tests="\(tests)" failures="\(failures)" errors="\(errors)" skipped="\(skipped)" time="\(time)">
            \(cases.joined(separator: "\n"))
              </testsuite>
            </testsuites>

            """
    }

}
