import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@testable import Interop

/// The exporters' one reading of a run (`ExportedRun`), checked against the log's own fold.
@Suite("Export view")
struct ExportedRunTests {
    @Test("the export view of a run holds every decision, call, verdict and approval of its log, in the log's order")
    func matchesTheFold() throws {
        let path = ExampleRuns.directory.appendingPathComponent("support-refund.jsonl.gz").path
        let events = try LogReader(path: path).readAll().events.map(\.event)
        var state = RunState()
        for event in events { _ = RunState.reduce(into: &state, event) }
        let run = try ExportedRun(log: path, keepsConversation: true)
        #expect(run.decisions.count == state.decisions.count)
        #expect(run.calls.map(\.id) == state.calls.map(\.id))
        let keys = Set(run.decisions.map(\.key))
        #expect(run.calls.allSatisfy { keys.contains($0.decisionKey) })
        // Verdicts and approvals interleaved as the log has them.
        let logged = events.compactMap { event -> String? in
            switch event.payload {
            case .verdictGiven(let verdict): "verdict \(verdict.callId)"
            case .approvalRecorded(let approval): "approval \(approval.callId)"
            default: nil
            }
        }
        let viewed = run.judgements.map { judgement in
            switch judgement {
            case .verdict(let verdict, _, _): "verdict \(verdict.callId)"
            case .approval(let approval, _, _): "approval \(approval.callId)"
            }
        }
        #expect(viewed == logged && logged.contains { $0.hasPrefix("approval") })
        // Each decision was asked with the goal first, and its results are its own calls'.
        for decision in run.decisions {
            if case .user(let goal)? = decision.input?.first { #expect(goal == run.started.goal) } else { Issue.record("no goal first") }
            #expect(decision.results.allSatisfy { decision.callIds.contains($0.callId) })
        }
        #expect(run.usage.input == state.decisions.compactMap(\.usage).map(\.input).reduce(0, +))
        #expect(run.stop?.stopped.reason == state.stop?.reason)
    }
}
