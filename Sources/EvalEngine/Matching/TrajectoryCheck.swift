import ConfigFile
public import TraceCore

/// One expectation a run did not meet: what was expected, what happened, and where.
public struct ExpectationFailure: Sendable, Hashable {
    /// The expectation's name in the case file (`toolsNotCalled`, `sequence`, `arguments.refund_order`…).
    public var expectation: String
    public var expected: String
    public var actual: String
    /// The step to look at, when one applies.
    public var step: Int?
    /// The call concerned, when one applies.
    public var callId: String?
    /// The log to look at when it is not the checked run's own: a pipeline task's child run.
    public var log: String?

    public init(expectation: String, expected: String, actual: String, step: Int? = nil, callId: String? = nil, log: String? = nil) {
        self.expectation = expectation
        self.expected = expected
        self.actual = actual
        self.step = step
        self.callId = callId
        self.log = log
    }
}

/// Something worth knowing that is not a failure (a denied attempt at a forbidden tool).
public struct CheckNote: Sendable, Hashable {
    public var message: String
    public var step: Int?
    /// Whether a passing result must still show it: the pass holds only in the letter of the
    /// expectation (a tool in `toolsCalled` that ran, but whose every attempt failed).
    public var isWarning: Bool

    public init(message: String, step: Int?, isWarning: Bool = false) {
        self.message = message
        self.step = step
        self.isWarning = isWarning
    }
}

/// A run being checked: its folded state and what the checks of every kind look up in it, found
/// once.
struct CheckedRun {
    let state: RunState
    /// The policy file whose verdicts were given to the calls that recorded none (a case's `policy:`).
    let policy: String?
    let executed: [ToolCallRecord]
    let lastStep: Int
    // Where each tool's calls are in `state.calls`, in order, found once: a case may list many
    // tools (a long toolsNotCalled), and scanning every call for each would make the check
    // quadratic. Places, not copies: a case asks about a few of the tools a run called.
    private let byTool: [String: [Int]]

    init(_ state: RunState, policy: String?) {
        self.state = state
        self.policy = policy
        executed = state.executedCalls
        lastStep = state.step
        var byTool: [String: [Int]] = [:]
        for index in state.calls.indices { byTool[state.calls[index].tool, default: []].append(index) }
        self.byTool = byTool
    }

    /// The executed tools' names, for a failure's message.
    var executedNames: String { TrajectoryCheck.names(executed) }

    func allCalls(of tool: String) -> [ToolCallRecord] { byTool[tool]?.map { state.calls[$0] } ?? [] }
    func executedCalls(of tool: String) -> [ToolCallRecord] { allCalls(of: tool).filter(\.isExecuted) }
}

/// What the checks found: failures, and notes that are not failures.
struct CheckOutcome {
    var failures: [ExpectationFailure] = []
    var notes: [CheckNote] = []
}

/// Checks a run's trajectory — the state folded from its log — against a case's expectations.
/// Pure: the same state and expectations always give the same failures, in the order of
/// `ExpectationKind.all`. Each kind's check is a function here; the table names it.
public enum TrajectoryCheck {
    /// `auditedBy` names the policy file whose verdicts the state was given for the calls that
    /// recorded none (a case's `policy:`): verdict expectations then hold an imported or
    /// recorded run to them.
    public static func check(_ expected: Expectations, against state: RunState, auditedBy policy: String? = nil)
        -> (failures: [ExpectationFailure], notes: [CheckNote])
    {
        let run = CheckedRun(state, policy: policy)
        var out = CheckOutcome()
        for kind in ExpectationKind.all { kind.check(expected, run, &out) }
        return (out.failures, out.notes)
    }

    static func toolsCalled(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        for tool in expected.toolsCalled where !run.allCalls(of: tool).contains(where: \.isExecuted) {
            let attempts = run.allCalls(of: tool)
            let actual: String
            if let attempt = attempts.first {
                actual = "\(tool) was proposed (\(attempt.id), step \(attempt.step)) but never ran: \(outcome(of: attempt))"
            } else {
                actual = "no call of \(tool); tools executed: \(run.executedNames)"
            }
            out.failures.append(
                ExpectationFailure(
                    expectation: "toolsCalled", expected: "\(tool) is called", actual: actual, step: attempts.first?.step ?? run.lastStep,
                    callId: attempts.first?.id))
        }

        for tool in expected.toolsCalled {
            let calls = run.executedCalls(of: tool)
            if let first = calls.first, !calls.contains(where: \.hasSucceeded) {
                out.notes.append(
                    CheckNote(
                        message: "\(tool) was called, but every attempt failed (\(attemptsSummary(calls))): "
                            + "toolsCalled counts a call that ran; toolsSucceeded requires one that succeeded",
                        step: first.step, isWarning: true))
            }
        }
    }

