import AgentRuntime
import TestSupport
import Testing

/// `WatchedState`: the one way a task waits for another task's change of shared state (the
/// recording gateway's calls and spans waiting for their model answer, a fork for its prefix).
/// The clock here never moves unless the test moves it, so a wait that ends with its condition
/// met was woken by the change, not by a poll or a timer.
@Suite("WatchedState")
struct WatchedStateTests {
    struct Counters {
        var inFlight = 2
    }

    @Test("a change that makes the condition true wakes the waiting task, with the clock standing still")
    func changeWakesTheWaiter() async {
        let state = WatchedState(Counters())
        let clock = ManualClock()
        async let met = state.wait(within: .seconds(60), on: clock) { $0.inFlight == 0 }
        // Changes that leave the condition false wake it only to sleep again.
        for _ in 0..<2 {
            await Task.yield()
            state.withLock { $0.inFlight -= 1 }
        }
        #expect(await met)
        #expect(state.withLock { $0.inFlight } == 0)
    }

    @Test("a condition already true returns at once, without waiting for a change")
    func alreadyTrue() async {
        let state = WatchedState(Counters(inFlight: 0))
        #expect(await state.wait(within: .seconds(1), on: ManualClock()) { $0.inFlight == 0 })
    }

    @Test("the wait ends at its deadline on the caller's clock, the condition unmet")
    func deadlineEndsTheWait() async {
        let state = WatchedState(Counters())
        let clock = ManualClock()
        async let met = state.wait(within: .seconds(5), on: clock) { $0.inFlight == 0 }
        while clock.sleeperCount == 0 { await Task.yield() }
        clock.advance(by: .seconds(5))
        #expect(await met == false)
    }

    @Test("cancelling the waiting task ends its wait, the condition unmet")
    func cancellationEndsTheWait() async {
        let state = WatchedState(Counters())
        let clock = ManualClock()
        let waiter = Task { await state.wait(within: .seconds(60), on: clock) { $0.inFlight == 0 } }
        while clock.sleeperCount == 0 { await Task.yield() }
        waiter.cancel()
        #expect(await waiter.value == false)
    }

    @Test("many waiters on different conditions each wake at their own change")
    func manyWaiters() async {
        let state = WatchedState(Counters(inFlight: 10))
        let clock = ManualClock()
        await withTaskGroup(of: Bool.self) { group in
            for target in 0..<10 {
                group.addTask { await state.wait(within: .seconds(60), on: clock) { $0.inFlight <= target } }
            }
            group.addTask {
                for _ in 0..<10 {
                    await Task.yield()
                    state.withLock { $0.inFlight -= 1 }
                }
                return true
            }
            var all = 0
            for await met in group where met { all += 1 }
            #expect(all == 11)
        }
    }
}
