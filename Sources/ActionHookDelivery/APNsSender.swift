import ActionHookCore
import AsyncHTTPClient
import Dispatch
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Synchronization

/// Sends pushes to APNs over HTTP/2: a few multiplexed connections per app and environment, each on its own
/// event loop, used in turn (``connections``), and APNs' answers mapped to retry decisions.
///
/// The provider token is one per signing key (team, key id and key), shared through
/// ``SharedProviderTokens`` (the database, so every instance sends the same token) and reused for 40
/// minutes. Each sender keeps the current token in memory, so a push costs no database round trip;
/// only a stale or refused token is looked up there, once per key at a time in this process. A token
/// APNs refuses as expired or invalid is replaced once (only while it is still the shared one) and the
/// push retried with the new one; `429 TooManyProviderTokenUpdates` is retried on the schedule.
public final class APNsSender: Sendable {
    /// Where to send.
    public struct Endpoints: Sendable {
        /// The production base URL.
        public var production: String
        /// The sandbox base URL.
        public var sandbox: String
        /// An extra trusted CA (PEM file), for a local stand-in in tests.
        public var caFile: String?

        /// Apple's endpoints, or one URL for both environments (`sandboxURL`, when given, for the sandbox).
        public init(overrideURL: String? = nil, sandboxURL: String? = nil, caFile: String? = nil) {
            production = overrideURL ?? "https://api.push.apple.com"
            sandbox = sandboxURL ?? overrideURL ?? "https://api.sandbox.push.apple.com"
            self.caFile = caFile
        }
    }

    /// Pushes whose payload is larger are refused before sending.
    public static let maxPayloadBytes = 4096

    let endpoints: Endpoints
    let clock: @Sendable () -> Int
    let sharedTokens: any SharedProviderTokens
    /// The HTTP/2 connections kept open to APNs per app and environment.
    public let connections: Int
    private let clients = Mutex([String: Connections]())
    private let tokens = Mutex(TokenCache())
    private let tokensIssued = Mutex(0)

    /// The connections per app and environment by default: one per event loop of NIO's shared group (as
    /// many as `NIOSingletons.groupLoopCountSuggestion`, one per core), at most four. A connection is carried
    /// by one event loop, whose thread does all of its TLS and HTTP/2 framing: over one connection the
    /// pushes a second stop where that thread does (`make bench-delivery`, docs/benchmarks.md), while more
    /// connections than loops would only share threads. Apple allows several connections and asks that they
    /// be kept open rather than opened per push; four carry the worker's default 256 pushes in flight at 64
    /// streams each, far below the 1,000 APNs allows, and each is one more TLS session for APNs to hold.
    public static let defaultConnections = min(4, NIOSingletons.groupLoopCountSuggestion)

    /// Creates a sender; `tokens` shares provider tokens (by default within this process only), `connections`
    /// is how many HTTP/2 connections it keeps per app and environment, `clock` gives the current time in
    /// whole seconds (tests move it).
    public init(
        endpoints: Endpoints, tokens: any SharedProviderTokens = LocalProviderTokens(),
        connections: Int = APNsSender.defaultConnections,
        clock: @escaping @Sendable () -> Int = { Int(Date().timeIntervalSince1970) }
    ) {
        self.endpoints = endpoints
        sharedTokens = tokens
        self.connections = max(1, connections)
        self.clock = clock
    }

    /// How many provider tokens this sender has signed (each is shared and reused until it is stale).
    public var providerTokensIssued: Int { tokensIssued.withLock { $0 } }

