/// JSON string literals, written byte by byte: shared by the domain's JSON writer and the HTTP layer's
/// problem+json bodies, so there is one escaping rule.
public enum JSONString {
    /// Appends `text` as a JSON string literal: `"` and `\` escaped, control characters and
    /// U+2028/U+2029 (line breaks to JavaScript) as `\n`, `\r`, `\t` or `\u00xx`.
    public static func append(_ text: String, to out: inout [UInt8]) {
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
    public static func quotedByteCount(_ text: String) -> Int {
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
