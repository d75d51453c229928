import Foundation
import Synchronization
import Testing

@testable import ActionHookServer
@testable import ActionHookStore

/// The ingest cache's reloads: an old entry is answered from and reloaded off the caller's thread;
/// invalidations win over reloads that began before them.
@Suite("App cache")
struct AppCacheTests {
    struct Failure: Error {}

    /// Counts loads and records whether each ran on the thread that asked.
    final class Loader: Sendable {
        let results: Mutex<[Result<IngestPrincipal?, Failure>]>
        let loads = Mutex<[Bool]>([])  // true: ran on the asking thread
        let gate = DispatchSemaphore(value: 0)
        let gated: Bool

        init(_ results: [Result<IngestPrincipal?, Failure>], gated: Bool = false) {
            self.results = Mutex(results)
            self.gated = gated
        }

        func load(asker: pthread_t) throws -> IngestPrincipal? {
            loads.withLock { $0.append(pthread_equal(pthread_self(), asker) != 0) }
            if gated { gate.wait() }
            // An unexpected load fails (and is seen in `loads`).
            guard let next = results.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { throw Failure() }
            return try next.get()
        }

        func principal(_ cache: AppCache) throws -> IngestPrincipal? {
            let asker = pthread_self()
            return try cache.principal(digest: [1, 2, 3]) { try self.load(asker: asker) }
        }
    }

    static let app = IngestPrincipal(appID: "app", rateLimitPerSecond: nil)
    static let limited = IngestPrincipal(appID: "app", rateLimitPerSecond: 5)

    /// The cache's clock, moved by hand.
    final class Clock: Sendable {
        let instant = Mutex(ContinuousClock.now)
        func now() -> ContinuousClock.Instant { instant.withLock { $0 } }
        func advance(by duration: Duration) { instant.withLock { $0 += duration } }
    }

    let clock = Clock()

    /// A cache whose entries are reloaded after a minute, and retried a second after a failed reload.
    func makeCache() -> AppCache {
        AppCache(maxAge: .seconds(60), retryDelay: .seconds(1), now: { [clock] in clock.now() })
    }

    /// Moves the clock past the cache's age so the next lookup finds its entry old.
    func age(_ cache: AppCache) { clock.advance(by: .seconds(61)) }

    /// A cache holding `app` for the key, loaded a minute and a second ago.
    func cacheWithOldEntry() throws -> AppCache {
        let cache = makeCache()
        _ = try Loader([.success(Self.app)]).principal(cache)
        age(cache)
        return cache
    }

    /// The key is no longer cached: the next lookup asks the database on the asking thread (which
    /// finds it revoked).
    func expectMissLoadedByTheAsker(_ cache: AppCache) throws {
        let loader = Loader([.success(nil)])
        #expect(try loader.principal(cache) == nil)
        #expect(loader.loads.withLock { $0 } == [true])
    }

    @Test("an old entry is answered at once and reloaded in the background")
    func oldEntryReloadedInBackground() throws {
        let cache = makeCache()
        let first = Loader([.success(Self.app)])
        #expect(try first.principal(cache) == Self.app)
        #expect(first.loads.withLock { $0 } == [true])  // a miss loads on the asking thread

        age(cache)
        let second = Loader([.success(Self.limited)], gated: true)
        #expect(try second.principal(cache) == Self.app)  // answered from the old entry while it reloads
        #expect(try second.principal(cache) == Self.app)  // one reload at a time
        second.gate.signal()
        cache.waitForRefreshes()
        #expect(second.loads.withLock { $0 } == [false])

        let third = Loader([])
        #expect(try third.principal(cache) == Self.limited)
        #expect(third.loads.withLock { $0 }.isEmpty)
    }

    @Test("a reload that began before an invalidation is not kept")
    func invalidationWinsOverReload() throws {
        let cache = try cacheWithOldEntry()
        let reload = Loader([.success(Self.app)], gated: true)
        #expect(try reload.principal(cache) == Self.app)
        cache.invalidate(appID: "app")
        reload.gate.signal()
        cache.waitForRefreshes()

        // The key was revoked meanwhile: the next request asks the database.
        try expectMissLoadedByTheAsker(cache)
    }

    @Test("a reload after an invalidation of another app is retried, not lost")
    func otherAppsInvalidationDoesNotStrandEntry() throws {
        let cache = try cacheWithOldEntry()
        let reload = Loader([.success(Self.limited)], gated: true)
        _ = try reload.principal(cache)
        cache.invalidate(appID: "other")
        reload.gate.signal()
        cache.waitForRefreshes()

        let next = Loader([.success(Self.limited)])
        #expect(try next.principal(cache) == Self.app)
        cache.waitForRefreshes()
        #expect(next.loads.withLock { $0 } == [false])
        #expect(try Loader([]).principal(cache) == Self.limited)
    }

    @Test("a key found revoked by a reload is forgotten")
    func revokedKeyForgotten() throws {
        let cache = try cacheWithOldEntry()
        _ = try Loader([.success(nil)]).principal(cache)
        cache.waitForRefreshes()
        try expectMissLoadedByTheAsker(cache)
    }

    @Test("a failed reload keeps the old entry and is tried again after the retry delay")
    func failedReloadKeepsEntry() throws {
        let cache = try cacheWithOldEntry()
        let failing = Loader([.failure(Failure())])
        #expect(try failing.principal(cache) == Self.app)
        cache.waitForRefreshes()

        let soon = Loader([])
        #expect(try soon.principal(cache) == Self.app)  // within the retry delay: no new attempt
        cache.waitForRefreshes()
        #expect(soon.loads.withLock { $0 }.isEmpty)
        clock.advance(by: .seconds(1))
        let later = Loader([.success(Self.limited)])
        #expect(try later.principal(cache) == Self.app)
        cache.waitForRefreshes()
        #expect(later.loads.withLock { $0 } == [false])
        #expect(try Loader([]).principal(cache) == Self.limited)
    }
}