    /// Sends one push. `payload` is the follow-up's rendered APNs payload: `deviceToken`,
    /// `pushType`, optional `priority`, `expiration`, `collapseId`, and `payload` (the aps JSON).
    /// `apns-priority` is always sent: the given priority, else 10 (5 for a background push).
    public func send(id: String, appID: String, credentials: APNsCredentials, payload: JSONValue) async -> SendOutcome {
        guard let deviceToken = payload.value(atPath: "deviceToken")?.stringValue, !deviceToken.isEmpty,
            deviceToken.utf8.allSatisfy({ $0 < 128 && Character(Unicode.Scalar($0)).isHexDigit })
        else { return .deadDevice(httpStatus: 400, reason: "BadDeviceToken") }
        let body = (payload.value(atPath: "payload") ?? .object([:])).jsonBytes
        guard body.count <= Self.maxPayloadBytes else {
            return .permanent(httpStatus: nil, errorClass: "PayloadTooLarge")
        }
        let pushType = payload.value(atPath: "pushType")?.stringValue ?? "alert"
        let priority =
            payload.value(atPath: "priority")?.intValue ?? FollowUpTemplate.defaultPriority(pushType: pushType)
        // A registered device is pushed in its own environment; any other in the app's.
        let environment = payload.value(atPath: "environment")?.stringValue ?? credentials.environment
        let base = environment == "sandbox" ? endpoints.sandbox : endpoints.production

        var request = HTTPClientRequest(url: base + "/3/device/" + deviceToken)
        request.method = .POST
        request.headers.add(name: "apns-topic", value: topic(credentials.topic, pushType: pushType))
        request.headers.add(name: "apns-push-type", value: pushType)
        request.headers.add(name: "apns-priority", value: String(priority))
        request.headers.add(name: "apns-id", value: id)
        if let expiration = payload.value(atPath: "expiration")?.intValue {
            request.headers.add(name: "apns-expiration", value: String(expiration))
        }
        if let collapseId = payload.value(atPath: "collapseId")?.stringValue {
            request.headers.add(name: "apns-collapse-id", value: collapseId)
        }
        request.body = .bytes(ByteBuffer(bytes: body))

        let client = self.client(appID: appID, environment: environment)
        // The token the server refused as expired or invalid; a second refusal, of a new one, is final.
        var refused: String?
        while true {
            let token: APNsProviderToken
            do {
                token = try await providerToken(credentials: credentials, replacing: refused)
            } catch is InvalidPrivateKey {
                return .permanent(httpStatus: nil, errorClass: "invalid_private_key")
            } catch is ProviderTokenUnavailable {
                return .retryable(httpStatus: nil, errorClass: "provider_token_unavailable")
            } catch StoreError.unavailable {
                // The shared token could not be read or written: the database is away. Nothing was sent, so
                // this is no attempt of the push (the worker holds the claim until the database answers).
                return .notSent
            } catch {
                // The database refused the token's statement: a failure of this attempt, tried again later.
                return .retryable(httpStatus: nil, errorClass: "database_error")
            }
            request.headers.replaceOrAdd(name: "authorization", value: "bearer " + token.jwt)
            do {
                let response = try await client.execute(request, timeout: .seconds(15))
                let status = Int(response.status.code)
                let answer = try? await response.body.collect(upTo: 16 * 1024)
                let reason =
                    answer.flatMap { buffer -> String? in
                        let bytes = Array(buffer.readableBytesView)
                        return (try? JSONParser.parse(bytes))?.value(atPath: "reason")?.stringValue
                    } ?? "http_\(status)"
                switch status {
                case 200:
                    return .delivered(httpStatus: status)
                case 410:
                    return .deadDevice(httpStatus: status, reason: reason)
                case 400 where reason == "BadDeviceToken":
                    return .deadDevice(httpStatus: status, reason: reason)
                case _ where reason == "TooManyProviderTokenUpdates":
                    // A new token for the key came too soon after the last (APNs documents it as 429, and
                    // takes a new one 20 minutes after the last): retried, whatever the status.
                    return .retryable(httpStatus: status, errorClass: reason)
                case 403 where (reason == "ExpiredProviderToken" || reason == "InvalidProviderToken") && refused == nil:
                    refused = token.jwt
                    continue
                case 429, 500..<600:
                    return .retryable(httpStatus: status, errorClass: reason)
                default:
                    return .permanent(httpStatus: status, errorClass: reason)
                }
            } catch {
                return .retryable(httpStatus: nil, errorClass: "connection_error")
            }
        }
    }

    /// The `apns-topic` for a push type: some types need a suffix on the bundle id.
    func topic(_ bundleID: String, pushType: String) -> String {
        switch pushType {
        case "voip": bundleID + ".voip"
        case "complication": bundleID + ".complication"
        case "fileprovider": bundleID + ".pushkit.fileprovider"
        case "location": bundleID + ".location-query"
        case "liveactivity": bundleID + ".push-type.liveactivity"
        case "pushtotalk": bundleID + ".voip-ptt"
        default: bundleID
        }
    }

    /// The provider token for `credentials`: the one in memory while it is fresh and not `refused` (the
    /// JWT APNs just refused), else the shared one (see ``SharedProviderTokens``), looked up once per key
    /// at a time: pushes that find the token stale or refused together wait for one lookup.
    func providerToken(credentials: APNsCredentials, replacing refused: String? = nil) async throws
        -> APNsProviderToken
    {
        let signer = Signer(teamId: credentials.teamId, keyId: credentials.keyId, privateKey: credentials.privateKey)
        // A lookup joined from another push asked only for a fresh token, and may bring back the one this
        // push saw refused: the next round starts a lookup that replaces it. A third is never needed.
        for _ in 0..<3 {
            let now = clock()
            let next = tokens.withLock { cache -> Next in
                if let cached = cache.tokens[signer], cached.jwt != refused, !cached.isStale(at: now) {
                    return .ready(cached)
                }
                if let running = cache.lookups[signer] { return .waitFor(running) }
                // On Dispatch threads, as the worker's sends: the cooperative pool may be held up by
                // blocking callers elsewhere in the process.
                let lookup = Task(executorPreference: DeliveryExecutor.shared) {
                    try await self.lookUp(signer, replacing: refused)
                }
                cache.lookups[signer] = lookup
                return .waitFor(lookup)
            }
            switch next {
            case .ready(let token):
                return token
            case .waitFor(let lookup):
                let token = try await lookup.value
                if token.jwt != refused && !token.isStale(at: clock()) { return token }
            }
        }
        throw ProviderTokenUnavailable()
    }

