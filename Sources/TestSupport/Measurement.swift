#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the benchmarks share to time work and summarise repetitions.
///
/// A duration in seconds.
public func seconds(_ duration: Duration) -> Double {
    Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
}

/// How long `body` took, in seconds.
public func seconds(_ body: () throws -> Void) rethrows -> Double {
    let start = ContinuousClock.now
    try body()
    return seconds(ContinuousClock.now - start)
}

/// The median (the mean of the middle two for an even count). `values` must not be empty.
public func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
}

/// The CPU time the calling thread spent in `body`, in seconds. Unlike wall time it is not
/// stretched by other work on the machine (tests running in parallel), so the ratio of two
/// measurements says how the work grew. `body` must stay on the calling thread: no `await`.
public func threadCPUSeconds(_ body: () throws -> Void) rethrows -> Double {
    func now() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }
    let start = now()
    try body()
    return now() - start
}

/// How much more thread CPU time `work(10 * n)` takes than `work(n)` (after one warm-up run of
/// `work(n)`, and the cheapest of three runs of it): about 10 when the work is linear in n,
/// about 100 when it is quadratic.
public func scalingRatio(n: Int, _ work: (_ size: Int) throws -> Void) rethrows -> Double {
    try work(n)
    var small = Double.infinity
    for _ in 0..<3 { small = min(small, try threadCPUSeconds { try work(n) }) }
    let large = try threadCPUSeconds { try work(10 * n) }
    return large / max(small, 1e-6)
}
