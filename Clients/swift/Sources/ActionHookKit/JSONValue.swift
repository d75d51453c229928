import Foundation

/// A JSON value: what a reply's `userInfo` becomes before it is queued and sent.
public enum JSONValue: Sendable, Hashable, Codable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Decodes any JSON value.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    /// Encodes the value; whole numbers are written without a fraction.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value):
            if value.rounded() == value, abs(value) < 9_007_199_254_740_992 {
                try container.encode(Int64(value))
            } else {
                try container.encode(value)
            }
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    /// The member `key` of an object, else nil.
    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    /// The string, else nil.
    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }
}

extension JSONValue {
    /// Makes a notification's `userInfo` JSON-safe, the way ActionHook stores it.
    ///
    /// - Strings, booleans, finite numbers, arrays and `NSNull` are kept.
    /// - `Date` becomes an RFC 3339 string in UTC with milliseconds; `Data` becomes base64 text; `URL` its
    ///   absolute string; `UUID` its string; `Decimal` a number.
    /// - Dictionary keys that are not strings are written with their description; non-finite numbers and
    ///   values of any other type are dropped (from an array too), never sent as something else.
    ///
    /// APNs payloads are JSON, so a `userInfo` that came from a remote notification loses nothing; values
    /// only a local notification can carry are converted or dropped as above.
    public static func sanitizing(userInfo: [AnyHashable: Any]) -> [String: JSONValue] {
        var object: [String: JSONValue] = [:]
        for (key, value) in userInfo {
            if let converted = sanitizing(value) { object[Self.key(key)] = converted }
        }
        return object
    }

    /// One value of `userInfo` made JSON-safe, or nil when it has no JSON form (see `sanitizing(userInfo:)`).
    public static func sanitizing(_ value: Any) -> JSONValue? {
        switch value {
        case let value as JSONValue: return value
        case let value as String: return .string(value)
        case let value as NSNumber: return number(value)
        case let value as Bool: return .bool(value)
        case let value as Int: return .number(Double(value))
        case let value as Double: return value.isFinite ? .number(value) : nil
        case let value as Float: return value.isFinite ? .number(Double(value)) : nil
        case let value as Decimal: return .number(NSDecimalNumber(decimal: value).doubleValue)
        case let value as Date: return .string(Timestamp.string(from: value))
        case let value as Data: return .string(value.base64EncodedString())
        case let value as URL: return .string(value.absoluteString)
        case let value as UUID: return .string(value.uuidString)
        case is NSNull: return .null
        case let value as [Any]: return .array(value.compactMap(sanitizing))
        case let value as [AnyHashable: Any]: return .object(sanitizing(userInfo: value))
        default: return nil
        }
    }

    private static func number(_ number: NSNumber) -> JSONValue? {
        if isBoolean(number) { return .bool(number.boolValue) }
        let value = number.doubleValue
        return value.isFinite ? .number(value) : nil
    }

    // Foundation hands booleans from a property list or JSON payload back as NSNumber; only the boolean
    // singletons must become JSON `true`/`false`, never 0 and 1.
    private static func isBoolean(_ number: NSNumber) -> Bool {
        #if canImport(Darwin)
            return CFGetTypeID(number) == CFBooleanGetTypeID()
        #else
            return number === NSNumber(value: true) || number === NSNumber(value: false)
                || String(cString: number.objCType) == "B"
        #endif
    }

    private static func key(_ key: AnyHashable) -> String {
        if let string = key.base as? String { return string }
        return String(describing: key.base)
    }
}
