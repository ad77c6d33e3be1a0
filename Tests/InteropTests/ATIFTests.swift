import Foundation
import Interop
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// ATIF (the Agent Trajectory Interchange Format) in and out, checked with the official `atif`
/// Pydantic models (v1.8) from PyPI.
@Suite("ATIF trajectories", .tags(.python), .needsPython, .ownThread)
struct ATIFTests {
    @Test(
        "trajectories made by the official models: an embedded sub-agent is a run of its own, a continuation is followed, copied context left out"
    )
    func importsSamples() async throws {
        let scratch = try TemporaryDirectory("agent-eval-atif")
        defer { scratch.remove() }
        try await runPython("atif_samples.py", [scratch.url.path])
        let (outcome, states) = try await importRuns([scratch.path("delegating.atif.json")])
        #expect(outcome.importedCount == 2 && outcome.failedCount == 0)
        let parent = try #require(states.first { $0.start?.agent.name == "support-agent" })
        let sub = try #require(states.first { $0.start?.agent.name == "refund-agent" })
        #expect(
            Trajectory(parent).description
                == #"lookup_order({"order_id":"A-1042"}), delegate_refund({"order_id":"A-1042"}) → success"#)
        #expect(parent.finalAnswer == "Refunded 25 EUR for order A-1042.", "the answer comes from the continuation")
        #expect(parent.start?.goal == "Order A-1042 arrived broken. Refund me.")
        #expect(parent.start?.tools.map(\.name) == ["lookup_order", "delegate_refund"])
        #expect(parent.usage.inputTokens == 360 && parent.usage.outputTokens == 33)
        #expect(parent.calls.last?.lastResult?.output == ["subagent_trajectories": ["refund-subagent"]])
        #expect(Trajectory(sub).description == #"refund_order({"amount":25,"order_id":"A-1042"}) → success"#)
        #expect(sub.start?.source?.metadata?["parent_trajectory"] == "support-main")
        let notes = outcome.runs.first { $0.sourceId == "support-main" }?.warnings ?? []
        #expect(notes == ["1 step copied from an earlier trajectory (is_copied_context) left out"])
    }

