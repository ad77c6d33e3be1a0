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

/// Checks a run's trajectory — the state folded from its log — against a case's expectations.
/// Pure: the same state and expectations always give the same failures, in the order the
/// expectations are listed in `Expectations`.
public enum TrajectoryCheck {
    /// `auditedBy` names the policy file whose verdicts the state was given for the calls that
    /// recorded none (a case's `policy:`): verdict expectations then hold an imported or
    /// recorded run to them.
    public static func check(_ expected: Expectations, against state: RunState, auditedBy policy: String? = nil)
        -> (failures: [ExpectationFailure], notes: [CheckNote])
    {
        var failures: [ExpectationFailure] = []
        var notes: [CheckNote] = []
        let executed = state.executedCalls
        let lastStep = state.step
        // Each tool's calls in order, found once: a case may list many tools (a long
        // toolsNotCalled), and scanning every call for each would make the check quadratic.
        let byTool = Dictionary(grouping: state.calls, by: \.tool)
        func allCalls(of tool: String) -> [ToolCallRecord] { byTool[tool] ?? [] }
        func executedCalls(of tool: String) -> [ToolCallRecord] { allCalls(of: tool).filter(\.isExecuted) }
        let executedNames = names(executed)

        for tool in expected.toolsCalled where !allCalls(of: tool).contains(where: \.isExecuted) {
            let attempts = allCalls(of: tool)
            let actual: String
            if let attempt = attempts.first {
                actual = "\(tool) was proposed (\(attempt.id), step \(attempt.step)) but never ran: \(outcome(of: attempt))"
            } else {
                actual = "no call of \(tool); tools executed: \(executedNames)"
            }
            failures.append(
                ExpectationFailure(
                    expectation: "toolsCalled", expected: "\(tool) is called", actual: actual, step: attempts.first?.step ?? lastStep,
                    callId: attempts.first?.id))
        }

        for tool in expected.toolsCalled {
            let calls = executedCalls(of: tool)
            if let first = calls.first, !calls.contains(where: \.hasSucceeded) {
                notes.append(
                    CheckNote(
                        message: "\(tool) was called, but every attempt failed (\(attemptsSummary(calls))): "
                            + "toolsCalled counts a call that ran; toolsSucceeded requires one that succeeded",
                        step: first.step, isWarning: true))
            }
        }

        for tool in expected.toolsSucceeded where !allCalls(of: tool).contains(where: { $0.isExecuted && $0.hasSucceeded }) {
            let calls = allCalls(of: tool)
            let ran = calls.filter(\.isExecuted)
            let actual: String
            if !ran.isEmpty {
                actual = "\(tool) ran, but every attempt failed: \(attemptsSummary(ran))"
            } else if let attempt = calls.first {
                actual = "\(tool) was proposed (\(attempt.id), step \(attempt.step)) but never ran: \(outcome(of: attempt))"
            } else {
                actual = "no call of \(tool); tools executed: \(executedNames)"
            }
            let concerned = ran.first ?? calls.first
            failures.append(
                ExpectationFailure(
                    expectation: "toolsSucceeded", expected: "\(tool) is called and succeeds", actual: actual,
                    step: concerned?.step ?? lastStep, callId: concerned?.id))
        }

        for tool in expected.toolsNotCalled {
            let calls = allCalls(of: tool)
            if let call = calls.first(where: \.isExecuted) {
                failures.append(
                    ExpectationFailure(
                        expectation: "toolsNotCalled", expected: "\(tool) is never called",
                        actual: "\(tool) ran as \(call.id) at step \(call.step) with \(JSONWriter.encodeString(call.arguments))",
                        step: call.step,
                        callId: call.id))
            } else if let attempt = calls.first {
                let message = "\(tool) was proposed as \(attempt.id) at step \(attempt.step) and did not run: \(outcome(of: attempt))"
                if expected.countsDeniedAttempts {
                    failures.append(
                        ExpectationFailure(
                            expectation: "toolsNotCalled", expected: "\(tool) is never called or attempted", actual: message,
                            step: attempt.step,
                            callId: attempt.id))
                } else {
                    notes.append(CheckNote(message: message, step: attempt.step))
                }
            }
        }

        if let allowed = expected.toolsAllowed {
            let permitted = Set(allowed)
            let others = executed.filter { !permitted.contains($0.tool) }
            if let first = others.first {
                let named = Array(Set(others.map(\.tool))).sorted()
                failures.append(
                    ExpectationFailure(
                        expectation: "toolsAllowed", expected: "only \(allowed.joined(separator: ", ")) run",
                        actual: "\(named.joined(separator: ", ")) ran too: first as \(first.id) at step \(first.step)"
                            + (others.count > 1 ? " (\(counted(others.count, "call")) in all)" : ""),
                        step: first.step, callId: first.id))
            }
        }
        if expected.notSequence.count >= 2 {
            // The earliest occurrence in order: each tool's first call after the previous one's.
            var matched: [ToolCallRecord] = []
            for call in executed where matched.count < expected.notSequence.count && call.tool == expected.notSequence[matched.count] {
                matched.append(call)
            }
            if matched.count == expected.notSequence.count, let last = matched.last {
                failures.append(
                    ExpectationFailure(
                        expectation: "notSequence", expected: "never \(expected.notSequence.joined(separator: " then "))",
                        actual: "they ran in that order: "
                            + matched.map { "\($0.tool) (\($0.id), step \($0.step))" }.joined(separator: ", "),
                        step: last.step, callId: last.id))
            }
        }
        if let range = expected.failedResults {
            // A result that ended in an error (a refusal, a business rule the tool applied, is no fault).
            let failed = executed.flatMap { call in call.results.filter { $0.status == .error }.map { (call, $0) } }
            if !range.contains(failed.count) {
                let listed = failed.prefix(5).map { "\($0.0.id) \($0.0.tool) (\($0.1.status.rawValue))" }.joined(separator: ", ")
                failures.append(
                    ExpectationFailure(
                        expectation: "failedResults", expected: "\(range) failed tool results",
                        actual: "\(failed.count)" + (failed.isEmpty ? "" : ": \(listed)\(failed.count > 5 ? ", …" : "")"),
                        step: failed.last?.0.step ?? lastStep, callId: failed.last?.0.id))
            }
        }
        if let reason = expected.stopReason, state.stopReason != reason {
            failures.append(
                ExpectationFailure(
                    expectation: "stopReason", expected: reason.rawValue, actual: describeStop(state), step: lastStep))
        }
        if let limit = expected.limit, state.limitFired != limit {
            failures.append(
                ExpectationFailure(
                    expectation: "limit", expected: limit.rawValue,
                    actual: state.limitFired.map { "the \($0.rawValue) limit fired" } ?? describeStop(state),
                    step: lastStep))
        }
        if let sequence = expected.sequence, let failure = SequenceMatch.check(sequence, against: executed) {
            failures.append(failure)
        }
        for (tool, matcher) in expected.arguments {
            let calls = executedCalls(of: tool)
            if calls.isEmpty {
                failures.append(
                    ExpectationFailure(
                        expectation: "arguments.\(tool)", expected: "calls of \(tool) with \(matcher)", actual: "\(tool) never ran",
                        step: lastStep))
            }
            for call in calls {
                if let problem = matcher.mismatch(call.arguments) {
                    failures.append(
                        ExpectationFailure(
                            expectation: "arguments.\(tool)", expected: matcher.description,
                            actual: "\(call.id): \(problem) (arguments \(JSONWriter.encodeString(call.arguments)))", step: call.step,
                            callId: call.id))
                }
            }
        }
        for (tool, matchers) in expected.argumentsByCall {
            let calls = executedCalls(of: tool)
            for (index, matcher) in matchers.enumerated() {
                let name = "arguments.\(tool)[\(index + 1)]"
                guard index < calls.count else {
                    failures.append(
                        ExpectationFailure(
                            expectation: name, expected: "call \(index + 1) of \(tool) with \(matcher)",
                            actual: "\(tool) ran \(counted(calls.count, "time"))", step: calls.last?.step ?? lastStep,
                            callId: calls.last?.id))
                    break
                }
                let call = calls[index]
                if let problem = matcher.mismatch(call.arguments) {
                    failures.append(
                        ExpectationFailure(
                            expectation: name, expected: matcher.description,
                            actual: "\(call.id): \(problem) (arguments \(JSONWriter.encodeString(call.arguments)))", step: call.step,
                            callId: call.id))
                }
            }
        }
        for (tool, range) in expected.callCounts {
            let calls = executedCalls(of: tool)
            if !range.contains(calls.count) {
                failures.append(
                    ExpectationFailure(
                        expectation: "callCounts.\(tool)", expected: "\(range) calls of \(tool)", actual: "\(calls.count)",
                        step: calls.last?.step ?? lastStep, callId: calls.last?.id))
            }
        }
        if let limit = expected.maxSteps {
            let steps = state.decisionSteps
            if steps.count > limit {
                failures.append(
                    ExpectationFailure(
                        expectation: "maxSteps", expected: "at most \(counted(limit, "step"))", actual: counted(steps.count, "step"),
                        step: steps[limit]))
            }
        }
        if let limit = expected.maxToolCalls, executed.count > limit {
            let over = executed[limit]
            failures.append(
                ExpectationFailure(
                    expectation: "maxToolCalls", expected: "at most \(limit) tool calls", actual: "\(executed.count) tool calls",
                    step: over.step,
                    callId: over.id))
        }
        if let least = expected.minToolCalls, executed.count < least {
            failures.append(
                ExpectationFailure(
                    expectation: "minToolCalls", expected: "at least \(least) tool calls", actual: "\(executed.count) tool calls",
                    step: executed.last?.step ?? lastStep, callId: executed.last?.id))
        }
        if let limit = expected.maxTokens, state.usage.totalTokens > limit {
            failures.append(
                ExpectationFailure(
                    expectation: "maxTokens", expected: "at most \(limit) tokens",
                    actual: "\(state.usage.totalTokens) tokens (\(state.usage.inputTokens) in, \(state.usage.outputTokens) out)",
                    step: firstStep(overTokens: limit, in: state)))
        }
        if let limit = expected.maxDurationMs, state.elapsedUs > limit * 1000 {
            failures.append(
                ExpectationFailure(
                    expectation: "maxDurationMs", expected: "at most \(limit) ms", actual: "\(state.elapsedUs / 1000) ms", step: lastStep))
        }
        // A recorded run whose tools went through `agent-eval mcp-proxy` has the proxy's verdicts.
        if let source = state.start?.source, policy == nil, !state.calls.contains(where: { $0.verdict != nil }) {
            // An imported run had no policy gate here: say so instead of passing or failing on
            // verdicts that were never recorded.
            let why = "not recorded in this run: it was imported from \(source.format) (\(source.file)), which records no policy verdicts"
            for tool in expected.denied {
                failures.append(ExpectationFailure(expectation: "verdicts.denied", expected: "a call of \(tool) is denied", actual: why))
            }
            for tool in expected.approvalRequired {
                failures.append(
                    ExpectationFailure(expectation: "verdicts.approvalRequired", expected: "a call of \(tool) needs approval", actual: why))
            }
            if expected.requiresApprovalBeforeExecution {
                failures.append(
                    ExpectationFailure(
                        expectation: "verdicts.noUnapprovedExecution", expected: "no call runs without allow or a granted approval",
                        actual: why))
            }
        } else {
            // In a recorded run some tools went through a gate (`mcp-proxy`) and some did not.
            func ungated(_ tool: String) -> String? {
                guard let source = state.start?.source, policy == nil, !allCalls(of: tool).isEmpty,
                    !allCalls(of: tool).contains(where: { $0.verdict != nil })
                else { return nil }
                return "not recorded in this run: \(tool)'s calls went through no gate (the run was recorded from \(source.format))"
            }
            for tool in expected.denied where !allCalls(of: tool).contains(where: \.isDenied) {
                failures.append(
                    ExpectationFailure(
                        expectation: "verdicts.denied", expected: "a call of \(tool) is denied",
                        actual: ungated(tool) ?? allCalls(of: tool).first.map { "\($0.id) (step \($0.step)): \(outcome(of: $0))" }
                            ?? "no call of \(tool) was proposed",
                        step: allCalls(of: tool).first?.step ?? lastStep, callId: allCalls(of: tool).first?.id))
            }
            for tool in expected.approvalRequired where !allCalls(of: tool).contains(where: { $0.verdict?.verdict == .approvalRequired }) {
                failures.append(
                    ExpectationFailure(
                        expectation: "verdicts.approvalRequired", expected: "a call of \(tool) needs approval",
                        actual: ungated(tool) ?? allCalls(of: tool).first.map { "\($0.id) (step \($0.step)): \(outcome(of: $0))" }
                            ?? "no call of \(tool) was proposed",
                        step: allCalls(of: tool).first?.step ?? lastStep, callId: allCalls(of: tool).first?.id))
            }
            if expected.requiresApprovalBeforeExecution {
                for call in executed where !call.isPermitted {
                    failures.append(
                        ExpectationFailure(
                            expectation: "verdicts.noUnapprovedExecution", expected: "no call runs without allow or a granted approval",
                            actual: "\(call.tool) ran as \(call.id) with \(outcome(of: call))"
                                + (state.start?.source != nil
                                    ? policy.map { ", as \($0) judges it (the run recorded no verdict)" } ?? "" : ""),
                            step: call.step, callId: call.id))
                }
            }
        }
        let answer = state.finalAnswer
        for text in expected.answerContains where !(answer?.contains(text) ?? false) {
            failures.append(
                ExpectationFailure(
                    expectation: "answer.contains", expected: "the answer contains \"\(text)\"",
                    actual: answer.map { "the answer is \"\(shortened($0))\"" } ?? "no answer (\(describeStop(state)))", step: lastStep))
        }
        if let pattern = expected.answerMatches {
            let matched = answer.map { text in (try? LinearRegex(pattern))?.matches(text) == true } ?? false
            if !matched {
                failures.append(
                    ExpectationFailure(
                        expectation: "answer.matches", expected: "the answer matches /\(pattern)/",
                        actual: answer.map { "the answer is \"\(shortened($0))\"" } ?? "no answer (\(describeStop(state)))", step: lastStep)
                )
            }
        }
        if let (reference, least) = expected.answerSimilarTo {
            let score = answer.map { AnswerSimilarity.rouge1($0, reference) } ?? 0
            if answer == nil || score < least {
                failures.append(
                    ExpectationFailure(
                        expectation: "answer.similarTo",
                        expected: "the answer's word overlap with \"\(shortened(reference))\" is at least \(least) (ROUGE-1 F)",
                        actual: answer.map { "\((score * 1000).rounded() / 1000) for \"\(shortened($0))\"" }
                            ?? "no answer (\(describeStop(state)))",
                        step: lastStep))
            }
        }
        return (failures, notes)
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
