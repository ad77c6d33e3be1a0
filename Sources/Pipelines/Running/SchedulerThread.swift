import Foundation

/// One thread that runs the scheduler and its command attempts' async parts, one job at a time.
///
/// On the global executor every task took two thread hops the scheduler waited for: starting
/// an attempt woke a pool thread, and the attempt's end woke another to resume the scheduler
/// (each a futex wake and a reschedule, tens of microseconds on a small VM). Here an attempt
/// starts when the scheduler waits and its end resumes the scheduler on the same thread; the
/// only wake left is the one from the command's own blocking thread when it ends. Agent
/// attempts do real work and still run on the global executor, so they run in parallel.
///
/// While the thread waits (a command runs), it can do work that a later job would otherwise
/// do on the scheduler's critical path: `whenIdle`.
final class SchedulerThread: TaskExecutor, @unchecked Sendable {
    private let condition = NSCondition()
    /// Jobs not yet run, in the order they were enqueued; `head` is the next.
    private var queue: [UnownedJob] = []
    private var head = 0
    private var isStopping = false
    private var isStopped = false
    /// Run once each time the queue empties, before the thread waits. Only the thread's own
    /// jobs set or clear it, so it never runs at the same time as one of them.
    var whenIdle: (() -> Void)?

    /// Starts the thread; `stop()` ends it.
    init() {
        let thread = Thread { [self] in loop() }
        thread.name = "agent-eval pipeline scheduler"
        thread.start()
    }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        condition.lock()
        if isStopped {
            // Nothing should come after the scheduler is done; if something does, it still runs.
            condition.unlock()
            globalConcurrentExecutor.enqueue(ExecutorJob(job))
            return
        }
        queue.append(job)
        condition.signal()
        condition.unlock()
    }

    /// Ends the thread once every job enqueued so far ran. Safe to call from the thread itself.
    func stop() {
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
