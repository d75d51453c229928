import Foundation

/// Lower-case hexadecimal text, written without `String(format:)`.
public enum Hex {
    static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `bytes` as lower-case hex digits.
    public static func append(_ bytes: some Collection<UInt8>, to out: inout [UInt8]) {
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0F)])
        }
    }

    /// `bytes` as lower-case hex text.
    public static func encode(_ bytes: some Collection<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count * 2)
        append(bytes, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// Whether `text` is only lower-case hex digits.
    public static func isLowercaseHex(_ text: String) -> Bool {
        text.utf8.allSatisfy { digits.contains($0) }
    }

    /// Appends `uuid` in its canonical lower-case form (8-4-4-4-12 digits).
    public static func append(_ uuid: UUID, to out: inout [UInt8]) {
        withUnsafeBytes(of: uuid.uuid) { raw in
            for index in 0..<16 {
                if index == 4 || index == 6 || index == 8 || index == 10 { out.append(UInt8(ascii: "-")) }
                out.append(digits[Int(raw[index] >> 4)])
                out.append(digits[Int(raw[index] & 0x0F)])
            }
        }
    }
}

extension UUID {
    /// The canonical lower-case form, as ids appear in the API (`uuidString` is upper case).
    public var lowercasedString: String {
        var out: [UInt8] = []
        out.reserveCapacity(36)
        Hex.append(self, to: &out)
        return String(decoding: out, as: UTF8.self)
    }
}
