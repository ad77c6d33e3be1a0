/// How long to wait before a retry: the one formula behind every retry the project makes (a
/// tool's failed attempt, a model request, a pipeline task).
///
/// The wait before retry `n` (1 for the first) grows as `initialMs × multiplierⁿ⁻¹`, up to
/// `capMs`. With jitter, the wait taken is drawn from `0…` that bound ("full jitter"), by a
/// source the caller gives: random for requests to a shared service, a hash of a key where a
/// re-run must record the same waits.
public struct Backoff: Sendable, Hashable {
    /// The bound of the wait before the first retry.
    public var initialMs: Int
    /// Each next bound is the one before times this.
    public var multiplier: Double
    /// The largest bound; nil for none.
    public var capMs: Int?
    /// Whether the wait is the bound itself or drawn below it.
    public var jitter: Jitter

    public enum Jitter: Sendable, Hashable {
        /// The wait is the bound.
        case none
        /// The wait is drawn from `0…bound`.
        case full
    }

    public init(initialMs: Int, multiplier: Double = 2, capMs: Int? = nil, jitter: Jitter = .none) {
        self.initialMs = initialMs
        self.multiplier = multiplier
        self.capMs = capMs
        self.jitter = jitter
    }

    /// Waits that grow by `multiplier` with no jitter and no cap: a tool's `retry` settings,
    /// whose waits a log records and a reader can predict.
    public static func exponential(initialMs: Int, multiplier: Double = 2) -> Backoff {
        Backoff(initialMs: initialMs, multiplier: multiplier)
    }

    /// Doubling bounds up to `capMs`, each wait drawn below its bound.
    public static func fullJitter(initialMs: Int, capMs: Int) -> Backoff {
        Backoff(initialMs: initialMs, multiplier: 2, capMs: capMs, jitter: .full)
    }

    /// The bound of the wait before retry `retry` (1 for the first; 0 or less waits nothing).
    public func boundMs(retry: Int) -> Int {
        guard retry >= 1, initialMs > 0 else { return 0 }
        var bound = Double(initialMs)
        let limit = Double(capMs ?? Int(Int32.max))
        for _ in 1..<retry where bound < limit { bound *= multiplier }
        return Int(min(bound, limit).rounded())
    }

    /// The wait before retry `retry`, drawing with `source` when there is jitter.
    public func delayMs(retry: Int, source: some JitterSource) -> Int {
        let bound = boundMs(retry: retry)
        switch jitter {
        case .none: return bound
        case .full: return bound > 0 ? source.draw(upTo: bound) : 0
        }
    }
}

/// Where jittered waits come from: a number in `0…bound`.
public protocol JitterSource: Sendable {
    func draw(upTo bound: Int) -> Int
}

/// The system's random numbers: for waits no log records.
public struct RandomJitter: JitterSource {
    public init() {}

    public func draw(upTo bound: Int) -> Int { Int.random(in: 0...bound) }
}

/// A number taken from the SHA-256 of a key: spread like random, yet the same on every run
/// with the same key, so a re-run records the same waits.
public struct HashedJitter: JitterSource {
    public var key: String

    public init(key: String) { self.key = key }

    public func draw(upTo bound: Int) -> Int {
        let seed = ContentHash.sha256Hex(Array(key.utf8)).prefix(8)
        return Int(UInt32(seed, radix: 16) ?? 0) % (bound + 1)
    }
}
