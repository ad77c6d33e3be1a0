import Testing
import TraceCore

@Suite("Backoff: the one retry-wait formula")
struct BackoffTests {
    @Test("exponential waits grow by the multiplier from the first retry, with no jitter and no wait before it")
    func exponential() {
        let backoff = Backoff.exponential(initialMs: 100, multiplier: 3)
        #expect((0...4).map { backoff.delayMs(retry: $0, source: RandomJitter()) } == [0, 100, 300, 900, 2_700])
        #expect(Backoff.exponential(initialMs: 15, multiplier: 1.5).boundMs(retry: 3) == 34, "rounded to the nearest ms")
    }

    @Test("full-jitter bounds double up to the cap, and every wait is drawn within its bound")
    func fullJitter() {
        let backoff = Backoff.fullJitter(initialMs: 1_000, capMs: 20_000)
        #expect((1...7).map(backoff.boundMs(retry:)) == [1_000, 2_000, 4_000, 8_000, 16_000, 20_000, 20_000])
        #expect(backoff.boundMs(retry: 10_000) == 20_000, "a huge retry number neither overflows nor passes the cap")
        for retry in 1...7 {
            for _ in 0..<50 {
                #expect((0...backoff.boundMs(retry: retry)).contains(backoff.delayMs(retry: retry, source: RandomJitter())))
            }
        }
        #expect(Backoff.fullJitter(initialMs: 0, capMs: 100).delayMs(retry: 3, source: RandomJitter()) == 0)
    }

    @Test("hashed jitter gives the same wait for the same key on every run, and spreads different keys")
    func hashedJitter() {
        let backoff = Backoff.fullJitter(initialMs: 100, capMs: 30_000)
        let first = backoff.delayMs(retry: 4, source: HashedJitter(key: "fetch#2"))
        #expect(first == backoff.delayMs(retry: 4, source: HashedJitter(key: "fetch#2")))
        #expect((0...800).contains(first))
        let waits = Set((0..<20).map { backoff.delayMs(retry: 4, source: HashedJitter(key: "fetch#\($0)")) })
        #expect(waits.count > 10, "\(waits)")
    }
}