    static func toolsSucceeded(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        for tool in expected.toolsSucceeded where !run.allCalls(of: tool).contains(where: { $0.isExecuted && $0.hasSucceeded }) {
            let calls = run.allCalls(of: tool)
            let ran = calls.filter(\.isExecuted)
            let actual: String
            if !ran.isEmpty {
                actual = "\(tool) ran, but every attempt failed: \(attemptsSummary(ran))"
            } else if let attempt = calls.first {
                actual = "\(tool) was proposed (\(attempt.id), step \(attempt.step)) but never ran: \(outcome(of: attempt))"
            } else {
                actual = "no call of \(tool); tools executed: \(run.executedNames)"
            }
            let concerned = ran.first ?? calls.first
            out.failures.append(
                ExpectationFailure(
                    expectation: "toolsSucceeded", expected: "\(tool) is called and succeeds", actual: actual,
                    step: concerned?.step ?? run.lastStep, callId: concerned?.id))
        }
    }

    static func toolsNotCalled(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        for tool in expected.toolsNotCalled {
            let calls = run.allCalls(of: tool)
            if let call = calls.first(where: \.isExecuted) {
                out.failures.append(
                    ExpectationFailure(
                        expectation: "toolsNotCalled", expected: "\(tool) is never called",
                        actual: "\(tool) ran as \(call.id) at step \(call.step) with \(call.argumentsText.string)",
                        step: call.step,
                        callId: call.id))
            } else if let attempt = calls.first {
                let message = "\(tool) was proposed as \(attempt.id) at step \(attempt.step) and did not run: \(outcome(of: attempt))"
                if expected.countsDeniedAttempts {
                    out.failures.append(
                        ExpectationFailure(
                            expectation: "toolsNotCalled", expected: "\(tool) is never called or attempted", actual: message,
                            step: attempt.step,
                            callId: attempt.id))
                } else {
                    out.notes.append(CheckNote(message: message, step: attempt.step))
                }
            }
        }
    }

    static func toolsAllowed(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        if let allowed = expected.toolsAllowed {
            let permitted = Set(allowed)
            let others = run.executed.filter { !permitted.contains($0.tool) }
            if let first = others.first {
                let named = Array(Set(others.map(\.tool))).sorted()
                out.failures.append(
                    ExpectationFailure(
                        expectation: "toolsAllowed", expected: "only \(allowed.joined(separator: ", ")) run",
                        actual: "\(named.joined(separator: ", ")) ran too: first as \(first.id) at step \(first.step)"
                            + (others.count > 1 ? " (\(counted(others.count, "call")) in all)" : ""),
                        step: first.step, callId: first.id))
            }
        }
    }

    static func notSequence(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        if expected.notSequence.count >= 2 {
            // The earliest occurrence in order: each tool's first call after the previous one's.
            var matched: [ToolCallRecord] = []
            for call in run.executed where matched.count < expected.notSequence.count && call.tool == expected.notSequence[matched.count] {
                matched.append(call)
            }
            if matched.count == expected.notSequence.count, let last = matched.last {
                out.failures.append(
                    ExpectationFailure(
                        expectation: "notSequence", expected: "never \(expected.notSequence.joined(separator: " then "))",
                        actual: "they ran in that order: "
                            + matched.map { "\($0.tool) (\($0.id), step \($0.step))" }.joined(separator: ", "),
                        step: last.step, callId: last.id))
            }
        }
    }

