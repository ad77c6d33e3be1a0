public import TraceCore

/// What one run (a recorded log, or one repeat of a live case) showed.
public struct RunResult: Sendable {
    /// The log checked or written.
    public var logPath: String
    /// 1-based repeat number for live runs; 0 for recorded logs.
    public var repeatIndex: Int
    public var failures: [ExpectationFailure]
    public var notes: [CheckNote]
    /// Why the run could not be checked (an unreadable log, an agent that would not load);
    /// a harness error, not a failure.
    public var error: String?
    public var summary: RunSummary

    public init(logPath: String, repeatIndex: Int, failures: [ExpectationFailure], notes: [CheckNote], error: String?, summary: RunSummary)
    {
        self.logPath = logPath
        self.repeatIndex = repeatIndex
        self.failures = failures
        self.notes = notes
        self.error = error
        self.summary = summary
    }

    public var passed: Bool { error == nil && failures.isEmpty }

    /// A short name for the run: the log's file name, or `repeat N`.
    public var label: String {
        repeatIndex > 0 ? "repeat \(repeatIndex)" : (logPath.split(separator: "/").last.map(String.init) ?? logPath)
    }
}

/// The trajectory facts reports and baselines keep of a run.
public struct RunSummary: Sendable, Hashable {
    /// Executed tools, in proposal order, with repeats.
    public var tools: [String] = []
    /// Tools proposed but never run (denied, refused, waiting, cut off by a limit).
    public var attempted: [String] = []
    public var stopReason: StopReason?
    public var limit: LimitKind?
    public var steps = 0
    public var tokens = 0
    public var durationMs = 0
    /// Where the log was cut, for a torn log.
    public var tear: String?

    public init() {}

    public init(_ state: RunState) {
        tools = state.executedToolNames
        attempted = state.calls.filter { !$0.isExecuted }.map(\.tool)
        stopReason = state.stopReason
        limit = state.limitFired
        steps = state.decisions.last?.step ?? 0
        tokens = state.usage.totalTokens
        durationMs = state.elapsedUs / 1000
    }
}

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
    public var error: String?

    public init(evalCase: EvalCase, runs: [RunResult], error: String? = nil) {
        self.evalCase = evalCase
        self.runs = runs
        self.error = error
    }

    public var id: String { evalCase.id }

    /// A harness problem in the case or any of its runs.
    public var harnessError: String? { error ?? runs.first(where: { $0.error != nil })?.error }

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

/// The unbiased estimators over n runs of which c passed.
public enum PassEstimator {
    /// C(c, k) / C(n, k): all k sampled runs pass.
    public static func passHatK(n: Int, c: Int, k: Int) -> Double {
        guard n > 0, k > 0, k <= n else { return 0 }
        return ratio(top: c, bottom: n, k: k)
    }

    /// 1 - C(n - c, k) / C(n, k): at least one of k sampled runs passes.
    public static func passAtK(n: Int, c: Int, k: Int) -> Double {
        guard n > 0, k > 0, k <= n else { return 0 }
        return 1 - ratio(top: n - c, bottom: n, k: k)
    }

    /// C(top, k) / C(bottom, k) as a product, so large n does not overflow.
    static func ratio(top: Int, bottom: Int, k: Int) -> Double {
        guard top >= k else { return 0 }
        var value = 1.0
        for i in 0..<k { value *= Double(top - i) / Double(bottom - i) }
        return value
    }
}
