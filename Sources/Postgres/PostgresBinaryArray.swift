import Basics
import Foundation

/// A one-dimensional array parameter built in PostgreSQL's binary form (what `array_recv` reads), to
/// bind many rows' values as one parameter without the server parsing text: `unnest(\(ids))` with
/// `ids` a `uuid` array, for example.
///
/// Each element type writes its values as the server's `*_recv` function reads them: `text` and
/// `json` as UTF-8, `jsonb` as its version byte 1 and the text, `uuid` as 16 bytes, `int4` and `bool`
/// in network order, `timestamptz` as microseconds since 2000-01-01 UTC, `bytea` as the bytes.
/// Text and JSON must not hold a NUL (the server refuses it); callers check before binding.
public struct PostgresBinaryArray: Sendable {
    /// An element type, by its type OID (`pg_type.oid`), with its array type's.
    public enum Element: Sendable {
        case text, json, jsonb, uuid, int4, bool, timestamptz, bytea

        var oid: UInt32 {
            switch self {
            case .text: 25
            case .json: 114
            case .jsonb: 3802
            case .uuid: 2950
            case .int4: 23
            case .bool: 16
            case .timestamptz: 1184
            case .bytea: 17
            }
        }

        /// The type's name in SQL, as a statement casts the array to it (`::text[]`).
        public var typeName: String {
            switch self {
            case .text: "text"
            case .json: "json"
            case .jsonb: "jsonb"
            case .uuid: "uuid"
            case .int4: "int4"
            case .bool: "bool"
            case .timestamptz: "timestamptz"
            case .bytea: "bytea"
            }
        }

        var arrayOID: UInt32 {
            switch self {
            case .text: 1009
            case .json: 199
            case .jsonb: 3807
            case .uuid: 2951
            case .int4: 1007
            case .bool: 1000
            case .timestamptz: 1185
            case .bytea: 1001
            }
        }
    }

    /// The element type.
    public let element: Element
    /// The number of elements appended.
    public private(set) var count = 0
    private var hasNull = false
    /// The elements, each as its length (-1 for `NULL`) and its bytes.
    private var body: [UInt8] = []

    /// An empty array of `element`, with room for `capacity` bytes of elements.
    public init(_ element: Element, capacity: Int = 0) {
        self.element = element
        body.reserveCapacity(capacity)
    }

    private mutating func appendLength(_ length: Int32) {
        withUnsafeBytes(of: length.bigEndian) { body.append(contentsOf: $0) }
        count += 1
    }

    private mutating func appendNull() {
        hasNull = true
        appendLength(-1)
    }

    /// Appends a `text` or `json` element (UTF-8), or a `jsonb` one (its version byte and the text); `nil` is `NULL`.
    public mutating func append(_ text: String?) {
        precondition(element == .text || element == .json || element == .jsonb, "a text element in a \(element) array")
        guard var text else { return appendNull() }
        text.withUTF8 { appendText(UnsafeRawBufferPointer($0)) }
    }

    /// Appends a `text`, `json` or `jsonb` element from UTF-8 bytes.
    public mutating func append(utf8 bytes: [UInt8]) {
        bytes.withUnsafeBytes { appendText($0) }
    }

    private mutating func appendText(_ bytes: UnsafeRawBufferPointer) {
        precondition(element == .text || element == .json || element == .jsonb, "a text element in a \(element) array")
        // jsonb's binary form is its version, 1, and the text.
        let version = element == .jsonb ? 1 : 0
        appendLength(Int32(bytes.count + version))
        if version == 1 { body.append(1) }
        body.append(contentsOf: bytes)
    }

    /// Appends a `uuid` element; `nil` is `NULL`.
    public mutating func append(_ uuid: UUID?) {
        precondition(element == .uuid, "a uuid element in a \(element) array")
        guard let uuid else { return appendNull() }
        appendLength(16)
        withUnsafeBytes(of: uuid.uuid) { body.append(contentsOf: $0) }
    }

    /// Appends an `int4` element; `nil` is `NULL`.
    public mutating func append(_ value: Int32?) {
        precondition(element == .int4, "an int4 element in a \(element) array")
        guard let value else { return appendNull() }
        appendLength(4)
        withUnsafeBytes(of: value.bigEndian) { body.append(contentsOf: $0) }
    }

    /// Appends a `bool` element; `nil` is `NULL`.
    public mutating func append(_ value: Bool?) {
        precondition(element == .bool, "a bool element in a \(element) array")
        guard let value else { return appendNull() }
        appendLength(1)
        body.append(value ? 1 : 0)
    }

    /// Appends a `timestamptz` element, rounded to the microsecond (the type's precision); `nil` is `NULL`.
    public mutating func append(_ date: Date?) {
        append(date.map { Int64(($0.timeIntervalSince1970 * 1_000_000).rounded()) })
    }

    /// Appends a `timestamptz` element truncated to the millisecond, as the service's RFC 3339 text has
    /// it (a time the service also shows, stored as shown); `nil` is `NULL`. The time is taken to the
    /// microsecond first, so that one held as `….787999999` is `.788`.
    public mutating func append(milliseconds date: Date?) {
        append(
            date.map {
                let microseconds = Int64(($0.timeIntervalSince1970 * 1_000_000).rounded())
                return CivilDate.floorDivide(microseconds, 1000).quotient * 1000
            })
    }

    private mutating func append(_ unixMicroseconds: Int64?) {
        precondition(element == .timestamptz, "a timestamptz element in a \(element) array")
        guard let unixMicroseconds else { return appendNull() }
        // PostgreSQL's epoch is 2000-01-01 00:00:00 UTC, 946,684,800 s after Unix's.
        let microseconds = unixMicroseconds - 946_684_800_000_000
        appendLength(8)
        withUnsafeBytes(of: microseconds.bigEndian) { body.append(contentsOf: $0) }
    }

    /// Appends a `bytea` element; `nil` is `NULL`.
    public mutating func append(bytes: [UInt8]?) {
        precondition(element == .bytea, "a bytea element in a \(element) array")
        guard let bytes else { return appendNull() }
        appendLength(Int32(bytes.count))
        body.append(contentsOf: bytes)
    }

    /// The array as a parameter: its header (one dimension, lower bound 1) and the elements.
    public var parameter: PostgresParameter {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(20 + body.count)
        func int32(_ value: Int32) { withUnsafeBytes(of: value.bigEndian) { bytes.append(contentsOf: $0) } }
        if count == 0 {
            // An empty array has no dimensions.
            int32(0)
            int32(0)
            int32(Int32(bitPattern: element.oid))
        } else {
            int32(1)
            int32(hasNull ? 1 : 0)
            int32(Int32(bitPattern: element.oid))
            int32(Int32(count))
            int32(1)
            bytes.append(contentsOf: body)
        }
        return PostgresParameter(binary: bytes, typeOID: element.arrayOID)
    }
}