    static func failedResults(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        if let range = expected.failedResults {
            // A result that ended in an error (a refusal, a business rule the tool applied, is no fault).
            let failed = run.executed.flatMap { call in call.results.filter { $0.status == .error }.map { (call, $0) } }
            if !range.contains(failed.count) {
                let listed = failed.prefix(5).map { "\($0.0.id) \($0.0.tool) (\($0.1.status.rawValue))" }.joined(separator: ", ")
                out.failures.append(
                    ExpectationFailure(
                        expectation: "failedResults", expected: "\(range) failed tool results",
                        actual: "\(failed.count)" + (failed.isEmpty ? "" : ": \(listed)\(failed.count > 5 ? ", …" : "")"),
                        step: failed.last?.0.step ?? run.lastStep, callId: failed.last?.0.id))
            }
        }
    }

    static func stopReason(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        if let reason = expected.stopReason, run.state.stopReason != reason {
            out.failures.append(
                ExpectationFailure(
                    expectation: "stopReason", expected: reason.rawValue, actual: describeStop(run.state), step: run.lastStep))
        }
    }

    static func limit(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        if let limit = expected.limit, run.state.limitFired != limit {
            out.failures.append(
                ExpectationFailure(
                    expectation: "limit", expected: limit.rawValue,
                    actual: run.state.limitFired.map { "the \($0.rawValue) limit fired" } ?? describeStop(run.state),
                    step: run.lastStep))
        }
    }

    static func sequence(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        if let sequence = expected.sequence, let failure = SequenceMatch.check(sequence, against: run.executed) {
            out.failures.append(failure)
        }
    }

    static func arguments(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        // A key the tool's input schema does not declare, close to one it does: a misspelling
        // (`amount_cent` for `amount_cents`), whose `exists: false` passed every run.
        for (tool, matcher) in expected.arguments + expected.argumentsByCall.flatMap({ entry in entry.matchers.map { (entry.tool, $0) } }) {
            guard let spec = run.state.start?.tools.first(where: { $0.name == tool }),
                let declared = spec.inputSchema["properties"]?.objectValue.map({ Array($0.keys) }), !declared.isEmpty
            else { continue }
            for key in matcher.firstKeys where !declared.contains(key) {
                guard let meant = ConfigNode.suggestion(for: key, among: declared) else { continue }
                out.failures.append(
                    ExpectationFailure(
                        expectation: "arguments.\(tool)", expected: "arguments \(tool) takes",
                        actual: "\(key) is not one (its input_schema declares \(declared.sorted().joined(separator: ", "))): did you mean "
                            + "\"\(meant)\"? The check would never see a value", step: run.lastStep))
            }
        }
        for (tool, matcher) in expected.arguments {
            let calls = run.executedCalls(of: tool)
            if calls.isEmpty {
                out.failures.append(
                    ExpectationFailure(
                        expectation: "arguments.\(tool)", expected: "calls of \(tool) with \(matcher)", actual: "\(tool) never ran",
                        step: run.lastStep))
            }
            for call in calls {
                if let problem = matcher.mismatch(call.arguments) {
                    out.failures.append(
                        ExpectationFailure(
                            expectation: "arguments.\(tool)", expected: matcher.description,
                            actual: "\(call.id): \(problem) (arguments \(call.argumentsText.string))", step: call.step,
                            callId: call.id))
                }
            }
        }
        for (tool, matchers) in expected.argumentsByCall {
            let calls = run.executedCalls(of: tool)
            for (index, matcher) in matchers.enumerated() {
                let name = "arguments.\(tool)[\(index + 1)]"
                guard index < calls.count else {
                    out.failures.append(
                        ExpectationFailure(
                            expectation: name, expected: "call \(index + 1) of \(tool) with \(matcher)",
                            actual: "\(tool) ran \(counted(calls.count, "time"))", step: calls.last?.step ?? run.lastStep,
                            callId: calls.last?.id))
                    break
                }
                let call = calls[index]
                if let problem = matcher.mismatch(call.arguments) {
                    out.failures.append(
                        ExpectationFailure(
                            expectation: name, expected: matcher.description,
                            actual: "\(call.id): \(problem) (arguments \(call.argumentsText.string))", step: call.step,
                            callId: call.id))
                }
            }
        }
    }

    static func callCounts(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        for (tool, range) in expected.callCounts {
            let calls = run.executedCalls(of: tool)
            if !range.contains(calls.count) {
                out.failures.append(
                    ExpectationFailure(
                        expectation: "callCounts.\(tool)", expected: "\(range) calls of \(tool)", actual: "\(calls.count)",
                        step: calls.last?.step ?? run.lastStep, callId: calls.last?.id))
            }
        }
    }

