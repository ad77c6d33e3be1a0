import Foundation
import TraceLog

/// Runs blocking work — waiting for a child process, reading a pipe to its end — on a thread
/// of its own, and gives its result to the task that awaits it.
///
/// Work that blocks must never run on a thread of the cooperative pool: the pool has one
/// thread per core (two on a small CI machine), and a task holding one while it waits keeps
/// every other task's continuation queued behind it — a model stream's chunks, a timer, a
/// test's server. The thread lives as long as the work and no longer.
public enum OwnThread {
    /// `body`'s value or error, computed on a new thread; `stackSize` in bytes when the work
    /// needs little (a process runner), else the platform's default.
    public static func run<T: Sendable>(
        name: String? = nil, stackSize: Int? = nil, _ body: @escaping @Sendable () throws -> T
    ) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            start(name: name, stackSize: stackSize) { continuation.resume(with: Result { try body() }) }
        }
    }

    /// `body`'s value, computed on a new thread.
    public static func run<T: Sendable>(name: String? = nil, stackSize: Int? = nil, _ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            start(name: name, stackSize: stackSize) { continuation.resume(returning: body()) }
        }
    }

    private static func start(name: String?, stackSize: Int?, _ work: @escaping @Sendable () -> Void) {
        JobThreads.once(name: name ?? "agent-eval blocking work", stackSize: stackSize, work)
    }
}
