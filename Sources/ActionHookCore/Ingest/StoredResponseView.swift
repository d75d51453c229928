import Foundation

/// A stored response as the API and the default webhook body show it.
public struct StoredResponseView: Sendable, Equatable {
    /// The response's id.
    public var id: UUID
    /// The normalised response.
    public var response: NotificationResponse
    /// When the server received it.
    public var receivedAt: Date
    /// What its handler gave.
    public var outcome: Outcome
    /// The rule that matched, if any.
    public var ruleId: String?
    /// What the response is about, if its category names a subject key.
    public var subject: String?
    /// The user the send reached the replying device as, shown unverified when the reply proved no user.
    public var deviceUser: String?

    /// Creates a view from its parts.
    public init(
        id: UUID, response: NotificationResponse, receivedAt: Date, outcome: Outcome, ruleId: String?,
        subject: String?, deviceUser: String? = nil
    ) {
        self.deviceUser = deviceUser
        self.id = id
        self.response = response
        self.receivedAt = receivedAt
        self.outcome = outcome
        self.ruleId = ruleId
        self.subject = subject
    }

    /// `{"id", "actionIdentifier", "userText", "categoryIdentifier", "notificationIdentifier", "userInfo",
    /// "deviceToken", "responseId", "respondedAt", "receivedAt", "outcome", "ruleId", "subject", "user",
    /// "signature"}`, every
    /// member present (`null` when absent), ids lowercase, times RFC 3339 UTC with milliseconds.
    public var json: JSONValue {
        var object: JSONObject = ["id": .string(id.lowercasedString)]
        for member in response.json.objectValue?.members ?? [] {
            object[member.key] = member.value
        }
        object["receivedAt"] = .string(Timestamp.format(receivedAt))
        object["outcome"] = .string(outcome.rawValue)
        object["ruleId"] = ruleId.map(JSONValue.string) ?? .null
        object["subject"] = subject.map(JSONValue.string) ?? .null
        object["user"] = Self.userJSON(verified: response.user, deviceUser: deviceUser)
        object["signature"] = response.signature.json
        return .object(object)
    }

    /// `{"id", "verified"}`: the user the reply's token proved (`verified: true`), else the user the send
    /// reached the replying device as (`verified: false`), else `null`.
    public static func userJSON(verified: String?, deviceUser: String?) -> JSONValue {
        if let verified { return .object(["id": .string(verified), "verified": .bool(true)]) }
        if let deviceUser { return .object(["id": .string(deviceUser), "verified": .bool(false)]) }
        return .null
    }
}
