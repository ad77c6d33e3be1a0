import Synchronization

/// State behind a lock that tasks can wait on: a task waits for a condition on the state, and
/// the change that makes it true wakes the task — in place of polling the state every few
/// milliseconds. Every `withLock` wakes the waiting tasks, each of which checks its condition
/// again (under the lock, waking nobody); a wait is bounded by `Deadline.run` on the caller's
/// clock.
///
/// ```swift
/// let state = WatchedState(Counters())
/// // a task:
/// let answered = await state.wait(within: .seconds(1), on: clock) { $0.inFlight == 0 }
/// // another:
/// state.withLock { $0.inFlight -= 1 }  // wakes the first
/// ```
///
/// What waits on one: the recording gateway's calls and spans waiting for their model answer, a
/// recorded fork waiting for its prefix (`ExchangeRecorder`).
public final class WatchedState<Value: ~Copyable>: Sendable {
    private let value: Mutex<Value>
    private let waiters = Mutex(Waiters())

    private struct Waiters {
        /// Changes so far: a waiter that saw generation `g` before checking its condition sleeps
        /// only while the generation is still `g`, so a change between the check and the sleep
        /// is never missed.
        var generation = 0
        var nextId = 0
        var sleeping: [Int: CheckedContinuation<Void, Never>] = [:]
        /// Waits cancelled before they slept.
        var cancelled: Set<Int> = []
    }

    public init(_ value: consuming sending Value) {
        self.value = Mutex(value)
    }

    /// Reads or changes the state under its lock, then wakes the tasks waiting on it.
    public func withLock<Result, E: Error>(_ body: (inout sending Value) throws(E) -> sending Result) throws(E) -> sending Result {
        defer { changed() }
        return try value.withLock(body)
    }

    /// Waits until `isMet` holds (checked under the lock now and after each change), at most
    /// `duration` on `clock`; whether it held when the wait ended. Cancelling the caller ends the
    /// wait too.
    @discardableResult
    public func wait(
        within duration: Duration, on clock: any Clock<Duration>, until isMet: @escaping @Sendable (inout Value) -> Bool
    ) async -> Bool {
        if value.withLock({ isMet(&$0) }) { return true }
        return await Deadline.run(within: duration, on: clock) { [self] in await wait(until: isMet) }.value
    }

    private func wait(until isMet: @escaping @Sendable (inout Value) -> Bool) async -> Bool {
        while !Task.isCancelled {
            let seen = waiters.withLock { $0.generation }
            if value.withLock({ isMet(&$0) }) { return true }
            await change(after: seen)
        }
        return value.withLock { isMet(&$0) }
    }

    /// Returns at the first change after generation `seen` (at once when there was one), or
    /// when the task is cancelled.
    private func change(after seen: Int) async {
        let id = waiters.withLock { waiters in
            waiters.nextId += 1
            return waiters.nextId
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let now = waiters.withLock { waiters -> Bool in
                    if waiters.generation != seen || waiters.cancelled.remove(id) != nil { return true }
                    waiters.sleeping[id] = continuation
                    return false
                }
                if now { continuation.resume() }
            }
        } onCancel: {
            let sleeping = waiters.withLock { waiters -> CheckedContinuation<Void, Never>? in
                if let sleeping = waiters.sleeping.removeValue(forKey: id) { return sleeping }
                waiters.cancelled.insert(id)
                return nil
            }
            sleeping?.resume()
        }
        // A cancellation that came as a change woke it leaves nothing behind.
        _ = waiters.withLock { $0.cancelled.remove(id) }
    }

    private func changed() {
        let woken = waiters.withLock { waiters -> [CheckedContinuation<Void, Never>] in
            waiters.generation &+= 1
            guard !waiters.sleeping.isEmpty else { return [] }
            defer { waiters.sleeping = [:] }
            return Array(waiters.sleeping.values)
        }
        for continuation in woken { continuation.resume() }
    }
}
