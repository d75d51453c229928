/// What a route does with a request: answer now, or later from another thread.
public enum HTTPHandler: Sendable {
    /// Answers on the server thread that received the request.
    case immediate(@Sendable (HTTPRequest) -> HTTPResponse)
    /// Answers later: the handler calls `respond` exactly once, from any thread. If it has not
    /// answered by the time it returns, the connection is suspended until it does and the server
    /// thread is free meanwhile; an answer given before returning is sent at once.
    case deferred(@Sendable (HTTPRequest, _ respond: @escaping @Sendable (HTTPResponse) -> Void) -> Void)
}

/// A route: a method, a path pattern such as `/v1/apps/{app}`, a body limit and a handler.
public struct Route: Sendable {
    /// The method the route answers.
    public let method: HTTPMethod
    /// The pattern as written, used as the route's name in metrics and logs.
    public let pattern: String
    /// The largest body accepted, in bytes; `nil` uses the server's default.
    public let bodyLimit: Int?
    /// What answers the request.
    public let handler: HTTPHandler

    let segments: [Segment]

    enum Segment: Sendable, Equatable {
        case literal(String)
        case parameter(String)
    }

    /// Creates a route. Parameters are whole segments written `{name}`.
    public init(_ method: HTTPMethod, _ pattern: String, bodyLimit: Int? = nil, handler: HTTPHandler) {
        precondition(pattern.hasPrefix("/"), "route patterns start with /")
        self.method = method
        self.pattern = pattern
        self.bodyLimit = bodyLimit
        self.handler = handler
        self.segments = pattern.split(separator: "/", omittingEmptySubsequences: true).map { part in
            if part.hasPrefix("{") && part.hasSuffix("}") {
                return .parameter(String(part.dropFirst().dropLast()))
            }
            return .literal(String(part))
        }
    }

    func match(_ parts: [Substring]) -> [String: String]? {
        guard parts.count == segments.count else { return nil }
        var parameters: [String: String] = [:]
        for (segment, part) in zip(segments, parts) {
            switch segment {
            case .literal(let literal):
                guard part == literal else { return nil }
            case .parameter(let name):
                guard !part.isEmpty else { return nil }
                parameters[name] = String(part)
            }
        }
        return parameters
    }
}

/// Finds the route for a method and path.
public struct Router: Sendable {
    /// The result of looking up a path.
    public enum Match: Sendable {
        /// A route answers this method and path.
        case found(Route, parameters: [String: String])
        /// Routes exist for the path, but not for this method; the allowed methods are listed.
        case methodNotAllowed(allowed: [HTTPMethod])
        /// No route has this path.
        case notFound
    }

    /// The routes, tried in order.
    public private(set) var routes: [Route] = []

    /// Routes without parameters by their pattern, so the common lookup needs no split of the path.
    /// A route is here only if no earlier route answers its path and method, so a hit gives the same
    /// route as trying them in order.
    private var literal: [String: [Route]] = [:]

    /// Creates an empty router.
    public init() {}

    /// Adds a route. Adding the same method and pattern twice is a programming error.
    public mutating func add(_ route: Route) {
        precondition(
            !routes.contains { $0.method == route.method && $0.segments == route.segments },
            "duplicate route \(route.method) \(route.pattern)")
        routes.append(route)
        guard route.segments.allSatisfy({ if case .literal = $0 { true } else { false } }) else { return }
        let parts = route.pattern.split(separator: "/", omittingEmptySubsequences: true)
        let shadowed = routes.dropLast().contains { $0.method == route.method && $0.match(parts) != nil }
        if !shadowed { literal[route.pattern, default: []].append(route) }
    }

    /// Adds a route answered on the server thread.
    public mutating func add(
        _ method: HTTPMethod, _ pattern: String, bodyLimit: Int? = nil,
        _ handler: @escaping @Sendable (HTTPRequest) -> HTTPResponse
    ) {
        add(Route(method, pattern, bodyLimit: bodyLimit, handler: .immediate(handler)))
    }

    /// Looks up `path` for `method`. `HEAD` falls back to the `GET` route.
    public func match(method: HTTPMethod, path: String) -> Match {
        if let route = literal[path]?.first(where: { $0.method == method }) { return .found(route, parameters: [:]) }
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        var allowed: [HTTPMethod] = []
        var getFallback: (Route, [String: String])?
        for route in routes {
            guard let parameters = route.match(parts) else { continue }
            if route.method == method { return .found(route, parameters: parameters) }
            if method == .head && route.method == .get { getFallback = (route, parameters) }
            if !allowed.contains(route.method) { allowed.append(route.method) }
        }
        if let (route, parameters) = getFallback { return .found(route, parameters: parameters) }
        return allowed.isEmpty ? .notFound : .methodNotAllowed(allowed: allowed)
    }
}
