/// How the HTTP server listens and protects itself. Every default is a hardened one.
public struct HTTPServerConfiguration: Sendable {
    /// The address to bind, IPv4 or IPv6 literal. `0.0.0.0` binds every IPv4 interface.
    public var host: String
    /// The port to bind; `0` picks a free one (see ``HTTPServer/port``).
    public var port: Int
    /// Threads answering requests, each with its own epoll set. At least 2: a single epoll thread
    /// stalls when hundreds of connections arrive at once.
    public var threads: Int
    /// Seconds of inactivity after which a connection is closed, idle keep-alive ones included.
    public var connectionTimeoutSeconds: Int
    /// The most connections open at once; more are refused at accept.
    public var connectionLimit: Int
    /// The most connections open at once from one IP address; `0` for no per-address limit.
    public var perIPConnectionLimit: Int
    /// Bytes of memory each connection may use for its request line, headers and read buffer.
    public var connectionMemoryLimit: Int
    /// The largest request body accepted by a route that does not set its own limit.
    public var defaultBodyLimit: Int
    /// The listen backlog.
    public var listenBacklog: Int

    /// Creates a configuration.
    public init(
        host: String = "0.0.0.0", port: Int = 8080, threads: Int = 8, connectionTimeoutSeconds: Int = 10,
        connectionLimit: Int = 1000, perIPConnectionLimit: Int = 256, connectionMemoryLimit: Int = 32 * 1024,
        defaultBodyLimit: Int = 16 * 1024, listenBacklog: Int = 1024
    ) {
        self.host = host
        self.port = port
        self.threads = threads
        self.connectionTimeoutSeconds = connectionTimeoutSeconds
        self.connectionLimit = connectionLimit
        self.perIPConnectionLimit = perIPConnectionLimit
        self.connectionMemoryLimit = connectionMemoryLimit
        self.defaultBodyLimit = defaultBodyLimit
        self.listenBacklog = listenBacklog
    }
}

/// Receives one call per answered request, for metrics.
public protocol HTTPServerObserver: Sendable {
    /// A response was queued. `route` is the matched pattern, or `unmatched`.
    func requestFinished(method: HTTPMethod, route: String, status: Int, duration: Duration)
}

/// Why the server could not start.
public struct HTTPServerError: Error, CustomStringConvertible {
    /// What went wrong.
    public let description: String
}
