/// A JSON value as received: numbers keep their literal text (so a 64-bit id survives a round
/// trip), objects keep their member order (so `aps` stays where the app put it).
public enum JSONValue: Sendable, Equatable {
    case null
    case bool(Bool)
    /// A number, as its literal text (already validated by the parser or formatted by us).
    case number(String)
    case string(String)
    case array([JSONValue])
    case object(JSONObject)

    /// A number from an integer.
    public static func integer(_ value: Int) -> JSONValue { .number(String(value)) }

    /// The string, when this is one.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    /// The object, when this is one.
    public var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The array, when this is one.
    public var arrayValue: [JSONValue]? {
        if case .array(let value) = self { return value }
        return nil
    }

    /// The boolean, when this is one.
    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The number as a `Double`, when this is a number.
    public var doubleValue: Double? {
        if case .number(let text) = self { return Double(text) }
        return nil
    }

    /// The number as an `Int`, when this is an integral number that fits.
    public var intValue: Int? {
        guard case .number(let text) = self else { return nil }
        if let value = Int(text) { return value }
        if let double = Double(text), double == double.rounded(), abs(double) < 9.0e15 { return Int(double) }
        return nil
    }

    /// Whether this is `null`.
    public var isNull: Bool { self == .null }

    /// The value at a dot path (`a.b.0.c`): object members by name, array elements by index.
    public func value(atPath path: String) -> JSONValue? {
        var current = self
        // "." is ASCII, so its bytes are where the path splits.
        let utf8 = path.utf8
        var start = utf8.startIndex
        while true {
            let end = utf8[start...].firstIndex(of: UInt8(ascii: ".")) ?? utf8.endIndex
            let component = String(path[start..<end])
            switch current {
            case .object(let object):
                guard let next = object[component] else { return nil }
                current = next
            case .array(let array):
                guard let index = Int(component), array.indices.contains(index) else { return nil }
                current = array[index]
            default:
                return nil
            }
            guard end < utf8.endIndex else { return current }
            start = utf8.index(after: end)
        }
    }

    /// The name of the value's JSON type, for error messages that must not quote the value.
    public var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }
}

/// A JSON object whose members keep their order; names are unique.
public struct JSONObject: Sendable, Equatable, ExpressibleByDictionaryLiteral {
    /// The members in order.
    public private(set) var members: [(key: String, value: JSONValue)]

    /// Creates an empty object.
    public init() {
        members = []
    }

    /// Creates an object from members; a later duplicate name replaces the earlier value.
    public init(_ members: [(key: String, value: JSONValue)]) {
        self.members = []
        self.members.reserveCapacity(members.count)
        if members.count <= 8 {
            for member in members { self[member.key] = member.value }
            return
        }
        var positions: [String: Int] = [:]
        for member in members {
            if let position = positions[member.key] {
                self.members[position].value = member.value
            } else {
                positions[member.key] = self.members.count
                self.members.append(member)
            }
        }
    }

    /// Creates an object from members whose names are known to be unique (the parser's).
    init(uniqueMembers: [(key: String, value: JSONValue)]) {
        members = uniqueMembers
    }

    /// Creates an object from a literal.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self.init(elements.map { (key: $0.0, value: $0.1) })
    }

    /// The value of member `key`; setting `nil` removes it, setting a new name appends it.
    public subscript(key: String) -> JSONValue? {
        get { members.first { $0.key == key }?.value }
        set {
            if let index = members.firstIndex(where: { $0.key == key }) {
                if let newValue { members[index].value = newValue } else { members.remove(at: index) }
            } else if let newValue {
                members.append((key: key, value: newValue))
            }
        }
    }

    /// The member names in order.
    public var keys: [String] { members.map(\.key) }

    /// Whether the object has no members.
    public var isEmpty: Bool { members.isEmpty }

    /// Objects are equal when they have the same members, in any order.
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.members.count == rhs.members.count else { return false }
        return lhs.members.allSatisfy { rhs[$0.key] == $0.value }
    }
}

extension JSONValue {
    /// The JSON pointer of the first string or member name holding U+0000 (which PostgreSQL
    /// cannot store), or `nil`.
    public var pointerToNUL: String? {
        // Bodies almost never hold a NUL: look first, build the pointer only when there is one.
        guard containsNUL else { return nil }
        return pointerToFirstNUL
    }

    var containsNUL: Bool {
        switch self {
        case .string(let text):
            return text.utf8.contains(0)
        case .array(let elements):
            return elements.contains { $0.containsNUL }
        case .object(let object):
            return object.members.contains { $0.key.utf8.contains(0) || $0.value.containsNUL }
        default:
            return false
        }
    }

    private var pointerToFirstNUL: String? {
        switch self {
        case .string(let text):
            return text.unicodeScalars.contains("\u{0}") ? "" : nil
        case .array(let elements):
            for (index, element) in elements.enumerated() {
                if let inner = element.pointerToFirstNUL { return JSONPointer.appending(index, to: "") + inner }
            }
            return nil
        case .object(let object):
            for member in object.members {
                let token = JSONPointer.appending(member.key, to: "")
                if member.key.unicodeScalars.contains("\u{0}") { return token }
                if let inner = member.value.pointerToFirstNUL { return token + inner }
            }
            return nil
        default:
            return nil
        }
    }
}
