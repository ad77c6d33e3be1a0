import AgentRuntime
import Foundation
import TestSupport
import Testing
import TraceCore
import TraceLog

/// The run as a sequence of updates, for programs that embed the runtime.
@Suite("A run's updates as they happen")
struct RunUpdatesTests {
    @Test("every event arrives as it is recorded, in the log's order, then the outcome")
    func eventsThenOutcome() async throws {
        try await TemporaryDirectory.with { directory in
            let agent = try AgentFile.load(path: ExampleRuns.agentPath("research"))
            let runtime = AgentRuntime(agent: agent, environment: .deterministic(runId: "run-updates"))
            let path = directory.path("r.jsonl.gz")
            var events: [Event] = []
            var outcome: RunOutcome?
            for try await update in runtime.updates(goal: "Is zstd faster than gzip?", log: path) {
                switch update {
                case .event(let event):
                    #expect(outcome == nil, "no event after the outcome")
                    events.append(event)
                case .modelText: Issue.record("a scripted model streams no text")
                case .finished(let finished): outcome = finished
                }
            }
            // Packets arrive whole, as a reader that makes them whole reads them back.
            let logged = try LogReader(path: path, options: LogReader.Options(resolvesContextPackets: true)).readAll().events.map(\.event)
            #expect(events == logged)
            #expect(outcome?.stop.reason == .budgetExhausted)
            #expect(outcome?.state == RunState(folding: logged))
        }
    }

    /// Answers its first request with a call of `echo`, then waits until it is cancelled: a
    /// model that is still thinking when the program stops listening.
    struct StallingModel: ModelClient {
        var identity: ModelIdentity { ModelIdentity(provider: "test", name: "stalling") }

        func reply(to request: ModelRequest) async throws -> ModelReply {
            if request.decisionIndex == 0 { return ModelReply(decision: ["tool_calls": [["name": "echo", "arguments": [:]]]]) }
            try await Task.sleep(for: .seconds(3_600))
            return ModelReply(decision: ["answer": "too late"])
        }
    }

    @Test("stopping the iteration interrupts the run: it stops with a recorded reason and a whole log")
    func stoppingEarly() async throws {
        try await TemporaryDirectory.with { directory in
            // A scripted run would finish before the stop reaches it (its loop never waits);
            // this one waits for its model, as a real one does.
            let agent = Agent(
                name: "test-agent", instructions: "Test.", model: StallingModel(), tools: ToolRegistry([try echoTool()]),
                policy: AllowAllPolicy(), limits: RunLimits(maxSteps: 20))
            let path = directory.path("r.jsonl.gz")
            var seen = 0
            for try await update in AgentRuntime(agent: agent).updates(goal: "Echo, then think forever.", log: path) {
                if case .event(let event) = update, event.kind == "decision_made" {
                    seen += 1
                    break
                }
            }
            #expect(seen == 1)
            // The run finishes its stop in the background: wait for the log to be closed.
            var state = RunState()
            for _ in 0..<200 {
                state = RunState(folding: try LogReader(path: path).readAll().events.map(\.event))
                if state.stop != nil { break }
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(state.stop?.reason == .blocked)
            #expect(state.stop?.error?.hasPrefix("interrupted") == true, "\(String(describing: state.stop))")
            #expect(try LogVerifier.verify(path: path).isIntact)
        }
    }
}
