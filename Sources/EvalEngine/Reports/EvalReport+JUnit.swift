import Foundation
public import TraceCore

extension EvalReport {
    /// JUnit XML from a results document (docs/eval-results.md): one testcase per case and run
    /// (log or repeat); the failure text is the console explanation. A case that could not run
    /// and has no runs is one testcase with its error.
    public static func junit(from report: JSONValue) -> String {
        var cases: [String] = []
        var failures = 0
        var errors = 0
        for entry in report["cases"]?.arrayValue ?? [] {
            let caseId = entry["case_id"]?.stringValue ?? "?"
            let file = entry["file"]?.stringValue ?? ""
            let className = "agent-eval." + ((file as NSString).lastPathComponent as NSString).deletingPathExtension
            let reportedRuns = entry["runs"]?.arrayValue ?? []
            let labelled = reportedRuns.count > 1 || entry["source"]?.stringValue == "live"
            let runs: [JSONValue?] = reportedRuns.isEmpty ? [nil] : reportedRuns
            for run in runs {
                let name =
                    run.map {
                        labelled
                            ? "\(caseId) [\(RunResult.label(log: $0["log"]?.stringValue ?? "", repeatIndex: $0["repeat"]?.intValue ?? 0))]"
                            : caseId
                    } ?? caseId
                // The time the check took; the run's own recorded duration is a property.
                let time = String(format: "%.3f", Double(run?["check_us"]?.intValue ?? 0) / 1_000_000)
                var xmlCase = "    <testcase classname=\"\(xml(className))\" name=\"\(xml(name))\" time=\"\(time)\">"
                if let run {
                    xmlCase +=
                        "\n      <properties><property name=\"run_duration_ms\" value=\"\(run["duration_ms"]?.intValue ?? 0)\"/>"
                        + "<property name=\"log\" value=\"\(xml(run["log"]?.stringValue ?? ""))\"/></properties>"
                }
                let failing = run?["failures"]?.arrayValue ?? []
                if let holder = [run, entry].compactMap({ $0 }).first(where: { $0["error"]?.stringValue != nil }),
                    let error = holder["error"]?.stringValue
                {
                    errors += 1
                    let code = holder["diagnostic"]?["code"]?.stringValue ?? "error"
                    xmlCase += "\n      <error message=\"\(xml(error))\" type=\"\(xml(code))\"/>"
                } else if !failing.isEmpty {
                    failures += 1
                    let text = failing.map { failure in
                        "\(failure["expectation"]?.stringValue ?? ""): expected \(failure["expected"]?.stringValue ?? "")\n"
                            + "happened: \(failure["actual"]?.stringValue ?? "")\nlook: \(failure["replay"]?.stringValue ?? "")"
                    }.joined(separator: "\n\n")
                    let message =
                        "\(failing.count) expectation\(failing.count == 1 ? "" : "s") failed: "
                        + failing.map { $0["expectation"]?.stringValue ?? "" }.joined(separator: ", ")
                    xmlCase += "\n      <failure message=\"\(xml(message))\" type=\"trajectory\">\(xml(text))</failure>"
                }
                xmlCase += "\n    </testcase>"
                cases.append(xmlCase)
            }
        }
        let time = String(format: "%.3f", Double(report["summary"]?["duration_ms"]?.intValue ?? 0) / 1000)
        let tests = cases.count
        // A partial merge (`results merge --allow-partial`) says so where a CI page shows the suite.
        if let partial = report["partial"]?.stringValue {
            cases.insert("    <properties><property name=\"partial\" value=\"\(xml(partial))\"/></properties>", at: 0)
        }
        return """
            <?xml version="1.0" encoding="UTF-8"?>
            <testsuites name="agent-eval" tests="\(tests)" failures="\(failures)" errors="\(errors)" time="\(time)">
              <testsuite name="agent-eval" tests="\(tests)" failures="\(failures)" errors="\(errors)" time="\(time)">
            \(cases.joined(separator: "\n"))
              </testsuite>
            </testsuites>

            """
    }

}
