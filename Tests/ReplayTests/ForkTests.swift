import AgentRuntime
import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import Replay

/// `agent-eval fork`: a run forked at a step, with edits, continued live by the runtime.
@Suite("What if: forks")
struct ForkTests {
    static let support = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path

    func agent(_ name: String) throws -> Agent { try AgentFile.load(path: ExampleRuns.agentPath(name)) }

    func events(_ path: String) throws -> [RecordedEvent] {
        // With each line's hash, which `parent_head` names.
        try LogReader(path: path, options: LogReader.Options(resolvesContextPackets: true, hashesLines: true)).readAll().events
    }

    /// The fork's log is whole to `gzip -t`, intact to the verifier, and every digest it
    /// recorded is the replayed state's; its copy is the parent's events up to `parentHead`.
    func checkLog(_ report: Fork.Report) async throws {
        #expect(try await Subprocess.run(gzipPath, ["-t", report.log]).status == 0)
        #expect(try LogVerifier.verify(path: report.log).isIntact)
        let replay = try Replayer(path: report.log).replay { _, _ in true }
        #expect(replay.digestMismatches.isEmpty && replay.digestsChecked > 0)
        let parent = try events(report.parent)
        let fork = try events(report.log)
        let head = try #require(parent.firstIndex { $0.hash == report.forked.parentHead })
        for (original, copied) in zip(parent[...head], fork) {
            #expect(original.event.kind == copied.event.kind && original.event.step == copied.event.step)
            #expect(original.event.timeUs == copied.event.timeUs)
            if original.event.kind != "step_ended" { #expect(original.event.payload == copied.event.payload) }
        }
        guard case .runForked(let recorded) = fork[head + 1].event.payload else {
            Issue.record("event \(head + 1) of the fork is \(fork[head + 1].event.kind), not run_forked")
            return
        }
        #expect(recorded == report.forked)
        #expect(fork.allSatisfy { $0.event.runId == report.outcome.runId })
    }

    @Test("forking each fixture run at every step with no edit gives the parent's trajectory", arguments: ExampleRuns.all)
    func sameWithoutEdits(example: ExampleRuns.Example) async throws {
        let log = ExampleRuns.directory.appendingPathComponent(example.logFileName).path
        let agent = try agent(example.agent)
        let steps = Set(try events(log).map(\.event.step)).sorted()
        try await TemporaryDirectory.with { directory in
            var forked = 0
            for step in steps {
                let output = directory.path("fork-\(step).jsonl.gz")
                do {
                    let report = try await Fork.run(
                        Fork.Request(parent: log, at: step, edits: []), agent: agent, output: output,
                        environment: .deterministic(runId: "fork-\(step)"))
                    #expect(report.diff.isSame, "fork at step \(step): \(String(describing: report.diff.first))")
                    #expect(report.outcome.stop.reason == RunState(folding: try events(log).map(\.event)).stop?.reason)
                    try await checkLog(report)
                    forked += 1
                } catch let error as ForkError {
                    // Only the end: the model's last answer, or a step that holds only the stop.
                    #expect(step >= steps.count - 2, "step \(step): \(error.message)")
                    #expect([.nothingToContinue, .noSuchStep].contains(error.code))
                    #expect(!FileManager.default.fileExists(atPath: output))
                }
            }
            #expect(forked >= steps.count - 2)
        }
    }

    @Test("a replaced result or a given reply diverges at its step and not before")
    func editDivergesAtItsStep() async throws {
        let agent = try agent("support")
        let parent = RunState(folding: try events(Self.support).map(\.event))
        try await TemporaryDirectory.with { directory in
            for call in parent.executedCalls {
                let report = try await Fork.run(
                    Fork.Request(
                        parent: Self.support, at: nil, edits: [ForkEdit(kind: .result, callId: call.id, value: ["status": "lost"])]),
                    agent: agent, output: directory.path("result-\(call.id).jsonl.gz"), environment: .deterministic(runId: "r-\(call.id)"))
                #expect(report.forked.step == call.step)
                #expect(report.diff.first?.leftStep == call.step && report.diff.first?.path == "\(call.id) \(call.tool) output")
                let before = report.diff.rows.filter { ($0.left?.step ?? 0) < call.step }
                #expect(before.allSatisfy { $0.isSame })
                #expect(report.outcome.state.call(id: call.id)?.lastResult?.output == ["status": "lost"])
                try await checkLog(report)
            }
            // A result of step 1 replaced in a fork after step 2: still a difference, found at the end.
            let later = try await Fork.run(
                Fork.Request(parent: Self.support, at: 2, edits: [ForkEdit(kind: .result, callId: "call-1", value: 1)]), agent: agent,
                output: directory.path("later.jsonl.gz"), environment: .deterministic(runId: "later"))
            #expect(!later.diff.isSame && later.diff.first?.path == "call-1 lookup_order output" && later.diff.first?.leftStep == 1)
            for step in 1...3 {
                let report = try await Fork.run(
                    Fork.Request(
                        parent: Self.support, at: nil, edits: [ForkEdit(kind: .decision, step: step, text: #"{"answer": "No."}"#)]),
                    agent: agent, output: directory.path("decision-\(step).jsonl.gz"), environment: .deterministic(runId: "d-\(step)"))
                #expect(report.forked.step == step - 1)
                #expect(report.diff.first?.leftStep == step && report.diff.first?.rightStep == step)
                #expect(report.outcome.stop.answer == "No.")
                try await checkLog(report)
            }
        }
    }

    @Test("a refusal at the parent's pause for approval: the call never runs, and the fork goes on from that step")
    func refusal() async throws {
        try await TemporaryDirectory.with { directory in
            let report = try await Fork.run(
                Fork.Request(parent: Self.support, at: nil, edits: [ForkEdit(kind: .deny, callId: "call-3")]), agent: try agent("support"),
                output: directory.path("deny.jsonl.gz"), environment: .deterministic(runId: "deny"))
            #expect(report.forked.step == 2)
            let call = try #require(report.outcome.state.call(id: "call-3"))
            #expect(call.approval?.isGranted == false && call.attempts == 0)
            #expect(report.diff.first?.leftStep == 2 && report.diff.first?.path == "call-3 refund_order results")
            try await checkLog(report)
        }
    }

    @Test("a fork of a fork keeps its parent's edits; the goal restated reaches the model's context")
    func forkOfFork() async throws {
        let agent = try agent("support")
        try await TemporaryDirectory.with { directory in
            let first = try await Fork.run(
                Fork.Request(
                    parent: Self.support, at: 1,
                    edits: [
                        ForkEdit(kind: .result, callId: "call-2", value: ["tier": "new"]), ForkEdit(kind: .input, text: "Just refund."),
                    ]),
                agent: agent, output: directory.path("first.jsonl.gz"), environment: .deterministic(runId: "first"))
            #expect(first.outcome.state.start?.goal == "Just refund.")
            let packets = try events(first.log).compactMap { event -> ContextBuilt? in
                if case .contextBuilt(let packet) = event.event.payload { packet } else { nil }
            }
            #expect(packets.first?.goal == "Order A-1042 arrived broken. Refund me and close my account.")
            #expect(packets.last?.goal == "Just refund.")
            let second = try await Fork.run(
                Fork.Request(parent: first.log, at: 1, edits: []), agent: agent, output: directory.path("second.jsonl.gz"),
                environment: .deterministic(runId: "second"))
            #expect(second.diff.isSame)
            #expect(second.outcome.state.call(id: "call-2")?.lastResult?.output == ["tier": "new"])
            #expect(second.outcome.state.start?.goal == "Just refund.")
            #expect(second.forked.parentRunId == "first")
            try await checkLog(second)
            // The copy holds the first fork's run_forked: the lineage is in the log.
            let kinds = try events(second.log).map(\.event.kind)
            #expect(kinds.filter { $0 == "run_forked" }.count == 2)
        }
    }

    @Test("a torn parent, a step past the end, an unknown call, an edit that does not apply: an error, nothing written")
    func badRequests() async throws {
        let agent = try agent("support")
        let torn = FixtureLogs.directory.appendingPathComponent("research-sample-torn.jsonl.gz").path
        let cases: [(Fork.Request, ForkError.Code, String)] = [
            (Fork.Request(parent: torn, at: 1, edits: []), .unreadableParent, "agent-eval log repair"),
            (
                Fork.Request(
                    parent: FixtureLogs.directory.deletingLastPathComponent().appendingPathComponent(
                        "conformance/edited-with-chain-recomputed.jsonl.gz"
                    )
                    .path, at: 2, edits: []), .unreadableParent, "does not match the state its events fold to"
            ),
            // The same edited parent forked at its pause for approval: the prefix stops before
            // the step's digest that covers the edit, which is checked all the same.
            (
                Fork.Request(
                    parent: FixtureLogs.directory.deletingLastPathComponent().appendingPathComponent(
                        "conformance/edited-with-chain-recomputed.jsonl.gz"
                    )
                    .path, at: nil, edits: [ForkEdit(kind: .deny, callId: "call-2")]), .unreadableParent,
                "does not match the state its events fold to"
            ),
            (Fork.Request(parent: Self.support, at: 9, edits: []), .noSuchStep, "the parent has steps 0 to 4"),
            (
                Fork.Request(parent: Self.support, at: nil, edits: [ForkEdit(kind: .result, callId: "call-9", value: 1)]), .noSuchCall,
                "call-1 (lookup_order, step 1)"
            ),
            (Fork.Request(parent: Self.support, at: nil, edits: [ForkEdit(kind: .approve, callId: "call-1")]), .editDoesNotApply, "allow"),
            (
                Fork.Request(parent: Self.support, at: 1, edits: [ForkEdit(kind: .result, callId: "call-3", value: 1)]), .editDoesNotApply,
                "comes after the fork point"
            ),
            (
                Fork.Request(parent: Self.support, at: nil, edits: [ForkEdit(kind: .result, callId: "call-4", value: 1)]),
                .editDoesNotApply, "has not run by the fork point"
            ),
            (
                Fork.Request(parent: Self.support, at: 1, edits: [ForkEdit(kind: .decision, step: 3, text: "{}")]), .editDoesNotApply,
                "needs the fork at step 2"
            ),
            (Fork.Request(parent: Self.support, at: 4, edits: []), .noSuchStep, "never ended"),
            (Fork.Request(parent: Self.support, at: nil, edits: [ForkEdit(kind: .input, text: "x")]), .noForkPoint, "--at STEP"),
        ]
        try await TemporaryDirectory.with { directory in
            for (index, (request, code, words)) in cases.enumerated() {
                let output = directory.path("bad-\(index).jsonl.gz")
                do {
                    _ = try await Fork.run(request, agent: agent, output: output)
                    Issue.record("case \(index) forked")
                } catch let error as ForkError {
                    #expect(error.code == code, "case \(index): \(error.message)")
                    #expect(error.lines().joined(separator: "\n").contains(words), "case \(index): \(error.lines())")
                }
                #expect(!FileManager.default.fileExists(atPath: output))
            }
        }
    }

    @Test("a parent's approval is given again only to the very call it decided, and a fork with another agent resumes")
    func approvalsAndAnotherAgent() async throws {
        try await TemporaryDirectory.with { directory in
            // Another refund at step 2 has the parent's call id, not its arguments: a human must decide it again.
            let other = try await Fork.run(
                Fork.Request(
                    parent: Self.support, at: nil,
                    edits: [
                        ForkEdit(
                            kind: .decision, step: 2,
                            text:
                                #"{"tool_calls": [{"name": "refund_order", "arguments": {"order_id": "A-1042", "amount_cents": 2500, "reason": "goodwill"}}]}"#
                        )
                    ]), agent: try agent("support"), output: directory.path("other.jsonl.gz"), environment: .deterministic(runId: "other"))
            #expect(other.outcome.stop.reason == .approvalRequired)
            #expect(other.outcome.state.call(id: "call-3")?.approval == nil)
            // An agent with other instructions: its prompt is stored for its packets, and the
            // parent's approval of the same refund resumes it.
            let source = ExampleRuns.fixtures.appendingPathComponent("agents/support")
            try String(contentsOf: source.appendingPathComponent("agent.yaml"), encoding: .utf8)
                .replacingOccurrences(of: "Answer in one or two sentences.", with: "Answer in one sentence.")
                .write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            try FileManager.default.copyItem(
                atPath: source.appendingPathComponent("support.model.yaml").path, toPath: directory.path("support.model.yaml"))
            let changed = try AgentFile.load(path: directory.path("agent.yaml"))
            let report = try await Fork.run(
                Fork.Request(parent: Self.support, at: 1, edits: []), agent: changed, output: directory.path("changed.jsonl.gz"),
                environment: .deterministic(runId: "changed"))
            #expect(report.outcome.stop.reason == .success)
            #expect(report.forked.agent?.configDigest == changed.configDigest)
            #expect(report.outcome.state.anomalies.isEmpty)
            let prompt = ContentHash.sha256(Array(changed.instructions.utf8))
            #expect(report.outcome.state.contents.contains { $0.hash == prompt })
            try await checkLog(report)
            // Two edits of one thing, and a re-run of a fork: refused.
            await #expect(throws: ForkError.self) {
                _ = try await Fork.run(
                    Fork.Request(
                        parent: Self.support, at: nil,
                        edits: [ForkEdit(kind: .result, callId: "call-1", value: 1), ForkEdit(kind: .error, callId: "call-1", text: "x")]),
                    agent: changed, output: directory.path("twice.jsonl.gz"))
            }
            let rerun = await #expect(throws: RerunError.self) {
                _ = try await Rerun.run(log: report.log, agent: changed, output: directory.path("rerun.jsonl.gz"))
            }
            #expect(rerun?.message.contains("is a fork (run_forked at step 1)") == true)
        }
    }

    @Test("nothing before the fork point runs again: a tool with a side effect runs only for the fork's own steps")
    func noToolRunsTwice() async throws {
        try await TemporaryDirectory.with { directory in
            try """
            name: ledger-script
            decisions:
              - tool_calls: [{name: append, arguments: {entry: one}}]
              - tool_calls: [{name: append, arguments: {entry: two}}]
              - answer: done
            """.write(toFile: directory.path("ledger.model.yaml"), atomically: true, encoding: .utf8)
            try """
            name: ledger-agent
            instructions: Append the entries.
            model: {script: ledger.model.yaml}
            tools:
              - name: append
                description: Appends an entry to the ledger file.
                side_effect: write
                input_schema: {type: object, required: [entry], properties: {entry: {type: string}}}
                command: [sh, -c, 'read -r line; echo "$line" >> ledger.txt; echo "{\\"ok\\": true}"']
            policy:
              default: allow
            """.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            let agent = try AgentFile.load(path: directory.path("agent.yaml"))
            let parent = try await AgentRuntime(agent: agent, environment: .deterministic(runId: "ledger")).run(
                goal: "Append one and two.", log: directory.path("parent.jsonl.gz"))
            #expect(parent.stop.reason == .success)
            func ledger() throws -> [String] {
                try String(contentsOfFile: directory.path("ledger.txt"), encoding: .utf8).split(separator: "\n").map(String.init)
            }
            #expect(try ledger().count == 2)
            // Forked after step 1: only step 2's call runs again, live.
            let report = try await Fork.run(
                Fork.Request(parent: directory.path("parent.jsonl.gz"), at: 1, edits: []), agent: agent,
                output: directory.path("fork.jsonl.gz"), environment: .deterministic(runId: "ledger-fork"))
            #expect(report.diff.isSame)
            #expect(try ledger() == [#"{"entry":"one"}"#, #"{"entry":"two"}"#, #"{"entry":"two"}"#])
            // A tool fixture answers instead of the command from the fork on.
            let fixture = try await Fork.run(
                Fork.Request(
                    parent: directory.path("parent.jsonl.gz"), at: 1,
                    edits: [ForkEdit(kind: .toolFixture, tool: "append", value: [["output": ["ok": false]]])]),
                agent: agent, output: directory.path("fixture.jsonl.gz"), environment: .deterministic(runId: "ledger-fixture"))
            #expect(try ledger().count == 3)
            #expect(fixture.outcome.state.calls.last?.lastResult?.output == ["ok": false])
        }
    }
}
