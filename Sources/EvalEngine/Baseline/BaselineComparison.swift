public import TraceCore

/// How regressions are told from noise (`run --alpha --min-drop --test`; docs/eval-cases.md,
/// "Statistics").
public struct RegressionPolicy: Sendable, Hashable {
    /// The significance level of the exact test: a drop whose p-value is below it is real.
    public var alpha: Double
    /// The smallest fall of the pass rate (baseline rate minus current rate) that counts.
    public var minDrop: Double
    public var test: PassRateTest

    public init(alpha: Double = 0.05, minDrop: Double = 0.1, test: PassRateTest = .fisher) {
        self.alpha = alpha
        self.minDrop = minDrop
        self.test = test
    }

    /// The p-value of a fall from `baseline` to `current`, and whether it is a regression.
    public func compare(_ baseline: PassCounts, _ current: PassCounts) -> PassRateComparison {
        let pValue = test.pValue(baseline: baseline, current: current)
        let drop = baseline.rate - current.rate
        return PassRateComparison(
            baseline: baseline, current: current, test: test, pValue: pValue, alpha: alpha, minDrop: minDrop,
            isRegression: pValue < alpha && drop >= minDrop - 1e-12)
    }
}

/// A case's pass rate against its baseline's, by an exact test.
public struct PassRateComparison: Sendable, Hashable {
    public var baseline: PassCounts
    public var current: PassCounts
    public var test: PassRateTest
    public var pValue: Double
    public var alpha: Double
    public var minDrop: Double
    /// The fall is significant (p < alpha) and at least `minDrop`.
    public var isRegression: Bool

    public var drop: Double { baseline.rate - current.rate }

    /// `pass rate 3/10 (95% CI 11%–60%) vs 10/10 in the baseline (72%–100%): Fisher p = 0.0015`.
    public var sentence: String {
        let now = current.wilsonInterval()
        let before = baseline.wilsonInterval()
        return "pass rate \(current.fraction) (95% CI \(Self.percent(now.lower))–\(Self.percent(now.upper))) vs \(baseline.fraction) "
            + "in the baseline (\(Self.percent(before.lower))–\(Self.percent(before.upper))): \(test == .fisher ? "Fisher" : "Barnard") "
            + Self.pClause(pValue)
    }

    static func percent(_ rate: Double) -> String { "\(Int((rate * 100).rounded()))%" }

    /// `p = 0.0015` (2 significant digits), `p = 1`, `p < 0.0001`.
    static func pClause(_ value: Double) -> String {
        if value < 0.0001 { return "p < 0.0001" }
        return "p = " + pText(value)
    }

    /// A p-value in 2 significant digits (`0.0015`, `0.23`, `1`).
    static func pText(_ value: Double) -> String {
        if value >= 0.995 { return "1" }
        var digits = 2
        var scaled = value
        while scaled < 0.1 {
            scaled *= 10
            digits += 1
        }
        let factor = pow10(digits)
        let rounded = (value * factor).rounded() / factor
        var text = "\(rounded)"
        if text.contains("e") { text = "\(value)" }
        return text
    }

    private static func pow10(_ n: Int) -> Double { (0..<n).reduce(1.0) { value, _ in value * 10 } }

    /// The report's `baseline.pass_rate` member.
    public var json: JSONValue {
        var object = ObjectBuilder()
        object.set("test", test.rawValue)
        object.set("p_value", pValue)
        object.set("alpha", alpha)
        object.set("min_drop", minDrop)
        object.set("drop", drop)
        object.set("significant", isRegression)
        object.set("baseline", baseline.json())
        object.set("current", current.json())
        return object.json
    }
}

/// How a case compares with its baseline.
public struct BaselineComparison: Sendable {
    public enum Status: String, Sendable {
        /// No baseline for this case.
        case new
        /// Fails now and failed in the baseline: not a regression.
        case knownFailure = "known_failure"
        case regressed
        /// Fails now though its baseline passed, but the pass rate's fall is not significant
        /// (too few attempts to tell it from noise): not a regression; repeat the case to tell.
        case notSignificant = "not_significant"
        case unchanged
        /// The case could not run: there is nothing of its quality to compare.
        case notRun = "not_run"
        /// Fails in the baseline, passes now.
        case fixed
    }

    public var status: Status
    public var regressions: [Regression]
    /// The exact test of the pass rate, for a live case with repeats on either side.
    public var passRate: PassRateComparison?

