import ActionHookCore
import ActionHookStore
import Dispatch
import Locks

/// Per-app data the ingest path reads on every request: who a key belongs to, and the app's
/// rules and categories. Entries are dropped when any instance announces a change (NOTIFY) and
/// when the change listener reconnects (it may have missed announcements). As a last resort an
/// entry older than `maxAge` is reloaded, in the background: the request that finds it old is
/// answered from it, so no request thread waits on the database for data it already has (every
/// thread finding its entries old at the same moment would stall all their connections at once).
/// Only a miss loads on the caller's thread.
final class AppCache: Sendable {
    struct Rules: Sendable {
        var rules: [Rule]
        var categories: [String: NotificationCategory]
    }

    private struct Entry<Value: Sendable>: Sendable {
        var value: Value
        var refreshAfter: ContinuousClock.Instant
        var refreshing = false
    }

    private struct State: Sendable {
        var principals: [[UInt8]: Entry<IngestPrincipal>] = [:]
        var rules: [String: Entry<Rules>] = [:]
        // Bumped by every invalidation: a load that began before one is answered but not kept.
        var generation: UInt64 = 0
    }

    private let state = Locked(State())
    private let maxAge: Duration
    private let retryDelay: Duration
    private let refreshes: DispatchQueue
    private let now: @Sendable () -> ContinuousClock.Instant

    /// - Parameters:
    ///   - maxAge: how long an entry is used before it is reloaded in the background.
    ///   - retryDelay: how long an old entry is used after a failed reload before the next attempt.
    ///   - now: the clock.
    init(
        maxAge: Duration = .seconds(30), retryDelay: Duration = .seconds(1),
        now: @escaping @Sendable () -> ContinuousClock.Instant = { ContinuousClock.now }
    ) {
        self.maxAge = maxAge
        self.retryDelay = retryDelay
        self.now = now
        refreshes = DispatchQueue(label: "actionhook.app-cache")
    }

    /// The principal for a key digest, loading it with `load` on a miss. Unknown keys are not
    /// cached, so a newly created key works at once; a key found revoked by a reload is forgotten.
    func principal(
        digest: [UInt8], load: @escaping @Sendable () throws -> IngestPrincipal?
    ) throws -> IngestPrincipal? {
        try value(for: digest, in: \.principals, load: load)
    }

    /// The app's rules and categories, loading them with `load` on a miss.
    func rules(appID: String, load: @escaping @Sendable () throws -> Rules) throws -> Rules {
        // A rule set always exists (an app without rules has an empty one).
        guard let rules = try value(for: appID, in: \.rules, load: load) else {
            preconditionFailure("a rules load always has a value")
        }
        return rules
    }

    /// Forgets everything about one app.
    func invalidate(appID: String) {
        state.withLock { state in
            state.generation &+= 1
            state.principals = state.principals.filter { $0.value.value.appID != appID }
            state.rules.removeValue(forKey: appID)
        }
    }

    /// Forgets everything.
    func invalidateAll() {
        state.withLock { state in
            state.generation &+= 1
            state.principals.removeAll()
            state.rules.removeAll()
        }
    }

    /// Waits until the reloads scheduled so far have finished (for tests).
    func waitForRefreshes() {
        refreshes.sync {}
    }

    private func value<Key: Hashable & Sendable, Value: Sendable>(
        for key: Key, in table: WritableKeyPath<State, [Key: Entry<Value>]> & Sendable,
        load: @escaping @Sendable () throws -> Value?
    ) throws -> Value? {
        let now = now()
        let (cached, generation, refresh) = state.withLock { state -> (Value?, UInt64, Bool) in
            guard var entry = state[keyPath: table][key] else { return (nil, state.generation, false) }
            let refresh = now >= entry.refreshAfter && !entry.refreshing
            if refresh {
                entry.refreshing = true
                state[keyPath: table][key] = entry
            }
            return (entry.value, state.generation, refresh)
        }
        if let cached {
            if refresh {
                refreshes.async { self.reload(key, in: table, generation: generation, load: load) }
            }
            return cached
        }
        let loaded = try load()
        store(loaded, for: key, in: table, ifStill: generation)
        return loaded
    }

    private func reload<Key: Hashable & Sendable, Value: Sendable>(
        _ key: Key, in table: WritableKeyPath<State, [Key: Entry<Value>]> & Sendable, generation: UInt64,
        load: @Sendable () throws -> Value?
    ) {
        do {
            store(try load(), for: key, in: table, ifStill: generation)
        } catch {
            // Keep answering from the old entry; try again after a pause.
            let retryAt = now() + retryDelay
            state.withLock { state in
                state[keyPath: table][key]?.refreshing = false
                if state.generation == generation { state[keyPath: table][key]?.refreshAfter = retryAt }
            }
        }
    }

    /// Keeps a loaded value (a value no longer there is forgotten), unless an invalidation came after
    /// its load began: the value may predate the change, so it is not kept and the next request loads
    /// again.
    private func store<Key: Hashable & Sendable, Value: Sendable>(
        _ value: Value?, for key: Key, in table: WritableKeyPath<State, [Key: Entry<Value>]> & Sendable,
        ifStill generation: UInt64
    ) {
        let refreshAfter = now() + maxAge
        state.withLock { state in
            guard state.generation == generation else {
                // An entry still here was not invalidated (or was loaded since): the next request
                // that finds it old reloads it.
                state[keyPath: table][key]?.refreshing = false
                return
            }
            state[keyPath: table][key] = value.map { Entry(value: $0, refreshAfter: refreshAfter) }
        }
    }
}
