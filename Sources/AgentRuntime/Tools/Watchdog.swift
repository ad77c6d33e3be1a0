import Foundation
import Synchronization

/// One thread that fires deadlines: a tool attempt registers its timeout here instead of
/// starting a sleeping task of its own, which costs a task, a timer and two thread hand-offs
/// per attempt. Callbacks run on the watchdog's thread and must be quick (they cancel a task).
final class Watchdog: Sendable {
    static let shared = Watchdog()

    private struct Entry {
        var id: Int
        var deadline: ContinuousClock.Instant
        var fire: @Sendable () -> Void
    }

    private struct Queue {
        var entries: [Entry] = []
        var nextId = 0
        var isRunning = false
    }

    // The entries are guarded by the mutex; the condition wakes the thread when an earlier
    // deadline arrives.
    private let queue = Mutex(Queue())
    private let condition = NSCondition()

    /// Calls `fire` once `deadline` passes, unless `cancel(_:)` comes first.
    func schedule(at deadline: ContinuousClock.Instant, _ fire: @escaping @Sendable () -> Void) -> Int {
        let (id, needsThread) = queue.withLock { queue -> (Int, Bool) in
            queue.nextId += 1
            queue.entries.append(Entry(id: queue.nextId, deadline: deadline, fire: fire))
            defer { queue.isRunning = true }
            return (queue.nextId, !queue.isRunning)
        }
        if needsThread {
            let thread = Thread { [self] in run() }
            thread.name = "agent-eval watchdog"
            thread.start()
        } else {
            condition.lock()
            condition.signal()
            condition.unlock()
        }
        return id
    }

    /// Forgets a deadline that did not fire.
    func cancel(_ id: Int) {
        queue.withLock { queue in queue.entries.removeAll { $0.id == id } }
    }

    private func run() {
        while true {
            let now = ContinuousClock.now
            let (due, next) = queue.withLock { queue -> ([Entry], ContinuousClock.Instant?) in
                let due = queue.entries.filter { $0.deadline <= now }
                queue.entries.removeAll { $0.deadline <= now }
                return (due, queue.entries.map(\.deadline).min())
            }
            for entry in due { entry.fire() }
            condition.lock()
            let wait = next.map { now.duration(to: $0) } ?? .seconds(1)
            let seconds = Double(wait.components.seconds) + Double(wait.components.attoseconds) / 1e18
            _ = condition.wait(until: Date(timeIntervalSinceNow: max(0.000_5, min(seconds, 1))))
            condition.unlock()
        }
    }
}
