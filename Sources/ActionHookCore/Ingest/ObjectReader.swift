import Basics
import Foundation

/// RFC 6901 pointers, built one reference token at a time.
public enum JSONPointer {
    /// `base` extended by the member name `key` (`~` and `/` escaped as RFC 6901 asks).
    public static func appending(_ key: String, to base: String) -> String {
        base + "/" + key.replacingOccurrences(of: "~", with: "~0").replacingOccurrences(of: "/", with: "~1")
    }

    /// `base` extended by the array index `index`.
    public static func appending(_ index: Int, to base: String) -> String {
        base + "/" + String(index)
    }
}

/// The field errors found while decoding one body, sorted into shape errors (400) and rule errors (422).
struct Diagnostics {
    private(set) var shapeErrors: [FieldError] = []
    private(set) var ruleErrors: [FieldError] = []

    /// Records that the value at `pointer` has the wrong JSON type (`expected` is e.g. "a string").
    mutating func wrongType(_ pointer: String, expected: String) {
        shapeErrors.append(FieldError(pointer: pointer, detail: "must be \(expected)"))
    }

    /// Records a shape problem other than a wrong type (mixed shapes).
    mutating func malformed(_ pointer: String, _ detail: String) {
        shapeErrors.append(FieldError(pointer: pointer, detail: detail))
    }

    /// Records a broken rule of the API.
    mutating func invalid(_ pointer: String, _ detail: String) {
        ruleErrors.append(FieldError(pointer: pointer, detail: detail))
    }

    /// Adds errors found elsewhere as rule errors.
    mutating func invalid(_ errors: [FieldError]) {
        ruleErrors.append(contentsOf: errors)
    }

    /// Whether anything was recorded.
    var isEmpty: Bool { shapeErrors.isEmpty && ruleErrors.isEmpty }

    /// Throws what was recorded: shape errors take precedence over rule errors.
    func check() throws(ValidationFailure) {
        if !shapeErrors.isEmpty { throw .shape(shapeErrors) }
        if !ruleErrors.isEmpty { throw .invalid(ruleErrors) }
    }

    /// Checks a string's length in characters, recording an error at `pointer` when it is out of range.
    mutating func checkLength(_ text: String, _ pointer: String, min: Int = 1, max: Int) {
        let count = text.count
        if count < min {
            invalid(pointer, min == 1 ? "must not be empty" : "must be at least \(min) characters")
        } else if count > max {
            invalid(pointer, "must be at most \(max) characters")
        }
    }
}

/// Reads the members of one JSON object, remembering which names were asked for so that the rest can
/// be reported as unknown. `null` reads as absent everywhere.
struct ObjectReader {
    let object: JSONObject
    let pointer: String
    // The positions of the members asked for or allowed: a bit each for the first 64 (every body
    // this reads in practice), a set past them.
    private var knownBits: UInt64 = 0
    private var knownBeyond: Set<Int> = []

    init(_ object: JSONObject, at pointer: String) {
        self.object = object
        self.pointer = pointer
    }

    /// Reads the value at the root of a body, recording a shape error unless it is an object.
    static func root(_ body: JSONValue, _ diagnostics: inout Diagnostics) -> ObjectReader? {
        guard let object = body.objectValue else {
            diagnostics.wrongType("", expected: "a JSON object")
            return nil
        }
        return ObjectReader(object, at: "")
    }

    /// The pointer of member `key`.
    func pointer(_ key: String) -> String { JSONPointer.appending(key, to: pointer) }

    /// Whether member `key` is present and not `null`.
    func has(_ key: String) -> Bool {
        if let value = object[key], !value.isNull { return true }
        return false
    }

    /// The raw value of member `key`, `null` included; marks the name as known.
    mutating func raw(_ key: String) -> JSONValue? {
        guard let position = object.members.firstIndex(where: { $0.key == key }) else { return nil }
        markKnown(position)
        return object.members[position].value
    }

    private mutating func markKnown(_ position: Int) {
        if position < 64 { knownBits |= 1 << UInt64(position) } else { knownBeyond.insert(position) }
    }

    private func isKnown(_ position: Int) -> Bool {
        position < 64 ? knownBits & (1 << UInt64(position)) != 0 : knownBeyond.contains(position)
    }

    /// The value of member `key` converted by `extract`; a wrong type is recorded as a shape error.
    mutating func read<T>(
        _ key: String, expected: String, _ diagnostics: inout Diagnostics, _ extract: (JSONValue) -> T?
    ) -> T? {
        guard let value = raw(key), !value.isNull else { return nil }
        guard let result = extract(value) else {
            diagnostics.wrongType(pointer(key), expected: expected)
            return nil
        }
        return result
    }

    /// A string member.
    mutating func string(_ key: String, _ diagnostics: inout Diagnostics) -> String? {
        read(key, expected: "a string", &diagnostics, \.stringValue)
    }

    /// A boolean member.
    mutating func bool(_ key: String, _ diagnostics: inout Diagnostics) -> Bool? {
        read(key, expected: "a boolean", &diagnostics, \.boolValue)
    }

    /// An object member.
    mutating func object(_ key: String, _ diagnostics: inout Diagnostics) -> JSONObject? {
        read(key, expected: "an object", &diagnostics, \.objectValue)
    }

    /// An array member.
    mutating func array(_ key: String, _ diagnostics: inout Diagnostics) -> [JSONValue]? {
        read(key, expected: "an array", &diagnostics, \.arrayValue)
    }

    /// An integer member within `range`: a non-number is a shape error, a fraction or a number out of
    /// range a rule error.
    mutating func integer(_ key: String, in range: ClosedRange<Int>, _ diagnostics: inout Diagnostics) -> Int? {
        guard let number = read(key, expected: "a number", &diagnostics, { $0.doubleValue == nil ? nil : $0 }) else {
            return nil
        }
        guard let value = number.intValue, range.contains(value) else {
            diagnostics.invalid(
                pointer(key), "must be an integer from \(range.lowerBound) to \(range.upperBound)")
            return nil
        }
        return value
    }

    /// An array of strings: a non-array or a non-string element is a shape error.
    mutating func strings(_ key: String, _ diagnostics: inout Diagnostics) -> [String]? {
        guard let elements = array(key, &diagnostics) else { return nil }
        var result: [String] = []
        var typesOK = true
        for (index, element) in elements.enumerated() {
            if let text = element.stringValue {
                result.append(text)
            } else {
                typesOK = false
                diagnostics.wrongType(JSONPointer.appending(index, to: pointer(key)), expected: "a string")
            }
        }
        return typesOK ? result : nil
    }

    /// Marks names as known without reading them.
    mutating func allow(_ keys: String...) {
        for key in keys { _ = raw(key) }
    }

    /// Records every member not asked for: server-owned names say so, the others are unknown.
    func reportUnknown(_ diagnostics: inout Diagnostics, serverOwned: Set<String> = []) {
        for (position, member) in object.members.enumerated() where !isKnown(position) {
            let key = member.key
            diagnostics.invalid(
                pointer(key), serverOwned.contains(key) ? "is set by the server" : "is not a known field")
        }
    }
}