    @Test("export → the official models accept it → import gives the same trajectory, stop and usage; and again")
    func roundTrip() async throws {
        let scratch = try TemporaryDirectory("agent-eval-atif-round")
        defer { scratch.remove() }
        let logs = [
            ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path,
            ExampleRuns.directory.appendingPathComponent("research-budget.jsonl.gz").path,
            FixtureLogs.directory.appendingPathComponent("support-sample.jsonl.gz").path,
        ]
        var files: [String] = []
        for (index, log) in logs.enumerated() {
            let path = scratch.path("run-\(index).atif.json")
            try Data(JSONWriter.encode(try ATIFExporter().trajectory(log: log))).write(to: URL(fileURLWithPath: path))
            files.append(path)
        }
        try await runPython("atif_samples.py", ["--validate"] + files)
        for (log, file) in zip(logs, files) {
            let original = try await fold(log)
            let (first, imported) = try await importRuns([file])
            #expect(first.importedCount == 1, "\(file): \(first.runs.map(\.error))")
            let back = try #require(imported.first)
            #expect(Trajectory(back) == Trajectory(original), "\(log)")
            #expect(back.finalAnswer == original.finalAnswer)
            #expect(back.usage.inputTokens == original.usage.inputTokens && back.usage.outputTokens == original.usage.outputTokens)
            #expect(
                back.calls.filter(\.isExecuted).map(\.lastResult?.status) == original.calls.filter(\.isExecuted).map(\.lastResult?.status))
            #expect(back.calls.map(\.tool) == original.calls.map(\.tool), "denied calls come back as proposed, not run")
            // The imported run exported and imported again: the same facts.
            let again = scratch.path("again-\((file as NSString).lastPathComponent)")
            let out = try TemporaryDirectory("agent-eval-atif-again")
            defer { out.remove() }
            let reimported = Importer.importRuns(
                from: [file], options: ImportOptions(format: .atif), writer: ImportWriter(directory: out.url.path))
            let firstLog = try #require(reimported.runs.first?.log)
            try Data(JSONWriter.encode(try ATIFExporter().trajectory(log: firstLog))).write(to: URL(fileURLWithPath: again))
            let (_, twice) = try await importRuns([again])
            #expect(twice.map(Trajectory.init) == [Trajectory(back)])
            #expect(twice.first?.usage.inputTokens == back.usage.inputTokens)
        }
    }

    @Test(
        "agent-eval's export of a conversation the agent acted on after the user ended it (a recorded program's last request) comes back ending at the turn that ended it, with its recorded stop and no anomaly"
    )
    func recordedEndingWhereverItStands() async throws {
        let scratch = try TemporaryDirectory("agent-eval-atif-ending")
        defer { scratch.remove() }
        let file = try write(
            #"""
            {"schema_version": "ATIF-v1.6", "session_id": "s", "agent": {"name": "bot", "version": "1", "model_name": "m"},
             "extra": {"agent_eval": {"stop_reason": "user_stop"}},
             "steps": [
              {"step_id": 1, "source": "user", "message": "my order arrived broken"},
              {"step_id": 2, "source": "agent", "message": "Sorry! Shall I refund it?"},
              {"step_id": 3, "source": "user", "message": "no, that is all", "extra": {"agent_eval": {"ends": "user_stop"}}},
              {"step_id": 4, "source": "agent", "message": "Goodbye."}]}
            """#, to: scratch.url.path, "ended.json")
        let (outcome, states) = try await importRuns([file], format: .atif)
        let state = try #require(states.first, "\(outcome.runs)")
        #expect(state.userTurns.map(\.turn.ends) == [nil, .userStop], "\(outcome.runs)")
        #expect(state.userTurns.map(\.turn.text) == ["my order arrived broken", "no, that is all"])
        #expect(state.stop?.reason == .userStop)
        #expect(state.anomalies.isEmpty, "\(state.anomalies)")
    }

    @Test("not ATIF, or an ATIF version before 1.4: a precise error")
    func badInput() async throws {
        let scratch = try TemporaryDirectory("agent-eval-atif-bad")
        defer { scratch.remove() }
        let old = try write(
            #"{"schema_version": "ATIF-v1.2", "agent": {"name": "a", "version": "1"}, "steps": []}"#, to: scratch.url.path, "old.json")
        let (outcome, _) = try await importRuns([old], format: .atif)
        #expect(outcome.runs.first?.error?.message.contains("is ATIF v1.2; ATIF v1.4 to v1.8 is read") == true, "\(outcome.runs)")
        // A continuation that comes back to itself is read once; a path elsewhere is not followed.
        let agentStep = #"{"step_id": 2, "source": "agent", "message": "done"}"#
        let looping = try write(
            #"{"schema_version": "ATIF-v1.8", "agent": {"name": "a", "version": "1"}, "continued_trajectory_ref": "loop.json", "steps": [{"step_id": 1, "source": "user", "message": "go"}, "#
                + agentStep + "]}", to: scratch.url.path, "loop.json")
        let (loop, loopStates) = try await importRuns([looping], format: .atif)
        #expect(loopStates.first?.decisions.count == 1)
        #expect(loop.runs.first?.warnings.contains { $0.contains("comes back to a file already read") } == true, "\(loop.runs)")
        let away = try write(
            #"{"schema_version": "ATIF-v1.8", "agent": {"name": "a", "version": "1"}, "continued_trajectory_ref": "../elsewhere.json", "steps": []}"#,
            to: scratch.url.path, "away.json")
        let (elsewhere, _) = try await importRuns([away], format: .atif)
        #expect(elsewhere.runs.first?.warnings.contains { $0.contains("names no file beside this one") } == true, "\(elsewhere.runs)")
        let other = try write(#"{"steps": []}"#, to: scratch.url.path, "other.json")
        let (none, _) = try await importRuns([other], format: .atif)
        #expect(none.runs.first?.error?.message.contains("is not an ATIF trajectory") == true, "\(none.runs)")
    }

    @Test(
        "each result goes to one call: two calls of one id get their own, a result naming no call is said; a step whose calls are no list is an error; a trajectory ending on the user's turn is unfinished"
    )
    func resultsAndEnds() async throws {
        let scratch = try TemporaryDirectory("agent-eval-atif-pairs")
        defer { scratch.remove() }
        let head =
            #"{"schema_version": "ATIF-v1.6", "session_id": "s", "agent": {"name": "bot", "version": "1", "model_name": "m"}, "steps": ["#
        let twice = try write(
            head + #"""
                {"step_id": 1, "source": "user", "message": "pay twice"},
                {"step_id": 2, "source": "agent", "message": "", "tool_calls": [
                  {"tool_call_id": "c1", "function_name": "pay", "arguments": {"amt": 1}},
                  {"tool_call_id": "c1", "function_name": "pay", "arguments": {"amt": 2}}],
                 "observation": {"results": [{"source_call_id": "c1", "content": "paid 1"},
                   {"source_call_id": "c1", "content": "Error: card declined"}, {"source_call_id": "ghost", "content": "refunded"}]}},
                {"step_id": 3, "source": "agent", "message": "done"}]}
                """#, to: scratch.url.path, "twice.json")
        let (paired, pairedStates) = try await importRuns([twice], format: .atif)
        let state = try #require(pairedStates.first)
        #expect(state.calls.map { $0.lastResult?.status } == [.ok, .error], "\(state.calls)")
        #expect(paired.runs.first?.warnings.contains { $0.contains("a result for call \"ghost\"") } == true, "\(paired.runs)")
        let notAList = try write(
            head
                + #"{"step_id": 1, "source": "user", "message": "go"}, {"step_id": 2, "source": "agent", "message": "", "tool_calls": {"tool_call_id": "c1", "function_name": "pay"}}]}"#,
            to: scratch.url.path, "object.json")
        let (refused, _) = try await importRuns([notAList], format: .atif)
        #expect(refused.runs.first?.error?.message.contains("agent step 2: tool_calls is no list") == true, "\(refused.runs)")
        let onUser = try write(
            head + #"""
                {"step_id": 1, "source": "user", "message": "my order broke"},
                {"step_id": 2, "source": "agent", "message": "Should I refund it?"},
                {"step_id": 3, "source": "user", "message": "no, replace it"}]}
                """#, to: scratch.url.path, "on-user.json")
        let (unfinished, unfinishedStates) = try await importRuns([onUser], format: .atif)
        #expect(unfinishedStates.first?.stop == nil, "the agent never answered the last turn")
        #expect(unfinished.runs.first?.warnings.contains { $0.contains("ends on a user turn (step 3)") } == true, "\(unfinished.runs)")
    }
}
