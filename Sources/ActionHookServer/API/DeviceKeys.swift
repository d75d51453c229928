import ActionHookCore
import ActionHookStore
import Foundation
import Locks

/// The devices' reply-signing keys, as signed replies are checked on the request threads: loaded from the
/// store on a miss (one indexed read per device), kept for `maxAge`, and forgotten at once when this
/// instance changes a device's keys and when any instance announces a change (``Channels/deviceKeys``, and
/// everything when the listener reconnects).
final class DeviceKeys: Sendable {
    private struct Entry: Sendable {
        var keys: [String: DevicePublicKey]
        var loadedAt: ContinuousClock.Instant
    }

    private struct Device: Hashable, Sendable {
        var appID: String
        var token: String
    }

    private struct State: Sendable {
        var entries: [Device: Entry] = [:]
        // Bumped by every invalidation: a load that began before one is used once but not kept.
        var generation: UInt64 = 0
    }

    private let state = Locked(State())
    private let maxAge: Duration
    private let maxEntries: Int

    /// - Parameters:
    ///   - maxAge: how long a device's keys are used before they are read again: the bound on a change that
    ///     no announcement reached (the listener down).
    ///   - maxEntries: the devices kept; past it the cache starts again empty.
    init(maxAge: Duration = .seconds(30), maxEntries: Int = 100_000) {
        self.maxAge = maxAge
        self.maxEntries = maxEntries
    }

    /// The keys that may verify a reply from `token` of `appID` now, loading them with `load` when they are
    /// not known or older than `maxAge`.
    func keys(
        appID: String, token: String, load: () throws -> [String: DevicePublicKey]
    ) throws -> [String: DevicePublicKey] {
        let key = Device(appID: appID, token: token)
        let now = ContinuousClock.now
        let (cached, generation) = state.withLock { state -> ([String: DevicePublicKey]?, UInt64) in
            guard let entry = state.entries[key], now - entry.loadedAt < maxAge else { return (nil, state.generation) }
            return (entry.keys, state.generation)
        }
        if let cached { return cached }
        let loaded = try load()
        state.withLock { state in
            guard state.generation == generation else { return }
            if state.entries.count >= maxEntries { state.entries.removeAll(keepingCapacity: true) }
            state.entries[key] = Entry(keys: loaded, loadedAt: now)
        }
        return loaded
    }

    /// Forgets one device's keys, or all of an app's when `token` is nil.
    func invalidate(appID: String, token: String?) {
        state.withLock { state in
            state.generation &+= 1
            if let token {
                state.entries.removeValue(forKey: Device(appID: appID, token: token))
            } else {
                state.entries = state.entries.filter { $0.key.appID != appID }
            }
        }
    }

    /// Forgets every device's keys (what a `Channels.deviceKeys` payload says, or everything).
    func invalidate(announcement payload: String?) {
        guard let payload else {
            state.withLock { state in
                state.generation &+= 1
                state.entries.removeAll()
            }
            return
        }
        let parts = UnitSeparated.split(payload)
        invalidate(appID: parts[0], token: parts.count > 1 ? parts[1] : nil)
    }
}
