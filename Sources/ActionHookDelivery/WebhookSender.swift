import ActionHookCore
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// Sends Standard Webhooks: signed, redirects never followed, time and response size bounded.
public final class WebhookSender: Sendable {
    /// The client for targets that need no pinned address: IP literals, and any target while private ones are
    /// allowed.
    let client: HTTPClient
    /// The clients that connect a host name to the address its check resolved.
    let pinned: PinnedClients
    let timeout: TimeAmount
    let allowPrivate: Bool
    let resolver: HostResolver
    let isPublic: @Sendable (AddressPolicy.Address) -> Bool

    /// The most response bytes read (the body is otherwise ignored).
    static let maxResponseBytes = 64 * 1024

    /// Creates a sender with its own connection pool, up to `connectionsPerHost` connections to one
    /// host: the worker's concurrency, so that no delivery waits for another's connection. (With
    /// fewer, deliveries to a slow endpoint queued for a connection until the connect timeout, and
    /// failed as attempts though nothing had been sent.)
    public convenience init(timeoutSeconds: Int, allowPrivate: Bool, connectionsPerHost: Int = 256) {
        self.init(
            timeoutSeconds: timeoutSeconds, allowPrivate: allowPrivate, connectionsPerHost: connectionsPerHost,
            resolver: .system, isPublic: AddressPolicy.isPublic, pinnedClients: 64)
    }

    /// A sender whose host names are looked up by `resolver` and whose resolved addresses count as public when
    /// `isPublic` says so (tests stand a listener on this machine in for a public host), keeping up to
    /// `pinnedClients` idle clients for names.
    init(
        timeoutSeconds: Int, allowPrivate: Bool, connectionsPerHost: Int, resolver: HostResolver,
        isPublic: @escaping @Sendable (AddressPolicy.Address) -> Bool, pinnedClients: Int
    ) {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(Int64(min(timeoutSeconds, 5))), read: .seconds(Int64(timeoutSeconds))))
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connectionsPerHost)
        configuration.decompression = .disabled
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        pinned = PinnedClients(configuration: configuration, capacity: pinnedClients)
        timeout = .seconds(Int64(timeoutSeconds))
        self.allowPrivate = allowPrivate
        self.resolver = resolver
        self.isPublic = isPublic
    }

    /// Sends `body` to `url` signed with `secret`; `id` is the stable `webhook-id`.
    public func send(id: String, url: String, body: [UInt8], secret: String) async -> SendOutcome {
        let target: WebhookTarget
        switch await WebhookTarget.check(url, allowPrivate: allowPrivate, resolver: resolver, isPublic: isPublic) {
        case .success(let checked): target = checked
        case .failure(.unresolvable): return .retryable(httpStatus: nil, errorClass: "dns_error")
        case .failure(.malformed): return .permanent(httpStatus: nil, errorClass: "invalid_url")
        case .failure(.forbiddenAddress): return .permanent(httpStatus: nil, errorClass: "forbidden_address")
        }
        guard let address = target.pinnedAddress else {
            return await send(id: id, url: url, body: body, secret: secret, client: client)
        }
        // The connection goes to the address that was checked; a second lookup could answer another one.
        let outcome = await pinned.withClient(PinnedClients.Key(host: target.host, address: address)) {
            await send(id: id, url: url, body: body, secret: secret, client: $0)
        }
        return outcome ?? .retryable(httpStatus: nil, errorClass: "connection_error")
    }

    func send(id: String, url: String, body: [UInt8], secret: String, client: HTTPClient) async -> SendOutcome {
        let timestamp = Int(Date().timeIntervalSince1970)
        guard let signature = WebhookSignature.sign(id: id, timestamp: timestamp, body: body, secret: secret) else {
            return .permanent(httpStatus: nil, errorClass: "invalid_secret")
        }
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "ActionHook")
        request.headers.add(name: "webhook-id", value: id)
        request.headers.add(name: "webhook-timestamp", value: String(timestamp))
        request.headers.add(name: "webhook-signature", value: signature)
        request.body = .bytes(ByteBuffer(bytes: body))
        do {
            let response = try await client.execute(request, timeout: timeout)
            // The answer's body is read only to free the connection, and only so far.
            _ = try? await response.body.collect(upTo: Self.maxResponseBytes)
            let status = Int(response.status.code)
            switch status {
            case 200..<300: return .delivered(httpStatus: status)
            case 410: return .endpointGone
            case 300..<400: return .retryable(httpStatus: status, errorClass: "redirect")
            default: return .retryable(httpStatus: status, errorClass: "http_\(status)")
            }
        } catch let error as HTTPClientError
            where error == .deadlineExceeded || error == .readTimeout
            || error == .connectTimeout
        {
            return .retryable(httpStatus: nil, errorClass: "timeout")
        } catch {
            return .retryable(httpStatus: nil, errorClass: "connection_error")
        }
    }

    /// Closes the connection pool, blocking the calling thread (never call it on an event loop or from
    /// async code). It needs no thread of the Swift concurrency pool, so a synchronous `stop()` called from
    /// that pool cannot deadlock waiting for it.
    public func syncShutdown() {
        // It fails only when already shut down (or its event loops are gone): nothing is left to release.
        try? client.syncShutdown()
        pinned.shutdown()
    }
}
