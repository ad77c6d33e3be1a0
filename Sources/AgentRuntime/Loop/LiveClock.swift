/// The clock of live runs: `ContinuousClock`'s time and sleeps, and a `DeadlineWatchdog` of its
/// own that keeps the deadlines `Deadline.run` sets on it, with no timer or sleeping task per
/// deadline (a tool attempt, a model request). Copies share the watchdog.
///
/// It is what `RuntimeEnvironment.live`, the model clients and the MCP client take by default;
/// tests inject a clock they advance instead, and any other clock gets `Deadline.run`'s race
/// against `sleep(until:)`. There is no process-wide watchdog: each `LiveClock()` has one, whose
/// thread starts with its first deadline and ends when it has had none for a while.
public struct LiveClock: Clock, Sendable {
    public typealias Instant = ContinuousClock.Instant
    public typealias Duration = Swift.Duration

    private let base = ContinuousClock()
    /// Keeps the deadlines set on this clock (and its copies).
    let watchdog = DeadlineWatchdog()

    public init() {}

    public var now: Instant { base.now }
    public var minimumResolution: Swift.Duration { base.minimumResolution }

    public func sleep(until deadline: Instant, tolerance: Swift.Duration?) async throws {
        try await base.sleep(until: deadline, tolerance: tolerance)
    }
}
