import ActionHookCore
import Foundation

/// Parses JSON text written in a test; a typo in a test is a programming error.
func json(_ text: String) -> JSONValue {
    do {
        return try JSONParser.parse(text)
    } catch {
        preconditionFailure("test JSON does not parse: \(error)")
    }
}

/// An object from members, in order.
func object(_ members: [(String, JSONValue)]) -> JSONValue {
    .object(JSONObject(members.map { (key: $0.0, value: $0.1) }))
}

/// A string of `count` copies of `character`.
func repeated(_ character: String, _ count: Int) -> String {
    String(repeating: character, count: count)
}

/// An object nested `depth` levels deep (`{}` is depth 1).
func nested(depth: Int) -> JSONValue {
    depth <= 1 ? .object(JSONObject()) : object([("a", nested(depth: depth - 1))])
}

/// The failure `NotificationResponse.decode` throws, or nil when it decodes.
func ingestFailure(_ body: JSONValue, limits: IngestLimits = IngestLimits()) -> ValidationFailure? {
    do {
        _ = try NotificationResponse.decode(body, limits: limits)
        return nil
    } catch {
        return error
    }
}

/// The failure `Rule.decode` throws, or nil when it decodes.
func ruleFailure(_ body: JSONValue, id: String? = nil) -> ValidationFailure? {
    do {
        _ = try Rule.decode(body, id: id)
        return nil
    } catch {
        return error
    }
}

/// The failure `NotificationCategory.decode` throws, or nil when it decodes.
func categoryFailure(_ body: JSONValue, id: String) -> ValidationFailure? {
    do {
        _ = try NotificationCategory.decode(body, id: id)
        return nil
    } catch {
        return error
    }
}

extension ValidationFailure {
    /// The pointers of the field errors, in order.
    var pointers: [String] { errors.map(\.pointer) }

    /// Everything a client would read: title, detail and every field error.
    var allText: String {
        ([title, detail] + errors.flatMap { [$0.pointer, $0.detail] }).joined(separator: "\n")
    }
}

/// An expected failure: its status and one pointer it must name.
struct Expected: Sendable, CustomStringConvertible {
    var status: Int
    var pointer: String

    var description: String { "\(status) at \(pointer.isEmpty ? "<root>" : pointer)" }

    static func shape(_ pointer: String) -> Expected { Expected(status: 400, pointer: pointer) }
    static func invalid(_ pointer: String) -> Expected { Expected(status: 422, pointer: pointer) }
}

/// A fixed response id, so rendered output can be compared.
let fixedID = UUID(uuidString: "5F0C4B7E-1D2A-4C3B-9E8F-0123456789AB")!