    static func maxSteps(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        if let limit = expected.maxSteps {
            let steps = run.state.decisionSteps
            if steps.count > limit {
                out.failures.append(
                    ExpectationFailure(
                        expectation: "maxSteps", expected: "at most \(counted(limit, "step"))", actual: counted(steps.count, "step"),
                        step: steps[limit]))
            }
        }
    }

    static func maxToolCalls(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        if let limit = expected.maxToolCalls, run.executed.count > limit {
            let over = run.executed[limit]
            out.failures.append(
                ExpectationFailure(
                    expectation: "maxToolCalls", expected: "at most \(limit) tool calls", actual: "\(run.executed.count) tool calls",
                    step: over.step,
                    callId: over.id))
        }
    }

    static func minToolCalls(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        if let least = expected.minToolCalls, run.executed.count < least {
            out.failures.append(
                ExpectationFailure(
                    expectation: "minToolCalls", expected: "at least \(least) tool calls", actual: "\(run.executed.count) tool calls",
                    step: run.executed.last?.step ?? run.lastStep, callId: run.executed.last?.id))
        }
    }

    static func maxTokens(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        guard let limit = expected.maxTokens else { return }
        // A reply that recorded no usage (a stream asked without `stream_options.include_usage`, an
        // import without counts) adds nothing to the total: under the limit proves nothing then.
        let unmetered = run.state.decisions.filter { $0.usage == nil }
        if let first = unmetered.first, run.state.usage.totalTokens <= limit {
            out.failures.append(
                ExpectationFailure(
                    expectation: "maxTokens", expected: "at most \(limit) tokens",
                    actual: "\(run.state.usage.totalTokens) tokens counted, but \(unmetered.count) of \(run.state.decisions.count) "
                        + "model replies recorded no token usage (the first at step \(first.step)): the total is unproven",
                    step: first.step))
            return
        }
        if run.state.usage.totalTokens > limit {
            out.failures.append(
                ExpectationFailure(
                    expectation: "maxTokens", expected: "at most \(limit) tokens",
                    actual:
                        "\(run.state.usage.totalTokens) tokens (\(run.state.usage.inputTokens) in, \(run.state.usage.outputTokens) out)",
                    step: firstStep(overTokens: limit, in: run.state)))
        }
    }

    static func maxDurationMs(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        if let limit = expected.maxDurationMs, run.state.elapsedUs > limit.multipliedSaturating(by: 1000) {
            out.failures.append(
                ExpectationFailure(
                    expectation: "maxDurationMs", expected: "at most \(limit) ms", actual: "\(run.state.elapsedUs / 1000) ms",
                    step: run.lastStep))
        }
    }

