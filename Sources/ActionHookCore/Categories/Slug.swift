/// Client-chosen ids of apps, rules and categories: `[A-Za-z0-9._-]{1,64}`.
public enum Slug {
    /// The longest slug.
    public static let maxLength = 64

    /// Whether `text` is a valid slug.
    public static func isValid(_ text: String) -> Bool {
        let bytes = text.utf8
        guard (1...maxLength).contains(bytes.count) else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "-"):
                true
            default: false
            }
        }
    }

    /// The detail of a slug error.
    static let rule = "must be 1 to 64 characters of A-Z, a-z, 0-9, '.', '_' or '-'"
}
