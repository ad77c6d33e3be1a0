import AgentRuntime
import ConfigFile
import Foundation
import Synchronization
import TestSupport
import TraceCore
import TraceLog

/// A reply that calls tools: `calls("echo", ["x": 1])`.
func calls(_ items: (String, JSONValue)...) -> ModelReply {
    ModelReply(
        decision: ["tool_calls": .array(items.map { ["name": .string($0.0), "arguments": $0.1] })],
        usage: TokenUsage(input: 100, output: 10))
}

func answer(_ text: String) -> ModelReply {
    ModelReply(decision: ["answer": .string(text)], usage: TokenUsage(input: 100, output: 10))
}

func raw(_ text: String) -> ModelReply {
    ModelReply(raw: text, usage: TokenUsage(input: 100, output: 10))
}

let objectSchema: JSONValue = ["type": "object"]

/// Counts invocations, from the tool's side.
final class CallCounter: Sendable {
    private let count = Mutex(0)
    func increment() { count.withLock { $0 += 1 } }
    var value: Int { count.withLock { $0 } }
}

func tool(
    _ name: String, sideEffect: SideEffect = .read, schema: JSONValue = objectSchema, timeoutMs: Int = 120_000,
    retry: RetryPolicy = RetryPolicy(), _ body: @escaping @Sendable (ToolRequest) async throws -> ToolOutcome
) throws -> Tool {
    try Tool(
        spec: ToolSpec(name: name, description: "\(name) tool", inputSchema: schema, sideEffect: sideEffect),
        host: ClosureToolHost(outcome: body), timeoutMs: timeoutMs, retry: retry)
}

/// An echo tool that returns its arguments, counting calls.
func echoTool(_ counter: CallCounter = CallCounter(), name: String = "echo", sideEffect: SideEffect = .read) throws -> Tool {
    try tool(name, sideEffect: sideEffect) { request in
        counter.increment()
        return .ok(request.arguments)
    }
}

func makeAgent(
    decisions: [ModelReply] = [], rules: [ScriptedModel.Rule] = [], tools: [Tool], policy: any Policy = AllowAllPolicy(),
    limits: RunLimits = RunLimits(maxSteps: 20), handling: FailureHandling = FailureHandling(), context: ContextSettings = ContextSettings()
) -> Agent {
    Agent(
        name: "test-agent", instructions: "Test.", model: ScriptedModel(name: "test-script", decisions: decisions, rules: rules),
        tools: ToolRegistry(tools), policy: policy, limits: limits, handling: handling, context: context)
}

/// Runs `agent` into a log in `directory`; returns the outcome and the fold of the log, and
/// checks the invariants every run must keep.
func record(
    _ agent: Agent, in directory: TemporaryDirectory, name: String = "run.jsonl.gz", goal: String = "Do the thing.",
    clock: SteppingClock = SteppingClock(), monotonic: (any Clock<Duration>)? = nil
) async throws -> (outcome: RunOutcome, folded: RunState, events: [Event]) {
    let path = directory.path(name)
    var environment = RuntimeEnvironment.deterministic(runId: "run-test", clock: clock)
    if let monotonic { environment.clock = monotonic }
    let runtime = AgentRuntime(agent: agent, environment: environment)
    let outcome = try await runtime.run(goal: goal, log: path)
    let events = try LogReader(path: path, options: .init(isStrict: true)).readAll().events.map(\.event)
    return (outcome, RunState(folding: events), events)
}

/// Policy rules built in code.
func rulePolicy(_ rules: [PolicyRule], default verdict: Verdict = .allow) -> RulePolicy {
    RulePolicy(name: "test-policy", rules: rules, defaultDecision: PolicyDecision(verdict, reason: "default", rule: "default"))
}

func rule(_ id: String, _ verdict: Verdict, tools: [String] = [], reason: String? = nil) -> PolicyRule {
    var rule = PolicyRule(id: id, verdict: verdict, reason: reason)
    rule.tools = tools.map(Glob.init)
    return rule
}
