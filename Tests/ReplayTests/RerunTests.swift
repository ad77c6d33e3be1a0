import AgentRuntime
import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import Replay

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

    @Test("prefix mode: the unchanged agent never goes live and gives the recorded run")
    func prefixUnchanged() async throws {
        try await TemporaryDirectory.with { directory in
            let report = try await Rerun.run(log: Self.log, agent: try agent { $0 }, output: directory.path("new.jsonl.gz"), mode: .prefix)
            #expect(report.wentLive == nil && report.divergence == nil)
            #expect(report.diff?.isSame == true)
        }
    }

    @Test("prefix mode: a changed policy goes live at the first request that differs, and the live model answers from there")
    func prefixGoesLive() async throws {
        try await TemporaryDirectory.with { directory in
            // The stricter policy denies the refund; the live model (the script, edited) answers otherwise.
            let source = ExampleRuns.fixtures.appendingPathComponent("agents/support")
            let agentText = try String(contentsOf: source.appendingPathComponent("agent.yaml"), encoding: .utf8)
                .replacingOccurrences(of: "arguments: {amount_cents: {min: 50001}}", with: "arguments: {amount_cents: {min: 1000}}")
            try agentText.write(toFile: directory.path("agent.yaml"), atomically: true, encoding: .utf8)
            let script = try String(contentsOf: source.appendingPathComponent("support.model.yaml"), encoding: .utf8)
                .replacingOccurrences(of: "I have refunded the full 49.99 EUR", with: "I could not refund the 49.99 EUR")
            try script.write(toFile: directory.path("support.model.yaml"), atomically: true, encoding: .utf8)
            let live = try AgentFile.load(path: directory.path("agent.yaml"))
            let report = try await Rerun.run(log: Self.log, agent: live, output: directory.path("new.jsonl.gz"), mode: .prefix)
            let point = try #require(report.wentLive)
            #expect(point.step == 3 && point.decision == 2)
            #expect(point.reason.contains("the context packet for decision 3 (step 3) differs at observations[2].summary"))
            #expect(report.diff?.first?.leftStep == 2 && report.diff?.first?.path == "call-3 refund_order verdict")
            #expect(report.newStop?.answer?.hasPrefix("I could not refund") == true)
            // Strict mode serves the recorded answer whatever the model would say now.
            let strict = try await Rerun.run(log: Self.log, agent: live, output: directory.path("strict.jsonl.gz"))
            #expect(strict.newStop?.answer?.hasPrefix("I have refunded") == true)
        }
    }

    @Test("prefix mode: a call the log never ran goes live and runs the agent's tool, not refused")
    func prefixToolGoesLive() async throws {
        try await TemporaryDirectory.with { directory in
            // A rule on c-77's deletion: the tool is shown to the model either way, so the packets
            // match, and the parent denied the deletion the new policy allows.
            func policy(_ verdict: String) throws -> Agent {
                try agent {
                    $0.replacingOccurrences(
                        of: "when: {tool: \"delete_*\"}\n      verdict: deny",
                        with: "when: {tool: \"delete_*\", arguments: {customer_id: c-77}}\n      verdict: \(verdict)")
                }
            }
            let parent = directory.path("parent.jsonl.gz")
            let runtime = AgentRuntime(agent: try policy("deny"), environment: .deterministic(runId: "parent"))
            let paused = try await runtime.run(goal: "Order A-1042 arrived broken. Refund me and close my account.", log: parent)
            _ = try await runtime.resume(
                log: paused.logPath, approvals: [ApprovalRecorded(callId: "call-3", isGranted: true, approver: "agent:maria")])
            let report = try await Rerun.run(log: parent, agent: try policy("allow"), output: directory.path("new.jsonl.gz"), mode: .prefix)
            #expect(report.wentLive?.callId == "call-4")
            #expect(report.wentLive?.reason.contains("the log has no result for call-4") == true)
            #expect(report.unanswered.isEmpty)
            let state = RunState(folding: try LogReader(path: report.newLog).readAll().events.map(\.event))
            #expect(state.call(id: "call-4")?.lastResult?.output == ["deleted": true])
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
            #expect(report.unanswered.isEmpty || report.unanswered.allSatisfy { $0.message.hasPrefix("the log") })
        }
    }

    @Test("a refusal is blamed on the log only when the log refused that very request, whatever the result's text says")
    func refusalIsTyped() {
        let refused = Event(
            runId: "r", sequence: 9, step: 2, timeUs: 0, previousHash: "",
            payload: .toolCompleted(
                ToolCompleted(
                    callId: "call-2", tool: "refund_order", attempt: 1, status: .refused, error: "not run: the tool said so", durationUs: 0)
            ))
        let none = UnansweredRequests()
        #expect(Rerun.cause(recorded: nil, new: refused, unanswered: none) == nil)
        let logRefused = UnansweredRequests()
        logRefused.append(
            UnansweredRequest(callId: "call-2", attempt: 1, tool: "refund_order", message: "the log has no result for call-2"))
        #expect(
            Rerun.cause(recorded: nil, new: refused, unanswered: logRefused)
                == "the log cannot answer this request: the log has no result for call-2")
    }
}
