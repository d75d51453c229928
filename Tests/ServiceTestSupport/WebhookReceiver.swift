import ActionHookServer
import Crypto
import Foundation
import Logging
import MicroHTTPD
import Synchronization
import TestSupport

/// One request a ``WebhookReceiver`` saw.
package struct ReceivedRequest: Sendable {
    /// Position among every request the receiver saw, from 0.
    package let index: Int
    /// Which of the receiver's listeners took it.
    package let listener: Int
    package let method: String
    package let path: String
    package let headers: HTTPHeaders
    package let body: [UInt8]
    /// When it arrived (this process's wall clock).
    package let receivedAt: Date

    package var webhookID: String? { headers["webhook-id"] }
    package var timestamp: Int? { headers["webhook-timestamp"].flatMap { Int($0) } }
    package var bodyText: String { String(decoding: body, as: UTF8.self) }
    package var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] }
}

/// How a ``WebhookReceiver`` answers one call.
package struct ReceiverReply: Sendable {
    package var status: Int = 200
    package var headers: [(String, String)] = []
    package var body: [UInt8] = []
    /// Answer only after this long.
    package var delay: Duration = .zero
    /// Keep the request open until ``WebhookReceiver/release(_:with:)``.
    package var hold = false

    package init(
        status: Int = 200, headers: [(String, String)] = [], body: [UInt8] = [], delay: Duration = .zero,
        hold: Bool = false
    ) {
        self.status = status
        self.headers = headers
        self.body = body
        self.delay = delay
        self.hold = hold
    }

    package static func status(_ status: Int) -> ReceiverReply { ReceiverReply(status: status) }
    package static let ok = ReceiverReply(status: 200)
    package static let held = ReceiverReply(hold: true)
}

