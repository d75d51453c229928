import ActionHookCore
import Basics
import Foundation
import MicroHTTPD

extension HTTPRequest {
    /// The body as JSON: 415 unless the content type is JSON, 400 when it does not parse.
    func jsonBody(maxDepth: Int = 64) throws -> JSONValue {
        guard let contentType = headers["content-type"], Self.isJSON(mediaType: contentType) else {
            throw APIError.unsupportedMediaType
        }
        let value = try JSONParser.parse(body, maxDepth: maxDepth)
        // A raw NUL is a syntax error, so U+0000 can only come from a `\u0000` escape: walk the value
        // for it only when the bytes hold one.
        if Self.containsEscapedNUL(body), let pointer = value.pointerToNUL {
            throw ValidationFailure.invalid([
                FieldError(pointer: pointer, detail: "must not contain the character U+0000")
            ])
        }
        return value
    }

    /// Whether `bytes` hold the six characters `\u0000`.
    static func containsEscapedNUL(_ bytes: [UInt8]) -> Bool {
        let escape = Array(#"\u0000"#.utf8)
        return bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return false }
            var index = 0
            while buffer.count - index >= escape.count {
                guard let found = memchr(base + index, Int32(escape[0]), buffer.count - index) else { return false }
                let start = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
                if buffer.count - start >= escape.count && buffer[start..<start + escape.count].elementsEqual(escape) {
                    return true
                }
                index = start + 1
            }
            return false
        }
    }

    /// Whether a `Content-Type` value names JSON: `application/json` or any `+json` type, in any case,
    /// parameters ignored.
    static func isJSON(mediaType value: String) -> Bool {
        var value = value
        return value.withUTF8 { utf8 in
            func isBlank(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }
            var end = utf8.firstIndex(of: UInt8(ascii: ";")) ?? utf8.count
            var start = 0
            while start < end && isBlank(utf8[start]) { start += 1 }
            while end > start && isBlank(utf8[end - 1]) { end -= 1 }
            func endsWith(_ text: StaticString) -> Bool {
                let count = text.utf8CodeUnitCount
                guard end - start >= count else { return false }
                return (0..<count).allSatisfy { offset in
                    let byte = utf8[end - count + offset]
                    return ((0x41...0x5A).contains(byte) ? byte | 0x20 : byte) == text.utf8Start[offset]
                }
            }
            return (end - start == 16 && endsWith("application/json")) || (end - start > 5 && endsWith("+json"))
        }
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

    /// A query item that must be one of `Value`'s raw values: `nil` when absent or empty, a 400 saying
    /// `refusal` when it is anything else.
    func choiceQuery<Value: RawRepresentable>(_ name: String, as _: Value.Type, refusal: String) throws -> Value?
    where Value.RawValue == String {
        guard let text = queryValue(name), !text.isEmpty else { return nil }
        guard let value = Value(rawValue: text) else { throw APIError.badRequest(refusal) }
        return value
    }

    /// A query item that must be an RFC 3339 time, as the bound to compare stored times with
    /// (``Timestamp/filterBound(_:)``): a filter agrees with the times the API reports, so `since` set to
    /// a reported `createdAt` includes the row it came from.
    func timeQuery(_ name: String) throws -> Date? {
        guard let text = queryValue(name), !text.isEmpty else { return nil }
        guard let date = Timestamp.parse(text) else {
            throw APIError.badRequest("The \(name) query parameter must be an RFC 3339 time.")
        }
        return Timestamp.filterBound(date)
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

extension APIContext {
    /// The `Idempotency-Key` header of the send and ingest routes (1–255 visible ASCII characters), or `nil`.
    func idempotencyKeyHeader(_ request: HTTPRequest) throws -> String? {
        guard let header = request.headers["idempotency-key"] else { return nil }
        guard (1...255).contains(header.utf8.count), header.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
            throw APIError.badRequest("The Idempotency-Key header must be 1 to 255 visible ASCII characters.")
        }
        return header
    }
}