    /// Asks the shared tokens for `signer`'s token on a Dispatch thread (the call may block on the
    /// database), and keeps the answer in memory.
    private func lookUp(_ signer: Signer, replacing refused: String?) async throws -> APNsProviderToken {
        do {
            let key: APNsSigningKey
            do {
                key = try APNsSigningKey(teamId: signer.teamId, keyId: signer.keyId, privateKey: signer.privateKey)
            } catch {
                throw InvalidPrivateKey()
            }
            let now = clock()
            let shared = sharedTokens
            let (token, signed) = try await withCheckedThrowingContinuation { continuation in
                Self.lookups.async {
                    continuation.resume(with: Result { try shared.token(for: key, at: now, refused: refused) })
                }
            }
            if signed { tokensIssued.withLock { $0 += 1 } }
            tokens.withLock { cache in
                cache.tokens[signer] = token
                cache.lookups[signer] = nil
            }
            return token
        } catch {
            tokens.withLock { $0.lookups[signer] = nil }
            throw error
        }
    }

    /// Where lookups of shared tokens block: Dispatch threads, never the cooperative pool or an event loop.
    private static let lookups = DispatchQueue(label: "actionhook.apns-tokens", attributes: .concurrent)

    /// The parts of an app's credentials that sign its provider token, as the key in memory: cheap to
    /// hash on every push, unlike ``APNsSigningKey``, which parses the private key.
    struct Signer: Hashable, Sendable, CustomStringConvertible {
        var teamId: String
        var keyId: String
        var privateKey: String

        /// The team and key id only, never the key.
        var description: String { "Signer(team: \(teamId), key: \(keyId))" }
    }

    /// A token from memory, or the lookup to wait for.
    enum Next {
        case ready(APNsProviderToken)
        case waitFor(Task<APNsProviderToken, any Error>)
    }

    /// The tokens in memory, and the lookups under way, per signer.
    struct TokenCache {
        var tokens: [Signer: APNsProviderToken] = [:]
        var lookups: [Signer: Task<APNsProviderToken, any Error>] = [:]
    }

    /// The app's private key is not a P-256 PEM key: no token can be signed.
    struct InvalidPrivateKey: Error {}

    /// No fresh token could be had: the lookups kept bringing back a refused or stale one.
    struct ProviderTokenUnavailable: Error {}

    /// An app's connections in one environment: an HTTP client each, pinned to its own event loop (so that
    /// each keeps one HTTP/2 connection on its own thread), taken in turn.
    final class Connections: Sendable {
        let clients: [HTTPClient]
        private let turn = Atomic<Int>(0)

        init(clients: [HTTPClient]) { self.clients = clients }

        /// The next connection's client.
        func next() -> HTTPClient {
            clients[turn.wrappingAdd(1, ordering: .relaxed).oldValue % clients.count]
        }
    }

    /// The next connection's client for an app in an environment, its connections made on first use. Making
    /// an `HTTPClient` opens nothing (a connection is opened by its first request), so they are made under the
    /// lock: two first pushes never make two sets.
    func client(appID: String, environment: String) -> HTTPClient {
        let key = UnitSeparated.join(appID, environment)
        return clients.withLock { clients in
            if let existing = clients[key] { return existing }
            let created = makeConnections()
            clients[key] = created
            return created
        }.next()
    }

    /// ``connections`` HTTP clients, each pinned to its own event loop of NIO's shared group (in turn, when
    /// there are more than loops).
    private func makeConnections() -> Connections {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile = endpoints.caFile {
            tls.additionalTrustRoots = [.file(caFile)]
        }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(10), read: .seconds(15)))
        configuration.httpVersion = .automatic
        let loops = Array(MultiThreadedEventLoopGroup.singleton.makeIterator())
        return Connections(
            clients: (0..<connections).map { index in
                HTTPClient(eventLoopGroup: loops[index % loops.count], configuration: configuration)
            })
    }

    /// Closes every connection.
    public func shutdown() async {
        // Failing means already shut down (or its event loops are gone): nothing is left to release.
        for client in takeClients() { try? await client.shutdown() }
    }

    /// Closes every connection, blocking the calling thread (never call it on an event loop or from async
    /// code); it needs no thread of the Swift concurrency pool.
    public func syncShutdown() {
        for client in takeClients() { try? client.syncShutdown() }
    }

    /// Every client, each handed out once: later calls get only clients made since.
    private func takeClients() -> [HTTPClient] {
        clients.withLock { clients in
            defer { clients.removeAll() }
            return clients.values.flatMap(\.clients)
        }
    }
}
