import ActionHookCore
import AsyncHTTPClient
import Foundation
import NIOCore
import NIOHTTP1

/// Sends Standard Webhooks: signed, redirects never followed, time and response size bounded.
public final class WebhookSender: Sendable {
    let client: HTTPClient
    let timeout: TimeAmount
    let allowPrivate: Bool

    /// The most response bytes read (the body is otherwise ignored).
    static let maxResponseBytes = 64 * 1024

    /// Creates a sender with its own connection pool, up to `connectionsPerHost` connections to one
    /// host: the worker's concurrency, so that no delivery waits for another's connection. (With
    /// fewer, deliveries to a slow endpoint queued for a connection until the connect timeout, and
    /// failed as attempts though nothing had been sent.)
    public init(timeoutSeconds: Int, allowPrivate: Bool, connectionsPerHost: Int = 256) {
        var configuration = HTTPClient.Configuration(
            redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(Int64(min(timeoutSeconds, 5))), read: .seconds(Int64(timeoutSeconds))))
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: connectionsPerHost)
        configuration.decompression = .disabled
        client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        timeout = .seconds(Int64(timeoutSeconds))
        self.allowPrivate = allowPrivate
    }

    /// Sends `body` to `url` signed with `secret`; `id` is the stable `webhook-id`.
    public func send(id: String, url: String, body: [UInt8], secret: String) async -> SendOutcome {
        if let refusal = await WebhookTarget.check(url, allowPrivate: allowPrivate) {
            switch refusal {
            case .unresolvable: return .retryable(httpStatus: nil, errorClass: "dns_error")
            case .malformed: return .permanent(httpStatus: nil, errorClass: "invalid_url")
            case .forbiddenAddress: return .permanent(httpStatus: nil, errorClass: "forbidden_address")
            }
        }
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
    }
}
