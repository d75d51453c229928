import Crypto
import Foundation

/// The category list an app fetches with its ingest key (`GET /v1/categories`): the JSON body and a strong
/// `ETag` of it, so an app that already holds the set is answered `304 Not Modified`.
public struct CategoryListing: Sendable {
    /// `{"items": [...], "nextCursor": null}`, the categories ordered by identifier.
    public let body: [UInt8]
    /// `"<base64url of the body's SHA-256, first 16 bytes>"`: changes whenever any byte of the body does.
    public let etag: String

    /// The listing of `categories`.
    public init(_ categories: some Sequence<NotificationCategory>) {
        let items = categories.sorted { $0.id < $1.id }.map(\.json)
        body = JSONValue.object(["items": .array(items), "nextCursor": .null]).jsonBytes
        etag = "\"" + SecretToken.base64URL(Array(SHA256.hash(data: body).prefix(16))) + "\""
    }

    /// Whether an `If-None-Match` header names this listing (RFC 9110 §13.1.2: `*`, or a list of entity
    /// tags compared weakly, so `W/"x"` matches `"x"`).
    public func isNotModified(ifNoneMatch header: String) -> Bool {
        header.split(separator: ",").contains { member in
            var tag = member.trimmingCharacters(in: .whitespaces)
            if tag == "*" { return true }
            if tag.hasPrefix("W/") { tag.removeFirst(2) }
            return tag == etag
        }
    }
}
