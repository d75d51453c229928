import ActionHookCore
import Foundation

/// An opaque keyset-pagination cursor: the sort key of the last item returned.
struct Cursor {
    var parts: [String]

    init(_ parts: [String]) {
        self.parts = parts
    }

    /// Decodes a cursor made by `encoded`; `nil` for anything else.
    init?(encoded: String, count: Int) {
        var base64 = encoded.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        while base64.count % 4 != 0 { base64 += "=" }
        guard let data = Data(base64Encoded: base64), let text = String(data: data, encoding: .utf8) else {
            return nil
        }
        let parts = UnitSeparated.split(text)
        guard parts.count == count else { return nil }
        self.parts = parts
    }

    /// Decodes a newest-first cursor: the database's text of a timestamp and a row id.
    static func timeAndID(_ encoded: String) throws -> (time: String, id: UUID) {
        guard let cursor = Cursor(encoded: encoded, count: 2), Timestamp.parse(cursor.parts[0]) != nil,
            let id = UUID(uuidString: cursor.parts[1])
        else { throw InvalidCursor() }
        return (cursor.parts[0], id)
    }

    var encoded: String {
        Data(UnitSeparated.join(parts).utf8).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-").replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}

/// A page of a list: the items and the cursor of the next page, if any.
public struct Page<Item: Sendable>: Sendable {
    /// The items, in order.
    public var items: [Item]
    /// The cursor for the next page, or `nil` on the last page.
    public var nextCursor: String?
}

/// A request for one page.
public struct PageRequest: Sendable {
    /// Items per page, 1...500.
    public var limit: Int
    /// The cursor from the previous page.
    public var cursor: String?

    /// Creates a page request.
    public init(limit: Int = 50, cursor: String? = nil) {
        self.limit = limit
        self.cursor = cursor
    }
}

/// A cursor that was not made by this server.
public struct InvalidCursor: Error, Sendable {}
