extension Unicode.Scalar {
    /// Unicode's White_Space property (what Foundation's `whitespacesAndNewlines` holds), with the
    /// ASCII cases answered without a property lookup.
    var isWhiteSpace: Bool {
        value < 0x80 ? value == 0x20 || (0x09...0x0D).contains(value) : properties.isWhitespace
    }
}

extension StringProtocol {
    /// Whether the text is empty or only white space.
    var isBlank: Bool { unicodeScalars.allSatisfy(\.isWhiteSpace) }

    /// The text without leading and trailing white space.
    func trimmingWhiteSpace() -> Substring {
        let scalars = Substring(self).unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.isWhiteSpace }),
            let last = scalars.lastIndex(where: { !$0.isWhiteSpace })
        else { return "" }
        return Substring(scalars[first...last])
    }
}
