internal import CMicroHTTPD
import Foundation
import Locks
import Logging
import Synchronization

/// An HTTP/1.1 server on libmicrohttpd: epoll with an internal thread pool, suspend/resume, body
/// limits, connection limits and a graceful stop.
///
/// Handlers run on the server's threads and may block (a database call); a handler that must wait
/// for other work uses ``HTTPHandler/deferred(_:)`` so the thread is free meanwhile.
public final class HTTPServer: @unchecked Sendable {
    // @unchecked: `daemon` is written only by `start` and `stop`, which callers must not run
    // concurrently with each other; everything the request threads touch is atomic or locked.
    /// The configuration the server was created with.
    public let configuration: HTTPServerConfiguration
    let router: Router
    let logger: Logger
    let observer: (any HTTPServerObserver)?

    private var daemon: OpaquePointer?
    private var boundPort = 0
    let inFlight = Atomic<Int>(0)
    /// Set once `stop`'s grace period is over: deferred requests are then answered 503 instead of
    /// suspending, so none can be left suspended when the daemon stops.
    let stopping = Atomic<Bool>(false)
    /// The requests whose connection is suspended until their deferred handler answers; `stop`
    /// answers those still waiting.
    let suspended = Locked([ObjectIdentifier: SuspendedRequest]())

    /// The largest body read and discarded after a chunked body went over its limit; past it the
    /// connection is closed without an answer.
    static let discardCap = 1 << 20

    /// Creates a server; it listens once ``start()`` returns.
    public init(
        configuration: HTTPServerConfiguration, router: Router, logger: Logger,
        observer: (any HTTPServerObserver)? = nil
    ) {
        precondition(configuration.threads >= 2, "libmicrohttpd's epoll mode needs at least 2 threads")
        self.configuration = configuration
        self.router = router
        self.logger = logger
        self.observer = observer
    }

    deinit {
        if daemon != nil { stop(gracePeriod: .zero) }
    }

    /// The port the server listens on (the chosen one when configured with port 0).
    public var port: Int { boundPort }

