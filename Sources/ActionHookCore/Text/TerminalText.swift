/// Text from elsewhere (a server's answer, a webhook's headers and body) made safe to print to a terminal.
public enum TerminalText {
    /// `text` with every control character that is not a line break or a tab written out visibly
    /// (`\u{1B}` becomes `\x1b`, U+009B becomes `\u009b`), so a sender cannot move the cursor, retitle the
    /// window or hide text with escape sequences. Line breaks and tabs are kept as they are.
    public static func escaped(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isEscaped) else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 8)
        for scalar in text.unicodeScalars {
            if isEscaped(scalar) {
                let digits = String(scalar.value, radix: 16)
                out +=
                    scalar.value < 0x80
                    ? "\\x" + String(repeating: "0", count: 2 - digits.count) + digits
                    : "\\u" + String(repeating: "0", count: 4 - digits.count) + digits
            } else {
                out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    /// C0 controls but line feed and tab, DEL, and the C1 controls (U+0080–U+009F, which some terminals
    /// read as escape sequences too).
    static func isEscaped(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09: false
        case 0x00...0x1F, 0x7F...0x9F: true
        default: false
        }
    }
}
