import AgentRuntime
import Foundation
import TestSupport
import Testing
import TraceCore

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
