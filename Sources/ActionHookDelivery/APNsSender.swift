import ActionHookCore
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import Synchronization

/// Sends pushes to APNs over HTTP/2: one multiplexed connection per app and environment, a
/// provider token reused for 40 minutes per app, and APNs' answers mapped to retry decisions.
public final class APNsSender: Sendable {
    /// Where to send.
    public struct Endpoints: Sendable {
        /// The production base URL.
        public var production: String
        /// The sandbox base URL.
        public var sandbox: String
        /// An extra trusted CA (PEM file), for a local stand-in in tests.
        public var caFile: String?

        /// Apple's endpoints, or one URL for both environments.
        public init(overrideURL: String? = nil, caFile: String? = nil) {
            production = overrideURL ?? "https://api.push.apple.com"
            sandbox = overrideURL ?? "https://api.sandbox.push.apple.com"
            self.caFile = caFile
        }
    }

    /// Pushes whose payload is larger are refused before sending.
    public static let maxPayloadBytes = 4096

    let endpoints: Endpoints
    let clock: @Sendable () -> Int
    private let clients = Mutex([String: HTTPClient]())
    private let tokens = Mutex([String: (credentials: APNsCredentials, token: APNsProviderToken)]())
    private let tokensIssued = Mutex(0)

    /// Creates a sender; `clock` gives the current time in whole seconds (tests move it).
    public init(endpoints: Endpoints, clock: @escaping @Sendable () -> Int = { Int(Date().timeIntervalSince1970) }) {
        self.endpoints = endpoints
        self.clock = clock
    }

    /// How many provider tokens have been signed (each is reused until it is stale).
    public var providerTokensIssued: Int { tokensIssued.withLock { $0 } }

    /// Sends one push. `payload` is the follow-up's rendered APNs payload: `deviceToken`,
    /// `pushType`, optional `priority`, `expiration`, `collapseId`, and `payload` (the aps JSON).
    public func send(id: String, appID: String, credentials: APNsCredentials, payload: JSONValue) async -> SendOutcome {
        guard let deviceToken = payload.value(atPath: "deviceToken")?.stringValue, !deviceToken.isEmpty,
            deviceToken.utf8.allSatisfy({ $0 < 128 && Character(Unicode.Scalar($0)).isHexDigit })
        else { return .deadDevice(httpStatus: 400, reason: "BadDeviceToken") }
        let body = (payload.value(atPath: "payload") ?? .object([:])).jsonBytes
        guard body.count <= Self.maxPayloadBytes else {
            return .permanent(httpStatus: nil, errorClass: "PayloadTooLarge")
        }
        let pushType = payload.value(atPath: "pushType")?.stringValue ?? "alert"
        let priority = payload.value(atPath: "priority")?.intValue ?? (pushType == "background" ? 5 : 10)
        let base = credentials.environment == "sandbox" ? endpoints.sandbox : endpoints.production

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

        let client: HTTPClient
        do {
            client = try self.client(appID: appID, environment: credentials.environment)
        } catch {
            return .permanent(httpStatus: nil, errorClass: "tls_configuration")
        }
        // The token the server refused as expired; a second refusal of a fresh one is final.
        var rejected: String?
        while true {
            let token: APNsProviderToken
            do {
                token = try providerToken(appID: appID, credentials: credentials, replacing: rejected)
            } catch {
                return .permanent(httpStatus: nil, errorClass: "invalid_private_key")
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
                case 403 where reason == "ExpiredProviderToken" && rejected == nil:
                    rejected = token.jwt
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

    /// The app's provider token: reused until stale, or replaced when the credentials changed or when
    /// APNs refused it as expired (`rejected` is that token's JWT; if another push already replaced it,
    /// the replacement is used). Checked and replaced under one lock, so pushes sent at once sign one
    /// token between them: APNs answers TooManyProviderTokenUpdates to a second within 20 minutes.
    func providerToken(appID: String, credentials: APNsCredentials, replacing rejected: String? = nil) throws
        -> APNsProviderToken
    {
        let now = clock()
        let (token, issued) = try tokens.withLock { tokens throws -> (APNsProviderToken, Bool) in
            if let cached = tokens[appID], cached.credentials == credentials, !cached.token.isStale(at: now),
                cached.token.jwt != rejected
            {
                return (cached.token, false)
            }
            let token = try APNsProviderToken.make(credentials: credentials, issuedAt: now)
            tokens[appID] = (credentials, token)
            return (token, true)
        }
        if issued { tokensIssued.withLock { $0 += 1 } }
        return token
    }

    func client(appID: String, environment: String) throws -> HTTPClient {
        let key = appID + "\u{1F}" + environment
        if let existing = clients.withLock({ $0[key] }) { return existing }
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile = endpoints.caFile {
            tls.additionalTrustRoots = [.file(caFile)]
        }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(10), read: .seconds(15)))
        configuration.httpVersion = .automatic
        let created = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        let (client, extra) = clients.withLock { clients -> (HTTPClient, HTTPClient?) in
            if let raced = clients[key] { return (raced, created) }
            clients[key] = created
            return (created, nil)
        }
        if let extra { try? extra.syncShutdown() }
        return client
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
            return Array(clients.values)
        }
    }
}
