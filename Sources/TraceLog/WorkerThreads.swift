import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Threads of the project's own that run submitted work in the order it came, one item at a
/// time per thread: the one worker-thread type (issue 46). What runs on one:
/// - `ExecutorThread` (AgentRuntime): one thread whose work is the jobs of the tasks that prefer
///   it — a run's loop, the pipeline scheduler;
/// - the catalog's log readers during `index` (a few threads, one log each at a time);
/// - `MemberPipeline`'s helper, which reads a large log ahead of its reader (one thread, one
///   item: the whole read).
///
/// Not the shared dispatch pool, and not Swift's cooperative pool, both of which the caller's own
/// tasks may hold: work that blocks or waits belongs here. (`DeadlineWatchdog` keeps its own
/// thread: it waits for instants, not for work.)
///
/// ```swift
/// let readers = WorkerThreads<@Sendable () -> Void>(count: 2, name: "reader") { $0() }
/// readers.submit { read(log) }
/// readers.cancelAndWait()
/// ```
///
/// Unchecked Sendable: every stored `var` is guarded by `condition`; `perform` and `idle` are
/// set once and called on the threads only.
public final class WorkerThreads<Work: Sendable>: @unchecked Sendable {
    private let condition = NSCondition()
    /// Work not yet started, in the order submitted; `head` is the next.
    private var queue: [Work] = []
    private var head = 0
    private var isStopping = false
    private var running: Int
    private let perform: @Sendable (Work) -> Void
    private let idle: (@Sendable () -> Void)?

    /// Starts `count` threads named `name` (what a debugger or `top -H` shows; Linux keeps 15
    /// bytes of it, and a longer name it refuses whole, leaving the thread the name of the one
    /// that made it, so the name is cut to its first 15 bytes there), each running
    /// `perform` on one item of work at a time. `idle`, when given, runs on a thread each time it
    /// finds the queue empty after work, before it waits (once per emptying).
    public init(
        count: Int = 1, name: String, stackSize: Int? = nil, idle: (@Sendable () -> Void)? = nil,
        perform: @escaping @Sendable (Work) -> Void
    ) {
        self.perform = perform
        self.idle = idle
        running = max(1, count)
        for _ in 0..<running {
            let threadName = Self.threadName(name)
            // Named from inside as well, by the system call itself: Foundation gives the system a
            // name set before the start only on some platforms, and on Linux, when the thread
            // starts before `start()` has noted it, its own `Thread.current.name =` does not
            // reach the system either — the thread kept the name of the one that made it (a
            // Dispatch worker's, `oot.default-qos`), one start in a few dozen on a loaded machine.
            let thread = Thread { [self] in
                Self.nameThisThread(threadName)
                loop()
            }
            thread.name = threadName
            if let stackSize { thread.stackSize = stackSize }
            thread.start()
        }
    }

    /// Gives the calling thread `name`, in the system (what `top -H`, a debugger and
    /// `Thread.current.name` read) and in Foundation.
    private static func nameThisThread(_ name: String) {
        #if os(Linux)
            // pthread_setname_np needs _GNU_SOURCE, which Swift's Glibc does not import; the
            // kernel takes the name written here (at most 15 bytes: `threadName` cut it).
            let descriptor = open("/proc/thread-self/comm", O_WRONLY | O_CLOEXEC)
            if descriptor >= 0 {
                _ = name.withCString { write(descriptor, $0, strlen($0)) }
                close(descriptor)
            }
        #endif
        Thread.current.name = name
    }

    /// `name` as the system keeps it: on Linux its first 15 bytes (on a character's boundary).
    static func threadName(_ name: String) -> String {
        #if os(Linux)
            var cut = ""
            for character in name {
                guard cut.utf8.count + character.utf8.count <= 15 else { break }
                cut.append(character)
            }
            return cut
        #else
            return name
        #endif
    }

    /// Adds `work` to the queue; false (and nothing is queued) once the threads are stopping,
    /// so that the caller can run it elsewhere.
    @discardableResult
    public func submit(_ work: Work) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        guard !isStopping else { return false }
        queue.append(work)
        condition.signal()
        return true
    }

    /// Ends the threads once the work submitted so far has run, without waiting for that. Safe to
    /// call from one of the threads.
    public func finish() {
        condition.lock()
        isStopping = true
        condition.broadcast()
        condition.unlock()
    }

    /// Drops the work not started, waits for the work running, and ends the threads. Not from
    /// one of the threads (it would wait for itself).
    public func cancelAndWait() {
        condition.lock()
        isStopping = true
        queue.removeAll()
        head = 0
        condition.broadcast()
        while running > 0 { condition.wait() }
        condition.unlock()
    }

    /// Waits until every thread has ended (after `finish`). Not from one of the threads.
    public func waitUntilEnded() {
        condition.lock()
        while running > 0 { condition.wait() }
        condition.unlock()
    }

    /// `waitUntilEnded`, for at most `timeout`: whether the threads ended within it. For a thread
    /// that waits on another's end which something outside may hold up (a pipe a daemon kept).
    public func waitUntilEnded(within timeout: Duration) -> Bool {
        let seconds = Double(timeout.components.seconds) + Double(timeout.components.attoseconds) / 1e18
        let deadline = Date(timeIntervalSinceNow: seconds)
        condition.lock()
        defer { condition.unlock() }
        while running > 0 {
            if !condition.wait(until: deadline) { return running == 0 }
        }
        return true
    }

    private func loop() {
        condition.lock()
        // The idle hook runs after work, never before the first item.
        var ranIdle = true
        while true {
            if head == queue.count, !ranIdle, let idle {
                ranIdle = true
                condition.unlock()
                idle()
                condition.lock()
                continue
            }
            while head == queue.count && !isStopping { condition.wait() }
            if head == queue.count { break }
            let work = queue[head]
            head += 1
            if head == queue.count {
                queue.removeAll(keepingCapacity: true)
                head = 0
            }
            ranIdle = false
            condition.unlock()
            perform(work)
            condition.lock()
        }
        running -= 1
        condition.broadcast()
        condition.unlock()
    }
}

/// Worker threads whose work is a closure to run: a serial writer (`count: 1`), a pool.
public typealias JobThreads = WorkerThreads<@Sendable () -> Void>

extension WorkerThreads where Work == @Sendable () -> Void {
    /// Threads that run the closures submitted to them.
    public convenience init(count: Int = 1, name: String, stackSize: Int? = nil) {
        self.init(count: count, name: name, stackSize: stackSize) { $0() }
    }

    /// Runs `work` on a thread that ends with it: for work that holds its thread for its whole
    /// life — reading a pipe to its end, waiting for a child process.
    public static func once(name: String, stackSize: Int? = nil, _ work: @escaping @Sendable () -> Void) {
        let thread = JobThreads(name: name, stackSize: stackSize)
        thread.submit(work)
        thread.finish()
    }

    /// `body`'s value, computed on one of these threads, handed to the awaiting task (on the
    /// caller's thread once the threads are stopping). Not for threads that `cancelAndWait`
    /// stops: the work it drops would never resume its task; `finish` runs what was submitted.
    public func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let work: @Sendable () -> Void = { continuation.resume(with: Result { try body() }) }
            if !submit(work) { work() }
        }
    }

    /// `body`'s value, computed on one of these threads, handed to the awaiting task.
    public func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            let work: @Sendable () -> Void = { continuation.resume(returning: body()) }
            if !submit(work) { work() }
        }
    }
}
