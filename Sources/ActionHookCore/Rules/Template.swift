import Basics
import Foundation

/// The values a template is rendered with: one stored response, its id and its subject.
public struct TemplateContext: Sendable {
    /// The response.
    public var response: NotificationResponse
    /// The stored response's id (`{{response.id}}`).
    public var responseID: UUID
    /// The response's subject (`{{subject}}`).
    public var subject: String?
    /// The sent notification the reply is bound to (`{{notification.id}}`).
    public var notificationID: UUID?
    /// The replying device's recipient label, from the send (`{{recipient}}`).
    public var recipient: String?

    /// Creates a context.
    public init(response: NotificationResponse, responseID: UUID, subject: String? = nil) {
        self.response = response
        self.responseID = responseID
        self.subject = subject
    }

    /// The value a placeholder names, or nil when the response has none.
    func value(of name: String) -> JSONValue? {
        switch name {
        case "actionIdentifier": return .string(response.actionIdentifier)
        case "userText": return response.userText.map(JSONValue.string)
        case "categoryIdentifier": return response.categoryIdentifier.map(JSONValue.string)
        case "notificationIdentifier": return response.notificationIdentifier.map(JSONValue.string)
        case "deviceToken": return response.deviceToken.map(JSONValue.string)
        case "subject": return subject.map(JSONValue.string)
        case "response.id": return .string(responseID.lowercasedString)
        case "notification.id": return notificationID.map { .string($0.lowercasedString) }
        case "recipient": return recipient.map(JSONValue.string)
        default:
            guard name.hasPrefix(Template.userInfoPrefix) else { return nil }
            return JSONValue.object(response.userInfo).value(
                atPath: String(name.dropFirst(Template.userInfoPrefix.count)))
        }
    }
}

/// `{{name}}` placeholders inside the JSON strings of follow-up templates.
///
/// Names: `actionIdentifier`, `userText`, `categoryIdentifier`, `notificationIdentifier`, `deviceToken`,
/// `subject`, `response.id`, `notification.id`, `recipient` (of a reply bound to a sent notification) and
/// `userInfo.<dot path>` (array elements by index); spaces inside the braces
/// are ignored. A string that is exactly one placeholder takes the value's JSON type (a missing value is
/// `null`); inside a longer string, strings are inserted as they are, other values as their JSON text,
/// missing values as nothing. Values are data, never JSON text: the output is a `JSONValue` tree, so
/// escaping is structural. Object member names are not templated.
public enum Template {
    static let userInfoPrefix = "userInfo."
    static let names = [
        "actionIdentifier", "userText", "categoryIdentifier", "notificationIdentifier", "deviceToken", "subject",
        "response.id", "notification.id", "recipient",
    ]

    /// The problems of every string in `value`, each at its pointer under `pointer`: placeholders that are
    /// unclosed, empty, or name nothing known.
    public static func validate(_ value: JSONValue, pointer: String) -> [FieldError] {
        switch value {
        case .string(let text):
            return problems(in: text).map { FieldError(pointer: pointer, detail: $0) }
        case .array(let elements):
            return elements.enumerated().flatMap { validate($1, pointer: JSONPointer.appending($0, to: pointer)) }
        case .object(let object):
            return object.members.flatMap { validate($0.value, pointer: JSONPointer.appending($0.key, to: pointer)) }
        default:
            return []
        }
    }

    /// `value` with every string rendered.
    public static func render(_ value: JSONValue, context: TemplateContext) -> JSONValue {
        render(value, resolve: context.value(of:))
    }

    /// One string rendered: its value's JSON type when it is exactly one placeholder, else a string.
    public static func render(_ text: String, context: TemplateContext) -> JSONValue {
        render(text, resolve: context.value(of:))
    }

    /// `value` rendered with every placeholder missing: the smallest form a template can take.
    static func renderEmpty(_ value: JSONValue) -> JSONValue {
        render(value, resolve: { _ in nil })
    }

