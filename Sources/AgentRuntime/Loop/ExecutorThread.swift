import Foundation
import TraceLog

/// One thread that runs the jobs of the tasks that prefer it, one at a time: a task executor
/// for a loop that mostly waits.
///
/// On the global executor every hand-off between tasks a loop waits for costs a thread hop:
/// creating a child task wakes a pool thread, and the child's end wakes another to resume its
/// parent (each a futex wake and a reschedule, tens of microseconds on a small VM). Here a child
/// starts when its parent waits and its end resumes the parent on the same thread; the only
/// wakes left come from outside (a blocking thread, a timer, I/O). The pipeline scheduler runs
/// on one with its command attempts, and so does each agent run with its tool attempts
/// (`AgentRuntime`); pipeline agent attempts run on the global executor, in parallel.
///
/// While the thread waits, it can do work that a later job would otherwise do on the loop's
/// critical path: `whenIdle`.
///
/// The thread is TraceLog's `WorkerThreads` (the project's one worker-thread type), whose work
/// is jobs.
///
/// Unchecked Sendable: `whenIdle` is confined to the thread (only its own jobs set it, and it
/// runs between them); the rest is `WorkerThreads`', which guards its own state.
public final class ExecutorThread: TaskExecutor, @unchecked Sendable {
    private let worker: WorkerThreads<UnownedJob>
    /// Run once each time the queue empties, before the thread waits. Only the thread's own
    /// jobs set or clear it, so it never runs at the same time as one of them.
    public var whenIdle: (() -> Void)?

    /// Starts the thread, named `name` (what a debugger or `top -H` shows); `stop()` ends it.
    public init(name: String) {
        // The thread holds the executor weakly: a job that comes after it is gone (none should)
        // goes to the global executor.
        let executor = WeakExecutor()
        worker = WorkerThreads(
            name: name, idle: { executor.thread?.whenIdle?() },
            perform: { job in
                guard let thread = executor.thread else { return globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
                job.runSynchronously(on: thread.asUnownedTaskExecutor())
            })
        executor.thread = self
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        // After `stop()` nothing should come; if something does, it still runs.
        if !worker.submit(job) { globalConcurrentExecutor.enqueue(ExecutorJob(job)) }
    }

    /// The thread the current task runs on when it was started by `run(_:)`: where a task it
    /// starts outside its task tree (`Task(executorPreference: ExecutorThread.current)`: a
    /// server's accept loop, an attempt a watchdog may cancel) runs too. An unstructured task
    /// does not inherit its creator's executor preference, and Swift has no way to read one.
    @TaskLocal public static var current: ExecutorThread?

    /// Runs `body` on this thread, with the child tasks it starts, and with `current` set to
    /// this thread for the tasks it starts outside its tree.
    public func run<T, Failure: Error>(_ body: () async throws(Failure) -> T) async throws(Failure) -> T {
        let result = await withTaskExecutorPreference(self) { () async -> Result<T, Failure> in
            await Self.$current.withValue(self) {
                do throws(Failure) {
                    return .success(try await body())
                } catch {
                    return .failure(error)
                }
            }
        }
        return try result.get()
    }

    /// Ends the thread once every job enqueued so far ran. Safe to call from the thread itself.
    public func stop() {
        worker.finish()
    }

    deinit {
        worker.finish()
    }
}

/// The executor, as its thread's work sees it. Unchecked Sendable: `thread` is set once, in the
/// executor's `init`, before any job can be enqueued; the thread reads it only in a job or in the
/// idle hook, which runs after a job (`WorkerThreads`), so after the enqueue's lock.
private final class WeakExecutor: @unchecked Sendable {
    weak var thread: ExecutorThread?
}
