import Foundation

/// How a condition compares the value at its path.
public enum ConditionOperator: String, Sendable, CaseIterable {
    /// The value is present and equal to the condition's value (numbers compare by value).
    case eq
    /// The value is absent or not equal to the condition's value.
    case ne
    /// The value is present and equal to one element of the condition's array.
    case `in`
    /// The path is present (its value may be `null`).
    case exists
    /// The path is not present.
    case absent
    /// The value is a string that starts with the condition's string.
    case prefix
    /// The value is a number greater than the condition's number.
    case gt
    /// The value is a number less than the condition's number.
    case lt
}

/// A test on one value of a response's `userInfo`, found by a dot path (`event.id`, `items.0.kind`).
public struct Condition: Sendable, Equatable {
    /// The dot path into `userInfo`: member names, or indexes into arrays.
    public var path: String
    /// The comparison.
    public var op: ConditionOperator
    /// The operand: any value for `eq`/`ne`, an array for `in`, a string for `prefix`, a number for
    /// `gt`/`lt`, nil for `exists`/`absent`.
    public var value: JSONValue?

    /// Creates a condition (not validated; `Rule.decode` validates).
    public init(path: String, op: ConditionOperator, value: JSONValue? = nil) {
        self.path = path
        self.op = op
        self.value = value
    }

    /// Whether the condition holds for `userInfo`. A missing path makes every operator false except
    /// `absent` and `ne`.
    public func holds(in userInfo: JSONObject) -> Bool {
        let found = JSONValue.object(userInfo).value(atPath: path)
        switch op {
        case .exists: return found != nil
        case .absent: return found == nil
        case .eq:
            guard let found, let value else { return false }
            return JSONComparison.equal(found, value)
        case .ne:
            guard let found, let value else { return true }
            return !JSONComparison.equal(found, value)
        case .in:
            guard let found, let candidates = value?.arrayValue else { return false }
            return candidates.contains { JSONComparison.equal(found, $0) }
        case .prefix:
            guard let text = found?.stringValue, let prefix = value?.stringValue else { return false }
            return text.hasPrefix(prefix)
        case .gt, .lt:
            guard case .number(let left)? = found, case .number(let right)? = value,
                let order = JSONComparison.compareNumbers(left, right)
            else { return false }
            return op == .gt ? order == .orderedDescending : order == .orderedAscending
        }
    }

    /// `{"path", "op", ("value")}`.
    public var json: JSONValue {
        var object: JSONObject = ["path": .string(path), "op": .string(op.rawValue)]
        if let value {
            object["value"] = value
        }
        return .object(object)
    }

    /// The longest path, in characters.
    static let maxPathLength = 256

    /// Decodes one condition of a rule's `match.userInfo`.
    static func decode(_ object: JSONObject, at pointer: String, _ diagnostics: inout Diagnostics) -> Condition? {
        var reader = ObjectReader(object, at: pointer)
        let path = reader.string("path", &diagnostics)
        if let path {
            if path.count > maxPathLength {
                diagnostics.invalid(reader.pointer("path"), "must be at most \(maxPathLength) characters")
            } else if path.isEmpty || path.split(separator: ".", omittingEmptySubsequences: false).contains("") {
                diagnostics.invalid(reader.pointer("path"), "must be a dot path of non-empty names")
            }
        } else if !reader.has("path") {
            diagnostics.invalid(reader.pointer("path"), "is required")
        }

        var op: ConditionOperator?
        if let name = reader.string("op", &diagnostics) {
            op = ConditionOperator(rawValue: name)
            if op == nil {
                let names = ConditionOperator.allCases.map(\.rawValue).joined(separator: ", ")
                diagnostics.invalid(reader.pointer("op"), "must be one of \(names)")
            }
        } else if !reader.has("op") {
            diagnostics.invalid(reader.pointer("op"), "is required")
        }

        // `null` is a value here (`eq null`), so presence is read raw.
        let value = reader.raw("value")
        let valuePointer = reader.pointer("value")
        switch op {
        case .eq?, .ne?:
            if value == nil { diagnostics.invalid(valuePointer, "is required for this operator") }
        case .in?:
            if value?.arrayValue == nil { diagnostics.invalid(valuePointer, "must be an array for this operator") }
        case .prefix?:
            if value?.stringValue == nil { diagnostics.invalid(valuePointer, "must be a string for this operator") }
        case .gt?, .lt?:
            if value?.doubleValue == nil { diagnostics.invalid(valuePointer, "must be a number for this operator") }
        case .exists?, .absent?:
            if value != nil { diagnostics.invalid(valuePointer, "must be absent for this operator") }
        case nil:
            break
        }
        reader.reportUnknown(&diagnostics)
        guard let path, let op else { return nil }
        return Condition(path: path, op: op, value: value)
    }
}

/// Equality and order of JSON values as conditions see them: numbers by value, whatever their literal.
enum JSONComparison {
    /// Deep equality, with numbers compared by value and object members in any order.
    static func equal(_ left: JSONValue, _ right: JSONValue) -> Bool {
        switch (left, right) {
        case (.number(let a), .number(let b)):
            return compareNumbers(a, b) == .orderedSame
        case (.array(let a), .array(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { equal($0, $1) }
        case (.object(let a), .object(let b)):
            return a.members.count == b.members.count
                && a.members.allSatisfy { member in b[member.key].map { equal(member.value, $0) } ?? false }
        default:
            return left == right
        }
    }

    /// The order of two number literals: exact for integers and decimals, by `Double` beyond that.
    static func compareNumbers(_ left: String, _ right: String) -> ComparisonResult? {
        if left == right { return .orderedSame }
        if let a = Int(left), let b = Int(right) {
            return a == b ? .orderedSame : (a < b ? .orderedAscending : .orderedDescending)
        }
        if let a = Decimal(string: left, locale: Locale(identifier: "en_US_POSIX")),
            let b = Decimal(string: right, locale: Locale(identifier: "en_US_POSIX")), !a.isNaN, !b.isNaN
        {
            return a == b ? .orderedSame : (a < b ? .orderedAscending : .orderedDescending)
        }
        guard let a = Double(left), let b = Double(right) else { return nil }
        return a == b ? .orderedSame : (a < b ? .orderedAscending : .orderedDescending)
    }
}
