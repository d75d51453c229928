/// Why a JSON text was refused. Positions are byte offsets; the text itself is never quoted.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of problem it is.
    public enum Reason: Sendable, Equatable {
        case invalidUTF8
        case syntax
        case tooDeep
        case duplicateKey
    }

    /// The kind of problem.
    public let reason: Reason
    /// The byte offset where it was found.
    public let offset: Int

    /// A description that names the problem and its position only.
    public var description: String {
        switch reason {
        case .invalidUTF8: "The body is not valid UTF-8 (byte \(offset))."
        case .syntax: "The body is not valid JSON (byte \(offset))."
        case .tooDeep: "The JSON nests too deeply (byte \(offset))."
        case .duplicateKey: "An object has the same member name twice (byte \(offset))."
        }
    }
}

/// A strict RFC 8259 parser over bytes: validates UTF-8, limits nesting, refuses duplicate names.
public struct JSONParser {
    // Valid only during `parse`: every read is checked against `bytes.count` first.
    private let bytes: UnsafeBufferPointer<UInt8>
    private var position = 0
    private let maxDepth: Int

    /// Parses one JSON text (surrounding whitespace allowed).
    public static func parse(_ bytes: [UInt8], maxDepth: Int = 64) throws(JSONParseError) -> JSONValue {
        try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) in
            var parser = JSONParser(bytes: buffer, maxDepth: maxDepth)
            parser.skipWhitespace()
            let value = try parser.parseValue(depth: 1)
            parser.skipWhitespace()
            guard parser.position == buffer.count else { throw parser.error(.syntax) }
            return value
        }
    }

    /// Parses a JSON text given as a string.
    public static func parse(_ text: String, maxDepth: Int = 64) throws(JSONParseError) -> JSONValue {
        try parse(Array(text.utf8), maxDepth: maxDepth)
    }

    private init(bytes: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
        self.bytes = bytes
        self.maxDepth = maxDepth
    }

    private func error(_ reason: JSONParseError.Reason) -> JSONParseError {
        JSONParseError(reason: reason, offset: position)
    }

    private mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case 0x20, 0x09, 0x0A, 0x0D: position += 1
            default: return
            }
        }
    }

    private mutating func parseValue(depth: Int) throws(JSONParseError) -> JSONValue {
        guard position < bytes.count else { throw error(.syntax) }
        switch bytes[position] {
        case UInt8(ascii: "{"): return try parseObject(depth: depth)
        case UInt8(ascii: "["): return try parseArray(depth: depth)
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"):
            try expect("true")
            return .bool(true)
        case UInt8(ascii: "f"):
            try expect("false")
            return .bool(false)
        case UInt8(ascii: "n"):
            try expect("null")
            return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
        default: throw error(.syntax)
        }
    }

    private mutating func expect(_ word: StaticString) throws(JSONParseError) {
        let count = word.utf8CodeUnitCount
        guard position + count <= bytes.count else { throw error(.syntax) }
        let matches = word.withUTF8Buffer { literal in
            (0..<count).allSatisfy { bytes[position + $0] == literal[$0] }
        }
        guard matches else { throw error(.syntax) }
        position += count
    }

    private mutating func parseObject(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= maxDepth else { throw error(.tooDeep) }
        position += 1
        var members: [(key: String, value: JSONValue)] = []
        // Small objects (the usual case) look for a duplicate name by scanning; large ones hash.
        var seen: Set<String>? = nil
        skipWhitespace()
        if position < bytes.count && bytes[position] == UInt8(ascii: "}") {
            position += 1
            return .object(JSONObject())
        }
        while true {
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: "\"") else { throw error(.syntax) }
            let keyOffset = position
            let key = try parseString()
            if seen == nil && members.count >= 16 { seen = Set(members.map(\.key)) }
            let isNew = seen?.insert(key).inserted ?? !members.contains { $0.key == key }
            guard isNew else { throw JSONParseError(reason: .duplicateKey, offset: keyOffset) }
            skipWhitespace()
            guard position < bytes.count, bytes[position] == UInt8(ascii: ":") else { throw error(.syntax) }
            position += 1
            skipWhitespace()
            members.append((key: key, value: try parseValue(depth: depth + 1)))
            skipWhitespace()
            guard position < bytes.count else { throw error(.syntax) }
            if bytes[position] == UInt8(ascii: ",") {
                position += 1
                continue
            }
            guard bytes[position] == UInt8(ascii: "}") else { throw error(.syntax) }
            position += 1
            return .object(JSONObject(uniqueMembers: members))
        }
    }

    private mutating func parseArray(depth: Int) throws(JSONParseError) -> JSONValue {
        guard depth <= maxDepth else { throw error(.tooDeep) }
        position += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if position < bytes.count && bytes[position] == UInt8(ascii: "]") {
            position += 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try parseValue(depth: depth + 1))
            skipWhitespace()
            guard position < bytes.count else { throw error(.syntax) }
            if bytes[position] == UInt8(ascii: ",") {
                position += 1
                continue
            }
            guard bytes[position] == UInt8(ascii: "]") else { throw error(.syntax) }
            position += 1
            return .array(elements)
        }
    }

    private mutating func parseNumber() throws(JSONParseError) -> String {
        let start = position
        func digits() -> Int {
            let from = position
            while position < bytes.count && (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[position]) {
                position += 1
            }
            return position - from
        }
        if bytes[position] == UInt8(ascii: "-") { position += 1 }
        guard position < bytes.count else { throw error(.syntax) }
        if bytes[position] == UInt8(ascii: "0") {
            position += 1
        } else if digits() == 0 {
            throw error(.syntax)
        }
        if position < bytes.count && bytes[position] == UInt8(ascii: ".") {
            position += 1
            guard digits() > 0 else { throw error(.syntax) }
        }
        if position < bytes.count && (bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E")) {
            position += 1
            if position < bytes.count && (bytes[position] == UInt8(ascii: "+") || bytes[position] == UInt8(ascii: "-"))
            {
                position += 1
            }
            guard digits() > 0 else { throw error(.syntax) }
        }
        return String(decoding: bytes[start..<position], as: UTF8.self)
    }

    private mutating func parseString() throws(JSONParseError) -> String {
        position += 1
        let start = position
        skipPlainASCII()
        // Most strings have no escapes: they are their bytes.
        while position < bytes.count {
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[start..<position]), as: UTF8.self)
                position += 1
                return text
            case UInt8(ascii: "\\"):
                return try parseEscapedString(start: start)
            case 0..<0x20:
                throw error(.syntax)
            case 0..<0x80:
                position += 1
            default:
                try skipUTF8Sequence()
            }
        }
        throw error(.syntax)
    }

    /// Moves past the bytes that need no look of their own inside a string (ASCII other than `"`, `\`
    /// and control characters), eight at a time while eight remain.
    private mutating func skipPlainASCII() {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highs: UInt64 = 0x8080_8080_8080_8080
        // Whether some byte of x is below n (n ≤ 0x80): the classic (x - n·ones) & ~x & highs, exact as a
        // yes or no. Bytes ≥ 0x80 are ruled out first; `"` and `\` are the bytes that x XOR them makes zero.
        func hasByte(below n: UInt64, in x: UInt64) -> Bool { (x &- n &* ones) & ~x & highs != 0 }
        guard let base = bytes.baseAddress else { return }
        while bytes.count - position >= 8 {
            // Byte order does not matter: every test is on each byte alike.
            let word = UnsafeRawPointer(base + position).loadUnaligned(as: UInt64.self)
            if word & highs != 0 || hasByte(below: 0x20, in: word) || hasByte(below: 1, in: word ^ (0x22 &* ones))
                || hasByte(below: 1, in: word ^ (0x5C &* ones))
            {
                return
            }
            position += 8
        }
    }

    /// The rest of a string from its first escape at `position`; `start` is just after the quote.
    private mutating func parseEscapedString(start: Int) throws(JSONParseError) -> String {
        var text = Array(bytes[start..<position])
        while position < bytes.count {
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                return String(decoding: text, as: UTF8.self)
            case UInt8(ascii: "\\"):
                position += 1
                text.append(contentsOf: UTF8.encode(try parseEscape())!)
            case 0..<0x20:
                throw error(.syntax)
            case 0..<0x80:
                text.append(byte)
                position += 1
            default:
                let from = position
                try skipUTF8Sequence()
                text.append(contentsOf: bytes[from..<position])
            }
        }
        throw error(.syntax)
    }

    /// Checks one multi-byte UTF-8 sequence (RFC 3629: no overlongs, no surrogates, ≤ U+10FFFF).
    private mutating func skipUTF8Sequence() throws(JSONParseError) {
        let lead = bytes[position]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0:
            length = 3
            low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED:
            length = 3
            high = 0x9F
        case 0xF0:
            length = 4
            low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4:
            length = 4
            high = 0x8F
        default: throw error(.invalidUTF8)
        }
        guard position + length <= bytes.count else { throw error(.invalidUTF8) }
        let second = bytes[position + 1]
        guard second >= low && second <= high else { throw error(.invalidUTF8) }
        for index in 2..<length where !(0x80...0xBF).contains(bytes[position + index]) {
            throw error(.invalidUTF8)
        }
        position += length
    }

    private mutating func parseEscape() throws(JSONParseError) -> Unicode.Scalar {
        guard position < bytes.count else { throw error(.syntax) }
        let byte = bytes[position]
        position += 1
        switch byte {
        case UInt8(ascii: "\""): return "\""
        case UInt8(ascii: "\\"): return "\\"
        case UInt8(ascii: "/"): return "/"
        case UInt8(ascii: "b"): return "\u{08}"
        case UInt8(ascii: "f"): return "\u{0C}"
        case UInt8(ascii: "n"): return "\n"
        case UInt8(ascii: "r"): return "\r"
        case UInt8(ascii: "t"): return "\t"
        case UInt8(ascii: "u"):
            let unit = try parseHex4()
            if (0xD800...0xDBFF).contains(unit) {
                guard position + 1 < bytes.count, bytes[position] == UInt8(ascii: "\\"),
                    bytes[position + 1] == UInt8(ascii: "u")
                else { throw error(.invalidUTF8) }
                position += 2
                let lowUnit = try parseHex4()
                guard (0xDC00...0xDFFF).contains(lowUnit) else { throw error(.invalidUTF8) }
                let value = 0x10000 + ((UInt32(unit) - 0xD800) << 10) + (UInt32(lowUnit) - 0xDC00)
                guard let scalar = Unicode.Scalar(value) else { throw error(.invalidUTF8) }
                return scalar
            }
            // A lone low surrogate cannot become text.
            guard let scalar = Unicode.Scalar(unit) else { throw error(.invalidUTF8) }
            return scalar
        default:
            throw error(.syntax)
        }
    }

    private mutating func parseHex4() throws(JSONParseError) -> UInt16 {
        guard position + 4 <= bytes.count else { throw error(.syntax) }
        var value: UInt16 = 0
        for _ in 0..<4 {
            let byte = bytes[position]
            let digit: UInt8
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = byte - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = byte - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = byte - UInt8(ascii: "A") + 10
            default: throw error(.syntax)
            }
            value = value << 4 | UInt16(digit)
            position += 1
        }
        return value
    }
}
