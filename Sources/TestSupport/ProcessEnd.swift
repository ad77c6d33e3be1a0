public import Foundation

extension Process {
    /// Waits at most `limit` for the process to be seen ended; whether it was.
    ///
    /// A bounded poll of `isRunning` every 10 ms, for the long-running servers and commands a
    /// test keeps as Foundation `Process`es (to signal them): never `waitUntilExit`, which off the
    /// main thread can wait for ever for a process that has ended; and not the house's `waitpid`
    /// either, since reaping such a process is Foundation's (a second reaper would take its exit
    /// from it). Their stops are synchronous (a deinit stops a server), hence no task here.
    /// Programs a test runs to their end go through `Subprocess.run` (the house's `ChildProcess`).
    @discardableResult
    public func waitForEnd(within limit: Duration) -> Bool {
        let end = ContinuousClock.now + limit
        while isRunning && ContinuousClock.now < end { usleep(10_000) }
        return !isRunning
    }
}
