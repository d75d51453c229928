extension JSONValue {
    /// Compact JSON text, members in their stored order.
    public var jsonText: String {
        var out = ""
        write(to: &out, sortedKeys: false)
        return out
    }

    /// Compact JSON text with object members sorted by name: equal values give equal text.
    public var canonicalText: String {
        var out = ""
        write(to: &out, sortedKeys: true)
        return out
    }

    /// The compact JSON text as UTF-8 bytes.
    public var jsonBytes: [UInt8] { Array(jsonText.utf8) }

    /// The serialised size in bytes.
    public var jsonByteCount: Int { jsonText.utf8.count }

    /// The deepest nesting of arrays and objects (a scalar is 0).
    public var depth: Int {
        switch self {
        case .array(let elements): 1 + (elements.map(\.depth).max() ?? 0)
        case .object(let object): 1 + (object.members.map(\.value.depth).max() ?? 0)
        default: 0
        }
    }

    func write(to out: inout String, sortedKeys: Bool) {
        switch self {
        case .null: out += "null"
        case .bool(let value): out += value ? "true" : "false"
        case .number(let text): out += text
        case .string(let text): JSONValue.writeString(text, to: &out)
        case .array(let elements):
            out += "["
            for (index, element) in elements.enumerated() {
                if index > 0 { out += "," }
                element.write(to: &out, sortedKeys: sortedKeys)
            }
            out += "]"
        case .object(let object):
            out += "{"
            let members = sortedKeys ? object.members.sorted { $0.key < $1.key } : object.members
            for (index, member) in members.enumerated() {
                if index > 0 { out += "," }
                JSONValue.writeString(member.key, to: &out)
                out += ":"
                member.value.write(to: &out, sortedKeys: sortedKeys)
            }
            out += "}"
        }
    }

    /// Appends `text` as a JSON string literal.
    public static func writeString(_ text: String, to out: inout String) {
        out += "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x2028 || scalar.value == 0x2029:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
