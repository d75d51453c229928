import ActionHookCore
import ActionHookStore
import Foundation
import Locks

/// Per-app data the ingest path reads on every request: who a key belongs to, and the app's
/// rules and categories. Entries are dropped when any instance announces a change (NOTIFY), when
/// the change listener reconnects (it may have missed announcements), and after a short age as a
/// last resort.
final class AppCache: Sendable {
    struct Rules: Sendable {
        var rules: [Rule]
        var categories: [String: NotificationCategory]
    }

    private struct Entry<Value: Sendable>: Sendable {
        var value: Value
        var loadedAt: ContinuousClock.Instant
    }

    private let principals = Locked([[UInt8]: Entry<IngestPrincipal>]())
    private let rules = Locked([String: Entry<Rules>]())
    private let maxAge: Duration

    init(maxAge: Duration = .seconds(30)) {
        self.maxAge = maxAge
    }

    /// The principal for a key digest, loading it with `load` on a miss. Unknown keys are not
    /// cached, so a newly created key works at once.
    func principal(digest: [UInt8], load: () throws -> IngestPrincipal?) rethrows -> IngestPrincipal? {
        let now = ContinuousClock.now
        if let entry = principals.withLock({ $0[digest] }), now - entry.loadedAt < maxAge { return entry.value }
        guard let principal = try load() else { return nil }
        principals.withLock { $0[digest] = Entry(value: principal, loadedAt: now) }
        return principal
    }

    /// The app's rules and categories, loading them with `load` on a miss.
    func rules(appID: String, load: () throws -> Rules) rethrows -> Rules {
        let now = ContinuousClock.now
        if let entry = rules.withLock({ $0[appID] }), now - entry.loadedAt < maxAge { return entry.value }
        let loaded = try load()
        rules.withLock { $0[appID] = Entry(value: loaded, loadedAt: now) }
        return loaded
    }

    /// Forgets everything about one app.
    func invalidate(appID: String) {
        principals.withLock { $0 = $0.filter { $0.value.value.appID != appID } }
        _ = rules.withLock { $0.removeValue(forKey: appID) }
    }

    /// Forgets everything.
    func invalidateAll() {
        principals.withLock { $0.removeAll() }
        rules.withLock { $0.removeAll() }
    }
}
