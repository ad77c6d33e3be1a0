import Foundation
public import TraceCore
public import TraceLog

/// Synthetic runs for benchmarks, with realistic event sizes and varied text: context packets about 1.5 KB,
/// decisions 300 B, verdicts 150 B, results 900 B.
public struct SyntheticCorpus {
    public typealias Run = (runId: String, events: [(payload: EventPayload, step: Int)])

    static let vocabulary: [String] = """
        the order customer refund shipment invoice account delivered damaged returned payment card bank transfer \
        tracking number warehouse carrier delay weather holiday address postal code verify identity policy \
        limit approval manager escalate ticket priority urgent resolved pending review search result paper \
        abstract citation method dataset benchmark latency throughput error retry timeout service unavailable \
        database query table index row column value null missing duplicate merge conflict branch commit deploy \
        rollback incident alert metric dashboard log trace span agent tool call argument schema model token \
        budget context memory evidence summary observation decision answer question human stop success blocked
        """.split(separator: " ").map(String.init)

    var generator: SeededGenerator
    /// The tools of the run being made.
    var tools: [ToolSpec] = []

    public init(seed: UInt64 = 2026) {
        generator = SeededGenerator(seed: seed)
    }

    /// Writes `run` as the runtime would record it: through a `RunRecorder`, so every
    /// `step_ended` carries the real digest of the state (the random one in the run's events is
    /// replaced), and a reader that checks digests accepts the log.
    public static func record(_ run: Run, into writer: LogWriter, clock: SteppingClock) throws {
        try record(run.events, with: RunRecorder(writer: writer, clock: { clock.now() }))
    }

    /// Records `events` through `recorder`: part of a run, which later calls can continue.
    public static func record(_ events: some Sequence<(payload: EventPayload, step: Int)>, with recorder: RunRecorder) throws {
        for (payload, step) in events {
            recorder.step = step
            if case .stepEnded = payload {
                try recorder.endStep()
            } else {
                try recorder.record(payload)
            }
        }
    }

    mutating func words(_ count: Int) -> String {
        var text = ""
        for index in 0..<count {
            if index > 0 { text += index % 13 == 0 ? ". " : " " }
            text += SyntheticCorpus.vocabulary[Int(generator.next() % UInt64(SyntheticCorpus.vocabulary.count))]
        }
        return text
    }

