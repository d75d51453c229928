import ActionHookCore
import Foundation
import Yams

/// A YAML (or JSON, which YAML reads too) document as a JSON value, with the line each value starts on,
/// so a problem found at a JSON pointer can be reported at its place in the file.
public struct YAMLDocument: Sendable {
    /// The document's value.
    public var value: JSONValue
    /// The 1-based line of each value, by JSON pointer (members by their key's line).
    public var lines: [String: Int]

    /// Parses `text`; `name` is used in messages.
    public init(text: String, name: String) throws {
        let node: Node?
        do {
            node = try Yams.compose(yaml: text)
        } catch let error as YamlError {
            throw CLIError("\(name): not valid YAML: \(Self.describe(error))")
        }
        guard let node else { throw CLIError("\(name): the file is empty") }
        var lines: [String: Int] = [:]
        value = try Self.convert(node, pointer: "", line: node.mark?.line, lines: &lines, name: name)
        self.lines = lines
    }

    /// The line of the value at `pointer`, or of the nearest enclosing value the file has.
    public func line(for pointer: String) -> Int? {
        var current = pointer
        while true {
            if let line = lines[current] { return line }
            guard let slash = current.lastIndex(of: "/") else { return nil }
            current = String(current[..<slash])
        }
    }

    /// Where the parser stopped, without quoting the file's text (which may hold anything).
    static func describe(_ error: YamlError) -> String {
        switch error {
        case .scanner(_, let problem, let mark, _), .parser(_, let problem, let mark, _),
            .composer(_, let problem, let mark, _):
            return "line \(mark.line), column \(mark.column): \(problem)"
        default:
            return "it could not be read"
        }
    }

    private static func convert(
        _ node: Node, pointer: String, line: Int?, lines: inout [String: Int], name: String
    ) throws -> JSONValue {
        if let line { lines[pointer] = line }
        let at = { (line: Int?) in "\(name):\(line.map(String.init) ?? "?")" }
        switch node {
        case .scalar(let scalar):
            switch node.tag.rawValue {
            case Tag.Name.null.rawValue:
                return .null
            case Tag.Name.bool.rawValue:
                return .bool(node.bool ?? false)
            case Tag.Name.int.rawValue:
                guard let value = node.int else {
                    throw CLIError("\(at(line)): \(pointer): the integer is out of range")
                }
                return .integer(value)
            case Tag.Name.float.rawValue:
                guard let value = node.float, value.isFinite else {
                    throw CLIError("\(at(line)): \(pointer): must be a finite number")
                }
                return .number(value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value))
            default:
                return .string(scalar.string)
            }
        case .sequence(let sequence):
            return .array(
                try sequence.enumerated().map { index, element in
                    try convert(
                        element, pointer: JSONPointer.appending(index, to: pointer), line: element.mark?.line,
                        lines: &lines, name: name)
                })
        case .mapping(let mapping):
            var members: [(key: String, value: JSONValue)] = []
            var seen = Set<String>()
            for (key, value) in mapping {
                guard case .scalar(let keyScalar) = key else {
                    throw CLIError("\(at(key.mark?.line)): \(pointer): keys must be plain strings")
                }
                let memberPointer = JSONPointer.appending(keyScalar.string, to: pointer)
                guard seen.insert(keyScalar.string).inserted else {
                    throw CLIError("\(at(key.mark?.line)): \(memberPointer): the key appears twice")
                }
                let converted = try convert(
                    value, pointer: memberPointer, line: key.mark?.line, lines: &lines, name: name)
                members.append((key: keyScalar.string, value: converted))
            }
            return .object(JSONObject(members))
        case .alias:
            throw CLIError("\(at(line)): \(pointer): YAML aliases are not supported; write the value out")
        }
    }
}
