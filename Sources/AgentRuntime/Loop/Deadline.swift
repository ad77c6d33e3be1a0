/// Work under a deadline on the injected clock: the one mechanism behind every deadline that
/// must hold however the work behaves — a tool attempt's timeout, the run's `timeout_ms` while
/// the model answers, a model request's per-attempt `timeout_ms` while its reply streams in.
///
/// The work runs in a task of its own, which is cancelled when the deadline passes (and when
/// the caller is cancelled). Work that stops on cancellation ends at once; work that ignores it
/// is waited for, and its late value is reported as the timeout it was. On a `LiveClock` its
/// `DeadlineWatchdog` keeps the deadline, with no timer or sleeping task per call; on any other
/// clock (tests inject one they advance) the work races `clock.sleep(until:)`.
///
/// ```swift
/// let (reply, timedOut) = await Deadline.run(within: .seconds(5), on: environment.clock) {
///     await fetchReply()
/// }
/// ```
public enum Deadline {
    /// Runs `work` until it returns or `duration` has passed on `clock`, whichever is first;
    /// returns what the work returned and whether the deadline passed before it did.
    public static func run<T: Sendable>(
        within duration: Duration, on clock: any Clock<Duration>, _ work: @escaping @Sendable () async -> T
    ) async -> (value: T, timedOut: Bool) {
        if let live = clock as? LiveClock { return await runWatched(within: duration, by: live.watchdog, work) }
        return await race(within: duration, on: clock, work)
    }

    /// The live clock: the work's task is cancelled by the clock's watchdog at the deadline, and
    /// awaited (cancelled with the caller too). The task runs on the run's loop thread when
    /// there is one, as a child would.
    private static func runWatched<T: Sendable>(
        within duration: Duration, by watchdog: DeadlineWatchdog, _ work: @escaping @Sendable () async -> T
    ) async -> (value: T, timedOut: Bool) {
        let deadline = ContinuousClock.now.advanced(by: duration)
        let task = Task(executorPreference: ExecutorThread.current) { await work() }
        let armed = watchdog.arm(at: deadline) { task.cancel() }
        let value = await withTaskCancellationHandler {
            await task.value
        } onCancel: {
            task.cancel()
        }
        // The deadline had passed when its action ran, or the value came after it (work that
        // blocked the thread the watchdog's cancel would have reached it on).
        let inTime = watchdog.withdraw(armed) && ContinuousClock.now < deadline
        return (value, !inTime)
    }

    private enum Finish<T: Sendable>: Sendable {
        case finished(T)
        case deadlinePassed
        case sleepCancelled
    }

    private static func race<C: Clock<Duration>, T: Sendable>(
        within duration: Duration, on clock: C, _ work: @escaping @Sendable () async -> T
    ) async -> (value: T, timedOut: Bool) {
        let deadline = clock.now.advanced(by: duration)
        return await withTaskGroup(of: Finish<T>.self) { group in
            group.addTask { .finished(await work()) }
            group.addTask {
                do {
                    try await clock.sleep(until: deadline, tolerance: nil)
                    return .deadlinePassed
                } catch {
                    return .sleepCancelled
                }
            }
            var value: T?
            var timedOut = false
            for await finish in group {
                switch finish {
                case .finished(let result):
                    value = result
                    // A value that comes after the deadline is the timeout it was, even when the
                    // deadline's own task had no chance to run first.
                    if !(clock.now < deadline) { timedOut = true }
                case .deadlinePassed:
                    if value == nil { timedOut = true }
                case .sleepCancelled:
                    continue
                }
                group.cancelAll()
            }
            // The work's task always finishes (the group waits for it), so there is a value.
            guard let value else { preconditionFailure("the work of a deadline race gave no value") }
            return (value, timedOut)
        }
    }
}
