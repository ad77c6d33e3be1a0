import ConfigFile
public import TraceCore

/// What a case expects of a run's trajectory. Every field is optional; an empty expectation
/// passes any run. The semantics are in docs/eval-cases.md and are the same for recorded and
/// live runs: they are checked against the run state folded from the log.
public struct Expectations: Sendable {
    /// Each must be executed at least once. A tool whose every attempt failed was executed,
    /// so it passes, with a warning that says so.
    public var toolsCalled: [String] = []
    /// Each must have at least one call whose last attempt succeeded.
    public var toolsSucceeded: [String] = []
    /// None may be executed; with `countsDeniedAttempts`, none may even be proposed.
    public var toolsNotCalled: [String] = []
    /// When set, only these may be executed (each as often as it likes): a call of any other
    /// tool that ran fails.
    public var toolsAllowed: [String]?
    /// Tools that must not run in this order (other calls may come between them).
    public var notSequence: [String] = []
    /// How many tool results may be failures (an attempt that ended `error`; a `refused` result is
    /// the tool applying a rule, not a fault).
    public var failedResults: CountRange?
    public var stopReason: StopReason?
    /// The limit the stop must name (for `budget_exhausted`).
    public var limit: LimitKind?
    public var sequence: SequenceExpectation?
    /// Argument matchers for every executed call of a tool, by tool name, in file order.
    public var arguments: [(tool: String, matcher: ArgumentMatcher)] = []
    /// Argument matchers for a tool's executed calls one by one: the first call must match the
    /// first, the second the second… (`arguments: {tool: [m1, m2]}`); calls past the list are
    /// not checked, a list longer than the calls fails.
    public var argumentsByCall: [(tool: String, matchers: [ArgumentMatcher])] = []
    public var callCounts: [(tool: String, range: CountRange)] = []
    public var maxSteps: Int?
    public var maxToolCalls: Int?
    /// At least this many executed calls, of any tools.
    public var minToolCalls: Int?
    public var maxTokens: Int?
    public var maxDurationMs: Int?
    /// Tools that must have at least one call denied by policy (or refused by a human).
    public var denied: [String] = []
    /// Tools that must have at least one call needing approval.
    public var approvalRequired: [String] = []
    /// No call that needed approval ran without a granted approval.
    public var requiresApprovalBeforeExecution = false
    public var answerContains: [String] = []
    public var answerMatches: String?
    /// The answer's word overlap with a reference answer (ROUGE-1 F-measure) is at least `min`.
    public var answerSimilarTo: (text: String, min: Double)?
    /// A judge model grades the final answer against this rubric.
    public var answerRubric: Rubric?
    /// A judge model grades the arguments of every executed call of a tool, in file order.
    public var argumentRubrics: [ArgumentRubric] = []
    /// Whether a denied or proposed-but-not-run call counts as "called" for `toolsNotCalled`.
    public var countsDeniedAttempts = false
    /// What the agent must have told the user (a conversation's messages, or a run's answer):
    /// each text, case-insensitively, in at least one of its messages.
    public var communicate: [String] = []
    /// Per user turn of a conversation (1 for the first), what the agent did in that turn.
    public var turns: [(turn: Int, expected: Expectations)] = []
    /// The environment's final state after a live run (`state:`), checked by the runner.
    public var state: StateExpectation?
    /// For a pipeline run: what its pipeline log and its tasks' child runs must show. A case
    /// checks either a run (the fields above) or a pipeline (this), never both.
    public var pipeline: PipelineExpectations?

    public init() {}

    /// Every tool name the expectations mention, without repeats: in the order of
    /// `ExpectationKind.all`, but for `sequence`'s, which come last (the order unknown tools have
    /// always been reported in, and the first of them is the one a run that cannot start names).
    public var toolNames: [String] {
        var names: [String] = []
        var seen: Set<String> = []
        let kinds = ExpectationKind.all.filter { $0.key != "sequence" } + ExpectationKind.all.filter { $0.key == "sequence" }
        for kind in kinds {
            for name in kind.tools(self) where seen.insert(name).inserted { names.append(name) }
        }
        return names
    }

    /// How many checks this is: one per tool listed and per setting given (`ExpectationKind.count`),
    /// and the pipeline's.
    public var count: Int { ExpectationKind.all.reduce(0) { $0 + $1.count(self) } + (pipeline?.count ?? 0) }

    /// The model-graded expectations, answer first: a run that has them is graded by a judge
    /// after its trajectory is checked.
    public var rubrics: [Rubric] { (answerRubric.map { [$0] } ?? []) + argumentRubrics.map(\.rubric) }

    /// The rubrics of this run and of the pipeline tasks' runs.
    public var allRubrics: [Rubric] { rubrics + (pipeline?.tasks.flatMap { $0.run?.rubrics ?? [] } ?? []) }

    /// The run-level keys a case sets, for the message when they are mixed with pipeline ones.
    var runKeyCount: Int { ExpectationKind.all.filter { $0.isGiven(self) }.count }
}

/// An inclusive range of call counts.
public struct CountRange: Sendable, Hashable, CustomStringConvertible {
    public var min: Int
    public var max: Int?

    public init(min: Int = 0, max: Int? = nil) {
        self.min = min
        self.max = max
    }

    public func contains(_ count: Int) -> Bool { count >= min && (max.map { count <= $0 } ?? true) }

    public var description: String {
        switch (min, max) {
        case (let low, let high?) where low == high: return "exactly \(low)"
        case (0, let high?): return "at most \(high)"
        case (let low, nil): return "at least \(low)"
        case (let low, let high?): return "between \(low) and \(high)"
        }
    }
}

/// An expected sequence of calls and how it must match the executed calls.
public struct SequenceExpectation: Sendable {
    /// How the expected list relates to the executed calls.
    public enum Mode: String, Sendable, CaseIterable {
        /// The same calls, in the same order, nothing else; calls proposed together in one
        /// decision have no order between them and are compared as a set.
        case strict
        /// The same calls, in any order, nothing else.
        case unordered
        /// The run's calls are a superset of the expected: every expected call happened (in any
        /// order); others may have too. (LangChain agentevals' `superset`.)
        case superset
        /// The run's calls are a subset of the expected: every call that happened was expected;
        /// expected ones may be missing. (agentevals' `subset`.)
        case subset
        /// The expected calls happened in this order; others may come between them.
        case inOrder = "in_order"

        /// Other names case files may use: the relation spelled out.
        public static let synonyms: [String: Mode] = ["includes_expected": .superset, "within_expected": .subset]
    }

    public var mode: Mode
    public var calls: [CallPattern]

    public init(mode: Mode, calls: [CallPattern]) {
        self.mode = mode
        self.calls = calls
    }
}

/// One expected call: a tool and, optionally, what its arguments must satisfy.
public struct CallPattern: Sendable, CustomStringConvertible {
    public var tool: String
    public var arguments: ArgumentMatcher?
    public var location: SourceLocation?

    public init(tool: String, arguments: ArgumentMatcher? = nil, location: SourceLocation? = nil) {
        self.tool = tool
        self.arguments = arguments
        self.location = location
    }

    public func matches(tool name: String, arguments actual: JSONValue) -> Bool {
        name == tool && (arguments?.mismatch(actual) == nil)
    }

    public var description: String {
        guard let arguments else { return tool }
        return "\(tool)(\(arguments))"
    }
}
