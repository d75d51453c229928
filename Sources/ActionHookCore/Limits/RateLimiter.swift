import Foundation

/// Token buckets keyed by `Key`: `rate` tokens a second, up to `burst`, one per request.
///
/// Pure bookkeeping over the times it is given, so it is tested without clocks. Keys that have
/// been full for a while are dropped, keeping memory bounded by the active keys.
public struct RateLimiter<Key: Hashable & Sendable>: Sendable {
    struct Bucket: Sendable {
        var tokens: Double
        var updated: Double
    }

    private var buckets: [Key: Bucket] = [:]
    private var lastSweep: Double = 0

    /// Creates an empty limiter.
    public init() {}

    /// Takes one token for `key` at time `now` (seconds). Returns `nil` when allowed, or the
    /// seconds to wait before a token is available.
    public mutating func acquire(_ key: Key, rate: Double, burst: Double, now: Double) -> Double? {
        precondition(rate > 0 && burst >= 1, "rate limits are positive")
        if now - lastSweep > 60 { sweep(now: now, maxAge: 60) }
        // Updated in place: one hash of the key.
        let full = Bucket(tokens: burst, updated: now)
        return Self.take(from: &buckets[key, default: full], rate: rate, burst: burst, now: now)
    }

    private static func take(from bucket: inout Bucket, rate: Double, burst: Double, now: Double) -> Double? {
        bucket.tokens = min(burst, bucket.tokens + max(0, now - bucket.updated) * rate)
        bucket.updated = now
        guard bucket.tokens >= 1 else { return (1 - bucket.tokens) / rate }
        bucket.tokens -= 1
        return nil
    }

    /// The number of keys tracked.
    public var count: Int { buckets.count }

    private mutating func sweep(now: Double, maxAge: Double) {
        buckets = buckets.filter { now - $0.value.updated < maxAge }
        lastSweep = now
    }
}
