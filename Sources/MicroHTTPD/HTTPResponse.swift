/// An HTTP response: status, headers and a complete body.
public struct HTTPResponse: Sendable {
    /// The status code.
    public var status: Int
    /// The response headers; `Content-Length` and `Date` are added by the server.
    public var headers: HTTPHeaders
    /// The body bytes.
    public var body: [UInt8]

    /// Creates a response.
    public init(status: Int, headers: HTTPHeaders = HTTPHeaders(), body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// A response whose body is JSON text.
    public static func json(_ status: Int, _ body: [UInt8], headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        var headers = headers
        headers.set("Content-Type", "application/json")
        return HTTPResponse(status: status, headers: headers, body: body)
    }

    /// A response with a plain-text body.
    public static func text(_ status: Int, _ text: String, contentType: String = "text/plain; charset=utf-8")
        -> HTTPResponse
    {
        HTTPResponse(status: status, headers: ["Content-Type": contentType], body: Array(text.utf8))
    }

    /// An `application/problem+json` (RFC 9457) response.
    public static func problem(_ problem: ProblemDetails, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        var headers = headers
        headers.set("Content-Type", "application/problem+json")
        return HTTPResponse(status: problem.status, headers: headers, body: problem.jsonBytes)
    }
}
