public import TraceCore

/// Whether a case's repeats agree.
public enum Stability: String, Sendable {
    case stablePass = "stable_pass"
    case flaky
    case stableFail = "stable_fail"
}

/// Everything one case produced.
public struct CaseResult: Sendable {
    public var evalCase: EvalCase
    public var runs: [RunResult]
    /// Why the case could not run at all (no log matched, the agent file is broken).
    public var error: DiagnosticRecord?

    public init(evalCase: EvalCase, runs: [RunResult], error: DiagnosticRecord? = nil) {
        self.evalCase = evalCase
        self.runs = runs
        self.error = error
    }

    public var id: String { evalCase.id }

    /// A harness problem in the case or any of its runs.
    public var harnessError: DiagnosticRecord? { error ?? runs.first(where: { $0.error != nil })?.error }

    public var passed: Bool { harnessError == nil && !runs.isEmpty && runs.allSatisfy(\.passed) }

    public var passCount: Int { runs.filter(\.passed).count }

    public var passRate: Double { runs.isEmpty ? 0 : Double(passCount) / Double(runs.count) }

    public var stability: Stability {
        switch passCount {
        case runs.count where !runs.isEmpty: return .stablePass
        case 0: return .stableFail
        default: return .flaky
        }
    }

    /// Probability that at least one of k runs drawn without replacement passes.
    public func passAtK(_ k: Int) -> Double { PassEstimator.passAtK(n: runs.count, c: passCount, k: k) }

    /// Probability that all of k runs drawn without replacement pass (tau-bench's pass^k).
    public func passHatK(_ k: Int) -> Double { PassEstimator.passHatK(n: runs.count, c: passCount, k: k) }
}
