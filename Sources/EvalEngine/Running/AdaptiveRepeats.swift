import Synchronization
public import TraceCore

/// `run --repeat auto --max-repeats N`: a live case is run again only while its verdict is
/// undecided (docs/eval-cases.md, "Adaptive repeats").
///
/// The rule is curtailment of the fixed-N design: after each attempt, the verdict the gate needs
/// — whether the case passes the gate (unless only regressions fail the run) and whether it
/// regressed against its baseline (unless only failures do) — is worked out for the sample so
/// far and for every way the attempts left could still come out. When they all agree, no further
/// attempt can change the verdict, and the case stops. So the gate outcome and the pass-rate
/// verdict are always the ones N attempts would have given: the false-alarm and miss rates are
/// exactly those of the fixed-N exact test at `--alpha`. A regression of another kind (a new tool,
/// a new stop reason) is seen only in the attempts made.
public struct AdaptiveRepeats: Sendable {
    public var maxRepeats: Int
    public var policy: RegressionPolicy
    public var failOn: FailOn
    /// Each case's baseline, by case id (none: only the gate outcome is decided).
    public var baselines: [String: Baseline]
    /// Tests already made: a case asks about the same final samples after every attempt.
    let cache = TestCache()

    public init(maxRepeats: Int, policy: RegressionPolicy = RegressionPolicy(), failOn: FailOn = .any, baselines: [String: Baseline] = [:])
    {
        self.maxRepeats = max(1, maxRepeats)
        self.policy = policy
        self.failOn = failOn
        self.baselines = baselines
    }

    /// What the gate needs to know of a case: does it pass the gate, did it regress.
    struct Verdict: Equatable {
        var passes: Bool?
        var regressed: Bool?
    }

    /// Whether `result` (the attempts so far) needs no further attempt.
    public func isDecided(_ result: CaseResult) -> Bool {
        let made = result.runs.count
        // A harness error makes the case "could not run" whatever follows.
        if made >= maxRepeats || result.outcome == .error { return true }
        let counts = result.counts
        let baseline = baselines[result.id]
        // Regressions other than the pass rate's (a new tool, a new stop reason) never go away.
        let otherRegression =
            baseline.map { baseline in
                BaselineComparison.compare(result, with: baseline, policy: policy).regressions.contains {
                    $0.kind != .nowFails && $0.kind != .passRateDropped
                }
            } ?? false
        func verdict(_ sample: PassCounts) -> Verdict {
            var verdict = Verdict()
            let passes = CaseResult.outcome(of: sample, minPassRate: result.evalCase.minPassRate, repeats: true).passes
            // Under `--fail-on regression` a case no baseline knows fails the gate when it fails
            // (`ReportCounts.isUnvouched`): its passing is part of the verdict.
            if failOn != .regression || baseline == nil { verdict.passes = passes }
            if failOn != .failure, let baseline {
                // As `BaselineComparison` decides: an exact test once either side has repeats.
                let fell =
                    sample.attempts > 1 ? cache.isRegression(policy, baseline.counts, sample) : baseline.passed && !passes
                verdict.regressed = otherRegression || fell
            }
            return verdict
        }
        let now = verdict(counts)
        let left = maxRepeats - made
        for passes in 0...left {
            let final = PassCounts(passes: counts.passes + passes, attempts: counts.attempts + left)
            if verdict(final) != now { return false }
        }
        return true
    }

    /// The exact tests made, by baseline and sample (Barnard's maximises over π per test).
    final class TestCache: Sendable {
        struct Key: Hashable {
            var policy: RegressionPolicy
            var baseline: PassCounts
            var sample: PassCounts
        }
        private let made = Mutex<[Key: Bool]>([:])

        func isRegression(_ policy: RegressionPolicy, _ baseline: PassCounts, _ sample: PassCounts) -> Bool {
            let key = Key(policy: policy, baseline: baseline, sample: sample)
            if let known = made.withLock({ $0[key] }) { return known }
            let answer = policy.compare(baseline, sample).isRegression
            made.withLock { $0[key] = answer }
            return answer
        }
    }

    /// How many attempts and model calls the adaptive run saved against `maxRepeats` each: the
    /// calls of an attempt not made are estimated by the mean steps of the case's attempts.
    public func savings(_ results: [CaseResult]) -> Savings {
        var savings = Savings(maxRepeats: maxRepeats)
        for result in results where result.evalCase.isLive && !result.runs.isEmpty {
            let saved = maxRepeats - result.runs.count
            let calls = result.runs.reduce(0) { $0 + max(1, $1.summary.steps) }
            savings.attemptsRun += result.runs.count
            savings.attemptsSaved += max(0, saved)
            savings.modelCallsRun += calls
            savings.modelCallsSaved += max(0, saved) * calls / result.runs.count
        }
        return savings
    }

    public struct Savings: Sendable, Hashable {
        public var maxRepeats: Int
        public var attemptsRun = 0
        public var attemptsSaved = 0
        /// Model calls made (each attempt's decisions), and those the saved attempts would have made.
        public var modelCallsRun = 0
        public var modelCallsSaved = 0

        /// `adaptive repeats: 34 attempts of 100 at most (66 saved, about 190 model calls)`.
        public var sentence: String {
            let fixed = attemptsRun + attemptsSaved
            return
                "adaptive repeats: \(counted(attemptsRun, "attempt")) of \(fixed) at most (\(attemptsSaved) saved, about \(counted(modelCallsSaved, "model call")))"
        }

        public var json: JSONValue {
            var object = ObjectBuilder()
            object.set("max_repeats", maxRepeats)
            object.set("attempts_run", attemptsRun)
            object.set("attempts_saved", attemptsSaved)
            object.set("model_calls_run", modelCallsRun)
            object.set("model_calls_saved", modelCallsSaved)
            return object.json
        }
    }
}
