import AgentRuntime
import TestSupport
public import Testing

/// A test that measures time or races a process it started (`.ownThread` on the test or its
/// suite) runs on a thread of its own, not on the cooperative pool, and in one of the
/// `TestLoad` slots.
///
/// The test runner starts every test at once, and the pool has a thread per core: a test that
/// computes for seconds holds one of them, and a continuation queued behind it (a poll after a
/// sleep, a model stream's next chunk, a timer) waited up to a minute in full runs, so a
/// deadline fired or a process meant to be killed mid-way had finished. On its own thread
/// (`ExecutorThread`, a task executor) the test and the tasks it starts wait only for the CPU,
/// and the slot keeps the CPU from being shared too thinly. So does a server the test starts
/// in its process: its tasks run on `ExecutorThread.current` (a gateway starved on the pool
/// left a proxied call unanswered for 30 s in a CI run).
public struct OwnThreadTrait: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard testCase != nil else { return try await function() }
        try await TestLoad.withSlot {
            let executor = ExecutorThread(name: "test \(test.name.prefix(40))")
            defer { executor.stop() }
            try await executor.run { try await function() }
        }
    }
}

extension Trait where Self == OwnThreadTrait {
    /// See `OwnThreadTrait`.
    public static var ownThread: Self { OwnThreadTrait() }
}