    static func verdicts(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        // A recorded run whose tools went through `agent-eval mcp-proxy` has the proxy's verdicts.
        if let source = run.state.start?.source, run.policy == nil, !run.state.calls.contains(where: { $0.verdict != nil }) {
            // An imported run had no policy gate here: say so instead of passing or failing on
            // verdicts that were never recorded.
            let why =
                "not recorded in this run: it was imported from \(source.format) (\(source.file)), which records no policy verdicts"
            for tool in expected.denied {
                out.failures.append(
                    ExpectationFailure(expectation: "verdicts.denied", expected: "a call of \(tool) is denied", actual: why))
            }
            for tool in expected.approvalRequired {
                out.failures.append(
                    ExpectationFailure(expectation: "verdicts.approvalRequired", expected: "a call of \(tool) needs approval", actual: why))
            }
            if expected.requiresApprovalBeforeExecution {
                out.failures.append(
                    ExpectationFailure(
                        expectation: "verdicts.noUnapprovedExecution", expected: "no call runs without allow or a granted approval",
                        actual: why))
            }
        } else {
            // In a recorded run some tools went through a gate (`mcp-proxy`) and some did not.
            func ungated(_ tool: String) -> String? {
                guard let source = run.state.start?.source, run.policy == nil, !run.allCalls(of: tool).isEmpty,
                    !run.allCalls(of: tool).contains(where: { $0.verdict != nil })
                else { return nil }
                return "not recorded in this run: \(tool)'s calls went through no gate (the run was recorded from \(source.format))"
            }
            for tool in expected.denied where !run.allCalls(of: tool).contains(where: \.isDenied) {
                out.failures.append(
                    ExpectationFailure(
                        expectation: "verdicts.denied", expected: "a call of \(tool) is denied",
                        actual: ungated(tool) ?? run.allCalls(of: tool).first.map { "\($0.id) (step \($0.step)): \(outcome(of: $0))" }
                            ?? "no call of \(tool) was proposed",
                        step: run.allCalls(of: tool).first?.step ?? run.lastStep, callId: run.allCalls(of: tool).first?.id))
            }
            for tool in expected.approvalRequired
            where !run.allCalls(of: tool).contains(where: { $0.verdict?.verdict == .approvalRequired }) {
                out.failures.append(
                    ExpectationFailure(
                        expectation: "verdicts.approvalRequired", expected: "a call of \(tool) needs approval",
                        actual: ungated(tool) ?? run.allCalls(of: tool).first.map { "\($0.id) (step \($0.step)): \(outcome(of: $0))" }
                            ?? "no call of \(tool) was proposed",
                        step: run.allCalls(of: tool).first?.step ?? run.lastStep, callId: run.allCalls(of: tool).first?.id))
            }
            if expected.requiresApprovalBeforeExecution {
                for call in run.executed where !call.isPermitted {
                    out.failures.append(
                        ExpectationFailure(
                            expectation: "verdicts.noUnapprovedExecution", expected: "no call runs without allow or a granted approval",
                            actual: "\(call.tool) ran as \(call.id) with \(outcome(of: call))"
                                + (run.state.start?.source != nil
                                    ? run.policy.map { ", as \($0) judges it (the run recorded no verdict)" } ?? "" : ""),
                            step: call.step, callId: call.id))
                }
            }
        }
    }

    /// `communicate`: each text, case-insensitively, in at least one thing the agent said to the
    /// user (a conversation's answers and questions; a run's answer).
    static func communicate(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        guard !expected.communicate.isEmpty else { return }
        let lines = run.state.dialogue.filter { $0.speaker == .agent }
        let said = lines.map { $0.text.lowercased() }
        for text in expected.communicate where !said.contains(where: { $0.contains(text.lowercased()) }) {
            out.failures.append(
                ExpectationFailure(
                    expectation: "communicate", expected: "the agent tells the user \"\(text)\"",
                    actual: lines.last.map { "none of its \(counted(lines.count, "message")) says it; the last: \"\(shortened($0.text))\"" }
                        ?? "the agent said nothing to the user (\(describeStop(run.state)))",
                    step: lines.last?.step ?? run.lastStep))
        }
    }

    /// `turns`: each turn's expectations over what the agent did within that user turn.
    static func turns(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        for (turn, inTurn) in expected.turns {
            guard let slice = run.state.slice(turn: turn) else {
                out.failures.append(
                    ExpectationFailure(
                        expectation: "turns.\(turn)", expected: "the conversation reaches user turn \(turn)",
                        actual: run.state.isConversation
                            ? "it had \(counted(run.state.userTurns.count, "user turn")) (\(describeStop(run.state)))"
                            : "the run is no conversation: it recorded no user turn",
                        step: run.lastStep))
                continue
            }
            // A turn the agent never answered (the user's closing words, a run that stopped on
            // it, model replies that were none of them a decision) holds nothing its checks could
            // see: no check of it passes on nothing.
            guard slice.decisions.contains(where: { if case .valid = $0.outcome { true } else { false } }) else {
                let record = slice.userTurns.first
                let actual =
                    record?.turn.ends != nil
                    ? "turn \(turn) ended the conversation (\(describeStop(run.state))): the agent never answered it"
                    : slice.decisions.isEmpty
                        ? "the agent never answered turn \(turn) (\(describeStop(run.state)))"
                        : "every one of the agent's \(counted(slice.decisions.count, "model reply", plural: "model replies")) in turn \(turn) was rejected as a "
                            + "decision (\(describeStop(run.state)))"
                out.failures.append(
                    ExpectationFailure(
                        expectation: "turns.\(turn)", expected: "the agent answers user turn \(turn), for its checks to look at",
                        actual: actual, step: record?.step ?? run.lastStep))
                continue
            }
            let found = check(inTurn, against: slice, auditedBy: run.policy)
            for var failure in found.failures {
                failure.expectation = "turns.\(turn).\(failure.expectation)"
                out.failures.append(failure)
            }
            out.notes += found.notes.map { CheckNote(message: "turn \(turn): \($0.message)", step: $0.step, isWarning: $0.isWarning) }
        }
    }

