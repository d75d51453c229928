import Foundation

/// An array of flat JSON objects written straight to bytes, for statements that read rows with
/// `json_to_recordset`: no intermediate ``JSONValue`` tree for values that are already typed.
///
/// Member names are static ASCII and written as they are; values are escaped.
public struct JSONRecords {
    private var bytes: [UInt8] = [UInt8(ascii: "[")]
    private var members = 0

    /// The number of records begun.
    public private(set) var count = 0

    /// Creates an empty array, reserving room for about `capacity` bytes.
    public init(capacity: Int = 0) {
        bytes.reserveCapacity(capacity)
    }

    /// Starts the next record; its members follow, then ``endRecord()``.
    public mutating func beginRecord() {
        if count > 0 { bytes.append(UInt8(ascii: ",")) }
        bytes.append(UInt8(ascii: "{"))
        count += 1
        members = 0
    }

    /// Ends the current record.
    public mutating func endRecord() {
        bytes.append(UInt8(ascii: "}"))
    }

    private mutating func name(_ name: StaticString) {
        if members > 0 { bytes.append(UInt8(ascii: ",")) }
        members += 1
        bytes.append(UInt8(ascii: "\""))
        name.withUTF8Buffer { bytes.append(contentsOf: $0) }
        bytes.append(UInt8(ascii: "\""))
        bytes.append(UInt8(ascii: ":"))
    }

    /// A string member, or `null`.
    public mutating func add(_ name: StaticString, _ value: String?) {
        self.name(name)
        if let value { JSONValue.writeString(value, to: &bytes) } else { bytes.append(contentsOf: "null".utf8) }
    }

    /// A number member.
    public mutating func add(_ name: StaticString, _ value: Int) {
        self.name(name)
        bytes.append(contentsOf: String(value).utf8)
    }

    /// A boolean member.
    public mutating func add(_ name: StaticString, _ value: Bool) {
        self.name(name)
        bytes.append(contentsOf: (value ? "true" : "false").utf8)
    }

    /// A member holding any JSON value.
    public mutating func add(_ name: StaticString, _ value: JSONValue) {
        self.name(name)
        value.write(to: &bytes, sortedKeys: false)
    }

    /// A UUID member in its lower-case form.
    public mutating func add(_ name: StaticString, _ value: UUID) {
        self.name(name)
        bytes.append(UInt8(ascii: "\""))
        Hex.append(value, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    /// A time member as RFC 3339 text, or `null`.
    public mutating func add(_ name: StaticString, _ value: Date?) {
        self.name(name)
        guard let value else { return bytes.append(contentsOf: "null".utf8) }
        bytes.append(UInt8(ascii: "\""))
        Timestamp.append(value, to: &bytes)
        bytes.append(UInt8(ascii: "\""))
    }

    /// The JSON text of the array.
    public var text: String {
        String(unsafeUninitializedCapacity: bytes.count + 1) { buffer in
            _ = buffer.initialize(from: bytes)
            buffer[bytes.count] = UInt8(ascii: "]")
            return bytes.count + 1
        }
    }
}
