import Foundation

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
    /// The peer's address, e.g. `127.0.0.1` or `::1`, when known (formatted when asked for).
    public var peerAddress: String? { peer?.text }
    let peer: PeerAddress?
    /// The request id: the client's `X-Request-Id` when it is well formed, else a generated one.
    public let requestID: String
    /// The values of the route's `{name}` path parameters.
    public let pathParameters: [String: String]

    /// Creates a request with the peer's address as the socket gave it (the server's way).
    public init(
        method: HTTPMethod, path: String, query: [(name: String, value: String)] = [],
        headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [], peer: PeerAddress?,
        requestID: String, pathParameters: [String: String] = [:]
    ) {
        self.method = method
        self.path = path
        self.query = query
        self.headers = headers
        self.body = body
        self.peer = peer
        self.requestID = requestID
        self.pathParameters = pathParameters
    }

    /// Creates a request; the server builds these, tests may too.
    public init(
        method: HTTPMethod, path: String, query: [(name: String, value: String)] = [],
        headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = [], peerAddress: String? = nil,
        requestID: String = "test", pathParameters: [String: String] = [:]
    ) {
        self.init(
            method: method, path: path, query: query, headers: headers, body: body,
            peer: peerAddress.map(PeerAddress.text), requestID: requestID, pathParameters: pathParameters)
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

/// A peer's IP address as the socket gave it; the text form is made only when asked for.
public enum PeerAddress: Sendable {
    /// An IPv4 address, in network byte order as in `in_addr`.
    case ipv4(UInt32)
    /// An IPv6 address, its 16 bytes in network order.
    case ipv6(UInt64, UInt64)
    /// An address given as text.
    case text(String)

    /// `127.0.0.1`, `::1`, …
    public var text: String? {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
        switch self {
        case .ipv4(let raw):
            var address = in_addr(s_addr: raw)
            return inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count)).map { String(cString: $0) }
        case .ipv6(let high, let low):
            var words = (high, low)
            return withUnsafeBytes(of: &words) { bytes in
                inet_ntop(AF_INET6, bytes.baseAddress, &buffer, socklen_t(buffer.count)).map { String(cString: $0) }
            }
        case .text(let text):
            return text
        }
    }
}
