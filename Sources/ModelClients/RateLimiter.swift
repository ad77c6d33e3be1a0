import Synchronization

/// Requests and tokens sent in the last minute, and how long the next request must wait to
/// stay within `requests_per_minute` and `tokens_per_minute`. Pure: the caller brings the
/// time, so the arithmetic is tested without waiting.
struct RateWindow: Sendable {
    var requestsPerMinute: Int?
    var tokensPerMinute: Int?
    /// Sends in the window: when (ms) and how many tokens, oldest first.
    private(set) var sent: [(atMs: Int, tokens: Int)] = []

    init(requestsPerMinute: Int?, tokensPerMinute: Int?) {
        self.requestsPerMinute = requestsPerMinute
        self.tokensPerMinute = tokensPerMinute
    }

    /// Milliseconds to wait before a request of `tokens` may go at `nowMs`; 0 records it as sent.
    mutating func reserve(tokens: Int, nowMs: Int) -> Int {
        sent.removeAll { nowMs - $0.atMs >= 60_000 }
        var wait = 0
        if let limit = requestsPerMinute, sent.count >= limit {
            wait = max(wait, sent[sent.count - limit].atMs + 60_000 - nowMs)
        }
        if let limit = tokensPerMinute, !sent.isEmpty {
            // Wait for enough of the oldest sends to leave the window; a request larger than
            // the whole limit goes alone in an empty window.
            var total = sent.reduce(0) { $0 + $1.tokens } + tokens
            var index = 0
            while total > limit && index < sent.count {
                total -= sent[index].tokens
                wait = max(wait, sent[index].atMs + 60_000 - nowMs)
                index += 1
            }
        }
        if wait == 0 { sent.append((nowMs, tokens)) }
        return wait
    }
}

/// Rate windows shared by every client of one process against the same server and model:
/// `agent-eval run --jobs N` stays within one limit, not N.
final class RateLimiter: Sendable {
    // Guarded by the mutex: the window.
    private let window: Mutex<RateWindow>

    init(requestsPerMinute: Int?, tokensPerMinute: Int?) {
        window = Mutex(RateWindow(requestsPerMinute: requestsPerMinute, tokensPerMinute: tokensPerMinute))
    }

    /// Waits until a request of `tokens` may go.
    func acquire(tokens: Int, clock: ContinuousClock = ContinuousClock()) async throws {
        while true {
            let nowMs = Self.milliseconds(clock.now)
            let wait = window.withLock { $0.reserve(tokens: tokens, nowMs: nowMs) }
            if wait == 0 { return }
            try await Task.sleep(for: .milliseconds(wait))
        }
    }

    private static let origin = ContinuousClock().now

    static func milliseconds(_ instant: ContinuousClock.Instant) -> Int {
        let elapsed = origin.duration(to: instant).components
        return Int(elapsed.seconds) * 1000 + Int(elapsed.attoseconds / 1_000_000_000_000_000)
    }

    // Guarded by the mutex: limiters by server, model and limits.
    private static let shared = Mutex<[String: RateLimiter]>([:])

    /// The process's limiter for `key`, made on first use.
    static func shared(key: String, requestsPerMinute: Int?, tokensPerMinute: Int?) -> RateLimiter {
        shared.withLock { limiters in
            if let limiter = limiters[key] { return limiter }
            let limiter = RateLimiter(requestsPerMinute: requestsPerMinute, tokensPerMinute: tokensPerMinute)
            limiters[key] = limiter
            return limiter
        }
    }
}
