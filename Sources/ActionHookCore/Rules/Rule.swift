/// A rule of an app: which responses it takes (`match`), what it does (`handler`) and what it sends
/// afterwards (`followUps`).
public struct Rule: Sendable, Equatable {
    /// The default priority.
    public static let defaultPriority = 100
    /// The priorities a rule may have.
    public static let priorityRange = -1_000_000...1_000_000
    /// The longest description, in characters.
    public static let maxDescriptionLength = 1000
    /// Members the server sets; a body that carries them is refused.
    static let serverOwned: Set<String> = ["etag", "version", "createdAt", "updatedAt", "app", "appId"]

    /// The rule's id, a slug chosen by the client.
    public var id: String
    /// What the rule is for, in words.
    public var description: String?
    /// Rules run in ascending priority, then id.
    public var priority: Int
    /// A disabled rule is skipped.
    public var enabled: Bool
    /// Which responses the rule takes.
    public var match: RuleMatch
    /// What it does with them.
    public var handler: RuleHandler
    /// What it sends afterwards, in order.
    public var followUps: [FollowUpTemplate]
    /// Overrides the category's `maxReplyAgeSeconds` for the replies this rule takes; nil: the category's.
    public var maxReplyAgeSeconds: Int?
    /// Overrides the category's `requireRespondedAt`; nil: the category's.
    public var requireRespondedAt: Bool?
    /// Whether the replies this rule takes act only when signed by their device's key; a rule cannot loosen
    /// its category's requirement.
    public var requireSignedReplies: Bool

    /// Creates a rule.
    public init(
        id: String, description: String? = nil, priority: Int = Rule.defaultPriority, enabled: Bool = true,
        match: RuleMatch = RuleMatch(), handler: RuleHandler, followUps: [FollowUpTemplate] = [],
        maxReplyAgeSeconds: Int? = nil, requireRespondedAt: Bool? = nil, requireSignedReplies: Bool = false
    ) {
        self.requireSignedReplies = requireSignedReplies
        self.maxReplyAgeSeconds = maxReplyAgeSeconds
        self.requireRespondedAt = requireRespondedAt
        self.id = id
        self.description = description
        self.priority = priority
        self.enabled = enabled
        self.match = match
        self.handler = handler
        self.followUps = followUps
    }

    /// Strictly decodes a rule body.
    ///
    /// For POST pass `id: nil`: the body must carry `id`. For PUT pass the path's id: a body `id`, if
    /// present, must equal it. Ids are slugs. Unknown or server-owned members (`etag`, `version`,
    /// `createdAt`, `updatedAt`, …), bad operators, `in` without an array, `gt`/`lt` without a number,
    /// `exists`/`absent` with a value, bad template placeholders and an APNs payload over 4096 bytes when
    /// rendered with empty values are 422s with pointers; wrong JSON types are 400s. `match` defaults to
    /// matching everything, `priority` to 100, `enabled` to true, `followUps` to none; `handler` is required.
    public static func decode(_ body: JSONValue, id: String?) throws(ValidationFailure) -> Rule {
        var diagnostics = Diagnostics()
        guard var reader = ObjectReader.root(body, &diagnostics) else {
            try diagnostics.check()
            preconditionFailure("a non-object body is always a shape error")
        }

        let bodyID = reader.string("id", &diagnostics)
        let ruleID: String?
        if let id {
            ruleID = id
            if !Slug.isValid(id) {
                diagnostics.invalid("/id", Slug.rule)
            } else if let bodyID, bodyID != id {
                diagnostics.invalid("/id", "must equal the id in the path")
            }
        } else {
            ruleID = bodyID
            if let bodyID, !Slug.isValid(bodyID) {
                diagnostics.invalid("/id", Slug.rule)
            } else if bodyID == nil && !reader.has("id") {
                diagnostics.invalid("/id", "is required")
            }
        }

        let description = reader.string("description", &diagnostics)
        if let description {
            diagnostics.checkLength(description, "/description", min: 0, max: maxDescriptionLength)
        }
        let priority = reader.integer("priority", in: priorityRange, &diagnostics) ?? defaultPriority
        let enabled = reader.bool("enabled", &diagnostics) ?? true
        let match = reader.object("match", &diagnostics).map { RuleMatch.decode($0, at: "/match", &diagnostics) }

        var handler: RuleHandler?
        if let handlerObject = reader.object("handler", &diagnostics) {
            handler = RuleHandler.decode(handlerObject, at: "/handler", &diagnostics)
        } else if !reader.has("handler") {
            diagnostics.invalid("/handler", "is required")
        }

        var followUps: [FollowUpTemplate] = []
        for (index, element) in (reader.array("followUps", &diagnostics) ?? []).enumerated() {
            let pointer = JSONPointer.appending(index, to: "/followUps")
            guard let object = element.objectValue else {
                diagnostics.wrongType(pointer, expected: "an object")
                continue
            }
            if let followUp = FollowUpTemplate.decode(object, at: pointer, &diagnostics) {
                followUps.append(followUp)
            }
        }

        let maxReplyAgeSeconds = reader.integer("maxReplyAgeSeconds", in: ReplyAgeLimit.range, &diagnostics)
        let requireRespondedAt = reader.bool("requireRespondedAt", &diagnostics)
        let requireSignedReplies = reader.bool("requireSignedReplies", &diagnostics) ?? false

        reader.reportUnknown(&diagnostics, serverOwned: serverOwned)
        try diagnostics.check()
        guard let ruleID, let handler else { preconditionFailure("a missing id or handler is always an error") }
        return Rule(
            id: ruleID, description: description, priority: priority, enabled: enabled, match: match ?? RuleMatch(),
            handler: handler, followUps: followUps, maxReplyAgeSeconds: maxReplyAgeSeconds,
            requireRespondedAt: requireRespondedAt, requireSignedReplies: requireSignedReplies)
    }

    /// `{"id", ("description"), "priority", "enabled", "match", "handler", "followUps", ("maxReplyAgeSeconds"),
    /// ("requireRespondedAt"), ("requireSignedReplies")}`: the shape the API
    /// accepts, so `decode(json, id: nil)` gives this rule back.
    public var json: JSONValue {
        var object: JSONObject = ["id": .string(id)]
        if let description { object["description"] = .string(description) }
        object["priority"] = .integer(priority)
        object["enabled"] = .bool(enabled)
        object["match"] = match.json
        object["handler"] = handler.json
        object["followUps"] = .array(followUps.map(\.json))
        if let maxReplyAgeSeconds { object["maxReplyAgeSeconds"] = .integer(maxReplyAgeSeconds) }
        if let requireRespondedAt { object["requireRespondedAt"] = .bool(requireRespondedAt) }
        if requireSignedReplies { object["requireSignedReplies"] = .bool(true) }
        return .object(object)
    }
}
