import ActionHookServer
import Crypto
import Foundation
import Logging
import MicroHTTPD
import Postgres
import Synchronization
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// One request a ``WebhookReceiver`` saw.
struct ReceivedRequest: Sendable {
    /// Position among every request the receiver saw, from 0.
    let index: Int
    /// Which of the receiver's listeners took it.
    let listener: Int
    let method: String
    let path: String
    let headers: HTTPHeaders
    let body: [UInt8]
    /// When it arrived (this process's wall clock).
    let receivedAt: Date

    var webhookID: String? { headers["webhook-id"] }
    var timestamp: Int? { headers["webhook-timestamp"].flatMap { Int($0) } }
    var bodyText: String { String(decoding: body, as: UTF8.self) }
    var json: [String: Any]? { (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] }
}

/// How a ``WebhookReceiver`` answers one call.
struct ReceiverReply: Sendable {
    var status: Int = 200
    var headers: [(String, String)] = []
    var body: [UInt8] = []
    /// Answer only after this long.
    var delay: Duration = .zero
    /// Keep the request open until ``WebhookReceiver/release(_:with:)``.
    var hold = false

    static func status(_ status: Int) -> ReceiverReply { ReceiverReply(status: status) }
    static let ok = ReceiverReply(status: 200)
    static let held = ReceiverReply(hold: true)
}

