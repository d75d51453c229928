import Basics

extension JSONValue {
    /// Compact JSON text, members in their stored order.
    public var jsonText: String { String(decoding: jsonBytes, as: UTF8.self) }

    /// Compact JSON text with object members sorted by name: equal values give equal text.
    public var canonicalText: String { String(decoding: canonicalBytes, as: UTF8.self) }

    /// The compact JSON text as UTF-8 bytes.
    public var jsonBytes: [UInt8] {
        var out: [UInt8] = []
        write(to: &out, sortedKeys: false)
        return out
    }

    /// ``canonicalText`` as UTF-8 bytes.
    public var canonicalBytes: [UInt8] {
        var out: [UInt8] = []
        write(to: &out, sortedKeys: true)
        return out
    }

    /// The size of ``jsonText`` in bytes, counted without writing it.
    public var jsonByteCount: Int {
        switch self {
        case .null: 4
        case .bool(let value): value ? 4 : 5
        case .number(let text): text.utf8.count
        case .string(let text): JSONValue.quotedByteCount(text)
        case .array(let elements):
            elements.reduce(2 + max(0, elements.count - 1)) { $0 + $1.jsonByteCount }
        case .object(let object):
            object.members.reduce(2 + max(0, object.members.count - 1)) {
                $0 + JSONValue.quotedByteCount($1.key) + 1 + $1.value.jsonByteCount
            }
        }
    }

    /// The most compact bytes ``jsonByteCount`` counts for one byte of any JSON text the value was
    /// parsed from: whitespace is dropped, numbers are kept as written, and an escape or character is
    /// never written more than three times as long (`\b` and `\f` as `\u0008` and `\u000c`, U+2028
    /// and U+2029 from three bytes to six).
    public static let maxCompactBytesPerSourceByte = 3

    /// The deepest nesting of arrays and objects (a scalar is 0).
    public var depth: Int {
        switch self {
        case .array(let elements): 1 + elements.reduce(0) { Swift.max($0, $1.depth) }
        case .object(let object): 1 + object.members.reduce(0) { Swift.max($0, $1.value.depth) }
        default: 0
        }
    }

    /// Appends the value's JSON text as UTF-8 (members in their order, or sorted by key).
    public func write(to out: inout [UInt8], sortedKeys: Bool) {
        switch self {
        case .null: out.append(contentsOf: "null".utf8)
        case .bool(let value): out.append(contentsOf: value ? "true".utf8 : "false".utf8)
        case .number(let text): out.append(contentsOf: text.utf8)
        case .string(let text): JSONValue.writeString(text, to: &out)
        case .array(let elements):
            out.append(UInt8(ascii: "["))
            for (index, element) in elements.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                element.write(to: &out, sortedKeys: sortedKeys)
            }
            out.append(UInt8(ascii: "]"))
        case .object(let object):
            out.append(UInt8(ascii: "{"))
            let members = sortedKeys ? object.members.sorted { $0.key < $1.key } : object.members
            for (index, member) in members.enumerated() {
                if index > 0 { out.append(UInt8(ascii: ",")) }
                JSONValue.writeString(member.key, to: &out)
                out.append(UInt8(ascii: ":"))
                member.value.write(to: &out, sortedKeys: sortedKeys)
            }
            out.append(UInt8(ascii: "}"))
        }
    }

    /// Appends `text` as a JSON string literal.
    public static func writeString(_ text: String, to out: inout String) {
        var bytes: [UInt8] = []
        writeString(text, to: &bytes)
        out += String(decoding: bytes, as: UTF8.self)
    }

    /// Appends `text` as a JSON string literal (``JSONString/append(_:to:)``): `"` and `\` escaped,
    /// control characters and U+2028/U+2029 (line breaks to JavaScript) as `\n`, `\r`, `\t` or `\u00xx`.
    public static func writeString(_ text: String, to out: inout [UInt8]) {
        JSONString.append(text, to: &out)
    }

    /// The bytes a string literal takes, quotes included.
    static func quotedByteCount(_ text: String) -> Int {
        JSONString.quotedByteCount(text)
    }
}
