import Foundation

/// A value that can be sent to PostgreSQL as a text-format parameter.
///
/// The server infers each parameter's type from the statement (parameters are sent with type OID 0),
/// so the text must be valid input for the column or cast it meets.
public protocol PostgresEncodable: Sendable {
    /// The value's PostgreSQL text representation.
    var postgresText: String { get }
}

/// A value that can be read from a PostgreSQL text-format result.
public protocol PostgresDecodable {
    /// Decodes a value from its PostgreSQL text output.
    ///
    /// - Throws: ``PostgresError`` of kind `.decoding` when the text is not a valid representation.
    init(postgresText: String) throws
}

/// A type whose Swift arrays have a PostgreSQL text form: a PostgreSQL array for `String`, `Int` and
/// `UUID`, and `bytea` for `UInt8`.
///
/// Swift allows `Array` only one conformance to each protocol, so this protocol lets the element
/// type choose the array's representation.
public protocol PostgresArrayElement: Sendable {
    /// The text form of an array of this element type.
    static func postgresText(of array: [Self]) -> String

    /// Decodes an array of this element type from its text form.
    static func postgresArray(fromText text: String) throws -> [Self]
}

extension PostgresArrayElement where Self: PostgresEncodable & PostgresDecodable {
    /// A PostgreSQL array literal with every element double-quoted, such as `{"a","b \"c\""}`.
    ///
    /// Quoting every element keeps commas, braces, spaces and the word `NULL` literal.
    public static func postgresText(of array: [Self]) -> String {
        var text = "{"
        for (offset, element) in array.enumerated() {
            if offset > 0 { text += "," }
            text += "\""
            for character in element.postgresText.unicodeScalars {
                if character == "\"" || character == "\\" { text += "\\" }
                text.unicodeScalars.append(character)
            }
            text += "\""
        }
        return text + "}"
    }

    /// Decodes a one-dimensional PostgreSQL array; a `NULL` element is a decoding error.
    public static func postgresArray(fromText text: String) throws -> [Self] {
        try PostgresArrayText.parse(text).map { element in
            guard let element else {
                throw PostgresError(kind: .decoding, message: "the array holds a NULL element")
            }
            return try Self(postgresText: element)
        }
    }
}

extension Array: PostgresEncodable where Element: PostgresArrayElement {
    /// The array's PostgreSQL text form, chosen by its element type.
    public var postgresText: String { Element.postgresText(of: self) }
}

extension Array: PostgresDecodable where Element: PostgresArrayElement {
    /// Decodes the array from its PostgreSQL text form, chosen by its element type.
    public init(postgresText: String) throws {
        self = try Element.postgresArray(fromText: postgresText)
    }
}

// MARK: - Text and numbers

extension String: PostgresEncodable, PostgresDecodable, PostgresArrayElement {
    /// The string itself.
    public var postgresText: String { self }

    /// The text itself.
    public init(postgresText: String) { self = postgresText }
}

extension Substring: PostgresEncodable, PostgresDecodable {
    /// The substring's characters.
    public var postgresText: String { String(self) }

    /// The text itself.
    public init(postgresText: String) { self = Substring(postgresText) }
}

extension Int: PostgresEncodable, PostgresDecodable, PostgresArrayElement {
    /// The decimal digits.
    public var postgresText: String { String(self) }

    /// Decodes decimal digits.
    public init(postgresText: String) throws { self = try decodeInteger(postgresText) }
}

extension Int32: PostgresEncodable, PostgresDecodable {
    /// The decimal digits.
    public var postgresText: String { String(self) }

    /// Decodes decimal digits.
    public init(postgresText: String) throws { self = try decodeInteger(postgresText) }
}

extension Int64: PostgresEncodable, PostgresDecodable {
    /// The decimal digits.
    public var postgresText: String { String(self) }

    /// Decodes decimal digits.
    public init(postgresText: String) throws { self = try decodeInteger(postgresText) }
}

private func decodeInteger<Integer: FixedWidthInteger>(_ text: String) throws -> Integer {
    guard let value = Integer(text, radix: 10) else {
        throw PostgresError(kind: .decoding, message: "not an integer of type \(Integer.self)")
    }
    return value
}

extension Bool: PostgresEncodable, PostgresDecodable {
    /// `true` or `false`.
    public var postgresText: String { self ? "true" : "false" }

    /// Decodes `t` or `f` (the server's output), or `true` or `false`.
    public init(postgresText: String) throws {
        switch postgresText {
        case "t", "true": self = true
        case "f", "false": self = false
        default: throw PostgresError(kind: .decoding, message: "not a boolean")
        }
    }
}

extension Double: PostgresEncodable, PostgresDecodable {
    /// The shortest text that reads back as the same value; `NaN`, `Infinity` or `-Infinity` when not finite.
    public var postgresText: String {
        if isNaN { return "NaN" }
        if isInfinite { return self < 0 ? "-Infinity" : "Infinity" }
        return description
    }

    /// Decodes the server's `float8` output, including `NaN`, `Infinity` and `-Infinity`.
    public init(postgresText: String) throws {
        switch postgresText {
        case "NaN": self = .nan
        case "Infinity": self = .infinity
        case "-Infinity": self = -.infinity
        default:
            // Swift's parser also accepts forms such as "nan" or "0x1p3" that PostgreSQL never prints;
            // they are harmless, so they are not rejected.
            guard let value = Double(postgresText) else {
                throw PostgresError(kind: .decoding, message: "not a floating-point number")
            }
            self = value
        }
    }
}

// MARK: - UUID

