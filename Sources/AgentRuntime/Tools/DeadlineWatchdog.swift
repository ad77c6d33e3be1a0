import Foundation

/// Runs an action when its deadline on the continuous clock passes, unless it is withdrawn
/// first: the deadlines set on a `LiveClock` (tool attempts, model requests), on one thread of
/// its own, started by the first deadline and ended after `idleExit` with none.
///
/// An attempt that answers in time costs a lock and a heap insertion to arm and a lock to
/// withdraw. Nothing is woken for it: a withdrawn deadline stays in the heap, marked, until
/// the thread passes it on its way to a later one. (A timer per attempt took a dispatch timer
/// and a sleeping task, a quarter of a fast step.) The thread wakes for the earliest deadline
/// plus `slack`, so deadlines close together are run by one wake-up.
///
/// Unchecked Sendable: every stored property, and each `Deadline`'s `action`, is guarded by
/// `condition`.
final class DeadlineWatchdog: @unchecked Sendable {
    /// How long the thread waits without a deadline before it ends (the next deadline starts
    /// another): a watchdog no one uses holds no thread.
    let idleExit: Duration

    init(idleExit: Duration = .seconds(2)) {
        self.idleExit = idleExit
    }

    /// How late an action may run: deadlines this close together share a wake-up.
    static let slack = Duration.milliseconds(5)

    /// One armed deadline. Unchecked Sendable: `instant` never changes; `action` is read and
    /// cleared under the watchdog's `condition` only.
    final class Deadline: @unchecked Sendable {
        let instant: ContinuousClock.Instant
        /// Nil once the action ran or the deadline was withdrawn.
        fileprivate var action: (@Sendable () -> Void)?

        fileprivate init(instant: ContinuousClock.Instant, action: @escaping @Sendable () -> Void) {
            self.instant = instant
            self.action = action
        }
    }

    private let condition = NSCondition()
    /// A binary min-heap by `instant`, withdrawn deadlines included until they are passed.
    private var heap: [Deadline] = []
    private var withdrawn = 0
    /// When the thread will wake next: nil while it runs actions or waits for a first deadline.
    private var wakesAt: ContinuousClock.Instant?
    private var isWaitingIdle = false
    private var isStarted = false

    /// Whether the thread runs now (for tests: it ends when idle).
    var hasThread: Bool {
        condition.lock()
        defer { condition.unlock() }
        return isStarted
    }

    /// Arms `action` for `instant`.
    func arm(at instant: ContinuousClock.Instant, _ action: @escaping @Sendable () -> Void) -> Deadline {
        let deadline = Deadline(instant: instant, action: action)
        condition.lock()
        defer { condition.unlock() }
        push(deadline)
        if !isStarted {
            isStarted = true
            let thread = Thread { [self] in run() }
            thread.name = "agent-eval tool deadlines"
            thread.stackSize = 256 * 1024
            thread.start()
        } else if isWaitingIdle || wakesAt.map({ instant + Self.slack < $0 }) == true {
            condition.signal()
        }
        return deadline
    }

    /// Withdraws `deadline`; returns false when its action already ran (or is running).
    @discardableResult
    func withdraw(_ deadline: Deadline) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard deadline.action != nil else { return false }
        deadline.action = nil
        withdrawn += 1
        // Many withdrawn deadlines far ahead (a burst of quick attempts with long timeouts):
        // drop them now rather than hold them until they pass.
        if withdrawn > 1_024 && withdrawn * 2 > heap.count {
            heap.removeAll { $0.action == nil }
            withdrawn = 0
            for index in stride(from: heap.count / 2 - 1, through: 0, by: -1) { siftDown(from: index) }
        }
        return true
    }

    private func run() {
        condition.lock()
        while true {
            let now = ContinuousClock.now
            while let first = heap.first, first.action == nil || first.instant <= now {
                popFirst()
                guard let action = first.action else {
                    withdrawn -= 1
                    continue
                }
                first.action = nil
                condition.unlock()
                action()
                condition.lock()
            }
            if let first = heap.first {
                // Never longer than `idleExit` at once: deadlines withdrawn since (a model request
                // answered long before its timeout) are dropped at the next look, and a watchdog
                // whose deadlines were all withdrawn lets its thread go soon, not at the timeout.
                let target = min(first.instant + Self.slack, now + idleExit)
                wakesAt = target
                _ = condition.wait(until: Date(timeIntervalSinceNow: Self.seconds(target - now)))
            } else {
                isWaitingIdle = true
                let isWoken = condition.wait(until: Date(timeIntervalSinceNow: Self.seconds(idleExit)))
                isWaitingIdle = false
                if !isWoken && heap.isEmpty {
                    // No deadline for a while: the thread ends (and lets go of the watchdog).
                    isStarted = false
                    condition.unlock()
                    return
                }
            }
            wakesAt = nil
        }
    }

    private static func seconds(_ duration: Duration) -> Double {
        max(0, Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
    }

    private func push(_ deadline: Deadline) {
        heap.append(deadline)
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].instant < heap[parent].instant else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    private func popFirst() {
        heap.swapAt(0, heap.count - 1)
        heap.removeLast()
        if !heap.isEmpty { siftDown(from: 0) }
    }

    private func siftDown(from start: Int) {
        var parent = start
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < heap.count && heap[left].instant < heap[smallest].instant { smallest = left }
            if right < heap.count && heap[right].instant < heap[smallest].instant { smallest = right }
            guard smallest != parent else { return }
            heap.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