    mutating func number(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &generator) }

    mutating func hex(_ count: Int) -> String {
        var text = ""
        while text.count < count { text += String(generator.next(), radix: 16) }
        return String(text.prefix(count))
    }

    /// One run of `steps` steps: calls of tool_0…tool_2 (tool_3, a write tool, is never called), then success.
    public mutating func run(index: Int, steps: Int) -> Run {
        var events: [(EventPayload, Int)] = [(.runStarted(start(steps: steps)), 0)]
        for step in 1...steps { events.append(contentsOf: self.step(step)) }
        events.append((.runStopped(stop()), steps))
        return ("bench-run-\(index)", events)
    }

    /// Writes one long run of about `events` events (6 per step, plus start and stop) to a new
    /// log at `path`, with real state digests and timestamps 1 ms apart: the log the replay and
    /// viewer benchmarks and tests read.
    @discardableResult
    public mutating func writeLongRun(to path: String, events: Int) throws -> RunState {
        let steps = max(1, (events - 2) / 6)
        return try writeLongRun(to: path, plannedSteps: steps) { step, _ in step <= steps }
    }

    /// Writes one long run, a step at a time, until the log holds at least `jsonBytes` bytes of
    /// JSONL (about 4.4 KB per step): the logs of the read benchmark's sizes.
    @discardableResult
    public mutating func writeLongRun(to path: String, jsonBytes: Int) throws -> RunState {
        try writeLongRun(to: path, plannedSteps: max(1, jsonBytes / 4_400)) { step, written in step == 1 || written < jsonBytes }
    }

    /// Writes `run_started`, then steps while `continues(step, jsonl bytes so far)`, then
    /// `run_stopped`; the state is folded (and digested at each step end) as it goes.
    private mutating func writeLongRun(to path: String, plannedSteps: Int, continues: (Int, Int) -> Bool) throws -> RunState {
        var time = 1_795_000_000_000_000
        var state = RunState()
        var digester = StateDigester()
        try LogWriter.withWriter(creating: path, runId: "bench-run-0") { writer in
            func append(_ payload: EventPayload, step: Int) throws {
                time += 1000
                var payload = payload
                if case .stepEnded = payload { payload = .stepEnded(StepEnded(stateDigest: digester.digest(of: state))) }
                let event = try writer.append(payload, step: step, timeUs: time)
                digester.track(RunState.reduce(into: &state, event))
            }
            try append(.runStarted(start(steps: plannedSteps)), step: 0)
            var step = 1
            while continues(step, writer.jsonlBytes) {
                for (payload, step) in self.step(step) { try append(payload, step: step) }
                step += 1
            }
            try append(.runStopped(stop()), step: step - 1)
        }
        return state
    }

    /// `writeLongRun`, then one byte two thirds into the file flipped: a log whose first members
    /// read and whose later ones are damaged.
    public mutating func writeDamagedRun(to path: String, events: Int) throws {
        try writeLongRun(to: path, events: events)
        let url = URL(fileURLWithPath: path)
        var bytes = [UInt8](try Data(contentsOf: url))
        bytes[bytes.count * 2 / 3] ^= 0x55
        try Data(bytes).write(to: url)
    }

    /// The `run_started` of a run of `steps` steps. A run can be made a step at a time (for
    /// runs too long to hold): `start`, then `step(1)`, `step(2)`…, then `stop`.
    public mutating func start(steps: Int) -> RunStarted {
        let tools = (0..<4).map { number in
            ToolSpec(
                name: "tool_\(number)", description: words(12),
                inputSchema: ["type": "object", "properties": ["id": ["type": "string"], "query": ["type": "string"]]],
                sideEffect: number == 3 ? .write : .read)
        }
        self.tools = tools
        return RunStarted(
            goal: words(25), agent: AgentIdentity(name: "bench-agent", version: "1", configDigest: "sha256:" + hex(64)),
            model: ModelIdentity(provider: "scripted", name: "bench"), policy: PolicyIdentity(name: "bench-policy"),
            tools: tools, limits: RunLimits(maxSteps: steps + 1, tokenBudget: 1_000_000))
    }

    /// The six events of step `step`: context, decision, verdict, intent, result, step end.
    public mutating func step(_ step: Int) -> [(payload: EventPayload, step: Int)] {
        var events: [(payload: EventPayload, step: Int)] = []
        let observations = (0..<4).map { item in
            ItemReference(id: "obs-\(step)-\(item)", summary: words(20), contentHash: item == 0 ? "sha256:" + hex(64) : nil)
        }
        events.append(
            (
                .contextBuilt(
                    ContextBuilt(
                        goal: words(25), stateSummary: words(45), observations: observations,
                        toolsDisclosed: tools.prefix(3).map(\.name),
                        omitted: [OmittedItem(id: "obs-old-\(step)", reason: .budget, detail: words(6))],
                        tokenEstimate: number(800...2_400))), step
            ))
        let callId = "call-\(step)"
        let arguments: JSONValue = ["id": .string("ord-\(number(10_000...99_999))"), "query": .string(words(8))]
        events.append(
            (
                .decisionMade(
                    DecisionMade(
                        raw: "{\"tool\":\"tool_\(step % 3)\",\"why\":\"\(words(6))\"}",
                        outcome: .valid(.toolCalls([ToolCall(id: callId, name: "tool_\(step % 3)", arguments: arguments)])),
                        usage: TokenUsage(input: number(800...2_400), output: number(20...200)), latencyUs: number(200_000...2_000_000))
                ), step
            ))
        events.append(
            (
                .verdictGiven(
                    VerdictGiven(callId: callId, tool: "tool_\(step % 3)", verdict: .allow, reason: words(9), rule: "rule-\(step % 7)")),
                step
            ))
        events.append((.toolIntended(ToolIntended(callId: callId, tool: "tool_\(step % 3)", arguments: arguments, attempt: 1)), step))
        events.append(
            (
                .toolCompleted(
                    ToolCompleted(
                        callId: callId, tool: "tool_\(step % 3)", attempt: 1, status: .ok,
                        output: [
                            "rows": .array((0..<5).map { _ in ["id": .int(number(1...999_999)), "text": .string(words(18))] }),
                            "count": .int(number(1...50)),
                        ], durationUs: number(1_000...900_000))), step
            ))
        events.append((.stepEnded(StepEnded(stateDigest: "sha256:" + hex(64))), step))
        return events
    }

    /// The `run_stopped` that ends the run.
    public mutating func stop() -> RunStopped {
        RunStopped(reason: .success, answer: words(30))
    }
}
