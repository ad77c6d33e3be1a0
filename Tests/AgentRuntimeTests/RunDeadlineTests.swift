import AgentRuntime
import Foundation
import Synchronization
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// The run's `limits.timeout_ms` holds while the model answers, not only between steps: a model
/// that keeps the run waiting is cut off at the deadline, on the injected clock, and the stop
/// says which limit fired.
@Suite("The run's timeout while the model answers", .ownThread)
struct RunDeadlineTests {
    /// A model that never answers on its own: it waits until it is cancelled (counted), or, when
    /// `ignoresCancellation`, blocks its thread for `blockMs` first and then answers.
    struct EndlessModel: ModelClient {
        var asked = CallCounter()
        var cancelled = CallCounter()
        var ignoresCancellation = false
        var blockMs = 0
        var identity: ModelIdentity { ModelIdentity(provider: "test", name: "endless") }

        func reply(to request: ModelRequest) async throws -> ModelReply {
            asked.increment()
            if ignoresCancellation {
                usleep(UInt32(blockMs * 1000))
                return answer("too late")
            }
            do {
                try await Task.sleep(for: .seconds(3_600))
            } catch {
                cancelled.increment()
                throw error
            }
            return answer("never")
        }
    }

    func agent(_ model: EndlessModel, timeoutMs: Int?) -> Agent {
        Agent(
            name: "test-agent", instructions: "Test.", model: model, tools: ToolRegistry([]),
            limits: RunLimits(maxSteps: 5, timeoutMs: timeoutMs))
    }

    @Test("on an injected clock: the model's request is cancelled at the run's deadline and the run stops budget_exhausted, limit timeout")
    func injectedClock() async throws {
        let clock = ManualClock()
        let model = EndlessModel()
        try await TemporaryDirectory.with { directory in
            async let recorded = record(agent(model, timeoutMs: 1_000), in: directory, monotonic: clock)
            await clock.waitForSleepers()
            clock.advance(by: .milliseconds(900))
            #expect(clock.sleeperCount == 1, "the run's deadline has not come yet")
            clock.advance(by: .milliseconds(100))
            let (outcome, folded, events) = try await recorded
            #expect(model.cancelled.value == 1, "the model's request was cancelled")
            #expect(outcome.stop.reason == .budgetExhausted)
            #expect(outcome.stop.limit == .timeout)
            let error = try #require(outcome.stop.error)
            #expect(error.contains("of its 1000 ms timeout") && error.contains("the model was still answering at step 1"), "\(error)")
            #expect(outcome.state == folded)
            #expect(!events.contains { $0.kind == "decision_made" })
        }
    }

    @Test("on the live clock: cut off by the watchdog")
    func liveClock() async throws {
        let model = EndlessModel()
        try await TemporaryDirectory.with { directory in
            // Uncut, the model would sleep an hour: its task was cancelled, by the watchdog.
            let (outcome, _, _) = try await record(agent(model, timeoutMs: 200), in: directory, monotonic: ContinuousClock())
            #expect(model.cancelled.value == 1)
            #expect(outcome.stop.reason == .budgetExhausted && outcome.stop.limit == .timeout)
        }
    }

    @Test("a model that blocks past the run's deadline is recorded as cut off, not with its late answer")
    func lateAnswer() async throws {
        let model = EndlessModel(ignoresCancellation: true, blockMs: 400)
        try await TemporaryDirectory.with { directory in
            let (outcome, _, events) = try await record(agent(model, timeoutMs: 100), in: directory, monotonic: ContinuousClock())
            #expect(model.asked.value == 1)
            #expect(outcome.stop.reason == .budgetExhausted && outcome.stop.limit == .timeout)
            #expect(!events.contains { $0.kind == "decision_made" })
        }
    }

    @Test("without a run timeout the model answers in its own time, and with one it is not cut off before it")
    func noDeadline() async throws {
        let clock = ManualClock()
        try await TemporaryDirectory.with { directory in
            let quick = makeAgent(decisions: [answer("done")], tools: [], limits: RunLimits(maxSteps: 5, timeoutMs: 1_000))
            let (outcome, _, _) = try await record(quick, in: directory, monotonic: clock)
            #expect(outcome.stop.reason == .success)
            #expect(clock.sleeperCount == 0, "the deadline was withdrawn")
        }
    }
}