    /// Binds and starts the request threads.
    public func start() throws {
        precondition(daemon == nil, "server already started")
        // Peers that vanish mid-write must not kill the process.
        signal(SIGPIPE, SIG_IGN)

        let isIPv6 = configuration.host.contains(":")
        var address = sockaddr_storage()
        let parsed = withUnsafeMutablePointer(to: &address) { storage -> Bool in
            storage.withMemoryRebound(to: UInt8.self, capacity: MemoryLayout<sockaddr_storage>.size) { _ in
                if isIPv6 {
                    return storage.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                        sin6.pointee.sin6_family = sa_family_t(AF_INET6)
                        sin6.pointee.sin6_port = in_port_t(UInt16(configuration.port).bigEndian)
                        return inet_pton(AF_INET6, configuration.host, &sin6.pointee.sin6_addr) == 1
                    }
                }
                return storage.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    sin.pointee.sin_family = sa_family_t(AF_INET)
                    sin.pointee.sin_port = in_port_t(UInt16(configuration.port).bigEndian)
                    return inet_pton(AF_INET, configuration.host, &sin.pointee.sin_addr) == 1
                }
            }
        }
        guard parsed, (0...65535).contains(configuration.port) else {
            throw HTTPServerError(description: "the listen address is not a valid IP address and port")
        }

        var flags =
            MHD_USE_EPOLL_INTERNAL_THREAD.rawValue | MHD_ALLOW_SUSPEND_RESUME.rawValue
            | MHD_USE_ERROR_LOG.rawValue
        if isIPv6 { flags |= MHD_USE_IPv6.rawValue }
        let context = Unmanaged.passUnretained(self).toOpaque()

        let started: OpaquePointer? = withUnsafeMutablePointer(to: &address) { storage in
            storage.withMemoryRebound(to: sockaddr.self, capacity: 1) { sockaddrPointer in
                var options: [MHD_OptionItem] = [
                    // The logger goes first so that errors in the other options are logged through it.
                    MHD_OptionItem(
                        option: .EXTERNAL_LOGGER, value: unsafeBitCast(mhdLog, to: Int.self),
                        ptr_value: context),
                    MHD_OptionItem(
                        option: .NOTIFY_COMPLETED, value: unsafeBitCast(mhdCompleted, to: Int.self),
                        ptr_value: context),
                    MHD_OptionItem(option: .SOCK_ADDR, value: 0, ptr_value: UnsafeMutableRawPointer(sockaddrPointer)),
                    MHD_OptionItem(option: .THREAD_POOL_SIZE, value: configuration.threads, ptr_value: nil),
                    MHD_OptionItem(
                        option: .CONNECTION_TIMEOUT, value: configuration.connectionTimeoutSeconds,
                        ptr_value: nil),
                    MHD_OptionItem(option: .CONNECTION_LIMIT, value: configuration.connectionLimit, ptr_value: nil),
                    MHD_OptionItem(
                        option: .CONNECTION_MEMORY_LIMIT, value: configuration.connectionMemoryLimit,
                        ptr_value: nil),
                    MHD_OptionItem(option: .LISTEN_BACKLOG_SIZE, value: configuration.listenBacklog, ptr_value: nil),
                ]
                if configuration.perIPConnectionLimit > 0 {
                    options.append(
                        MHD_OptionItem(
                            option: .PER_IP_CONNECTION_LIMIT, value: configuration.perIPConnectionLimit,
                            ptr_value: nil))
                }
                options.append(MHD_OptionItem(option: .END, value: 0, ptr_value: nil))
                return options.withUnsafeMutableBufferPointer { items in
                    ah_mhd_start_daemon(flags, 0, mhdAccess, context, items.baseAddress)
                }
            }
        }
        guard let started else {
            throw HTTPServerError(description: "libmicrohttpd could not start (address in use or a bad option)")
        }
        daemon = started
        boundPort = Int(ah_mhd_bound_port(started))
        logger.info(
            "HTTP server listening",
            metadata: ["port": "\(boundPort)", "threads": "\(configuration.threads)"])
    }

    /// Stops gracefully: no new connections, in-flight requests finish (deferred ones that have
    /// not answered within `gracePeriod` get a 503), then the threads stop.
    ///
    /// libmicrohttpd aborts when stopped with suspended connections, so this never stops before
    /// every suspended request has been answered.
    public func stop(gracePeriod: Duration = .seconds(10)) {
        guard let daemon else { return }
        self.daemon = nil
        // Quiescing (no new connections while in-flight requests finish) is only needed with requests in
        // flight. libmicrohttpd 0.9.75 can abort in MHD_quiesce_daemon ("Failed to remove listen FD from
        // epoll set") when a pool thread takes the listen socket out of its epoll set at the same moment;
        // an idle server is stopped without it (MHD_stop_daemon closes the listen socket itself).
        let listenSocket = inFlight.load(ordering: .acquiring) > 0 ? MHD_quiesce_daemon(daemon) : -1

        let clock = ContinuousClock()
        let deadline = clock.now + gracePeriod
        while inFlight.load(ordering: .acquiring) > 0 && clock.now < deadline {
            Thread.sleep(forTimeInterval: 0.005)
        }
        // From here no request suspends any more; answer whatever still waits, then wait until the
        // answers have been sent or their clients are gone (resuming is asynchronous), so that no
        // connection is still suspended when the daemon stops.
        stopping.store(true, ordering: .sequentiallyConsistent)
        let sendDeadline = clock.now + .seconds(5)
        repeat {
            for request in suspended.withLock({ Array($0.values) }) {
                request.complete(
                    .problem(.unavailable("The server is shutting down; retry the request.")), server: self)
            }
            if inFlight.load(ordering: .acquiring) == 0 { break }
            Thread.sleep(forTimeInterval: 0.005)
        } while clock.now < sendDeadline
        MHD_stop_daemon(daemon)
        // The listen socket is ours after quiescing, but threads may use it until the daemon stops.
        if listenSocket >= 0 { close(listenSocket) }
        logger.info("HTTP server stopped")
    }
}

/// A request waiting for its deferred handler, with the suspended connection to resume.
struct SuspendedRequest: @unchecked Sendable {
    // @unchecked: the connection pointer is only passed to MHD_resume_connection, which
    // libmicrohttpd documents as callable from any thread.
    let context: RequestContext
    let connection: OpaquePointer

