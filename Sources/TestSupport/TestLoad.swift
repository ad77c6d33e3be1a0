import Foundation
import Synchronization

/// The share of the machine the tests take at once. The test runner starts every test
/// together; what is heavy — a program a test runs (`Subprocess.run`), a test that measures
/// time or races a process it started (`.ownThread`) — first takes one of as many slots as the
/// machine has cores (at least two). Hundreds of CLI runs and timed tests all at once on two
/// cores stretched every deadline a test measures: a SIGTERM answered after 20 s, a process
/// meant to be killed mid-way already finished.
public enum TestLoad {
    static let slots = AsyncSlots(max(2, ProcessInfo.processInfo.activeProcessorCount))

    /// Whether the current task (or the test it belongs to) holds a slot.
    @TaskLocal static var holdsSlot = false

    /// Runs `body` in a slot, once one is free; a task that holds one already (a timed test
    /// running a program) uses its own, so that tests waiting for slots never wait for each
    /// other.
    public static func withSlot<T>(_ body: () async throws -> T) async throws -> T {
        if holdsSlot { return try await body() }
        await slots.acquire()
        defer { slots.release() }
        return try await $holdsSlot.withValue(true) { try await body() }
    }
}

/// A counting semaphore for tasks: `acquire` waits without holding a thread, `release` hands
/// the slot to the longest waiter.
final class AsyncSlots: Sendable {
    private struct State {
        var free: Int
        var waiting: [CheckedContinuation<Void, Never>] = []
    }
    private let state: Mutex<State>

    init(_ count: Int) { state = Mutex(State(free: count)) }

    func acquire() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let granted = state.withLock { state -> Bool in
                if state.free > 0 {
                    state.free -= 1
                    return true
                }
                state.waiting.append(continuation)
                return false
            }
            if granted { continuation.resume() }
        }
    }

    func release() {
        let next = state.withLock { state -> CheckedContinuation<Void, Never>? in
            if state.waiting.isEmpty {
                state.free += 1
                return nil
            }
            return state.waiting.removeFirst()
        }
        next?.resume()
    }
}
