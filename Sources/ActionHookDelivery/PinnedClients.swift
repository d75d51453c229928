import AsyncHTTPClient
import Locks

/// HTTP clients that each connect one host name to one checked address, kept for the deliveries that follow.
///
/// AsyncHTTPClient connects a host to an address of our choosing (keeping the `Host` header, the TLS server
/// name and certificate checks for the host) only through `dnsOverride`, a setting of the whole client: so
/// each (host, address) gets a client of its own, with its own connection pool. The least recently used ones
/// beyond `capacity` are shut down once no delivery uses them.
final class PinnedClients: Sendable {
    struct Key: Hashable, Sendable {
        var host: String
        var address: String
    }

    private struct Entry {
        let client: HTTPClient
        var users: Int
        var lastUse: UInt64
    }

    private struct State {
        var entries: [Key: Entry] = [:]
        var uses: UInt64 = 0
        var closed = false
    }

    private let state = Locked(State())
    private let configuration: HTTPClient.Configuration
    private let capacity: Int

    /// Clients made with `configuration` (its `dnsOverride` is replaced), at most `capacity` kept idle.
    init(configuration: HTTPClient.Configuration, capacity: Int) {
        self.configuration = configuration
        self.capacity = capacity
    }

    /// Runs `body` with the client for `key`; `nil` once ``shutdown()`` was called.
    func withClient<Result: Sendable>(_ key: Key, _ body: (HTTPClient) async -> Result) async -> Result? {
        let client = state.withLock { state -> HTTPClient? in
            guard !state.closed else { return nil }
            state.uses += 1
            if var entry = state.entries[key] {
                entry.users += 1
                entry.lastUse = state.uses
                state.entries[key] = entry
                return entry.client
            }
            var pinned = configuration
            pinned.dnsOverride = [key.host: key.address]
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: pinned)
            state.entries[key] = Entry(client: client, users: 1, lastUse: state.uses)
            return client
        }
        guard let client else { return nil }
        let result = await body(client)
        let evicted = state.withLock { state -> [HTTPClient] in
            state.entries[key]?.users -= 1
            guard state.entries.count > capacity else { return [] }
            let idle = state.entries.filter { $0.value.users == 0 }.sorted { $0.value.lastUse < $1.value.lastUse }
            let excess = idle.prefix(state.entries.count - capacity)
            for (evictedKey, _) in excess { state.entries[evictedKey] = nil }
            return excess.map(\.value.client)
        }
        for client in evicted {
            // It fails only when already shut down: nothing is left to release.
            try? await client.shutdown()
        }
        return result
    }

    /// How many clients are kept.
    var count: Int { state.withLock { $0.entries.count } }

    /// Shuts every client down, blocking the calling thread (see ``WebhookSender/syncShutdown()``); later
    /// deliveries get no client.
    func shutdown() {
        let clients = state.withLock { state -> [HTTPClient] in
            state.closed = true
            defer { state.entries = [:] }
            return state.entries.values.map(\.client)
        }
        for client in clients {
            // It fails only when already shut down: nothing is left to release.
            try? client.syncShutdown()
        }
    }
}