    /// Stores the response; if the connection is already suspended, resumes it so the server
    /// thread sends the response, otherwise the thread running the handler sends it without
    /// suspending. Only the first call has an effect.
    func complete(_ response: HTTPResponse, server: HTTPServer) {
        let wasSuspended = context.reply.withLock { reply -> Bool in
            guard reply.response == nil else { return false }
            reply.response = response
            return reply.suspended
        }
        guard wasSuspended else { return }
        _ = server.suspended.withLock { $0.removeValue(forKey: ObjectIdentifier(context)) }
        MHD_resume_connection(connection)
    }

    /// Called by the server thread once the handler has returned: suspends the connection unless
    /// the handler has already answered, and returns that answer.
    func suspendUnlessAnswered(server: HTTPServer) -> HTTPResponse? {
        // Suspending with the reply locked: a `complete` on another thread either came first (and
        // the answer is returned here) or sees `suspended` and resumes after the suspension.
        context.reply.withLock { reply -> HTTPResponse? in
            if let response = reply.response { return response }
            // A stopping server suspends nothing more: stop() must not leave a connection suspended.
            if server.stopping.load(ordering: .sequentiallyConsistent) {
                let refusal = HTTPResponse.problem(.unavailable("The server is shutting down; retry the request."))
                reply.response = refusal
                return refusal
            }
            reply.suspended = true
            server.suspended.withLock { $0[ObjectIdentifier(context)] = self }
            MHD_suspend_connection(connection)
            return nil
        }
    }
}

/// The state of one request across libmicrohttpd's calls, kept in `con_cls`.
final class RequestContext: @unchecked Sendable {
    // @unchecked: `upload` is only touched from the access handler, which libmicrohttpd calls for
    // one connection at a time; `reply` is shared with the thread answering a deferred request.
    let started = ContinuousClock.now
    let method: HTTPMethod
    let path: String
    let match: Router.Match
    let bodyLimit: Int
    let requestID: String
    var upload = Upload()
    let reply = Locked(Reply())

    struct Upload {
        var body: [UInt8] = []
        var overflowed = false
        var discarded = 0
        var dispatched = false
    }

    /// A deferred handler's answer, and whether the connection waits for it suspended.
    struct Reply {
        var response: HTTPResponse?
        var suspended = false
    }

    init(method: HTTPMethod, path: String, match: Router.Match, bodyLimit: Int, requestID: String) {
        self.requestID = requestID
        self.method = method
        self.path = path
        self.match = match
        self.bodyLimit = bodyLimit
    }

    var routeName: String {
        if case .found(let route, _) = match { return route.pattern }
        return "unmatched"
    }
}

