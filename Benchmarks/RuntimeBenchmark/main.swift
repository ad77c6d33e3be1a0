// The runtime benchmark: the loop's own overhead per step, with a scripted model and an
// in-process no-op tool, logging on, fsync off.
//
//   swift run -c release runtime-benchmark [--runs 200] [--steps 20] [--repetitions 5]
//
// A step here is one full turn of the loop: build the context packet, ask the model, parse and
// validate the decision, give a policy verdict, record the write-ahead intent (a sync flush),
// run the tool, record the result, fold every event and record the state digest (another sync
// flush). Prints medians of the repetitions; see README.md, "Performance".
import AgentRuntime
import Foundation
import TraceCore
import TraceLog

struct Settings {
    var runs = 200
    var steps = 20
    var repetitions = 5
}

func parseSettings() -> Settings {
    var settings = Settings()
    var arguments = CommandLine.arguments.dropFirst().makeIterator()
    while let argument = arguments.next() {
        let value = arguments.next().flatMap { Int($0) }
        switch (argument, value) {
        case ("--runs", let value?): settings.runs = value
        case ("--steps", let value?): settings.steps = value
        case ("--repetitions", let value?): settings.repetitions = value
        default:
            FileHandle.standardError.write(Data("usage: runtime-benchmark [--runs N] [--steps N] [--repetitions N]\n".utf8))
            exit(argument == "--help" ? 0 : 64)
        }
    }
    return settings
}

/// Calls the no-op tool until `steps` decisions were made, then answers.
struct LoopingModel: ModelClient {
    let steps: Int
    let call = ModelReply(
        decision: ["tool_calls": [["name": "noop", "arguments": ["order_id": "A-1042", "n": 1]]]], usage: TokenUsage(input: 400, output: 20)
    )
    let done = ModelReply(decision: ["answer": "done"], usage: TokenUsage(input: 400, output: 5))

    var identity: ModelIdentity { ModelIdentity(provider: "benchmark", name: "looping") }

    func reply(to request: ModelRequest) async throws -> ModelReply {
        request.decisionIndex + 1 < steps ? call : done
    }
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

func makeAgent(steps: Int) throws -> Agent {
    let noop = try Tool(
        spec: ToolSpec(
            name: "noop", description: "Does nothing.",
            inputSchema: [
                "type": "object", "required": ["order_id"], "properties": ["order_id": ["type": "string"], "n": ["type": "integer"]],
            ],
            sideEffect: .read),
        host: ClosureToolHost { _ in ["ok": true] })
    var reads = PolicyRule(id: "reads", verdict: .allow)
    reads.sideEffects = [.read]
    return Agent(
        name: "bench", instructions: "Call the tool.", model: LoopingModel(steps: steps), tools: ToolRegistry([noop]),
        policy: RulePolicy(name: "bench", rules: [reads]), limits: RunLimits(maxSteps: steps + 1, tokenBudget: 100_000_000),
        durability: Durability(flush: .durabilityPoints, sync: .never))
}

let settings = parseSettings()
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("agent-eval-runtime-bench-\(getpid())").path
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }

let agent = try makeAgent(steps: settings.steps)
let runtime = AgentRuntime(agent: agent)
print("runtime-benchmark: \(settings.runs) runs × \(settings.steps) steps, \(settings.repetitions) repetitions, release build, fsync off")

var perStep: [Double] = []
var eventsPerStep = 0.0
for repetition in 0..<settings.repetitions {
    var steps = 0
    var events = 0
    let started = ContinuousClock.now
    for run in 0..<settings.runs {
        let path = "\(directory)/r\(repetition)-\(run).jsonl.gz"
        let outcome = try await runtime.run(goal: "benchmark", log: path, runId: "run-\(run)")
        guard outcome.stop.reason == .success else {
            FileHandle.standardError.write(Data("run \(run) stopped with \(outcome.stop.reason)\n".utf8))
            exit(1)
        }
        steps += outcome.steps
        events += outcome.state.eventCount
        try FileManager.default.removeItem(atPath: path)
    }
    let elapsed = ContinuousClock.now - started
    let micros = (Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12) / Double(steps)
    perStep.append(micros)
    eventsPerStep = Double(events) / Double(steps)
    print(String(format: "  repetition %d: %.1f µs/step", repetition + 1, micros))
}
print(
    String(
        format:
            "median: %.1f µs per step (%.1f events per step, log included); target: ≤ 1.2x what the writer alone takes for those events (README, Performance)",
        median(perStep), eventsPerStep))
