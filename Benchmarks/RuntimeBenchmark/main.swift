// The runtime benchmark: the loop's own overhead per step, with a scripted model and an
// in-process no-op tool, logging on, fsync off.
//
//   swift run -c release runtime-benchmark [--runs 200] [--steps 20] [--repetitions 5]
//   swift run -c release runtime-benchmark --growth 1000,2000,5000,10000 [--keep DIR]
//
// A step here is one full turn of the loop: build the context packet, ask the model, parse and
// validate the decision, give a policy verdict, record the write-ahead intent (a sync flush),
// run the tool, record the result, fold every event and record the state digest (another sync
// flush). Prints medians of the repetitions; see docs/performance.md.
//
// --growth runs one long run per length instead, whose every call returns something new and
// whose budget holds about 20 observations, so each packet lists every older observation as
// omitted: the log's bytes per step, with delta packets (format version 2) and with whole ones,
// show whether a log grows with the run's length or with its square.
import AgentRuntime
import Foundation
import TraceCore
import TraceLog

struct Settings {
    var runs = 200
    var steps = 20
    var repetitions = 5
    /// Run lengths for the growth table; empty runs the per-step benchmark.
    var growth: [Int] = []
    /// Where the growth table's delta logs are kept (to replay or eval them); nil deletes them.
    var keep: String?
}

func parseSettings() -> Settings {
    var settings = Settings()
    var arguments = CommandLine.arguments.dropFirst().makeIterator()
    while let argument = arguments.next() {
        let text = arguments.next()
        let value = text.flatMap { Int($0) }
        let lengths = text.map { $0.split(separator: ",").compactMap { Int($0) } } ?? []
        switch (argument, value) {
        case ("--runs", let value?): settings.runs = value
        case ("--steps", let value?): settings.steps = value
        case ("--repetitions", let value?): settings.repetitions = value
        case ("--growth", _) where !lengths.isEmpty && lengths.allSatisfy({ $0 > 0 }): settings.growth = lengths
        case ("--keep", _) where text.map({ !$0.isEmpty }) == true: settings.keep = text
        default:
            FileHandle.standardError.write(
                Data("usage: runtime-benchmark [--runs N] [--steps N] [--repetitions N] | --growth N,N,… [--keep DIR]\n".utf8))
            exit(argument == "--help" ? 0 : 64)
        }
    }
    return settings
}

/// Calls the no-op tool until `steps` decisions were made, then answers; with `varies`, each
/// call's arguments (and so its result) are new.
struct LoopingModel: ModelClient {
    let steps: Int
    var varies = false
    let call = ModelReply(
        decision: ["tool_calls": [["name": "noop", "arguments": ["order_id": "A-1042", "n": 1]]]], usage: TokenUsage(input: 400, output: 20)
    )
    let done = ModelReply(decision: ["answer": "done"], usage: TokenUsage(input: 400, output: 5))

    var identity: ModelIdentity { ModelIdentity(provider: "benchmark", name: "looping") }

