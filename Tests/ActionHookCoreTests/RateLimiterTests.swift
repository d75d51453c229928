import ActionHookCore
import Testing

@Suite("Rate limiter")
struct RateLimiterTests {
    @Test("a full bucket allows its burst, then one request per 1/rate seconds, and says how long to wait")
    func burstThenRate() throws {
        var limiter = RateLimiter<String>()
        for _ in 0..<4 { #expect(limiter.acquire("a", rate: 2, burst: 4, now: 100) == nil) }
        let refused = limiter.acquire("a", rate: 2, burst: 4, now: 100)
        let wait = try #require(refused)
        #expect(abs(wait - 0.5) < 1e-9)
        #expect(limiter.acquire("a", rate: 2, burst: 4, now: 100.25) != nil)
        #expect(limiter.acquire("a", rate: 2, burst: 4, now: 100.5) == nil)
        // Other keys have buckets of their own.
        #expect(limiter.acquire("b", rate: 2, burst: 4, now: 100.5) == nil)
        // Refilled up to the burst, no further.
        for _ in 0..<4 { #expect(limiter.acquire("a", rate: 2, burst: 4, now: 1_000) == nil) }
        #expect(limiter.acquire("a", rate: 2, burst: 4, now: 1_000) != nil)
    }

    @Test("keys idle for a minute are dropped")
    func idleKeysDropped() {
        var limiter = RateLimiter<Int>()
        for key in 0..<100 { _ = limiter.acquire(key, rate: 1, burst: 1, now: 0) }
        #expect(limiter.count == 100)
        _ = limiter.acquire(0, rate: 1, burst: 1, now: 61)
        #expect(limiter.count == 1)
    }
}