    /// Compares a result with its baseline (nil when the case has none). A case that could not
    /// run is compared with nothing: a harness problem says nothing of quality.
    public static func compare(_ result: CaseResult, with baseline: Baseline?, policy: RegressionPolicy = RegressionPolicy())
        -> BaselineComparison
    {
        guard let baseline else { return BaselineComparison(status: .new, regressions: []) }
        // A harness problem says nothing of quality, not even of the attempts that did run.
        guard result.outcome != .error else { return BaselineComparison(status: .notRun, regressions: []) }
        var regressions: [Regression] = []
        let current = result.counts
        // A live case run with repeats: its pass rate is a sample, and only an exact test tells a
        // fall from noise. One attempt now (however many the baseline has): a case that passed
        // and fails now regressed, as without statistics — a single attempt cannot show a
        // significant fall, and the gate must not wave it through.
        let statistics = result.attemptsAreRepeats && current.attempts > 1
        var passRate: PassRateComparison?
        if statistics {
            let comparison = policy.compare(baseline.counts, current)
            passRate = comparison
            if comparison.isRegression {
                regressions.append(Regression(kind: .passRateDropped, message: comparison.sentence))
            }
        } else if !result.passed, baseline.passed || result.attemptsAreRepeats && baseline.mostlyPassed {
            // A live case's summed baseline whose attempts mostly passed (7 of 8: a flaky pass
            // or a flaky fail by its minPassRate) is a passing case: one attempt that fails now is
            // a regression, never a known failure — else one flaky failure in the baseline waves
            // every later failure through. (A recorded case's logs are the same every time: its
            // baseline's outcome is its verdict.)
            let before =
                baseline.passed
                ? "passed in the baseline" : "passed in \(baseline.counts.passes) of \(baseline.counts.attempts) baseline attempts"
            regressions.append(Regression(kind: .nowFails, message: "\(before), fails now"))
        }
        if result.attemptsAreRepeats {
            // A live case's attempts differ: a stop reason no baseline attempt ended with.
            let seen = Set(baseline.stopReasonsSeen)
            var newReasons: [String: [String]] = [:]
            for run in result.runs where run.error == nil {
                guard let now = run.summary.stopName, !seen.contains(now) else { continue }
                newReasons[now, default: []].append(run.label)
            }
            for (reason, labels) in newReasons.sorted(by: { $0.key < $1.key }) {
                let before = baseline.stopReasonsSeen.isEmpty ? "none stopped" : baseline.stopReasonsSeen.joined(separator: ", ")
                regressions.append(
                    Regression(
                        kind: .stopReasonChanged,
                        message: "\(labels.count == 1 ? labels[0] : "\(labels.count) attempts (\(labels.joined(separator: ", ")))") "
                            + "stopped with \(reason), which no baseline attempt did (\(before))"))
            }
        } else {
            for run in result.runs where run.error == nil {
                guard let before = baseline.runs.first(where: { $0.run == run.label }) else { continue }
                let now = run.summary.stopName
                if before.stopReason != now {
                    regressions.append(
                        Regression(
                            kind: .stopReasonChanged,
                            message: "\(run.label): stopped with \(now ?? "no stop"), was \(before.stopReason ?? "no stop")"))
                }
            }
        }
        let seen = Set(baseline.toolsSeen)
        for tool in Array(Set(result.runs.flatMap(\.summary.tools))).sorted() where baseline.knowsTools && !seen.contains(tool) {
            regressions.append(Regression(kind: .newTool, message: "\(tool) is called now and was not in the baseline"))
        }
        let tasksBefore = Set(baseline.tasksSeen)
        for task in Array(Set(result.runs.flatMap(\.summary.tasks))).sorted() where baseline.knowsTools && !tasksBefore.contains(task) {
            regressions.append(Regression(kind: .newTask, message: "the task \(task) runs now and did not in the baseline"))
        }
        let forbidden = Set(result.evalCase.expected.toolsNotCalled)
        let attemptedBefore = Set(baseline.toolsAttempted + baseline.toolsSeen)
        let attemptedNow = Set(result.runs.flatMap { $0.summary.attempted + $0.summary.tools })
        for tool in forbidden.intersection(attemptedNow).subtracting(attemptedBefore).sorted() where baseline.knowsTools {
            regressions.append(
                Regression(kind: .forbiddenToolAttempted, message: "the forbidden tool \(tool) is attempted now, and was not before"))
        }
        if !regressions.isEmpty { return BaselineComparison(status: .regressed, regressions: regressions, passRate: passRate) }
        // The baseline's outcome under the case's rule as it is now (its minPassRate may have changed).
        let passedBefore =
            result.attemptsAreRepeats
            ? CaseResult.outcome(of: baseline.counts, minPassRate: result.evalCase.minPassRate, repeats: true).passes : baseline.passed
        let status: Status
        if result.passed {
            status = passedBefore ? .unchanged : .fixed
        } else {
            status = passedBefore ? .notSignificant : .knownFailure
        }
        return BaselineComparison(status: status, regressions: [], passRate: passRate)
    }
}
