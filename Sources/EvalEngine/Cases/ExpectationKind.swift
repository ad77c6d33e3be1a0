import ConfigFile
import TraceCore

/// One key a case may give under `expected:` (or `expected.tasks.<task>`) about a run's
/// trajectory: how it is read from the file, how many checks it counts as, which tools it names,
/// and the function that checks a run against it.
///
/// `ExpectationKind.all` is the one list of them. The case reader, `Expectations.count`,
/// `Expectations.toolNames` and `TrajectoryCheck` all go through it, in its order (which is the
/// order errors and failures are reported in), and a test holds it to docs/eval-case.schema.json:
/// a kind added here and not to the schema, or the other way round, fails it.
struct ExpectationKind: Sendable {
    typealias Reader = @Sendable (ConfigNode, inout Expectations, _ directory: String) throws(ConfigError) -> Void
    typealias Checker = @Sendable (Expectations, CheckedRun, inout CheckOutcome) -> Void

    /// The key in the case file.
    let key: String
    /// The keys of its mapping form, when it has one (`verdicts`, `answer`).
    let members: [String]
    let read: Reader
    /// How many checks it makes of a run: one per tool listed or setting given.
    let count: @Sendable (Expectations) -> Int
    /// Whether the case gave it (a modifier such as `countDeniedAttempts` is given but checks nothing).
    let isGiven: @Sendable (Expectations) -> Bool
    /// The tools it names.
    let tools: @Sendable (Expectations) -> [String]
    let check: Checker

    init(
        _ key: String, members: [String] = [], read: @escaping Reader, count: @escaping @Sendable (Expectations) -> Int,
        isGiven: (@Sendable (Expectations) -> Bool)? = nil, tools: @escaping @Sendable (Expectations) -> [String] = { _ in [] },
        check: @escaping Checker
    ) {
        self.key = key
        self.members = members
        self.read = read
        self.count = count
        self.isGiven = isGiven ?? { count($0) > 0 }
        self.tools = tools
        self.check = check
    }

