import ActionHookCore
import Foundation
import MicroHTTPD

extension HTTPRequest {
    /// The body as JSON: 415 unless the content type is JSON, 400 when it does not parse.
    func jsonBody(maxDepth: Int = 64) throws -> JSONValue {
        let mediaType = headers["content-type"]?.split(separator: ";").first?
            .trimmingCharacters(in: .whitespaces).lowercased()
        guard let mediaType, mediaType == "application/json" || mediaType.hasSuffix("+json") else {
            throw APIError.unsupportedMediaType
        }
        let value = try JSONParser.parse(body, maxDepth: maxDepth)
        if let pointer = value.pointerToNUL {
            throw ValidationFailure.invalid([FieldError(pointer: pointer, detail: "must not contain the character U+0000")])
        }
        return value
    }

    /// The `limit` and `cursor` query items.
    func pageRequest() throws -> PageRequestValues {
        var limit = 50
        if let text = queryValue("limit") {
            guard let value = Int(text), (1...500).contains(value) else {
                throw APIError.badRequest("The limit query parameter must be an integer from 1 to 500.")
            }
            limit = value
        }
        let cursor = queryValue("cursor").flatMap { $0.isEmpty ? nil : $0 }
        return PageRequestValues(limit: limit, cursor: cursor)
    }

    /// A query item that must be an RFC 3339 time.
    func timeQuery(_ name: String) throws -> Date? {
        guard let text = queryValue(name), !text.isEmpty else { return nil }
        guard let date = Timestamp.parse(text) else {
            throw APIError.badRequest("The \(name) query parameter must be an RFC 3339 time.")
        }
        return date
    }

    /// A path parameter that must be a UUID; anything else cannot name an object, so it is a 404.
    func uuidParameter(_ name: String, what: String) throws -> UUID {
        guard let id = UUID(uuidString: parameter(name)) else { throw APIError.notFound(what) }
        return id
    }
}

/// Paging values read from the query.
struct PageRequestValues {
    var limit: Int
    var cursor: String?
}

extension HTTPResponse {
    /// A JSON response from a JSON value.
    static func json(_ status: Int, _ value: JSONValue, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        .json(status, value.jsonBytes, headers: headers)
    }

    /// The list shape every list route answers.
    static func list(_ items: [JSONValue], nextCursor: String?) -> HTTPResponse {
        .json(200, JSONValue.object(["items": .array(items), "nextCursor": nextCursor.map(JSONValue.string) ?? .null]))
    }

    /// 204 No Content.
    static let noContent = HTTPResponse(status: 204)
}
