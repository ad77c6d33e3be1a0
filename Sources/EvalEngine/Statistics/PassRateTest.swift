import Foundation
public import TraceCore

/// Passes out of attempts: a case's sample, now or in its baseline.
public struct PassCounts: Sendable, Hashable {
    public var passes: Int
    public var attempts: Int

    public init(passes: Int, attempts: Int) {
        self.passes = max(0, min(passes, attempts))
        self.attempts = max(0, attempts)
    }

    public var rate: Double { attempts == 0 ? 0 : Double(passes) / Double(attempts) }

    /// `7/10`.
    public var fraction: String { "\(passes)/\(attempts)" }

    /// The Wilson score interval of the rate at confidence `1 - alpha` (two-sided), as
    /// `scipy.stats.binomtest(k, n).proportion_ci(method="wilson")` gives it; (0, 1) for no attempts.
    public func wilsonInterval(alpha: Double = 0.05) -> (lower: Double, upper: Double) {
        guard attempts > 0 else { return (0, 1) }
        let z = NormalDistribution.quantile(1 - alpha / 2)
        let n = Double(attempts)
        let p = rate
        let denominator = 1 + z * z / n
        let centre = (p + z * z / (2 * n)) / denominator
        let margin = z * (p * (1 - p) / n + z * z / (4 * n * n)).squareRoot() / denominator
        // Snapped to the bounds within rounding, so 0 and 1 print as such.
        func snap(_ value: Double) -> Double { value < 1e-12 ? 0 : value > 1 - 1e-12 ? 1 : value }
        return (snap(centre - margin), snap(centre + margin))
    }

    /// `{"passes", "attempts", "rate", "interval": [lower, upper]}`.
    public func json(alpha: Double = 0.05) -> JSONValue {
        let interval = wilsonInterval(alpha: alpha)
        var object = ObjectBuilder()
        object.set("passes", passes)
        object.set("attempts", attempts)
        object.set("rate", rate)
        object.set("interval", JSONValue.array([.double(interval.lower), .double(interval.upper)]))
        return object.json
    }
}

/// The exact tests of "the pass rate fell": is the current sample's pass rate lower than the
/// baseline's? One-sided, on the 2×2 table of passes and failures (docs/eval-cases.md,
/// "Statistics"). Both give a p-value for the null hypothesis that the rate did not fall.
public enum PassRateTest: String, Sendable, CaseIterable {
    /// Fisher's exact test: conditional on both margins; the hypergeometric tail
    /// `P(X ≥ baseline passes)`. Conservative, the default.
    case fisher
    /// Barnard's exact test (unconditional, pooled Wald statistic): the largest over the common
    /// pass probability π of the chance of a table at least as extreme. More powerful at the
    /// small samples repeats give; slower (a maximisation per test).
    case barnard

    /// The one-sided p-value that the current rate is lower than the baseline's; 1 when a side
    /// has no attempts.
    public func pValue(baseline: PassCounts, current: PassCounts) -> Double {
        guard baseline.attempts > 0, current.attempts > 0 else { return 1 }
        switch self {
        case .fisher: return Self.fisher(baseline, current)
        case .barnard: return Self.barnard(baseline, current)
        }
    }

    /// log C(n, k).
    static func logChoose(_ n: Int, _ k: Int) -> Double {
        lgamma(Double(n) + 1) - lgamma(Double(k) + 1) - lgamma(Double(n - k) + 1)
    }

    /// `scipy.stats.fisher_exact([[b_pass, c_pass], [b_fail, c_fail]], alternative="greater")`.
    static func fisher(_ baseline: PassCounts, _ current: PassCounts) -> Double {
        let passes = baseline.passes + current.passes
        let total = baseline.attempts + current.attempts
        // X, the baseline's passes given both margins, is hypergeometric.
        let low = max(0, passes - current.attempts)
        let high = min(passes, baseline.attempts)
        let denominator = logChoose(total, passes)
        func probability(_ x: Int) -> Double {
            exp(logChoose(baseline.attempts, x) + logChoose(current.attempts, passes - x) - denominator)
        }
        var tail = 0.0
        var all = 0.0
        for x in low...high {
            let p = probability(x)
            all += p
            if x >= baseline.passes { tail += p }
        }
        return min(1, max(0, tail / all))
    }

