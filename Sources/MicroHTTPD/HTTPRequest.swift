/// An HTTP request method.
public struct HTTPMethod: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The method as sent, e.g. `GET`.
    public let rawValue: String

    /// Creates a method from its name.
    public init(rawValue: String) {
        self.rawValue = rawValue
    }

    /// `GET`
    public static let get = HTTPMethod(rawValue: "GET")
    /// `HEAD`
    public static let head = HTTPMethod(rawValue: "HEAD")
    /// `POST`
    public static let post = HTTPMethod(rawValue: "POST")
    /// `PUT`
    public static let put = HTTPMethod(rawValue: "PUT")
    /// `PATCH`
    public static let patch = HTTPMethod(rawValue: "PATCH")
    /// `DELETE`
    public static let delete = HTTPMethod(rawValue: "DELETE")
    /// `OPTIONS`
    public static let options = HTTPMethod(rawValue: "OPTIONS")

    /// The method's name.
    public var description: String { rawValue }
}

/// One complete, immutable HTTP request as the router hands it to a handler.
public struct HTTPRequest: Sendable {
    /// The request method.
    public let method: HTTPMethod
    /// The path, percent-decoded, without the query string.
    public let path: String
    /// The query items in order; a key without `=` has an empty value.
    public let query: [(name: String, value: String)]
    /// The request headers.
    public let headers: HTTPHeaders
    /// The body bytes (empty when there is none).
    public let body: [UInt8]
    /// The peer's address, e.g. `127.0.0.1` or `::1`, when known.
    public let peerAddress: String?
    /// The request id: the client's `X-Request-Id` when it is well formed, else a generated one.
    public let requestID: String
    /// The values of the route's `{name}` path parameters.
    public let pathParameters: [String: String]

    /// Creates a request; the server builds these, tests may too.
    public init(
        method: HTTPMethod, path: String, query: [(name: String, value: String)] = [],
        headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [], peerAddress: String? = nil,
        requestID: String = "test", pathParameters: [String: String] = [:]
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.peerAddress = peerAddress
        self.requestID = requestID
        self.pathParameters = pathParameters
    }

    /// The first value of the query item `name`, or `nil`.
    public func queryValue(_ name: String) -> String? {
        query.first { $0.name == name }?.value
    }

    /// The value of the path parameter `name`; the route guarantees it exists.
    public func parameter(_ name: String) -> String {
        guard let value = pathParameters[name] else {
            preconditionFailure("route has no path parameter {\(name)}")
        }
        return value
    }
}
