import ActionHookCore
import Testing

@Suite("Text printed to a terminal")
struct TerminalTextTests {
    @Test(
        "control characters are written out, line breaks and tabs kept",
        arguments: [
            ("plain", "plain"),
            ("two\nlines\tand a tab", "two\nlines\tand a tab"),
            ("\u{1B}[2J\u{1B}]0;owned\u{07}", "\\x1b[2J\\x1b]0;owned\\x07"),
            ("carriage\rreturn", "carriage\\x0dreturn"),
            ("nul\u{0}del\u{7F}", "nul\\x00del\\x7f"),
            ("c1 csi \u{9B}31m", "c1 csi \\u009b31m"),
            ("émoji 🎉 and ü", "émoji 🎉 and ü"),
        ])
    func escapes(input: String, expected: String) {
        #expect(TerminalText.escaped(input) == expected)
    }
}