/// A webhook receiver for tests: MicroHTTPD on 127.0.0.1, port 0 (one or more listeners sharing
/// one record), recording every request and answering as programmed. Signatures are checked with
/// swift-crypto directly, independently of ActionHook's own signing code.
final class WebhookReceiver: Sendable {
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
    /// and port, so several listeners let more deliveries be in flight at once).
    init(listeners: Int = 1, threads: Int = 4) throws {
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
                    host: "127.0.0.1", port: 0, threads: threads, connectionTimeoutSeconds: 120,
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
    func stop() {
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
    func port(_ listener: Int = 0) -> Int { servers[listener].port }

    /// `http://127.0.0.1:<port>/<path>` on a listener.
    func url(_ path: String = "/hook", listener: Int = 0) -> String {
        "http://127.0.0.1:\(port(listener))" + (path.hasPrefix("/") ? path : "/" + path)
    }

    /// Answers the next calls with these replies, in order, before the responder is asked again.
    func script(_ replies: [ReceiverReply]) {
        shared.mutex.withLock { $0.script.append(contentsOf: replies) }
    }

    /// Answers the next calls with these statuses, in order.
    func script(statuses: [Int]) {
        script(statuses.map(ReceiverReply.status))
    }

    /// Decides the answer of every call not covered by a script.
    func respond(with responder: @escaping @Sendable (ReceivedRequest) -> ReceiverReply) {
        shared.mutex.withLock { $0.responder = responder }
    }

    /// Runs after each answer is handed to the server (not for held requests until released).
    func afterAnswer(_ hook: (@Sendable (ReceivedRequest, ReceiverReply) -> Void)?) {
        shared.mutex.withLock { $0.afterAnswer = hook }
    }

    /// Answers up to `count` held requests (all when `nil`), oldest first; returns how many.
    @discardableResult
    func release(_ count: Int?, with reply: ReceiverReply = .ok) -> Int {
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

    var requests: [ReceivedRequest] { shared.mutex.withLock { $0.requests } }
    var count: Int { shared.mutex.withLock { $0.requests.count } }
    var heldCount: Int { shared.mutex.withLock { $0.held.count } }
    var heldIDs: [String] { shared.mutex.withLock { $0.held.compactMap { $0.request.webhookID } } }

    /// Requests per `webhook-id`.
    var countsByID: [String: Int] {
        var counts: [String: Int] = [:]
        for request in requests { counts[request.webhookID ?? "", default: 0] += 1 }
        return counts
    }

    /// Requests carrying `webhook-id` `id`, in arrival order.
    func requests(for id: String) -> [ReceivedRequest] {
        requests.filter { $0.webhookID == id }
    }

    /// Polls until `count` requests arrived or `timeout` passed.
    @discardableResult
    func waitFor(count: Int, timeout: Duration = .seconds(30)) async -> Bool {
        await Hooks.poll(timeout: timeout) { self.count >= count }
    }

    /// Polls until `count` requests are held.
    @discardableResult
    func waitFor(held: Int, timeout: Duration = .seconds(30)) async -> Bool {
        await Hooks.poll(timeout: timeout) { self.heldCount >= held }
    }

    // MARK: - Signatures, checked without ActionHook's code

    /// Whether `request` carries a Standard Webhooks `v1` signature made with `secret` (`whsec_…`)
    /// over `id.timestamp.body`.
    static func signatureIsValid(_ request: ReceivedRequest, secret: String) -> Bool {
        guard let id = request.headers["webhook-id"], let timestamp = request.headers["webhook-timestamp"],
            let header = request.headers["webhook-signature"]
        else { return false }
        return signatureMatches(header: header, id: id, timestamp: timestamp, body: request.body, secret: secret)
    }

    /// Checks a `webhook-signature` header value (space-separated `v1,<base64>` entries).
    static func signatureMatches(header: String, id: String, timestamp: String, body: [UInt8], secret: String) -> Bool {
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
    static func expectedSignature(id: String, timestamp: String, body: [UInt8], secret: String) -> String? {
        guard secret.hasPrefix("whsec_"), let key = Data(base64Encoded: String(secret.dropFirst(6))) else { return nil }
        var hmac = HMAC<SHA256>(key: SymmetricKey(data: key))
        hmac.update(data: Array("\(id).\(timestamp).".utf8))
        hmac.update(data: body)
        return Data(hmac.finalize()).base64EncodedString()
    }
}

/// A bare TCP listener on 127.0.0.1 (and the same port on ::1 when it exists) that counts the
/// connections it accepts and hands each to `handler` on its own thread. With the default
/// handler it is a canary: it closes every connection at once, and ``connections`` proves whether
/// anything reached the port.
final class RawTCPServer: Sendable {
    private let accepted = Atomic<Int>(0)
    private let finished = Atomic<Int>(0)
    private let sent = Atomic<Int>(0)
    private let stopping = Atomic<Bool>(false)
    private let loops = Atomic<Int>(0)
    private let handler: @Sendable (Int32, RawTCPServer) -> Void
    /// The port, the same on every address bound.
    let port: Int
    /// The addresses bound: 127.0.0.1, and ::1 when the machine has IPv6 loopback.
    let addresses: [String]

    init(handler: @escaping @Sendable (Int32, RawTCPServer) -> Void = { _, _ in }) throws {
        self.handler = handler
        let v4 = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard v4 >= 0 else { throw TestClientError(description: "socket() failed") }
        var yes: Int32 = 1
        setsockopt(v4, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(v4, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(v4, 128) == 0 else {
            close(v4)
            throw TestClientError(description: "bind/listen on 127.0.0.1 failed: errno \(errno)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(v4, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        var listening = [v4]
        var names = ["127.0.0.1"]
        let v6 = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        if v6 >= 0 {
            setsockopt(v6, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &yes, socklen_t(MemoryLayout<Int32>.size))
            var address6 = sockaddr_in6()
            address6.sin6_family = sa_family_t(AF_INET6)
            address6.sin6_port = in_port_t(UInt16(port).bigEndian)
            inet_pton(AF_INET6, "::1", &address6.sin6_addr)
            let ok = withUnsafePointer(to: &address6) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(v6, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
                }
            }
            if ok == 0 && listen(v6, 128) == 0 {
                listening.append(v6)
                names.append("::1")
            } else {
                close(v6)
            }
        }
        addresses = names
        for socket in listening {
            loops.add(1, ordering: .sequentiallyConsistent)
            Thread { [self] in acceptLoop(socket) }.start()
        }
    }

    deinit {
        stop()
    }

    /// Connections accepted so far.
    var connections: Int { accepted.load(ordering: .sequentiallyConsistent) }
    /// Connections whose handler returned.
    var finishedConnections: Int { finished.load(ordering: .sequentiallyConsistent) }
    /// Bytes handlers reported sending.
    var bytesSent: Int { sent.load(ordering: .sequentiallyConsistent) }

    func recordSent(_ count: Int) {
        sent.add(count, ordering: .sequentiallyConsistent)
    }

    private func acceptLoop(_ listening: Int32) {
        // The loop closes its own socket: closed from stop() while the loop is still polling, the
        // number could be reused by another test's socket and the loop would accept its connections.
        defer {
            close(listening)
            loops.subtract(1, ordering: .sequentiallyConsistent)
        }
        while !stopping.load(ordering: .sequentiallyConsistent) {
            var descriptor = pollfd(fd: listening, events: Int16(POLLIN), revents: 0)
            guard Glibc.poll(&descriptor, 1, 50) > 0 else { continue }
            let connection = accept(listening, nil, nil)
            guard connection >= 0 else { continue }
            accepted.add(1, ordering: .sequentiallyConsistent)
            Thread { [self] in
                handler(connection, self)
                close(connection)
                finished.add(1, ordering: .sequentiallyConsistent)
            }.start()
        }
    }

    /// Stops accepting; returns once the accept loops have closed the listening sockets.
    func stop() {
        guard !stopping.exchange(true, ordering: .sequentiallyConsistent) else { return }
        Hooks.pollBlocking(timeout: .seconds(10)) { self.loops.load(ordering: .sequentiallyConsistent) == 0 }
    }

    /// Reads a request head, answers `200` with a chunked body that never ends, and writes until the
    /// peer stops reading (send times out after 5 s) or hangs up; a 256 MiB cap ends it regardless.
    static let endlessChunkedOK: @Sendable (Int32, RawTCPServer) -> Void = { connection, server in
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var head: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !head.containsHeadEnd {
            let n = recv(connection, &buffer, buffer.count, 0)
            guard n > 0 else { return }
            head.append(contentsOf: buffer[..<n])
        }
        func write(_ bytes: [UInt8]) -> Bool {
            var offset = 0
            while offset < bytes.count {
                let n = bytes[offset...].withUnsafeBytes {
                    send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                }
                guard n > 0 else { return false }
                offset += n
                server.recordSent(n)
            }
            return true
        }
        guard write(Array("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
        else { return }
        let chunk = Array("10000\r\n".utf8) + [UInt8](repeating: UInt8(ascii: "y"), count: 0x10000) + Array("\r\n".utf8)
        while server.bytesSent < 256 << 20 {
            guard write(chunk) else { return }
        }
    }
}

extension Array where Element == UInt8 {
    fileprivate var containsHeadEnd: Bool {
        guard count >= 4 else { return false }
        return (0...(count - 4)).contains {
            self[$0] == 13 && self[$0 + 1] == 10 && self[$0 + 2] == 13 && self[$0 + 3] == 10
        }
    }
}

/// A follow-up row as the delivery tests read it.
struct HookFollowUpRow: Sendable {
    let id: String
    let status: String
    let attempt: Int
    let lastError: String?
    let dueAt: Date
}

/// A delivery attempt row.
struct HookAttemptRow: Sendable {
    let attempt: Int
    /// When the attempt was due, as the worker recorded it.
    let dueAt: Date?
    let startedAt: Date
    let finishedAt: Date
    let result: String
    let httpStatus: Int?
    let errorClass: String?
}

/// Helpers shared by the webhook, worker-fault and SSRF tests.
enum Hooks {
    /// Polls `condition` every `interval` until it holds or `timeout` passes; returns whether it held.
    /// Waits with `Task.sleep`, so the concurrency pool (which the worker's sends need) stays free.
    @discardableResult
    static func poll(timeout: Duration, interval: Duration = .milliseconds(50), _ condition: () throws -> Bool)
        async rethrows -> Bool
    {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while true {
            if try condition() { return true }
            if clock.now >= deadline { return false }
            try? await Task.sleep(for: interval)
        }
    }

    /// `poll` for code off the concurrency pool (plain threads).
    @discardableResult
    static func pollBlocking(timeout: Duration, _ condition: () -> Bool) -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while !condition() {
            if clock.now >= deadline { return false }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return true
    }

    /// Runs blocking work (a service's graceful stop) on its own thread, leaving the concurrency pool
    /// free meanwhile. `body` must not record test issues: it runs outside the test's task.
    static func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: body()) }.start()
        }
    }

    /// Seconds in a duration.
    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// A valid `whsec_` secret of 32 random bytes.
    static func newSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return "whsec_" + Data(bytes).base64EncodedString()
    }

    /// Worker on, loopback receivers allowed, a short poll interval.
    static func worker(_ configuration: inout Configuration) {
        configuration.workerEnabled = true
        configuration.allowPrivateWebhooks = true
        configuration.worker.pollInterval = .milliseconds(200)
    }

    /// Parses an RFC 3339 time with or without fractional seconds.
    static func parseTime(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }

    /// Another service over the same schema (not migrated again); the caller starts and stops it.
    static func sibling(of api: TestAPI, configure: (inout Configuration) -> Void) -> ActionHookService {
        TestService.make(database: api.database, migrate: false, configure: configure)
    }

    /// An admin request to any service's port.
    static func admin(port: Int, _ method: String, _ path: String, json: String? = nil) throws -> TestResponse {
        let client = try HTTPTestClient(port: port)
        let headers = [("Authorization", "Bearer \(TestService.adminToken)")]
        if let json { return try client.request(method, path, headers: headers, json: json) }
        return try client.request(method, path, headers: headers)
    }

    /// Creates an app whose webhook endpoint is `url` with `secret`; returns its ingest key.
    static func createApp(_ api: TestAPI, _ id: String, url: String, secret: String) throws -> String {
        try api.createApp(id, extra: #""webhook": {"url": "\#(url)", "secret": "\#(secret)"}"#)
    }

    /// Saves a rule and requires a 201.
    static func saveRule(_ api: TestAPI, app: String, _ json: String) throws {
        let response = try api.admin("POST", "/v1/apps/\(app)/rules", json: json)
        guard response.status == 201 else {
            throw TestClientError(description: "saving a rule answered \(response.status): \(response.text)")
        }
    }

    /// Ingests one response, requires a 202 and returns the follow-up ids it lists.
    static func ingest(_ api: TestAPI, key: String, _ json: String) throws -> (responseID: String, followUps: [String])
    {
        let response = try api.ingest(key: key, json: json)
        guard response.status == 202, let id = response.json["id"] as? String else {
            throw TestClientError(description: "ingest answered \(response.status): \(response.text)")
        }
        let ids = (response.json["followUps"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
        return (id, ids)
    }

    /// One follow-up's row.
    static func followUp(_ api: TestAPI, _ id: String) throws -> HookFollowUpRow {
        let rows = try api.query(
            "SELECT id::text AS id, status, attempt, last_error, due_at FROM followups WHERE id = \(UUID(uuidString: id)!)"
        )
        guard let row = rows.first else { throw TestClientError(description: "no follow-up \(id)") }
        return HookFollowUpRow(
            id: try row.decode("id"), status: try row.decode("status"), attempt: try row.decode("attempt"),
            lastError: try row.decode("last_error"), dueAt: try row.decode("due_at"))
    }

    /// Polls until the follow-up has `status`; returns the row last read.
    @discardableResult
    static func waitFor(_ api: TestAPI, _ id: String, status: String, timeout: Duration = .seconds(30)) async throws
        -> HookFollowUpRow
    {
        var last = try followUp(api, id)
        try await poll(timeout: timeout) {
            last = try followUp(api, id)
            return last.status == status
        }
        return last
    }

    /// Follow-ups by status.
    static func statusCounts(_ api: TestAPI) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for row in try api.query("SELECT status, count(*)::bigint AS n FROM followups GROUP BY status") {
            counts[try row.decode("status")] = try row.decode("n", as: Int.self)
        }
        return counts
    }

    /// A follow-up's delivery attempts in order.
    static func attempts(_ api: TestAPI, _ id: String) throws -> [HookAttemptRow] {
        try api.query(
            """
            SELECT attempt, due_at, started_at, finished_at, result, http_status, error_class FROM delivery_attempts
            WHERE followup_id = \(UUID(uuidString: id)!) ORDER BY attempt
            """
        ).map {
            HookAttemptRow(
                attempt: try $0.decode("attempt"), dueAt: try $0.decode("due_at"),
                startedAt: try $0.decode("started_at"),
                finishedAt: try $0.decode("finished_at"), result: try $0.decode("result"),
                httpStatus: try $0.decode("http_status"), errorClass: try $0.decode("error_class"))
        }
    }

    /// Inserts one response and `count` due webhook follow-ups for it straight into the outbox;
    /// `url(i)` is the follow-up's own URL (nil for the app's endpoint); they are due `dueInSeconds` from
    /// now (by the database clock). Returns their ids in order.
    static func insertDueWebhooks(
        _ api: TestAPI, app: String, count: Int, dueInSeconds: Int = 0, url: (Int) -> String?
    ) throws -> [String] {
        let responseID = UUID()
        let ids = (0..<count).map { _ in UUID() }
        try api.pool.transaction { connection in
            try connection.execute(
                """
                INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier, outcome, answer)
                VALUES (\(app), \(responseID), \(responseID.uuidString), '\\x00'::bytea, 'bulk', 'recorded', '{}')
                """)
            for (index, id) in ids.enumerated() {
                let target = url(index).map { "\"\($0)\"" } ?? "null"
                let payload = #"{"url": \#(target), "body": {"n": \#(index), "kind": "bulk"}}"#
                try connection.execute(
                    """
                    INSERT INTO followups (app_id, id, response_id, ordinal, channel, payload, due_at)
                    VALUES (\(app), \(id), \(responseID), \(index), 'webhook', \(payload)::jsonb,
                        now() + make_interval(secs => \(dueInSeconds)))
                    """)
            }
        }
        return ids.map { $0.uuidString.lowercased() }
    }

    /// The sum of a Prometheus metric's samples whose labels include `labels`, in a service's metrics.
    static func metric(_ service: ActionHookService, _ name: String, _ labels: [String: String]) -> Double {
        let text = String(decoding: service.metrics.render(), as: UTF8.self)
        var sum = 0.0
        for line in text.split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
            let parts = line.split(separator: " ")
            guard parts.count >= 2, let value = Double(parts[parts.count - 1]) else { continue }
            if labels.allSatisfy({ line.contains("\($0.key)=\"\($0.value)\"") }) { sum += value }
        }
        return sum
    }
}
