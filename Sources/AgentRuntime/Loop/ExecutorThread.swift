import Foundation

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
/// Unchecked Sendable: the queue and the stop flags are guarded by `condition`; `whenIdle` is
/// confined to the thread (only its own jobs set it, and it runs between them).
public final class ExecutorThread: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    /// Jobs not yet run, in the order they were enqueued; `head` is the next.
    private var queue: [UnownedJob] = []
    private var head = 0
    private var isStopping = false
    private var isStopped = false
    /// Run once each time the queue empties, before the thread waits. Only the thread's own
    /// jobs set or clear it, so it never runs at the same time as one of them.
    public var whenIdle: (() -> Void)?

    /// Starts the thread, named `name` (what a debugger or `top -H` shows); `stop()` ends it.
    public init(name: String) {
        let thread = Thread { [self] in loop() }
        thread.name = name
        thread.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        if isStopped {
            // Nothing should come after the loop is done; if something does, it still runs.
            condition.unlock()
            globalConcurrentExecutor.enqueue(ExecutorJob(job))
            return
        }
        queue.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Ends the thread once every job enqueued so far ran. Safe to call from the thread itself.
    public func stop() {
        condition.lock()
        isStopping = true
        condition.signal()
        condition.unlock()
    }

    private func loop() {
        let executor = asUnownedTaskExecutor()
        condition.lock()
        var ranIdle = false
        while true {
            if head == queue.count, !ranIdle, let whenIdle {
                ranIdle = true
                condition.unlock()
                whenIdle()
                condition.lock()
                continue
            }
            while head == queue.count && !isStopping { condition.wait() }
            if head == queue.count { break }
            let job = queue[head]
            head += 1
            if head == queue.count {
                queue.removeAll(keepingCapacity: true)
                head = 0
            }
            ranIdle = false
            condition.unlock()
            job.runSynchronously(on: executor)
            condition.lock()
        }
        isStopped = true
        condition.unlock()
    }
}