    /// `scipy.stats.barnard_exact([[b_pass, c_pass], [b_fail, c_fail]], alternative="greater")`
    /// (pooled): the samples are the columns.
    static func barnard(_ baseline: PassCounts, _ current: PassCounts) -> Double {
        let n1 = baseline.attempts
        let n2 = current.attempts
        func wald(_ x1: Int, _ x2: Int) -> Double {
            let p1 = Double(x1) / Double(n1)
            let p2 = Double(x2) / Double(n2)
            if p1 == p2 { return 0 }
            let pooled = Double(x1 + x2) / Double(n1 + n2)
            let variance = pooled * (1 - pooled) * (1 / Double(n1) + 1 / Double(n2))
            return (p1 - p2) / variance.squareRoot()
        }
        let observed = wald(baseline.passes, current.passes)
        // The tables at least as extreme, as (successes, log of the two binomial coefficients).
        // Compared in floating point as scipy compares them, so that a table whose statistic
        // equals the observed one only on paper is decided the same way.
        var extreme: [(successes: Int, logWeight: Double)] = []
        for x1 in 0...n1 {
            for x2 in 0...n2 where wald(x1, x2) >= observed {
                extreme.append((x1 + x2, logChoose(n1, x1) + logChoose(n2, x2)))
            }
        }
        let total = n1 + n2
        func pValue(_ pi: Double) -> Double {
            var sum = 0.0
            for (successes, logWeight) in extreme {
                let logPi = successes == 0 ? 0 : Double(successes) * log(pi)
                let logRest = total - successes == 0 ? 0 : Double(total - successes) * log1p(-pi)
                sum += exp(logWeight + logPi + logRest)
            }
            return sum
        }
        // The supremum over π in (0, 1): a grid, then golden-section search around the best
        // point (the function is smooth, with few local maxima).
        let grid = 400
        var best = (pi: 0.5, value: pValue(0.5))
        for i in 1..<grid {
            let pi = Double(i) / Double(grid)
            let value = pValue(pi)
            if value > best.value { best = (pi, value) }
        }
        var low = max(1e-12, best.pi - 1.0 / Double(grid))
        var high = min(1 - 1e-12, best.pi + 1.0 / Double(grid))
        let ratio = (5.0.squareRoot() - 1) / 2
        for _ in 0..<80 {
            let a = high - ratio * (high - low)
            let b = low + ratio * (high - low)
            if pValue(a) > pValue(b) { high = b } else { low = a }
        }
        return min(1, max(best.value, pValue((low + high) / 2)))
    }
}

/// The standard normal distribution's quantile function.
enum NormalDistribution {
    /// Φ⁻¹(p) for 0 < p < 1: Acklam's rational approximation refined by one Halley step on
    /// `erfc` (relative error below 1e-15).
    static func quantile(_ p: Double) -> Double {
        precondition(p > 0 && p < 1)
        let a = [
            -3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02, 1.383577518672690e+02, -3.066479806614716e+01,
            2.506628277459239e+00,
        ]
        let b = [-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02, 6.680131188771972e+01, -1.328068155288572e+01]
        let c = [
            -7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00, -2.549732539343734e+00, 4.374664141464968e+00,
            2.938163982698783e+00,
        ]
        let d = [7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00]
        let low = 0.02425
        var x: Double
        if p < low {
            let q = (-2 * log(p)).squareRoot()
            x =
                (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5])
                / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
        } else if p <= 1 - low {
            let q = p - 0.5
            let r = q * q
            x =
                (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q
                / (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1)
        } else {
            let q = (-2 * log1p(-p)).squareRoot()
            x =
                -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5])
                / ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1)
        }
        let e = 0.5 * erfc(-x / 2.0.squareRoot()) - p
        let u = e * (2 * Double.pi).squareRoot() * exp(x * x / 2)
        x -= u / (1 + x * u / 2)
        return x
    }
}
