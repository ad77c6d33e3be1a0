import AgentRuntime
import Foundation
import Replay
import TestSupport
import Testing
import TraceCore
import TraceLog

/// Every fixture log: the log-format fixtures and the example runs.
let allFixtureLogs: [String] =
    FixtureLogs.all.map { FixtureLogs.directory.appendingPathComponent($0.logFileName).path }
    + ExampleRuns.all.map { ExampleRuns.directory.appendingPathComponent($0.logFileName).path }

@Suite("Replay")
struct ReplayTests {
    @Test("replaying each fixture reproduces every recorded digest and the final state", arguments: allFixtureLogs)
    func fixturesReplay(_ log: String) throws {
        var steps: [Int] = []
        let result = try Replayer(path: log).replay { step, _ in
            steps.append(step.step)
            return true
        }
        #expect(result.digestsChecked > 0)
        #expect(result.digestMismatches.isEmpty)
        let folded = RunState(folding: try LogReader(path: log).readAll().events.map(\.event))
        #expect(result.state == folded)
        #expect(steps == Array(Set(steps)).sorted())
    }

    @Test("step N through the index equals the fold of the log up to that step's end, for every step", arguments: allFixtureLogs)
    func everyStepThroughTheIndex(_ log: String) throws {
        try TemporaryDirectory.with { directory in
            let (index, rebuilt) = try StepIndex.open(log: log, cacheDirectory: directory.url.path)
            #expect(rebuilt)
            #expect(try StepIndex.open(log: log, cacheDirectory: directory.url.path).rebuilt == false)
            let events = try LogReader(path: log).readAll().events.map(\.event)
            for position in 0..<index.stepCount {
                let record = try #require(index.record(at: position))
                let step = try #require(try index.replayStep(record.step))
                let prefix = events.filter { $0.sequence <= step.lastSequence }
                #expect(step.after == StateSummary(RunState(folding: prefix)), "step \(record.step)")
                #expect(
                    step.events.map(\.event)
                        == events.filter {
                            $0.step == record.step && $0.sequence >= record.firstSequence && $0.sequence <= record.lastSequence
                        })
                #expect(step.digests.allSatisfy { $0.isMatch })
                // The full replay agrees on what the step holds.
                var full: ReplayStep?
                try Replayer(path: log).replay(until: record.step) { candidate, _ in
                    if candidate.step == record.step { full = candidate }
                    return true
                }
                #expect(full?.events.map(\.event.sequence) == step.events.map(\.event.sequence))
                #expect(full?.problems.map(\.kind) == step.problems.map(\.kind))
            }
        }
    }

    @Test("a stale index is rebuilt when the log changes; without a cache directory the index lives in memory")
    func staleIndex() async throws {
        try await TemporaryDirectory.with { directory in
            let log = directory.path("run.jsonl.gz")
            let agent = try AgentFile.load(path: ExampleRuns.agentPath("support"))
            let runtime = AgentRuntime(agent: agent, environment: .deterministic(runId: "r"))
            _ = try await runtime.run(goal: "Order A-1042 arrived broken.", log: log)
            let cache = directory.path("cache")
            let first = try StepIndex.open(log: log, cacheDirectory: cache).index
            let stepsBefore = first.stepCount
            _ = try await runtime.resume(log: log, approvals: [ApprovalRecorded(callId: "call-3", isGranted: true)])
            let (second, rebuilt) = try StepIndex.open(log: log, cacheDirectory: cache)
            #expect(rebuilt)
            #expect(second.stepCount > stepsBefore)
            let memory = try StepIndex.open(log: log, cacheDirectory: nil)
            #expect(memory.index.indexPath == nil)
            #expect(memory.index.stepCount == second.stepCount)
        }
    }

    @Test("a torn log replays up to the tear and says where it was cut")
    func tornLog() throws {
        let log = FixtureLogs.directory.appendingPathComponent("research-torn.jsonl.gz").path
        let result = try Replayer(path: log).replay { _, _ in true }
        #expect(result.read.tear != nil)
        #expect(result.state.eventCount == 23)
        #expect(result.digestMismatches.isEmpty)
    }

    @Test("a corrupt log stops the replay at the damage, naming the member")
    func corruptLog() throws {
        try TemporaryDirectory.with { directory in
            let source = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz")
            var bytes = [UInt8](try Data(contentsOf: source))
            bytes[40] ^= 0x10
            let log = directory.path("bad.jsonl.gz")
            try Data(bytes).write(to: URL(fileURLWithPath: log))
            var replayed = 0
            #expect(throws: LogError.self) {
                try Replayer(path: log).replay { _, _ in
                    replayed += 1
                    return true
                }
            }
            do {
                try Replayer(path: log).replay { _, _ in true }
            } catch let error as LogError {
                #expect(error.code == .corruptMember)
                #expect(error.memberOffset == 0)
                #expect(error.hint?.contains("agent-eval log verify") == true)
            }
        }
    }
}

@Suite("Diff")
struct DiffTests {
    @Test("a run diffed with itself is the same trajectory", arguments: allFixtureLogs)
    func selfDiff(_ log: String) throws {
        let diff = try TrajectoryDiff.compare(left: log, right: log)
        #expect(diff.isSame)
        #expect(diff.rows.allSatisfy { $0.isSame })
    }

