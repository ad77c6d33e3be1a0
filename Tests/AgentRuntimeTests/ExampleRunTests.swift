import AgentRuntime
import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

@Suite("Example agents and their recorded runs")
struct ExampleRunTests {
    @Test("each example run is reproduced byte for byte, and its live state equals the fold of its log", arguments: ExampleRuns.all)
    func reproducesTheCheckedInLog(_ example: ExampleRuns.Example) async throws {
        try await TemporaryDirectory.with { directory in
            let path = directory.path(example.logFileName)
            let live = try await example.record(path)
            let folded = RunState(folding: try LogReader(path: path, options: .init(isStrict: true)).readAll().events.map(\.event))
            #expect(live == folded)
            #expect(live.anomalies.isEmpty)
            #expect(try LogVerifier.verify(path: path).isIntact)

            let checkedIn = ExampleRuns.directory.appendingPathComponent(example.logFileName)
            if FixtureLogs.isUpdating {
                try FileManager.default.createDirectory(at: ExampleRuns.directory, withIntermediateDirectories: true)
                try Data(contentsOf: URL(fileURLWithPath: path)).write(to: checkedIn)
            }
            let expected = try Data(contentsOf: checkedIn)
            #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == expected, "re-record with AGENT_EVAL_UPDATE_FIXTURES=1 swift test")
        }
    }

    @Test("the support example: reads run together, the delete is denied, the refund waits for approval, then succeeds")
    func supportExample() async throws {
        try await TemporaryDirectory.with { directory in
            let state = try await ExampleRuns.support.record(directory.path("s.jsonl.gz"))
            #expect(state.stopReason == .success)
            #expect(state.executedToolNames == ["lookup_order", "get_customer", "refund_order"])
            #expect(state.call(id: "call-4")?.tool == "delete_customer")
            #expect(state.call(id: "call-4")?.verdict?.rule == "no-deletes")
            #expect(state.call(id: "call-4")?.isExecuted == false)
            #expect(state.call(id: "call-3")?.verdict?.verdict == .approvalRequired)
            #expect(state.call(id: "call-3")?.approval?.approver == "agent:maria")
            #expect(state.resumeCount == 1)
            #expect(state.finalAnswer?.contains("rf-9") == true)
        }
    }

    @Test("the research example: the flaky search is retried, a prose reply is rejected, the token budget ends it")
    func researchExample() async throws {
        try await TemporaryDirectory.with { directory in
            let state = try await ExampleRuns.research.record(directory.path("r.jsonl.gz"))
            #expect(state.stopReason == .budgetExhausted)
            #expect(state.limitFired == .tokenBudget)
            #expect(state.call(id: "call-1")?.attempts == 2)
            #expect(state.call(id: "call-1")?.results.map(\.status) == [.error, .ok])
            #expect(state.invalidDecisionCount == 1)
            // The long page went to stored content, referenced from the result.
            #expect(state.call(id: "call-2")?.lastResult?.contentHash != nil)
            #expect(state.call(id: "call-2")?.lastResult?.output == nil)
        }
    }
}
