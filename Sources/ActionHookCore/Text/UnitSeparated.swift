import Foundation

/// Text made of several names joined by U+001F (the unit separator), a control character none of the
/// names holds: the key of a lock, a cache entry or a cursor that stands for all of them at once.
public enum UnitSeparated {
    /// U+001F.
    public static let separator = "\u{1F}"

    /// `parts` joined by the separator.
    public static func join(_ parts: [String]) -> String {
        parts.joined(separator: separator)
    }

    /// `parts` joined by the separator.
    public static func join(_ parts: String...) -> String {
        join(parts)
    }

    /// The names `join` joined.
    public static func split(_ text: String) -> [String] {
        text.components(separatedBy: separator)
    }
}