    static func render(_ value: JSONValue, resolve: (String) -> JSONValue?) -> JSONValue {
        switch value {
        case .string(let text):
            return render(text, resolve: resolve)
        case .array(let elements):
            return .array(elements.map { render($0, resolve: resolve) })
        case .object(let object):
            // Same names as the template's, so still unique.
            return .object(
                JSONObject(
                    uniqueMembers: object.members.map { (key: $0.key, value: render($0.value, resolve: resolve)) }))
        default:
            return value
        }
    }

    static func render(_ text: String, resolve: (String) -> JSONValue?) -> JSONValue {
        guard hasOpeningBraces(text) else { return .string(text) }
        let parts = segments(of: text)
        if parts.count == 1, case .placeholder(let name) = parts[0] {
            return (isKnown(name) ? resolve(name) : nil) ?? .null
        }
        var out = ""
        for part in parts {
            switch part {
            case .text(let literal):
                out += literal
            case .placeholder(let name):
                switch isKnown(name) ? resolve(name) : nil {
                case .string(let inserted)?: out += inserted
                case let other?: out += other.jsonText
                case nil: break
                }
            }
        }
        return .string(out)
    }

    private enum Segment: Equatable {
        case text(String)
        case placeholder(String)
    }

    /// Whether `text` holds `{{` (most template strings are plain text).
    private static func hasOpeningBraces(_ text: String) -> Bool {
        hasPair(of: UInt8(ascii: "{"), in: text.utf8)
    }

    /// Whether `bytes` hold `byte` twice in a row.
    private static func hasPair(of byte: UInt8, in bytes: some Sequence<UInt8>) -> Bool {
        var previous: UInt8? = nil
        for next in bytes {
            if next == byte && previous == byte { return true }
            previous = next
        }
        return false
    }

    /// Splits `text` into literal runs and placeholder names; an unclosed `{{` stays literal text.
    private static func segments(of text: String) -> [Segment] {
        // Braces are ASCII, so scanning the UTF-8 bytes finds them at character boundaries.
        let bytes = text.utf8
        // The first of two `brace`s in a row at or after `start`.
        func pair(of brace: UInt8, from start: String.Index) -> String.Index? {
            var index = start
            while index < bytes.endIndex {
                let next = bytes.index(after: index)
                if bytes[index] == brace && next < bytes.endIndex && bytes[next] == brace { return index }
                index = next
            }
            return nil
        }
        var parts: [Segment] = []
        var rest = bytes.startIndex
        while let open = pair(of: UInt8(ascii: "{"), from: rest) {
            let nameStart = bytes.index(open, offsetBy: 2)
            guard let close = pair(of: UInt8(ascii: "}"), from: nameStart) else { break }
            if open > rest { parts.append(.text(String(text[rest..<open]))) }
            parts.append(.placeholder(String(text[nameStart..<close].trimmingWhiteSpace())))
            rest = bytes.index(close, offsetBy: 2)
        }
        if rest < bytes.endIndex { parts.append(.text(String(text[rest...]))) }
        return parts
    }

    private static func problems(in text: String) -> [String] {
        var found: [String] = []
        func note(_ problem: String) {
            if !found.contains(problem) { found.append(problem) }
        }
        for part in segments(of: text) {
            switch part {
            case .text(let literal):
                if literal.contains("{{") { note("has an unclosed placeholder") }
            case .placeholder(let name):
                if name.isEmpty {
                    note("has an empty placeholder")
                } else if !isKnown(name) {
                    note(
                        "has a placeholder with an unknown name (known: " + names.joined(separator: ", ")
                            + ", userInfo.<path>)")
                }
            }
        }
        return found
    }

    private static func isKnown(_ name: String) -> Bool {
        if names.contains(name) { return true }
        guard name.hasPrefix(userInfoPrefix) else { return false }
        // A dot path as `JSONValue.value(atPath:)` reads it: split on the byte ".", no component empty;
        // no "{{" and no white space.
        let path = name.utf8.dropFirst(userInfoPrefix.utf8.count)
        let dot = UInt8(ascii: ".")
        guard let first = path.first, first != dot, path.last != dot else { return false }
        return !hasPair(of: dot, in: path) && !hasPair(of: UInt8(ascii: "{"), in: path)
            && !Substring(path).unicodeScalars.contains(where: \.isWhiteSpace)
    }
}