    /// Every kind, in the order they are read, counted and checked.
    static let all: [ExpectationKind] = [
        .tools("toolsCalled", \.toolsCalled, check: TrajectoryCheck.toolsCalled),
        .tools("toolsSucceeded", \.toolsSucceeded, check: TrajectoryCheck.toolsSucceeded),
        .tools("toolsNotCalled", \.toolsNotCalled, check: TrajectoryCheck.toolsNotCalled),
        ExpectationKind(
            "toolsAllowed", read: { node, expected, _ throws(ConfigError) in expected.toolsAllowed = try node.names("toolsAllowed") },
            count: { $0.toolsAllowed == nil ? 0 : 1 }, tools: { $0.toolsAllowed ?? [] }, check: TrajectoryCheck.toolsAllowed),
        ExpectationKind(
            "notSequence",
            read: { node, expected, _ throws(ConfigError) in
                let names = try node.names("notSequence")
                guard names.count >= 2 else {
                    throw ConfigError(
                        .invalidValue, "notSequence names \(counted(names.count, "tool")): an order needs two or more",
                        at: node.location, hint: "for a tool that must never run, use toolsNotCalled")
                }
                expected.notSequence = names
            }, count: { $0.notSequence.isEmpty ? 0 : 1 }, tools: \.notSequence, check: TrajectoryCheck.notSequence),
        ExpectationKind(
            "failedResults", members: ["min", "max"],
            read: { node, expected, _ throws(ConfigError) in
                expected.failedResults = try EvalCaseFile.readRange(node, what: "failedResults")
            },
            count: { $0.failedResults == nil ? 0 : 1 }, check: TrajectoryCheck.failedResults),
        ExpectationKind(
            "stopReason", read: { node, expected, _ throws(ConfigError) in expected.stopReason = try node.choice("stopReason") },
            count: { $0.stopReason == nil ? 0 : 1 }, check: TrajectoryCheck.stopReason),
        ExpectationKind(
            "limit", read: { node, expected, _ throws(ConfigError) in expected.limit = try node.choice("limit") },
            count: { $0.limit == nil ? 0 : 1 }, check: TrajectoryCheck.limit),
        ExpectationKind(
            "sequence", members: ["mode", "calls"],
            read: { node, expected, _ throws(ConfigError) in expected.sequence = try EvalCaseFile.readSequence(node) },
            count: { $0.sequence == nil ? 0 : 1 }, tools: { $0.sequence?.calls.map(\.tool) ?? [] }, check: TrajectoryCheck.sequence),
        ExpectationKind(
            "arguments", read: EvalCaseFile.readArgumentExpectations,
            count: { $0.arguments.count + $0.argumentsByCall.reduce(0) { $0 + $1.matchers.count } + $0.argumentRubrics.count },
            tools: { $0.arguments.map(\.tool) + $0.argumentsByCall.map(\.tool) + $0.argumentRubrics.map(\.tool) },
            check: TrajectoryCheck.arguments),
        ExpectationKind(
            "callCounts",
            read: { node, expected, _ throws(ConfigError) in
                for pair in try node.mapping("callCounts").pairs {
                    expected.callCounts.append((pair.key, try EvalCaseFile.readRange(pair.value, what: "callCounts.\(pair.key)")))
                }
            }, count: { $0.callCounts.count }, tools: { $0.callCounts.map(\.tool) }, check: TrajectoryCheck.callCounts),
        .bound("maxSteps", \.maxSteps, check: TrajectoryCheck.maxSteps),
        .bound("maxToolCalls", \.maxToolCalls, check: TrajectoryCheck.maxToolCalls),
        .bound("minToolCalls", \.minToolCalls, check: TrajectoryCheck.minToolCalls),
        .bound("maxTokens", \.maxTokens, check: TrajectoryCheck.maxTokens),
        .bound("maxDurationMs", \.maxDurationMs, check: TrajectoryCheck.maxDurationMs),
        ExpectationKind(
            "verdicts", members: ["denied", "approvalRequired", "noUnapprovedExecution"],
            read: { node, expected, _ throws(ConfigError) in
                var verdicts = try node.mapping("verdicts")
                expected.denied = try verdicts.optional("denied")?.names("verdicts.denied") ?? []
                expected.approvalRequired = try verdicts.optional("approvalRequired")?.names("verdicts.approvalRequired") ?? []
                expected.requiresApprovalBeforeExecution =
                    try verdicts.optional("noUnapprovedExecution")?.bool("verdicts.noUnapprovedExecution") ?? false
                try verdicts.finish()
            }, count: { $0.denied.count + $0.approvalRequired.count + ($0.requiresApprovalBeforeExecution ? 1 : 0) },
            tools: { $0.denied + $0.approvalRequired }, check: TrajectoryCheck.verdicts),
        ExpectationKind(
            "answer", members: ["contains", "matches", "similarTo", "min", "rubric", "model"], read: EvalCaseFile.readAnswerExpectations,
            count: {
                $0.answerContains.count + ($0.answerMatches == nil ? 0 : 1) + ($0.answerSimilarTo == nil ? 0 : 1)
                    + ($0.answerRubric == nil ? 0 : 1)
            }, check: TrajectoryCheck.answer),
        ExpectationKind(
            "communicate",
            read: { node, expected, _ throws(ConfigError) in
                expected.communicate = try node.strings("communicate")
                if let empty = expected.communicate.firstIndex(where: { $0.isEmpty }) {
                    throw ConfigError(.invalidValue, "communicate[\(empty)] is empty: it would be said by any message", at: node.location)
                }
            }, count: { $0.communicate.count }, check: TrajectoryCheck.communicate),
        ExpectationKind(
            "turns", read: EvalCaseFile.readTurnExpectations, count: { $0.turns.reduce(0) { $0 + $1.expected.count } },
            tools: { $0.turns.flatMap(\.expected.toolNames) }, check: TrajectoryCheck.turns),
        ExpectationKind(
            "state", members: ["command", "equals", "match"], read: EvalCaseFile.readStateExpectation,
            count: { $0.state == nil ? 0 : 1 },
            // A command's output, not the log: the runner checks it once the run has ended (`StateExpectation`).
            check: { _, _, _ in }),
        ExpectationKind(
            "countDeniedAttempts",
            read: { node, expected, _ throws(ConfigError) in expected.countsDeniedAttempts = try node.bool("countDeniedAttempts") },
            count: { _ in 0 }, isGiven: \.countsDeniedAttempts, check: { _, _, _ in }),
    ]

    /// The keys `expected.turns.<N>` takes: what the agent did within one user turn. A turn has
    /// no stop, limit, duration or answer of its own (the run's keys say those), and is judged
    /// by no rubric.
    static let perTurnKeys: Set<String> = [
        "toolsCalled", "toolsSucceeded", "toolsNotCalled", "toolsAllowed", "notSequence", "failedResults", "sequence", "arguments",
        "callCounts", "maxToolCalls", "minToolCalls", "verdicts", "communicate", "countDeniedAttempts",
    ]

    /// A list of tool names (`toolsCalled: [a, b]`, or one name): a check per tool.
    static func tools(_ key: String, _ path: any WritableKeyPath<Expectations, [String]> & Sendable, check: @escaping Checker) -> Self {
        ExpectationKind(
            key, read: { node, expected, _ throws(ConfigError) in expected[keyPath: path] = try node.names(key) },
            count: { $0[keyPath: path].count }, tools: { $0[keyPath: path] }, check: check)
    }

    /// A whole number, zero or more (`maxSteps: 8`): one check.
    static func bound(_ key: String, _ path: any WritableKeyPath<Expectations, Int?> & Sendable, check: @escaping Checker) -> Self {
        ExpectationKind(
            key,
            read: { node, expected, _ throws(ConfigError) in
                let bound = try node.int(key, in: 0...Int.max)
                if bound == 0 && key.hasPrefix("min") {
                    // Every run makes at least 0 calls: beside another expectation it passed without a word.
                    throw ConfigError(
                        .invalidValue, "\(key): 0 checks nothing, and every run passes it", at: node.location,
                        hint: "give a number above 0, or remove it")
                }
                expected[keyPath: path] = bound
            },
            count: { $0[keyPath: path] == nil ? 0 : 1 }, check: check)
    }
}
