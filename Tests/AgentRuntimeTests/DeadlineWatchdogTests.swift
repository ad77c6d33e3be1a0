import Foundation
import Synchronization
import TestTags
import Testing

@testable import AgentRuntime

@Suite("The tool deadline watchdog", .ownThread)
struct DeadlineWatchdogTests {
    /// Waits (up to a minute, so that a broken watchdog fails rather than hangs) until `done`.
    func wait(until done: () -> Bool) {
        let limit = ContinuousClock.now + .seconds(60)
        while !done() && ContinuousClock.now < limit { usleep(1_000) }
    }

    @Test("deadlines run once each, earliest first; a withdrawn one never runs; withdrawing after it ran says so")
    func order() throws {
        let watchdog = DeadlineWatchdog()
        let ran = Mutex<[Int]>([])
        let now = ContinuousClock.now
        // Armed out of order, two of them withdrawn.
        var armed: [Int: DeadlineWatchdog.Deadline] = [:]
        for index in [5, 1, 4, 2, 3, 0] {
            armed[index] = watchdog.arm(at: now + .milliseconds(20 * index)) { ran.withLock { $0.append(index) } }
        }
        let (second, fourth, last) = (try #require(armed[2]), try #require(armed[4]), try #require(armed[5]))
        #expect(watchdog.withdraw(second))
        #expect(watchdog.withdraw(fourth))
        wait { ran.withLock { $0.count } == 4 }
        #expect(ran.withLock { $0 } == [0, 1, 3, 5])
        #expect(!watchdog.withdraw(last), "it ran already")
        #expect(!watchdog.withdraw(second), "withdrawn already")
        usleep(50_000)
        #expect(ran.withLock { $0 } == [0, 1, 3, 5], "nothing ran twice")
    }

    @Test("many withdrawn deadlines far ahead are dropped, and a near one armed after them still runs")
    func manyWithdrawn() {
        let watchdog = DeadlineWatchdog()
        let far = ContinuousClock.now + .seconds(3_600)
        let armed = (0..<3_000).map { _ in watchdog.arm(at: far) { Issue.record("a withdrawn deadline ran") } }
        for deadline in armed { #expect(watchdog.withdraw(deadline)) }
        let ran = Mutex(false)
        _ = watchdog.arm(at: ContinuousClock.now + .milliseconds(10)) { ran.withLock { $0 = true } }
        wait { ran.withLock { $0 } }
        #expect(ran.withLock { $0 })
    }

    @Test("a watchdog without deadlines lets its thread end; the next deadline starts another and still runs")
    func idleThreadEnds() {
        let watchdog = DeadlineWatchdog(idleExit: .milliseconds(50))
        #expect(!watchdog.hasThread, "no thread before the first deadline")
        let ran = Mutex(0)
        _ = watchdog.arm(at: ContinuousClock.now + .milliseconds(5)) { ran.withLock { $0 += 1 } }
        #expect(watchdog.hasThread)
        wait { ran.withLock { $0 } == 1 && !watchdog.hasThread }
        #expect(!watchdog.hasThread, "the thread ended once idle")
        _ = watchdog.arm(at: ContinuousClock.now + .milliseconds(5)) { ran.withLock { $0 += 1 } }
        wait { ran.withLock { $0 } == 2 }
        #expect(ran.withLock { $0 } == 2)
    }
}