    @Test("runs that differ in one argument diverge at that argument; an inserted step does not throw off the rest")
    func oneArgument() async throws {
        try await TemporaryDirectory.with { directory in
            func record(_ name: String, decisions: [ModelReply]) async throws -> String {
                let path = directory.path(name)
                let echo = try Tool(
                    spec: ToolSpec(name: "lookup", description: "", inputSchema: ["type": "object"], sideEffect: .read),
                    host: ClosureToolHost { $0 })
                let agent = Agent(
                    name: "a", instructions: "", model: ScriptedModel(name: "s", decisions: decisions), tools: ToolRegistry([echo]))
                _ = try await AgentRuntime(agent: agent, environment: .deterministic(runId: "r")).run(goal: "g", log: path)
                return path
            }
            func call(_ order: String) -> ModelReply {
                ModelReply(decision: ["tool_calls": [["name": "lookup", "arguments": ["order": .string(order), "n": 1]]]])
            }
            let a = try await record("a.jsonl.gz", decisions: [call("A-1"), call("A-2"), ModelReply(decision: ["answer": "ok"])])
            let b = try await record("b.jsonl.gz", decisions: [call("A-1"), call("A-9"), ModelReply(decision: ["answer": "ok"])])
            let diff = try TrajectoryDiff.compare(left: a, right: b)
            #expect(diff.first?.path == "call-2 lookup arguments.order")
            #expect(diff.first?.left == "\"A-2\"")
            #expect(diff.first?.right == "\"A-9\"")
            #expect(diff.first?.leftStep == 2)

            let c = try await record(
                "c.jsonl.gz", decisions: [call("A-1"), call("X"), call("A-2"), ModelReply(decision: ["answer": "ok"])])
            let inserted = try TrajectoryDiff.compare(left: a, right: c)
            #expect(
                inserted.rows.map { ($0.left?.step, $0.right?.step) }.map {
                    "\($0.0.map(String.init) ?? "-")/\($0.1.map(String.init) ?? "-")"
                } == ["0/0", "1/1", "-/2", "2/3", "3/4", "4/5"])
            #expect(inserted.first?.rightStep == 2)
            #expect(inserted.first?.leftStep == nil)
        }
    }
}

@Suite("Re-run under current code")
struct RerunTests {
    static let log = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path

    func agent(editing edit: (String) -> String) throws -> Agent {
        try TemporaryDirectory.with { directory in
            let source = ExampleRuns.fixtures.appendingPathComponent("agents/support")
            let text = try String(contentsOf: source.appendingPathComponent("agent.yaml"), encoding: .utf8)
            try edit(text).write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try FileManager.default.copyItem(
                atPath: source.appendingPathComponent("support.model.yaml").path, toPath: directory.path("support.model.yaml"))
            return try AgentFile.load(path: directory.path("agent.yaml"))
        }
    }

    @Test("the unchanged agent reproduces the recorded run exactly")
    func identical() async throws {
        try await TemporaryDirectory.with { directory in
            let report = try await Rerun.run(log: Self.log, agent: try agent { $0 }, output: directory.path("new.jsonl.gz"))
            #expect(report.divergence == nil)
            #expect(report.unanswered.isEmpty)
            #expect(report.newEvents == report.recordedEvents)
        }
    }

    @Test("a policy rule changed to deny is reported at the exact step, call and rule")
    func policyNowDenies() async throws {
        try await TemporaryDirectory.with { directory in
            let changed = try agent {
                $0.replacingOccurrences(of: "arguments: {amount_cents: {min: 50001}}", with: "arguments: {amount_cents: {min: 1000}}")
            }
            let report = try await Rerun.run(log: Self.log, agent: changed, output: directory.path("new.jsonl.gz"))
            let divergence = try #require(report.divergence)
            #expect(divergence.step == 2)
            #expect(divergence.kind == "verdict_given")
            #expect(divergence.fieldPath == "data.verdict")
            #expect(divergence.recorded == "\"approval_required\"")
            #expect(divergence.new == "\"deny\"")
            #expect(divergence.cause?.hasPrefix("policy: rule large-refunds-denied now gives deny for refund_order (call-3)") == true)
        }
    }

    @Test("a changed tool schema is reported as the cause")
    func schemaChanged() async throws {
        try await TemporaryDirectory.with { directory in
            let changed = try agent {
                $0.replacingOccurrences(
                    of: "amount_cents: {type: integer, minimum: 1, maximum: 100000}",
                    with: "amount_cents: {type: integer, minimum: 1, maximum: 2000}")
            }
            let report = try await Rerun.run(log: Self.log, agent: changed, output: directory.path("new.jsonl.gz"))
            let divergence = try #require(report.divergence)
            #expect(
                divergence.cause?.hasPrefix("the input schema of refund_order changed (properties.amount_cents.maximum: 100000 → 2000)")
                    == true)
        }
    }

    @Test("a limit that now fires is named; nothing the log cannot answer is sent live")
    func limitNowFires() async throws {
        try await TemporaryDirectory.with { directory in
            let changed = try agent { $0.replacingOccurrences(of: "max_steps: 8", with: "max_steps: 2") }
            let report = try await Rerun.run(log: Self.log, agent: changed, output: directory.path("new.jsonl.gz"))
            #expect(report.divergence?.step == 3)
            #expect(report.divergence?.cause?.hasPrefix("a limit now fires: max_steps") == true)
            #expect(report.newStop?.limit == .maxSteps)
        }
    }

    @Test("a tool call the log cannot answer is refused and reported, not run")
    func unanswerable() async throws {
        try await TemporaryDirectory.with { directory in
            // Approving refunds up front lets the new run execute call-3 one stop earlier; the
            // log does hold its result, so only calls it never made would be unanswerable.
            let changed = try agent {
                $0.replacingOccurrences(
                    of: "when: {tool: refund_order, approved: false}", with: "when: {tool: refund_order, approved: true}")
            }
            let report = try await Rerun.run(log: Self.log, agent: changed, output: directory.path("new.jsonl.gz"))
            #expect(report.divergence != nil)
            #expect(report.unanswered.isEmpty || report.unanswered.allSatisfy { $0.hasPrefix("the log") })
        }
    }
}