    static func answer(_ expected: Expectations, _ run: CheckedRun, _ out: inout CheckOutcome) {
        let answer = run.state.finalAnswer
        for text in expected.answerContains where !(answer?.contains(text) ?? false) {
            out.failures.append(
                ExpectationFailure(
                    expectation: "answer.contains", expected: "the answer contains \"\(text)\"",
                    actual: answer.map { "the answer is \"\(shortened($0))\"" } ?? "no answer (\(describeStop(run.state)))",
                    step: run.lastStep))
        }
        if let pattern = expected.answerMatches {
            let matched = answer.map { text in (try? LinearRegex(pattern))?.matches(text) == true } ?? false
            if !matched {
                out.failures.append(
                    ExpectationFailure(
                        expectation: "answer.matches", expected: "the answer matches /\(pattern)/",
                        actual: answer.map { "the answer is \"\(shortened($0))\"" } ?? "no answer (\(describeStop(run.state)))",
                        step: run.lastStep)
                )
            }
        }
        if let (reference, least) = expected.answerSimilarTo {
            let score = answer.map { AnswerSimilarity.rouge1($0, reference) } ?? 0
            if answer == nil || score < least {
                out.failures.append(
                    ExpectationFailure(
                        expectation: "answer.similarTo",
                        expected: "the answer's word overlap with \"\(shortened(reference))\" is at least \(least) (ROUGE-1 F)",
                        actual: answer.map { "\((score * 1000).rounded() / 1000) for \"\(shortened($0))\"" }
                            ?? "no answer (\(describeStop(run.state)))",
                        step: run.lastStep))
            }
        }
    }

    /// The failed calls of one tool: each call's id, step and its last error, cut to a line.
    static func attemptsSummary(_ calls: [ToolCallRecord]) -> String {
        calls.prefix(3).map { call in
            let attempts = call.attempts == 1 ? "1 attempt" : "\(call.attempts) attempts"
            let error = call.lastResult.map { $0.error.map(shortened) ?? $0.status.rawValue } ?? "no result recorded"
            return "\(call.id) at step \(call.step), \(attempts): \(error)"
        }.joined(separator: "; ") + (calls.count > 3 ? "; and \(calls.count - 3) more" : "")
    }

    static func outcome(of call: ToolCallRecord) -> String {
        if let approval = call.approval, !approval.isGranted { return "refused by \(approval.approver ?? "a human")" }
        switch call.verdict?.verdict {
        case .deny?: return "denied" + (call.verdict?.rule.map { " by rule \($0)" } ?? "") + (call.verdict?.reason.map { " (\($0))" } ?? "")
        case .approvalRequired?:
            if call.approval != nil { return "approved" }
            return call.isExecuted
                ? "no approval, although it needs one" + (call.verdict?.rule.map { " (rule \($0))" } ?? "") : "waiting for approval"
        case .allow?: return call.isExecuted ? "allowed" : "allowed but not run"
        case nil: return call.isExecuted ? "ran (the run records no verdicts)" : "no verdict (the run stopped first)"
        }
    }

    static func describeStop(_ state: RunState) -> String {
        guard let stop = state.stop else { return "the run has not stopped (the log ends without run_stopped)" }
        var text = "stopped with \(stop.reason.rawValue)"
        if let limit = stop.limit { text += " (\(limit.rawValue))" }
        if let error = stop.error { text += ": \(shortened(error))" }
        return text
    }

    static func names(_ calls: [ToolCallRecord]) -> String {
        calls.isEmpty ? "none" : calls.map(\.tool).joined(separator: ", ")
    }

    static func firstStep(overTokens limit: Int, in state: RunState) -> Int {
        var total = 0
        for decision in state.decisions {
            total += (decision.usage?.input ?? 0) + (decision.usage?.output ?? 0)
            if total > limit { return decision.step }
        }
        return state.step
    }

    static func shortened(_ text: String) -> String {
        text.count > 100 ? String(text.prefix(99)) + "…" : text
    }
}