extension UUID: PostgresEncodable, PostgresDecodable, PostgresArrayElement {
    /// The lowercase hyphenated form, as the server prints it.
    public var postgresText: String { uuidString.lowercased() }

    /// Decodes the hyphenated form.
    public init(postgresText: String) throws {
        guard let value = UUID(uuidString: postgresText) else {
            throw PostgresError(kind: .decoding, message: "not a UUID")
        }
        self = value
    }
}

// MARK: - bytea

extension UInt8: PostgresArrayElement {
    /// The `bytea` hex form, `\x` followed by two lowercase hex digits per byte.
    public static func postgresText(of array: [UInt8]) -> String {
        ByteaText.encode(array)
    }

    /// Decodes the `bytea` hex form.
    public static func postgresArray(fromText text: String) throws -> [UInt8] {
        try ByteaText.decode(text)
    }
}

extension Data: PostgresEncodable, PostgresDecodable {
    /// The `bytea` hex form, `\x` followed by two lowercase hex digits per byte.
    public var postgresText: String { ByteaText.encode(self) }

    /// Decodes the `bytea` hex form.
    public init(postgresText: String) throws {
        self = Data(try ByteaText.decode(postgresText))
    }
}

enum ByteaText {
    private static let digits = Array("0123456789abcdef".utf8)

    static func encode<Bytes: Collection<UInt8>>(_ bytes: Bytes) -> String {
        var utf8: [UInt8] = [UInt8(ascii: "\\"), UInt8(ascii: "x")]
        utf8.reserveCapacity(2 + 2 * bytes.count)
        for byte in bytes {
            utf8.append(digits[Int(byte >> 4)])
            utf8.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: utf8, as: UTF8.self)
    }

    static func decode(_ text: String) throws -> [UInt8] {
        let utf8 = Array(text.utf8)
        // Only the hex form is read: the connection sets bytea_output to 'hex' when it opens.
        guard utf8.count >= 2, utf8[0] == UInt8(ascii: "\\"), utf8[1] == UInt8(ascii: "x"), utf8.count % 2 == 0
        else {
            throw PostgresError(kind: .decoding, message: "not bytea in hex form")
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity((utf8.count - 2) / 2)
        var index = 2
        while index < utf8.count {
            guard let high = nibble(utf8[index]), let low = nibble(utf8[index + 1]) else {
                throw PostgresError(kind: .decoding, message: "not bytea in hex form")
            }
            bytes.append(high << 4 | low)
            index += 2
        }
        return bytes
    }

    private static func nibble(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return digit - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return digit - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}

// MARK: - Arrays

enum PostgresArrayText {
    /// Parses a one-dimensional array in the server's output syntax into its elements, `nil` for `NULL`.
    static func parse(_ text: String) throws -> [String?] {
        let utf8 = Array(text.utf8)
        var index = 0
        func fail(_ reason: String) -> PostgresError {
            PostgresError(kind: .decoding, message: "not a one-dimensional array: \(reason)")
        }
        // Arrays whose lower bound is not 1 are printed with their bounds first, as in "[0:1]={a,b}".
        if utf8.first == UInt8(ascii: "[") {
            guard let equals = utf8.firstIndex(of: UInt8(ascii: "=")) else { throw fail("bad bounds") }
            index = equals + 1
        }
        guard index < utf8.count, utf8[index] == UInt8(ascii: "{"), utf8.last == UInt8(ascii: "}") else {
            throw fail("no braces")
        }
        index += 1
        let end = utf8.count - 1
        var elements: [String?] = []
        if index == end { return elements }
        while true {
            var bytes: [UInt8] = []
            var quoted = false
            if utf8[index] == UInt8(ascii: "\"") {
                quoted = true
                index += 1
                while true {
                    guard index < end else { throw fail("unterminated quote") }
                    let byte = utf8[index]
                    if byte == UInt8(ascii: "\"") { break }
                    if byte == UInt8(ascii: "\\") {
                        index += 1
                        guard index < end else { throw fail("dangling backslash") }
                    }
                    bytes.append(utf8[index])
                    index += 1
                }
                index += 1
            } else {
                while index < end, utf8[index] != UInt8(ascii: ",") {
                    let byte = utf8[index]
                    if byte == UInt8(ascii: "{") || byte == UInt8(ascii: "\"") { throw fail("nested or malformed") }
                    if byte == UInt8(ascii: "\\") {
                        index += 1
                        guard index < end else { throw fail("dangling backslash") }
                    }
                    bytes.append(utf8[index])
                    index += 1
                }
            }
            let element = String(decoding: bytes, as: UTF8.self)
            if !quoted && element.uppercased() == "NULL" {
                elements.append(nil)
            } else {
                elements.append(element)
            }
            if index == end { return elements }
            guard utf8[index] == UInt8(ascii: ",") else { throw fail("missing comma") }
            index += 1
            guard index < end else { throw fail("trailing comma") }
        }
    }
}

// MARK: - JSON

/// A `json` or `jsonb` value, kept as its text.
public struct PostgresJSON: Sendable, Hashable, PostgresEncodable, PostgresDecodable {
    /// The JSON text.
    public var text: String

    /// Wraps JSON text; it is not validated here (the server validates it).
    public init(_ text: String) {
        self.text = text
    }

    /// Wraps UTF-8 encoded JSON, such as the output of `JSONEncoder`.
    public init(data: Data) {
        self.text = String(decoding: data, as: UTF8.self)
    }

    /// The JSON text encoded as UTF-8, ready for `JSONDecoder`.
    public var data: Data { Data(text.utf8) }

    /// The JSON text.
    public var postgresText: String { text }

    /// Wraps the server's JSON output.
    public init(postgresText: String) {
        self.text = postgresText
    }
}
