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

    func write(to out: inout [UInt8], sortedKeys: Bool) {
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

    /// Appends `text` as a JSON string literal: `"` and `\` escaped, control characters and
    /// U+2028/U+2029 (line breaks to JavaScript) as `\n`, `\r`, `\t` or `\u00xx`.
    public static func writeString(_ text: String, to out: inout [UInt8]) {
        out.append(UInt8(ascii: "\""))
        var text = text
        text.withUTF8 { utf8 in
            var runStart = 0
            var index = 0
            while index < utf8.count {
                let byte = utf8[index]
                // The bytes written as they are, without a look of their own (most of them).
                if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") && byte != 0xE2 {
                    index += 1
                    continue
                }
                if escapedLength(utf8, at: index) == 0 {
                    index += 1
                    continue
                }
                out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
                switch byte {
                case UInt8(ascii: "\""): out.append(contentsOf: #"\""#.utf8)
                case UInt8(ascii: "\\"): out.append(contentsOf: #"\\"#.utf8)
                case UInt8(ascii: "\n"): out.append(contentsOf: #"\n"#.utf8)
                case UInt8(ascii: "\r"): out.append(contentsOf: #"\r"#.utf8)
                case UInt8(ascii: "\t"): out.append(contentsOf: #"\t"#.utf8)
                case 0xE2: out.append(contentsOf: (utf8[index + 2] == 0xA8 ? #"\u2028"# : #"\u2029"#).utf8)
                default:
                    out.append(contentsOf: #"\u00"#.utf8)
                    out.append(hexDigit(byte >> 4))
                    out.append(hexDigit(byte & 0x0F))
                }
                index += byte == 0xE2 ? 3 : 1
                runStart = index
            }
            out.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index]))
        }
        out.append(UInt8(ascii: "\""))
    }

    /// The bytes a string literal takes, quotes included.
    static func quotedByteCount(_ text: String) -> Int {
        var text = text
        return text.withUTF8 { utf8 in
            var count = 2 + utf8.count
            for index in utf8.indices
            where utf8[index] < 0x20 || utf8[index] == 0x22 || utf8[index] == 0x5C
                || utf8[index] == 0xE2
            {
                let length = escapedLength(utf8, at: index)
                count += length == 0 ? 0 : length - (utf8[index] == 0xE2 ? 3 : 1)
            }
            return count
        }
    }

    /// The length of the escape the byte at `index` starts (U+2028 and U+2029 take three bytes), or
    /// 0 when it is written as it is.
    private static func escapedLength(_ utf8: UnsafeBufferPointer<UInt8>, at index: Int) -> Int {
        let byte = utf8[index]
        switch byte {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "\n"), UInt8(ascii: "\r"), UInt8(ascii: "\t"):
            return 2
        case 0..<0x20:
            return 6
        case 0xE2:
            let isLineBreak =
                index + 2 < utf8.count && utf8[index + 1] == 0x80
                && (utf8[index + 2] == 0xA8 || utf8[index + 2] == 0xA9)
            return isLineBreak ? 6 : 0
        default:
            return 0
        }
    }

    private static func hexDigit(_ value: UInt8) -> UInt8 {
        value < 10 ? UInt8(ascii: "0") + value : UInt8(ascii: "a") + value - 10
    }
}