extension HTTPServer {
    /// The access handler's work; see `mhdAccess`.
    func handle(
        connection: OpaquePointer, url: UnsafePointer<CChar>?, method: UnsafePointer<CChar>?,
        uploadData: UnsafePointer<CChar>?, uploadSize: UnsafeMutablePointer<Int>?,
        state: UnsafeMutablePointer<UnsafeMutableRawPointer?>?
    ) -> MHD_Result {
        guard let state, let uploadSize else { return .NO }

        guard let existing = state.pointee else {
            // First call: only the headers are known.
            let method = HTTPMethod(rawValue: method.map { String(cString: $0) } ?? "GET")
            let path = url.map { String(cString: $0) } ?? "/"
            let match = router.match(method: method, path: path)
            var limit = configuration.defaultBodyLimit
            if case .found(let route, _) = match, let routeLimit = route.bodyLimit { limit = routeLimit }
            let requestID =
                header(connection, "X-Request-Id").flatMap(Self.acceptableRequestID)
                ?? Self.generateRequestID()
            let context = RequestContext(
                method: method, path: path, match: match, bodyLimit: limit, requestID: requestID)
            state.pointee = Unmanaged.passRetained(context).toOpaque()
            inFlight.add(1, ordering: .relaxed)

            if let declared = header(connection, "Content-Length").flatMap({ Int($0) }), declared > limit {
                // Answered before reading the body; libmicrohttpd then closes the connection.
                return queue(.problem(.payloadTooLarge(limit: limit)), context: context, connection: connection)
            }
            return .YES
        }

        let context = Unmanaged<RequestContext>.fromOpaque(existing).takeUnretainedValue()
        if uploadSize.pointee > 0 {
            let size = uploadSize.pointee
            uploadSize.pointee = 0
            if !context.upload.overflowed && context.upload.body.count + size <= context.bodyLimit {
                if context.upload.body.isEmpty { context.upload.body.reserveCapacity(size) }
                uploadData!.withMemoryRebound(to: UInt8.self, capacity: size) {
                    context.upload.body.append(contentsOf: UnsafeBufferPointer(start: $0, count: size))
                }
                return .YES
            }
            // A chunked body went over the limit: stop storing it, read on to answer 413.
            context.upload.overflowed = true
            context.upload.body = []
            context.upload.discarded += size
            return context.upload.discarded <= Self.discardCap ? .YES : .NO
        }

        if context.upload.dispatched {
            // Resumed after a deferred handler answered (or, spuriously, before: keep waiting).
            guard let response = context.reply.withLock({ $0.response }) else { return .YES }
            return queue(response, context: context, connection: connection)
        }
        let body = context.upload.body
        context.upload.body = []
        context.upload.dispatched = true
        if context.upload.overflowed {
            return queue(.problem(.payloadTooLarge(limit: context.bodyLimit)), context: context, connection: connection)
        }

        switch context.match {
        case .notFound:
            return queue(.problem(.notFound()), context: context, connection: connection)
        case .methodNotAllowed(let allowed):
            let allow = allowed.map(\.rawValue).joined(separator: ", ")
            return queue(
                .problem(.methodNotAllowed, headers: ["Allow": allow]), context: context, connection: connection)
        case .found(let route, let parameters):
            let request = makeRequest(connection: connection, context: context, body: body, parameters: parameters)
            switch route.handler {
            case .immediate(let handler):
                return queue(handler(request), context: context, connection: connection)
            case .deferred(let handler):
                let pending = SuspendedRequest(context: context, connection: connection)
                handler(request) { [self] response in pending.complete(response, server: self) }
                // Answered while the handler ran (a rejected request): send it without suspending.
                if let response = pending.suspendUnlessAnswered(server: self) {
                    return queue(response, context: context, connection: connection)
                }
                return .YES
            }
        }
    }

    func queue(_ response: HTTPResponse, context: RequestContext, connection: OpaquePointer) -> MHD_Result {
        let mhdResponse = response.body.withUnsafeBytes { bytes in
            MHD_create_response_from_buffer(
                bytes.count, UnsafeMutableRawPointer(mutating: bytes.baseAddress), .RESPMEM_MUST_COPY)
        }
        guard let mhdResponse else { return .NO }
        defer { MHD_destroy_response(mhdResponse) }
        for (name, value) in response.headers {
            _ = MHD_add_response_header(mhdResponse, name, value)
        }
        if !response.headers.contains("x-request-id") {
            _ = MHD_add_response_header(mhdResponse, "X-Request-Id", context.requestID)
        }
        let result = MHD_queue_response(connection, UInt32(response.status), mhdResponse)
        observer?.requestFinished(
            method: context.method, route: context.routeName, status: response.status,
            duration: ContinuousClock.now - context.started)
        return result
    }

    func makeRequest(
        connection: OpaquePointer, context: RequestContext, body: [UInt8], parameters: [String: String]
    ) -> HTTPRequest {
        var headers = HTTPHeaders()
        headers.reserveCapacity(12)
        withUnsafeMutablePointer(to: &headers) { pointer in
            _ = MHD_get_connection_values(connection, .HEADER_KIND, mhdCollectHeader, pointer)
        }
        var query: [(name: String, value: String)] = []
        withUnsafeMutablePointer(to: &query) { pointer in
            _ = MHD_get_connection_values(connection, .GET_ARGUMENT_KIND, mhdCollectQuery, pointer)
        }
        return HTTPRequest(
            method: context.method, path: context.path, query: query, headers: headers, body: body,
            peer: peerAddress(connection), requestID: context.requestID, pathParameters: parameters)
    }

    func header(_ connection: OpaquePointer, _ name: String) -> String? {
        MHD_lookup_connection_value(connection, .HEADER_KIND, name).map { String(cString: $0) }
    }

