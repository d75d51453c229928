import ActionHookCore
import Yams

/// Writes JSON values as block YAML, members in their order; strings that YAML would read as another
/// type (`"true"`, `"42"`, `""`) are quoted so the text reads back as the same value.
public enum YAMLWriter {
    /// The YAML text of `value`, ending with a line break.
    public static func text(_ value: JSONValue) throws -> String {
        try Yams.serialize(node: node(value), indent: 2, width: -1, allowUnicode: true)
    }

    static func node(_ value: JSONValue) -> Node {
        switch value {
        case .null:
            return Node("null")
        case .bool(let flag):
            return Node(flag ? "true" : "false")
        case .number(let text):
            return Node(text)
        case .string(let text):
            let plain = Node(text)
            if Resolver.default.resolveTag(of: plain) == .str && !text.isEmpty {
                return plain
            }
            return Node(text, Tag(.str), .singleQuoted)
        case .array(let elements):
            return Node(elements.map(node))
        case .object(let object):
            return Node(object.members.map { (node(.string($0.key)), node($0.value)) })
        }
    }
}

/// The lines that differ between two texts, as `- old` / `+ new` lines (a longest-common-subsequence
/// diff; configuration items are small).
enum LineDiff {
    static func lines(from old: String, to new: String) -> [String] {
        let a = old.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        let b = new.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        var table = Array(repeating: Array(repeating: 0, count: b.count + 1), count: a.count + 1)
        for i in stride(from: a.count - 1, through: 0, by: -1) {
            for j in stride(from: b.count - 1, through: 0, by: -1) {
                table[i][j] = a[i] == b[j] ? table[i + 1][j + 1] + 1 : max(table[i + 1][j], table[i][j + 1])
            }
        }
        var result: [String] = []
        var i = 0
        var j = 0
        while i < a.count || j < b.count {
            if i < a.count && j < b.count && a[i] == b[j] {
                i += 1
                j += 1
            } else if i < a.count && (j == b.count || table[i + 1][j] >= table[i][j + 1]) {
                // Removals before additions, as diff shows them.
                if !a[i].isEmpty { result.append("- " + a[i]) }
                i += 1
            } else {
                if !b[j].isEmpty { result.append("+ " + b[j]) }
                j += 1
            }
        }
        return result
    }
}