    func reply(to request: ModelRequest) async throws -> ModelReply {
        guard request.decisionIndex + 1 < steps else { return done }
        guard varies else { return call }
        return ModelReply(
            decision: ["tool_calls": [["name": "noop", "arguments": ["order_id": "A-1042", "n": .int(request.decisionIndex)]]]],
            usage: TokenUsage(input: 400, output: 20))
    }
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

func makeAgent(steps: Int, varies: Bool = false) throws -> Agent {
    let noop = try Tool(
        spec: ToolSpec(
            name: "noop", description: "Does nothing.",
            inputSchema: [
                "type": "object", "required": ["order_id"], "properties": ["order_id": ["type": "string"], "n": ["type": "integer"]],
            ],
            sideEffect: .read),
        host: ClosureToolHost { arguments in ["ok": true, "n": arguments["n"] ?? .null] })
    var reads = PolicyRule(id: "reads", verdict: .allow)
    reads.sideEffects = [.read]
    return Agent(
        name: "bench", instructions: "Call the tool.", model: LoopingModel(steps: steps, varies: varies), tools: ToolRegistry([noop]),
        policy: RulePolicy(name: "bench", rules: [reads]), limits: RunLimits(maxSteps: steps + 1, tokenBudget: 100_000_000),
        context: ContextSettings(tokenBudget: varies ? 600 : 8_000), durability: Durability(flush: .durabilityPoints, sync: .never))
}

/// One long run per length, with delta packets and (up to `wholeLimit` steps) with whole ones.
func growthTable(_ lengths: [Int], in directory: String, keep: String?, wholeLimit: Int = 2_000) async throws {
    print("runtime-benchmark --growth: one run per length; each call's result is new, the budget holds ~20 observations")
    print("steps    packets as  time      µs/step  JSONL         bytes/step  file          largest line")
    for steps in lengths {
        for deltas in [true, false] where deltas || steps <= wholeLimit {
            var agent = try makeAgent(steps: steps, varies: true)
            agent.writesContextDeltas = deltas
            let runtime = AgentRuntime(agent: agent)
            let path = "\(directory)/growth-\(steps)-\(deltas).jsonl.gz"
            let started = ContinuousClock.now
            let outcome = try await runtime.run(goal: "benchmark", log: path, runId: "growth-\(steps)")
            let elapsed = ContinuousClock.now - started
            guard outcome.stop.reason == .success else {
                FileHandle.standardError.write(Data("the \(steps)-step run stopped with \(outcome.stop.reason)\n".utf8))
                exit(1)
            }
            var largest = 0
            let read = try LogReader(path: path).forEachLine { line, _ in largest = max(largest, line.count) }
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
            let file = (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
            let label = (deltas ? "deltas" : "whole").padding(toLength: 11, withPad: " ", startingAt: 0)
            print(
                String(format: "%-8d ", steps) + label
                    + String(
                        format: "%7.2f s  %7.1f  %10.1f MB  %10.0f  %9.2f MB  %9d B", seconds, seconds * 1e6 / Double(steps),
                        Double(read.decompressedBytes) / 1e6, Double(read.decompressedBytes) / Double(steps), Double(file) / 1e6, largest))
            if let keep, deltas {
                try FileManager.default.createDirectory(atPath: keep, withIntermediateDirectories: true)
                let kept = "\(keep)/growth-\(steps).jsonl.gz"
                try? FileManager.default.removeItem(atPath: kept)
                try FileManager.default.moveItem(atPath: path, toPath: kept)
            } else {
                try FileManager.default.removeItem(atPath: path)
            }
        }
    }
    if let keep { print("the delta logs are in \(keep)") }
    print("linear growth: bytes/step stays flat with deltas; whole packets grow with the run (above \(wholeLimit) steps not run)")
}

let settings = parseSettings()
let directory = FileManager.default.temporaryDirectory.appendingPathComponent("agent-eval-runtime-bench-\(getpid())").path
try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
defer { try? FileManager.default.removeItem(atPath: directory) }

if !settings.growth.isEmpty {
    try await growthTable(settings.growth, in: directory, keep: settings.keep)
    try? FileManager.default.removeItem(atPath: directory)
    exit(0)
}

let agent = try makeAgent(steps: settings.steps)
let runtime = AgentRuntime(agent: agent)
print("runtime-benchmark: \(settings.runs) runs × \(settings.steps) steps, \(settings.repetitions) repetitions, release build, fsync off")

func microseconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) * 1e6 + Double(duration.components.attoseconds) / 1e12
}

/// The writer alone on the events a run recorded (packets whole, as the runtime hands them to
/// the writer), with the runtime's log options: what the loop's own work is measured against.
func writerAlone(_ events: [Event], runs: Int, options: LogWriter.Options, in directory: String) throws -> Duration {
    let started = ContinuousClock.now
    for run in 0..<runs {
        let path = "\(directory)/w-\(run).jsonl.gz"
        let writer = try LogWriter.create(at: path, runId: "run-\(run)", options: options)
        for event in events { try writer.append(event.payload, step: event.step, timeUs: event.timeUs) }
        try writer.close()
    }
    let elapsed = ContinuousClock.now - started
    for run in 0..<runs { try FileManager.default.removeItem(atPath: "\(directory)/w-\(run).jsonl.gz") }
    return elapsed
}

var perStep: [Double] = []
var writerPerStep: [Double] = []
var eventsPerStep = 0.0
for repetition in 0..<settings.repetitions {
    var steps = 0
    var events = 0
    var recorded: [Event] = []
    let paths = (0..<settings.runs).map { "\(directory)/r\(repetition)-\($0).jsonl.gz" }
    let started = ContinuousClock.now
    for (run, path) in paths.enumerated() {
        let outcome = try await runtime.run(goal: "benchmark", log: path, runId: "run-\(run)")
        guard outcome.stop.reason == .success else {
            FileHandle.standardError.write(Data("run \(run) stopped with \(outcome.stop.reason)\n".utf8))
            exit(1)
        }
        steps += outcome.steps
        events += outcome.state.eventCount
    }
    let micros = microseconds(ContinuousClock.now - started) / Double(steps)
    // Outside the timed loop, as for the writer alone: the first run's events, packets whole,
    // and the logs' removal.
    var options = LogReader.Options()
    options.resolvesContextPackets = true
    _ = try LogReader(path: paths[0], options: options).forEachEvent { recorded.append($0.event) }
    for path in paths { try FileManager.default.removeItem(atPath: path) }
    perStep.append(micros)
    eventsPerStep = Double(events) / Double(steps)
    let writer = microseconds(try writerAlone(recorded, runs: settings.runs, options: runtime.logOptions, in: directory)) / Double(steps)
    writerPerStep.append(writer)
    print(String(format: "  repetition %d: %.1f µs/step; the writer alone on the same events %.1f µs/step", repetition + 1, micros, writer))
}
print(
    String(
        format:
            "median: %.1f µs per step (%.1f events per step, log included); the writer alone on those events: %.1f µs; runtime / writer = %.2f (target ≤ 1.2, README, Performance)",
        median(perStep), eventsPerStep, median(writerPerStep), median(perStep) / median(writerPerStep)))
