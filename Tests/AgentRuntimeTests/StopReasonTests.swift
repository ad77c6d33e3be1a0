import AgentRuntime
import Foundation
import TestSupport
import Testing
import TraceCore

@Suite("Every stop reason, reached by a scripted run")
struct StopReasonTests {
    struct Scenario: Sendable, CustomStringConvertible {
        var description: String
        var expected: StopReason
        var limit: LimitKind?
        var agent: @Sendable () throws -> Agent
        var clockIncrementUs = 1_250
    }

    static let scenarios: [Scenario] = [
        Scenario(description: "success: the model answers", expected: .success) {
            makeAgent(decisions: [calls(("echo", ["x": 1])), answer("done")], tools: [try echoTool()])
        },
        Scenario(description: "blocked: the model asks a human", expected: .blocked) {
            makeAgent(decisions: [ModelReply(decision: ["ask_human": "Which order?"])], tools: [try echoTool()])
        },
        Scenario(description: "blocked: the model stops", expected: .blocked) {
            makeAgent(decisions: [ModelReply(decision: ["stop": "cannot help"])], tools: [try echoTool()])
        },
        Scenario(description: "blocked: the model client throws", expected: .blocked) {
            makeAgent(decisions: [calls(("echo", [:]))], tools: [try echoTool()])
        },
        Scenario(description: "approval_required: policy wants a human", expected: .approvalRequired) {
            makeAgent(
                decisions: [calls(("refund", [:]))], tools: [try echoTool(name: "refund", sideEffect: .write)],
                policy: rulePolicy([rule("refunds", .approvalRequired, tools: ["refund"])]))
        },
        Scenario(description: "budget_exhausted: max steps", expected: .budgetExhausted, limit: .maxSteps) {
            makeAgent(rules: [ScriptedModel.Rule(reply: calls(("echo", [:])))], tools: [try echoTool()], limits: RunLimits(maxSteps: 3))
        },
        Scenario(description: "budget_exhausted: max tool calls", expected: .budgetExhausted, limit: .maxToolCalls) {
            makeAgent(
                rules: [ScriptedModel.Rule(reply: calls(("echo", [:])))], tools: [try echoTool()],
                limits: RunLimits(maxSteps: 20, maxToolCalls: 2))
        },
        Scenario(
            description: "budget_exhausted: wall-clock timeout", expected: .budgetExhausted, limit: .timeout,
            agent: {
                makeAgent(
                    rules: [ScriptedModel.Rule(reply: calls(("echo", [:])))], tools: [try echoTool()],
                    limits: RunLimits(maxSteps: 1_000, timeoutMs: 5_000))
            }, clockIncrementUs: 400_000),
        Scenario(description: "budget_exhausted: token budget", expected: .budgetExhausted, limit: .tokenBudget) {
            makeAgent(
                rules: [ScriptedModel.Rule(reply: calls(("echo", [:])))], tools: [try echoTool()],
                limits: RunLimits(maxSteps: 100, tokenBudget: 300))
        },
        Scenario(description: "invalid_decision: the model keeps replying garbage", expected: .invalidDecision) {
            makeAgent(rules: [ScriptedModel.Rule(reply: raw("hmm, let me think"))], tools: [try echoTool()])
        },
        Scenario(description: "policy_denied: a denial is final by configuration", expected: .policyDenied) {
            makeAgent(
                decisions: [calls(("rm", [:]))], tools: [try echoTool(name: "rm", sideEffect: .write)],
                policy: rulePolicy([rule("no-rm", .deny, tools: ["rm"], reason: "never")]),
                handling: FailureHandling(policyDenied: .stop))
        },
        Scenario(description: "tool_failure: a failure is final by configuration", expected: .toolFailure) {
            makeAgent(
                decisions: [calls(("broken", [:]))], tools: [try tool("broken") { _ in .failure("disk on fire") }],
                handling: FailureHandling(toolFailure: .stop))
        },
    ]

    @Test("the run ends with exactly one stop, the expected one, and the live state equals the fold", arguments: scenarios)
    func reachesStopReason(_ scenario: Scenario) async throws {
        try await TemporaryDirectory.with { directory in
            let (outcome, folded, events) = try await record(
                scenario.agent(), in: directory, clock: SteppingClock(incrementUs: scenario.clockIncrementUs))
            #expect(outcome.stop.reason == scenario.expected)
            #expect(outcome.stop.limit == scenario.limit)
            #expect(outcome.state == folded)
            #expect(folded.anomalies.isEmpty)
            #expect(events.filter { $0.kind == "run_stopped" }.count == 1)
            #expect(events.last?.kind == "run_stopped")
            if scenario.expected != .success && scenario.expected != .approvalRequired { #expect(outcome.stop.error != nil) }
        }
    }

    @Test("a decision that uses the token budget to the last token runs none of its calls: the budget is spent, as before a step")
    func budgetSpentExactly() async throws {
        try await TemporaryDirectory.with { directory in
            let counter = CallCounter()
            // One decision of 110 tokens (`calls` uses 100 in, 10 out) against a budget of 110.
            let agent = makeAgent(
                decisions: [calls(("pay", [:])), answer("paid")], tools: [try echoTool(counter, name: "pay", sideEffect: .write)],
                limits: RunLimits(maxSteps: 20, tokenBudget: 110))
            let (outcome, folded, events) = try await record(agent, in: directory)
            #expect(outcome.stop.reason == .budgetExhausted && outcome.stop.limit == .tokenBudget)
            #expect(counter.value == 0, "the write never ran")
            #expect(!events.contains { $0.kind == "tool_intended" || $0.kind == "verdict_given" }, "\(events.map(\.kind))")
            #expect(folded.usage.totalTokens == 110)
        }
    }

    @Test("a model client failure is recorded in the stop event with what went wrong")
    func modelFailureIsRecorded() async throws {
        try await TemporaryDirectory.with { directory in
            let (outcome, _, _) = try await record(makeAgent(decisions: [calls(("echo", [:]))], tools: [try echoTool()]), in: directory)
            #expect(outcome.stop.error?.contains("the model client failed at step 2") == true)
            #expect(outcome.stop.error?.contains("no reply for decision 2") == true)
        }
    }

    @Test("a tool host that throws becomes a recorded failure the model sees, not a crash")
    func throwingHost() async throws {
        struct Boom: Error, CustomStringConvertible { var description: String { "connection reset" } }
        try await TemporaryDirectory.with { directory in
            let agent = makeAgent(
                decisions: [calls(("flaky", [:])), answer("gave up on flaky")],
                tools: [try tool("flaky") { _ in throw Boom() }])
            let (outcome, folded, _) = try await record(agent, in: directory)
            #expect(outcome.stop.reason == .success)
            let result = try #require(folded.call(id: "call-1")?.lastResult)
            #expect(result.status == .error)
            #expect(result.error == "the tool host failed: connection reset")
        }
    }

    @Test("max_steps counts decision steps: a limit of 3 allows exactly 3 decisions")
    func maxStepsCountsDecisions() async throws {
        try await TemporaryDirectory.with { directory in
            let agent = makeAgent(
                rules: [ScriptedModel.Rule(reply: calls(("echo", [:])))], tools: [try echoTool()], limits: RunLimits(maxSteps: 3))
            let (outcome, _, _) = try await record(agent, in: directory)
            #expect(outcome.state.decisions.count == 3)
            #expect(outcome.steps == 3)
        }
    }
}
