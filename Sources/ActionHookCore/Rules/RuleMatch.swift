import Foundation

/// What a response must look like for a rule to run. Every part is optional: an absent part matches any
/// response.
public struct RuleMatch: Sendable, Equatable {
    /// The category the response must have.
    public var category: String?
    /// The action identifiers, one of which the response must have (JSON member `action`).
    public var actions: [String]?
    /// Conditions on `userInfo`, all of which must hold.
    public var userInfo: [Condition]
    /// When true, the response must carry non-blank `userText`; false or nil accepts any.
    public var userTextRequired: Bool?
    /// When true, the response must come with a verified user token; when false, without one; nil accepts
    /// any (JSON `"user": {"verified": …}`).
    public var userVerified: Bool?

    /// Creates a match; with no arguments it matches every response.
    public init(
        category: String? = nil, actions: [String]? = nil, userInfo: [Condition] = [], userTextRequired: Bool? = nil,
        userVerified: Bool? = nil
    ) {
        self.category = category
        self.actions = actions
        self.userInfo = userInfo
        self.userTextRequired = userTextRequired
        self.userVerified = userVerified
    }

    /// Whether `response` meets every part of the match.
    public func matches(_ response: NotificationResponse) -> Bool {
        if let category, response.categoryIdentifier != category { return false }
        if let actions, !actions.contains(response.actionIdentifier) { return false }
        if userTextRequired == true {
            guard let text = response.userText, !text.isBlank else { return false }
        }
        if let userVerified, userVerified != (response.user != nil) { return false }
        return userInfo.allSatisfy { $0.holds(in: response.userInfo) }
    }

    /// `{("category"), ("action": [...]), ("userInfo": [...]), ("userText": {"required"})}`, the shape the
    /// API accepts.
    public var json: JSONValue {
        var object = JSONObject()
        if let category { object["category"] = .string(category) }
        if let actions { object["action"] = .array(actions.map(JSONValue.string)) }
        if !userInfo.isEmpty { object["userInfo"] = .array(userInfo.map(\.json)) }
        if let userTextRequired { object["userText"] = .object(["required": .bool(userTextRequired)]) }
        if let userVerified { object["user"] = .object(["verified": .bool(userVerified)]) }
        return .object(object)
    }

    /// The longest category or action identifier, in characters.
    static let maxIdentifierLength = 256

    /// The elements of an array of strings; nil for anything else.
    private static func strings(of value: JSONValue) -> [String]? {
        guard let elements = value.arrayValue else { return nil }
        let strings = elements.compactMap(\.stringValue)
        return strings.count == elements.count ? strings : nil
    }

    /// Decodes a rule's `match`; `action` may be one string or an array of them.
    static func decode(_ object: JSONObject, at pointer: String, _ diagnostics: inout Diagnostics) -> RuleMatch {
        var reader = ObjectReader(object, at: pointer)
        let category = reader.string("category", &diagnostics)
        if let category {
            diagnostics.checkLength(category, reader.pointer("category"), max: maxIdentifierLength)
        }

        var actions: [String]?
        let actionPointer = reader.pointer("action")
        if case .string(let single)? = reader.raw("action") {
            actions = [single]
            diagnostics.checkLength(single, actionPointer, max: maxIdentifierLength)
        } else if let list = reader.read(
            "action", expected: "a string or an array of strings", &diagnostics, Self.strings(of:))
        {
            actions = list
            if list.isEmpty { diagnostics.invalid(actionPointer, "must not be empty") }
            for (index, action) in list.enumerated() {
                diagnostics.checkLength(
                    action, JSONPointer.appending(index, to: actionPointer), max: maxIdentifierLength)
            }
        }

        var conditions: [Condition] = []
        for (index, element) in (reader.array("userInfo", &diagnostics) ?? []).enumerated() {
            let conditionPointer = JSONPointer.appending(index, to: reader.pointer("userInfo"))
            guard let conditionObject = element.objectValue else {
                diagnostics.wrongType(conditionPointer, expected: "an object")
                continue
            }
            if let condition = Condition.decode(conditionObject, at: conditionPointer, &diagnostics) {
                conditions.append(condition)
            }
        }

        var userTextRequired: Bool?
        if let userText = reader.object("userText", &diagnostics) {
            var textReader = ObjectReader(userText, at: reader.pointer("userText"))
            userTextRequired = textReader.bool("required", &diagnostics)
            textReader.reportUnknown(&diagnostics)
        }
        var userVerified: Bool?
        if let user = reader.object("user", &diagnostics) {
            var userReader = ObjectReader(user, at: reader.pointer("user"))
            userVerified = userReader.bool("verified", &diagnostics)
            userReader.reportUnknown(&diagnostics)
        }
        reader.reportUnknown(&diagnostics)
        return RuleMatch(
            category: category, actions: actions, userInfo: conditions, userTextRequired: userTextRequired,
            userVerified: userVerified)
    }
}