    func peerAddress(_ connection: OpaquePointer) -> PeerAddress? {
        guard let address = ah_mhd_client_address(connection) else { return nil }
        switch Int32(address.pointee.sa_family) {
        case AF_INET:
            return address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { .ipv4($0.pointee.sin_addr.s_addr) }
        case AF_INET6:
            return address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                withUnsafeBytes(of: sin6.pointee.sin6_addr) { bytes in
                    .ipv6(bytes.loadUnaligned(as: UInt64.self), bytes.loadUnaligned(fromByteOffset: 8, as: UInt64.self))
                }
            }
        default:
            return nil
        }
    }

    /// A client's request id is echoed only when it is short and made of safe characters.
    static func acceptableRequestID(_ value: String) -> String? {
        guard (1...128).contains(value.utf8.count),
            value.utf8.allSatisfy({ byte in
                (48...57).contains(byte) || (65...90).contains(byte) || (97...122).contains(byte)
                    || byte == 45 || byte == 46 || byte == 95
            })
        else { return nil }
        return value
    }

    /// A process-wide random half for generated request ids.
    static let requestIDSeed: UInt64 = {
        var random = SystemRandomNumberGenerator()
        return random.next()
    }()
    static let requestIDCounter = Atomic<UInt64>(0)

    /// A request id in the form of a version 4 UUID in lower case: a random half fixed for the
    /// process and a counter, so ids never repeat within a process and collide across processes
    /// only with random chance; no system call per request.
    static func generateRequestID() -> String {
        let count = requestIDCounter.add(1, ordering: .relaxed).newValue
        var bytes = (requestIDSeed, count.bigEndian)
        return withUnsafeMutableBytes(of: &bytes) { raw in
            raw[6] = (raw[6] & 0x0F) | 0x40
            raw[8] = (raw[8] & 0x3F) | 0x80
            let digits: StaticString = "0123456789abcdef"
            return String(unsafeUninitializedCapacity: 36) { output in
                var position = 0
                for index in 0..<16 {
                    if index == 4 || index == 6 || index == 8 || index == 10 {
                        output[position] = UInt8(ascii: "-")
                        position += 1
                    }
                    output[position] = digits.utf8Start[Int(raw[index] >> 4)]
                    output[position + 1] = digits.utf8Start[Int(raw[index] & 0x0F)]
                    position += 2
                }
                return position
            }
        }
    }

    func completed(state: UnsafeMutablePointer<UnsafeMutableRawPointer?>?) {
        guard let state, let existing = state.pointee else { return }
        state.pointee = nil
        // Released here; a suspended connection is never completed (libmicrohttpd neither polls nor
        // times it out), and `complete` removed it from `suspended` before resuming it.
        _ = Unmanaged<RequestContext>.fromOpaque(existing).takeRetainedValue()
        inFlight.subtract(1, ordering: .releasing)
    }
}

// libmicrohttpd's callbacks. They must not capture anything (a capturing C callback crashes the
// compiler), so the server comes through the `cls` pointer.

private let mhdAccess: MHD_AccessHandlerCallback = {
    cls, connection, url, method, _, uploadData, uploadSize, state in
    guard let cls, let connection else { return .NO }
    let server = Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue()
    return server.handle(
        connection: connection, url: url, method: method, uploadData: uploadData, uploadSize: uploadSize,
        state: state)
}

private let mhdCompleted: MHD_RequestCompletedCallback = { cls, _, state, _ in
    guard let cls else { return }
    Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().completed(state: state)
}

private let mhdLog: ah_mhd_logger = { cls, format, arguments in
    guard let cls, let format, let arguments else { return }
    var buffer = [CChar](repeating: 0, count: 512)
    _ = vsnprintf(&buffer, buffer.count, format, arguments)
    let length = buffer.firstIndex(of: 0) ?? buffer.count
    let message = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        .trimmingCharacters(in: .whitespacesAndNewlines)
    Unmanaged<HTTPServer>.fromOpaque(cls).takeUnretainedValue().logger.debug(
        "libmicrohttpd", metadata: ["message": "\(message)"])
}

private let mhdCollectHeader: MHD_KeyValueIterator = { cls, _, key, value in
    guard let cls, let key else { return .YES }
    let headers = cls.assumingMemoryBound(to: HTTPHeaders.self)
    headers.pointee.add(String(cString: key), value.map { String(cString: $0) } ?? "")
    return .YES
}

private let mhdCollectQuery: MHD_KeyValueIterator = { cls, _, key, value in
    guard let cls, let key else { return .YES }
    let query = cls.assumingMemoryBound(to: [(name: String, value: String)].self)
    query.pointee.append((name: String(cString: key), value: value.map { String(cString: $0) } ?? ""))
    return .YES
}