/// A webhook receiver for tests: MicroHTTPD on 127.0.0.1, port 0 (one or more listeners sharing
/// one record), recording every request and answering as programmed. Signatures are checked with
/// swift-crypto directly, independently of ActionHook's own signing code.
package final class WebhookReceiver: Sendable {
    private struct State {
        var requests: [ReceivedRequest] = []
        /// Statuses consumed one per call before `responder` is asked.
        var script: [ReceiverReply] = []
        var responder: @Sendable (ReceivedRequest) -> ReceiverReply = { _ in .ok }
        var afterAnswer: (@Sendable (ReceivedRequest, ReceiverReply) -> Void)?
        var held: [(request: ReceivedRequest, respond: @Sendable (HTTPResponse) -> Void)] = []
    }

    private final class Shared: Sendable {
        let mutex = Mutex(State())
    }

    private let shared = Shared()
    private let servers: [HTTPServer]

    /// Starts `listeners` servers (each its own port: webhook senders pool connections per host
    /// and port, so several listeners let more deliveries be in flight at once), on `host` and `port`
    /// (0: a free one; another number suits one listener only).
    package init(listeners: Int = 1, threads: Int = 4, host: String = "127.0.0.1", port: Int = 0) throws {
        let shared = self.shared
        var servers: [HTTPServer] = []
        for listener in 0..<listeners {
            var router = Router()
            let handler = HTTPHandler.deferred { request, respond in
                Self.handle(request, listener: listener, shared: shared, respond: respond)
            }
            for pattern in ["/", "/{a}", "/{a}/{b}", "/{a}/{b}/{c}", "/{a}/{b}/{c}/{d}"] {
                router.add(Route(.post, pattern, bodyLimit: 4 << 20, handler: handler))
            }
            let server = HTTPServer(
                configuration: HTTPServerConfiguration(
                    host: host, port: port, threads: threads, connectionTimeoutSeconds: 120,
                    perIPConnectionLimit: 0, defaultBodyLimit: 4 << 20),
                router: router, logger: Logger(label: "webhook-receiver"))
            try server.start()
            servers.append(server)
        }
        self.servers = servers
    }

    deinit {
        stop()
    }

    /// Answers every held request with 503 and stops listening.
    package func stop() {
        release(nil, with: .status(503))
        for server in servers { server.stop(gracePeriod: .seconds(1)) }
    }

    private static func handle(
        _ request: HTTPRequest, listener: Int, shared: Shared,
        respond: @escaping @Sendable (HTTPResponse) -> Void
    ) {
        let (received, reply, after) = shared.mutex.withLock { state in
            let received = ReceivedRequest(
                index: state.requests.count, listener: listener, method: request.method.rawValue, path: request.path,
                headers: request.headers, body: request.body, receivedAt: Date())
            state.requests.append(received)
            let reply = state.script.isEmpty ? state.responder(received) : state.script.removeFirst()
            if reply.hold { state.held.append((received, respond)) }
            return (received, reply, state.afterAnswer)
        }
        if reply.hold { return }
        let answer = { @Sendable in
            respond(Self.response(reply))
            after?(received, reply)
        }
        if reply.delay > .zero {
            let seconds = Double(reply.delay.components.seconds) + Double(reply.delay.components.attoseconds) / 1e18
            DispatchQueue.global().asyncAfter(deadline: .now() + seconds, execute: answer)
        } else {
            answer()
        }
    }

    private static func response(_ reply: ReceiverReply) -> HTTPResponse {
        var headers = HTTPHeaders()
        for (name, value) in reply.headers { headers.add(name, value) }
        return HTTPResponse(status: reply.status, headers: headers, body: reply.body)
    }

    // MARK: - Programming

    /// The port of listener `listener`.
    package func port(_ listener: Int = 0) -> Int { servers[listener].port }

    /// `http://127.0.0.1:<port>/<path>` on a listener.
    package func url(_ path: String = "/hook", listener: Int = 0) -> String {
        "http://127.0.0.1:\(port(listener))" + (path.hasPrefix("/") ? path : "/" + path)
    }

    /// Answers the next calls with these replies, in order, before the responder is asked again.
    package func script(_ replies: [ReceiverReply]) {
        shared.mutex.withLock { $0.script.append(contentsOf: replies) }
    }

    /// Answers the next calls with these statuses, in order.
    package func script(statuses: [Int]) {
        script(statuses.map(ReceiverReply.status))
    }

    /// Decides the answer of every call not covered by a script.
    package func respond(with responder: @escaping @Sendable (ReceivedRequest) -> ReceiverReply) {
        shared.mutex.withLock { $0.responder = responder }
    }

    /// Runs after each answer is handed to the server (not for held requests until released).
    package func afterAnswer(_ hook: (@Sendable (ReceivedRequest, ReceiverReply) -> Void)?) {
        shared.mutex.withLock { $0.afterAnswer = hook }
    }

    /// Answers up to `count` held requests (all when `nil`), oldest first; returns how many.
    @discardableResult
    package func release(_ count: Int?, with reply: ReceiverReply = .ok) -> Int {
        let released = shared.mutex.withLock {
            state -> [(request: ReceivedRequest, respond: @Sendable (HTTPResponse) -> Void)] in
            let n = min(count ?? state.held.count, state.held.count)
            let taken = Array(state.held.prefix(n))
            state.held.removeFirst(n)
            return taken
        }
        let after = shared.mutex.withLock { $0.afterAnswer }
        for entry in released {
            entry.respond(Self.response(reply))
            after?(entry.request, reply)
        }
        return released.count
    }

    // MARK: - Reading

    package var requests: [ReceivedRequest] { shared.mutex.withLock { $0.requests } }
    package var count: Int { shared.mutex.withLock { $0.requests.count } }
    package var heldCount: Int { shared.mutex.withLock { $0.held.count } }
    package var heldIDs: [String] { shared.mutex.withLock { $0.held.compactMap { $0.request.webhookID } } }

    /// Requests per `webhook-id`.
    package var countsByID: [String: Int] {
        var counts: [String: Int] = [:]
        for request in requests { counts[request.webhookID ?? "", default: 0] += 1 }
        return counts
    }

    /// Requests carrying `webhook-id` `id`, in arrival order.
    package func requests(for id: String) -> [ReceivedRequest] {
        requests.filter { $0.webhookID == id }
    }

    /// Polls until `count` requests arrived or `timeout` passed.
    @discardableResult
    package func waitFor(count: Int, timeout: Duration = .seconds(30)) async -> Bool {
        await Hooks.poll(timeout: timeout) { self.count >= count }
    }

    /// Polls until `count` requests are held.
    @discardableResult
    package func waitFor(held: Int, timeout: Duration = .seconds(30)) async -> Bool {
        await Hooks.poll(timeout: timeout) { self.heldCount >= held }
    }

    // MARK: - Signatures, checked without ActionHook's code

    /// Whether `request` carries a Standard Webhooks `v1` signature made with `secret` (`whsec_…`)
    /// over `id.timestamp.body`.
    package static func signatureIsValid(_ request: ReceivedRequest, secret: String) -> Bool {
        guard let id = request.headers["webhook-id"], let timestamp = request.headers["webhook-timestamp"],
            let header = request.headers["webhook-signature"]
        else { return false }
        return signatureMatches(header: header, id: id, timestamp: timestamp, body: request.body, secret: secret)
    }

    /// Checks a `webhook-signature` header value (space-separated `v1,<base64>` entries).
    package static func signatureMatches(header: String, id: String, timestamp: String, body: [UInt8], secret: String)
        -> Bool
    {
        guard let expected = expectedSignature(id: id, timestamp: timestamp, body: body, secret: secret) else {
            return false
        }
        return header.split(separator: " ").contains { entry in
            let parts = entry.split(separator: ",", maxSplits: 1)
            return parts.count == 2 && parts[0] == "v1"
                && Data(base64Encoded: String(parts[1])) == Data(base64Encoded: expected)
        }
    }

    /// The base64 HMAC-SHA256 of `id.timestamp.body` keyed with the bytes after `whsec_`.
    package static func expectedSignature(id: String, timestamp: String, body: [UInt8], secret: String) -> String? {
        guard secret.hasPrefix("whsec_"), let key = Data(base64Encoded: String(secret.dropFirst(6))) else { return nil }
        var hmac = HMAC<SHA256>(key: SymmetricKey(data: key))
        hmac.update(data: Array("\(id).\(timestamp).".utf8))
        hmac.update(data: body)
        return Data(hmac.finalize()).base64EncodedString()
    }
}
