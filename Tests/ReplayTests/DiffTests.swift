import AgentRuntime
import Foundation
import TestSupport
import Testing
import TraceCore

@testable import Replay

@Suite("Diff")
struct DiffTests {
    @Test("a run diffed with itself is the same trajectory", arguments: allFixtureLogs)
    func selfDiff(_ log: String) throws {
        let diff = try TrajectoryDiff.compare(left: log, right: log)
        #expect(diff.rows.allSatisfy { $0.isSame })
        if log.contains("torn") {
            // Compared up to the cut: the same steps, but what came after was never seen.
            #expect(!diff.isSame && diff.leftProblems.contains { $0.hasPrefix("the log is torn") }, "\(diff.leftProblems)")
        } else {
            #expect(diff.isSame)
        }
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

            // The same name in another Unicode normalisation is another argument (other bytes
            // reach the tool), shown by its code points since it looks the same.
            let composed = try await record(
                "nfc.jsonl.gz", decisions: [call("A-1"), call("Jos\u{E9}"), ModelReply(decision: ["answer": "ok"])])
            let decomposed = try await record(
                "nfd.jsonl.gz", decisions: [call("A-1"), call("Jose\u{301}"), ModelReply(decision: ["answer": "ok"])])
            let normalised = try TrajectoryDiff.compare(left: composed, right: decomposed)
            #expect(!normalised.isSame)
            #expect(normalised.first?.path == "call-2 lookup arguments.order")
            #expect(normalised.first?.left == #""Jos\u{e9}""# && normalised.first?.right == #""Jose\u{301}""#)

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

    @Test(
        "two conversations in which the user said otherwise are not the same trajectory, whatever the agent did: the first difference is the user's turn"
    )
    func userTurnsDiffer() async throws {
        try await TemporaryDirectory.with { directory in
            func converse(_ name: String, saying text: String) async throws -> String {
                let path = directory.path(name)
                let agent = Agent(
                    name: "a", instructions: "",
                    model: ScriptedModel(name: "s", decisions: Array(repeating: ModelReply(decision: ["answer": "ok"]), count: 3)),
                    tools: ToolRegistry([]))
                let user = CaseUser(
                    opening: "my order broke", lines: [CaseUser.Line(turn: 2, say: text), CaseUser.Line(say: "bye", end: .userStop)])
                _ = try await AgentRuntime(agent: agent, environment: .deterministic(runId: "r", clock: SteppingClock())).converse(
                    Conversation(user: user), log: path)
                return path
            }
            let yes = try await converse("yes.jsonl.gz", saying: "Yes, refund it")
            let no = try await converse("no.jsonl.gz", saying: "Do NOT refund")
            #expect(try TrajectoryDiff.compare(left: yes, right: yes).isSame)
            let diff = try TrajectoryDiff.compare(left: yes, right: no)
            #expect(!diff.isSame)
            #expect(
                diff.first?.left.contains("Yes, refund it") == true && diff.first?.right.contains("Do NOT refund") == true,
                "\(String(describing: diff.first))")
        }
    }

    @Test(
        "a step's row shows what the user said in it beside its calls: two rows that differ only in the user's words do not read the same")
    func rowShowsTheUserBesideCalls() {
        func step(saying text: String) -> TrajectoryDiff.StepSketch {
            let line = "user 3: \(text)"
            var sketch = TrajectoryDiff.StepSketch(
                step: 4, decisions: [line, #"refund_order{"order_id":"A-1"}"#],
                calls: [
                    .init(id: "c1", tool: "refund_order", arguments: ["order_id": "A-1"], verdict: "allow", results: ["ok"], output: nil)
                ],
                tokens: 7, durationUs: 0)
            sketch.userLines = [line]
            return sketch
        }
        let yes = step(saying: "yes, please")
        let more = step(saying: "yes, and delete my account too")
        #expect(yes.summary == #"user 3: yes, please; refund_order({"order_id":"A-1"}) allow ok [7 tokens]"#)
        #expect(yes.summary != more.summary)
        // A long user line is cut on its own: the calls after it still show.
        let long = step(saying: String(repeating: "my mugs arrived broken ", count: 8))
        #expect(long.summary.contains(#"refund_order({"order_id":"A-1"}) allow ok"#), "\(long.summary)")
    }

    @Test("two long runs (2,500 steps each) are aligned within a bounded table: alike ends paired, the middle by position")
    func longRunsAlignBounded() {
        func step(_ number: Int, _ decision: String) -> TrajectoryDiff.StepSketch {
            TrajectoryDiff.StepSketch(step: number, decisions: [decision], calls: [], tokens: 0, durationUs: 0)
        }
        let left = (0..<2_500).map { step($0, $0 < 10 || $0 >= 2_495 ? "answer same \($0)" : "answer left \($0)") }
        let right = (0..<2_500).map { step($0, $0 < 10 || $0 >= 2_495 ? "answer same \($0)" : "answer right \($0)") }
        #expect((left.count + 1) * (right.count + 1) > TrajectoryDiff.maximumTableCells)
        let rows = TrajectoryDiff.align(left, right)
        #expect(rows.count == 2_500)
        #expect(rows.prefix(10).allSatisfy(\.isSame) && rows.suffix(5).allSatisfy(\.isSame))
        #expect(rows.dropFirst(10).dropLast(5).allSatisfy { !$0.isSame && $0.left?.step == $0.right?.step && $0.left != nil })
        // Runs as short as a table holds are still aligned exactly: an inserted step is one-sided.
        let short = TrajectoryDiff.align([step(0, "a"), step(1, "b")], [step(0, "a"), step(1, "x"), step(2, "b")])
        #expect(
            short.map { [$0.left?.decisions.first ?? "-", $0.right?.decisions.first ?? "-"] } == [["a", "a"], ["-", "x"], ["b", "b"]])
    }
}
