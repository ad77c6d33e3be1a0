import TraceCore

/// How a case compares with its baseline.
public struct BaselineComparison: Sendable {
    public enum Status: String, Sendable {
        /// No baseline for this case.
        case new
        /// Fails now and failed in the baseline: not a regression.
        case knownFailure = "known_failure"
        case regressed
        case unchanged
        /// Fails in the baseline, passes now.
        case fixed
    }

    public var status: Status
    public var regressions: [Regression]

    /// Compares a result with its baseline (nil when the case has none).
    public static func compare(_ result: CaseResult, with baseline: Baseline?) -> BaselineComparison {
        guard let baseline else { return BaselineComparison(status: .new, regressions: []) }
        var regressions: [Regression] = []
        if baseline.passed && !result.passed {
            regressions.append(Regression(kind: .nowFails, message: "passed in the baseline, fails now"))
        }
        for run in result.runs {
            guard let before = baseline.runs.first(where: { $0.run == run.label }) else { continue }
            let now = run.summary.stopName
            if before.stopReason != now {
                regressions.append(
                    Regression(
                        kind: .stopReasonChanged,
                        message: "\(run.label): stopped with \(now ?? "no stop"), was \(before.stopReason ?? "no stop")"))
            }
        }
        let seen = Set(baseline.toolsSeen)
        for tool in Array(Set(result.runs.flatMap(\.summary.tools))).sorted() where !seen.contains(tool) {
            regressions.append(Regression(kind: .newTool, message: "\(tool) is called now and was not in the baseline"))
        }
        let tasksBefore = Set(baseline.tasksSeen)
        for task in Array(Set(result.runs.flatMap(\.summary.tasks))).sorted() where !tasksBefore.contains(task) {
            regressions.append(Regression(kind: .newTask, message: "the task \(task) runs now and did not in the baseline"))
        }
        let forbidden = Set(result.evalCase.expected.toolsNotCalled)
        let attemptedBefore = Set(baseline.toolsAttempted + baseline.toolsSeen)
        let attemptedNow = Set(result.runs.flatMap { $0.summary.attempted + $0.summary.tools })
        for tool in forbidden.intersection(attemptedNow).subtracting(attemptedBefore).sorted() {
            regressions.append(
                Regression(kind: .forbiddenToolAttempted, message: "the forbidden tool \(tool) is attempted now, and was not before"))
        }
        if baseline.runCount > 1 || result.runs.count > 1 {
            let lower = wilsonLowerBound(rate: baseline.passRate, count: baseline.runCount)
            if result.passRate < lower {
                regressions.append(
                    Regression(
                        kind: .passRateDropped,
                        message: "pass rate \(percent(result.passRate)) is below the baseline's \(percent(baseline.passRate)) "
                            + "(95% interval from \(percent(lower)), \(baseline.runCount) runs)"))
            }
        }
        if !regressions.isEmpty { return BaselineComparison(status: .regressed, regressions: regressions) }
        if !result.passed { return BaselineComparison(status: .knownFailure, regressions: []) }
        return BaselineComparison(status: baseline.passed ? .unchanged : .fixed, regressions: [])
    }

    /// The lower end of the Wilson score interval (95%) for a rate seen over `count` runs.
    static func wilsonLowerBound(rate: Double, count: Int) -> Double {
        guard count > 0 else { return 0 }
        let z = 1.959964
        let n = Double(count)
        let centre = rate + z * z / (2 * n)
        let margin = z * ((rate * (1 - rate) + z * z / (4 * n)) / n).squareRoot()
        return max(0, (centre - margin) / (1 + z * z / n))
    }

    static func percent(_ rate: Double) -> String { "\(Int((rate * 100).rounded()))%" }
}
