import Basics
import Crypto
import Foundation

/// One device a notification is sent to: its APNs token and, optionally, who holds it (a user id).
public struct SendDevice: Sendable, Equatable, Hashable {
    /// The APNs device token, lowercase hex.
    public var deviceToken: String
    /// A label for the person or account behind the device, chosen by the app's backend.
    public var recipient: String?
    /// The APNs environment of the device (`sandbox` or `production`) when it is registered; nil: the app's.
    public var environment: String?
    /// The registered user the device was reached through (a send `to` a user); its recipient is the user.
    public var user: String?

    /// Creates a device.
    public init(deviceToken: String, recipient: String? = nil, environment: String? = nil, user: String? = nil) {
        self.deviceToken = deviceToken
        self.recipient = recipient
        self.environment = environment
        self.user = user
    }

    /// `{"deviceToken", "recipient"}`.
    public var json: JSONValue {
        .object(["deviceToken": .string(deviceToken), "recipient": recipient.map(JSONValue.string) ?? .null])
    }
}

/// How many replies to a notification act.
public enum AnswerPolicy: String, Sendable, Equatable {
    /// The first reply acts; later ones are stored `superseded` and act on nothing.
    case first
    /// Every reply acts (the first one still marks the notification answered).
    case each
}

/// One follow-up of a no-reply step.
public enum NoReplyAction: Sendable, Equatable {
    /// The same notification again to every device it went to, with its collapse id (it replaces the one shown).
    case remind
    /// A `notification.unanswered` webhook: to `url` (on the app's webhook origin), or the app's endpoint;
    /// `body` is the caller's data, carried inside the event, never the event itself.
    case webhook(url: String?, body: JSONValue?)
    /// A push to other devices: `aps`, or the notification's own content.
    case escalate(to: [SendDevice], aps: JSONObject?)
}

/// What happens when a notification is still unanswered `afterSeconds` after it was sent.
public struct NoReplyStep: Sendable, Equatable {
    /// Seconds after the send.
    public var afterSeconds: Int
    /// What it does.
    public var actions: [NoReplyAction]

    /// Creates a step.
    public init(afterSeconds: Int, actions: [NoReplyAction]) {
        self.afterSeconds = afterSeconds
        self.actions = actions
    }
}

/// The limits of a send request, documented in docs/sending.md ("Limits").
public struct SendLimits: Sendable {
    /// Devices per request (`to`, or the subject's devices).
    public var maxDevices = 1000
    /// No-reply steps per notification.
    public var maxSteps = 10
    /// Follow-ups per step.
    public var maxActionsPerStep = 10
    /// Devices an escalation may add, over every step.
    public var maxEscalationDevices = 100
    /// Longest time a notification may wait for a reply (`ttlSeconds`, `expiresAt`): 30 days, as APNs
    /// keeps a push at most about that long.
    public var maxTTLSeconds = 30 * 24 * 3600
    /// Without `expiresAt` or `ttlSeconds`, a notification expires a day after it was sent.
    public var defaultTTLSeconds = 24 * 3600
    /// Length of `recipient`, `subject`, `collapseId` (APNs allows 64 bytes) and the category.
    public var maxLabelLength = 64
    /// The largest APNs payload, ActionHook's own key included.
    public var maxPayloadBytes = FollowUpTemplate.maxPayloadBytes
    /// Outbox rows one send may write: its pushes and every step's follow-ups (a reminder is one push per
    /// device), so that one request cannot queue an unbounded amount of work.
    public var maxRowsPerSend = 20_000

    /// The defaults.
    public init() {}
}

/// A `POST /v1/apps/{app}/notifications` body, decoded and validated.
public struct SendRequest: Sendable, Equatable {
    /// The devices given (`to`); `nil` sends to the subject's known devices.
    public var to: [SendDevice]?
    /// The users given in `to` (`{"user": "alice"}`), each with its pointer: resolved by the store, in the
    /// send's transaction, to their active registered devices.
    public var users: [SendUser] = []
    /// The users escalations name, by the escalation's place: resolved with `users`, each escalation then
    /// reaching its users' active devices besides the devices it names.
    public var escalationUsers: [EscalationUsers] = []
    /// The category (`aps.category`); must be one of the app's categories.
    public var category: String?
    /// The `aps` content without the category: alert, sound, badge, thread-id, interruption-level, …
    public var aps: JSONObject
    /// The app's own keys of the payload (beside `aps`).
    public var userInfo: JSONObject
    /// What the notification is about.
    public var subject: String?
    /// An absolute expiry, if given.
    public var expiresAt: Date?
    /// A relative expiry in seconds, if given.
    public var ttlSeconds: Int?
    /// `apns-priority`.
    public var priority: Int?
    /// `apns-push-type`: alert (default), or another type that the payload fits.
    public var pushType: String
    /// `apns-collapse-id`; the notification's id when absent.
    public var collapseId: String?
    /// How many replies act.
    public var answers: AnswerPolicy
    /// The `aps` of the push that replaces the notification on the other devices once it is answered,
    /// or `nil`; `true` in the request means the default text.
    public var replaceOnAnswer: JSONObject?
    /// The no-reply steps, in order of `afterSeconds`.
    public var onNoReply: [NoReplyStep]
    /// The webhook events asked for besides the steps' own: `answered`, `expired`.
    public var events: [String]
    /// The SHA-256 of the body as sent, to tell a replay from another body under the same key.
    public var requestHash: [UInt8]
    /// Whether only replies signed by their device's key act on the notification (``ReplySignature``): the
    /// body's `requireSignedReplies`, or its category's (set by the route, which knows the app's categories).
    public var requireSignedReplies = false

    /// The default replacement shown on the other devices once one device answered.
    public static let defaultReplacement: JSONObject = [
        "alert": .object(["title": .string("Answered"), "body": .string("Answered on another device")])
    ]

    /// The webhook events a send can ask for.
    public static let eventNames: Set<String> = ["answered", "expired"]
    /// Push types a notification may use.
    static let pushTypes: Set<String> = ["alert", "background", "voip", "complication", "fileprovider", "mdm"]
    /// The `aps` members a send may set (the category comes from `category`).
    static let apsMembers: Set<String> = [
        "alert", "badge", "sound", "thread-id", "content-available", "mutable-content", "target-content-id",
        "interruption-level", "relevance-score", "filter-criteria", "stale-date", "content-state", "timestamp",
        "event", "dismissal-date",
    ]

    /// Decodes a send body. Every problem is collected: wrong types are 400s, broken rules 422s, each
    /// with its pointer. The category's existence is checked by the caller, which knows the app.
    public static func decode(_ body: JSONValue, limits: SendLimits = SendLimits(), now: Date) throws(ValidationFailure)
        -> SendRequest
    {
        var diagnostics = Diagnostics()
        guard var reader = ObjectReader.root(body, &diagnostics) else {
            try diagnostics.check()
            preconditionFailure("a non-object body is always a shape error")
        }
        var users: [SendUser] = []
        let to = recipients(&reader, limits: limits, users: &users, &diagnostics)
        let category = reader.string("category", &diagnostics)
        if let category { diagnostics.checkLength(category, "/category", max: limits.maxLabelLength) }
        let aps = Self.checkedAps(reader.object("aps", &diagnostics) ?? JSONObject(), at: "/aps", &diagnostics)
        let userInfo = reader.object("userInfo", &diagnostics) ?? JSONObject()
        for key in ["aps", NotificationKey.member] where userInfo[key] != nil {
            diagnostics.invalid(JSONPointer.appending(key, to: "/userInfo"), "is set by the server")
        }
        let subject = reader.string("subject", &diagnostics)
        if let subject { diagnostics.checkLength(subject, "/subject", max: 256) }
        if to == nil && subject == nil && !reader.has("to") {
            diagnostics.invalid("/to", "is required unless subject names whose devices to send to")
        }
        let (expiresAt, ttlSeconds) = expiry(&reader, limits: limits, now: now, &diagnostics)
        let (priority, pushType, collapseId) = pushOptions(&reader, limits: limits, &diagnostics)
        var answers = AnswerPolicy.first
        if let text = reader.string("answers", &diagnostics) {
            if let policy = AnswerPolicy(rawValue: text) {
                answers = policy
            } else {
                diagnostics.invalid("/answers", "must be first or each")
            }
        }
        let requireSignedReplies = reader.bool("requireSignedReplies", &diagnostics) ?? false
        let replaceOnAnswer = replacement(&reader, answers: answers, &diagnostics)
        let (steps, escalationUsers) = noReplySteps(&reader, limits: limits, &diagnostics)
        var events: [String] = []
        if let names = reader.strings("webhookEvents", &diagnostics) {
            for (index, name) in names.enumerated() where !eventNames.contains(name) {
                diagnostics.invalid(
                    JSONPointer.appending(index, to: "/webhookEvents"), "must be one of answered, expired")
            }
            events = Array(Set(names).intersection(eventNames)).sorted()
        }
        if let to { Self.checkDevices(to, steps: steps, limits: limits, &diagnostics) }
        reader.reportUnknown(&diagnostics)
        try diagnostics.check()

        var request = SendRequest(
            to: to, users: users, category: category, aps: aps, userInfo: userInfo, subject: subject,
            expiresAt: expiresAt,
            ttlSeconds: ttlSeconds, priority: priority, pushType: pushType, collapseId: collapseId, answers: answers,
            replaceOnAnswer: replaceOnAnswer, onNoReply: steps, events: events,
            requestHash: SHA256.hash(data: Array(body.jsonBytes)).withUnsafeBytes { Array($0) })
        request.escalationUsers = escalationUsers
        request.requireSignedReplies = requireSignedReplies
        try request.checkPayloadSize(limits: limits)
        return request
    }

    /// `to`: the devices named, and the users named among them (in `users`); nil when absent.
    private static func recipients(
        _ reader: inout ObjectReader, limits: SendLimits, users: inout [SendUser], _ diagnostics: inout Diagnostics
    ) -> [SendDevice]? {
        guard let elements = reader.array("to", &diagnostics) else { return nil }
        let to = devices(elements, at: "/to", limits: limits, users: &users, &diagnostics)
        if elements.isEmpty { diagnostics.invalid("/to", "must name at least one device") }
        if elements.count > limits.maxDevices {
            diagnostics.invalid("/to", "must name at most \(limits.maxDevices) devices")
        }
        return to
    }

    /// `expiresAt` (in the future, within the longest time to live) or `ttlSeconds`, not both.
    private static func expiry(
        _ reader: inout ObjectReader, limits: SendLimits, now: Date, _ diagnostics: inout Diagnostics
    ) -> (expiresAt: Date?, ttlSeconds: Int?) {
        var expiresAt: Date?
        if let text = reader.string("expiresAt", &diagnostics) {
            if let date = Timestamp.parse(text).flatMap(Timestamp.toTheMillisecond) {
                expiresAt = date
                if date <= now {
                    diagnostics.invalid("/expiresAt", "must be in the future")
                } else if date.timeIntervalSince(now) > Double(limits.maxTTLSeconds) {
                    diagnostics.invalid("/expiresAt", "must be at most \(limits.maxTTLSeconds) seconds ahead")
                }
            } else {
                diagnostics.malformed("/expiresAt", "must be an RFC 3339 time with an offset")
            }
        }
        let ttlSeconds = reader.integer("ttlSeconds", in: 1...limits.maxTTLSeconds, &diagnostics)
        if reader.has("expiresAt") && reader.has("ttlSeconds") {
            diagnostics.invalid("/ttlSeconds", "must not be combined with expiresAt")
        }
        return (expiresAt, ttlSeconds)
    }

    /// APNs' `apns-priority`, `apns-push-type` and `apns-collapse-id`, as APNs allows them together.
    private static func pushOptions(
        _ reader: inout ObjectReader, limits: SendLimits, _ diagnostics: inout Diagnostics
    ) -> (priority: Int?, pushType: String, collapseId: String?) {
        let priority = reader.integer("priority", in: 1...10, &diagnostics)
        if let priority, ![1, 5, 10].contains(priority) { diagnostics.invalid("/priority", "must be 1, 5 or 10") }
        let pushType = reader.string("pushType", &diagnostics) ?? "alert"
        if !pushTypes.contains(pushType) {
            diagnostics.invalid("/pushType", "must be one of \(pushTypes.sorted().joined(separator: ", "))")
        }
        if let priority, !FollowUpTemplate.allows(priority: priority, pushType: pushType) {
            diagnostics.invalid("/priority", FollowUpTemplate.backgroundPriorityRefusal)
        }
        let collapseId = reader.string("collapseId", &diagnostics)
        if let collapseId, collapseId.isEmpty || collapseId.utf8.count > limits.maxLabelLength {
            diagnostics.invalid("/collapseId", "must be 1 to \(limits.maxLabelLength) bytes")
        }
        return (priority, pushType, collapseId)
    }

    /// `replaceOnAnswer`: true, or the replacing push's `aps` (a template over the answering reply), which
    /// only a notification answered once can have.
    private static func replacement(
        _ reader: inout ObjectReader, answers: AnswerPolicy, _ diagnostics: inout Diagnostics
    ) -> JSONObject? {
        guard let value = reader.raw("replaceOnAnswer"), !value.isNull else { return nil }
        var replaceOnAnswer: JSONObject?
        switch value {
        case .bool(let on): replaceOnAnswer = on ? defaultReplacement : nil
        case .object(let object):
            var replacement = ObjectReader(object, at: "/replaceOnAnswer")
            replaceOnAnswer =
                replacement.object("aps", &diagnostics).map {
                    // A template over the answering reply: "Answered by {{recipient}}".
                    diagnostics.invalid(Template.validate(.object($0), pointer: "/replaceOnAnswer/aps"))
                    return Self.checkedAps($0, at: "/replaceOnAnswer/aps", &diagnostics)
                }
                ?? defaultReplacement
            replacement.reportUnknown(&diagnostics)
        default: diagnostics.wrongType("/replaceOnAnswer", expected: "a boolean or an object")
        }
        if replaceOnAnswer != nil && answers == .each {
            diagnostics.invalid("/replaceOnAnswer", "needs answers: first (with each, every device may answer)")
        }
        return replaceOnAnswer
    }

    /// `onNoReply`: the steps, each later than the one before, within the limits on steps and escalated
    /// devices, and the users each step's escalations name.
    private static func noReplySteps(
        _ reader: inout ObjectReader, limits: SendLimits, _ diagnostics: inout Diagnostics
    ) -> ([NoReplyStep], [EscalationUsers]) {
        guard let elements = reader.array("onNoReply", &diagnostics) else { return ([], []) }
        if elements.count > limits.maxSteps {
            diagnostics.invalid("/onNoReply", "must have at most \(limits.maxSteps) steps")
        }
        var steps: [NoReplyStep] = []
        var escalationUsers: [EscalationUsers] = []
        var escalated = 0
        for (index, element) in elements.enumerated() {
            let pointer = JSONPointer.appending(index, to: "/onNoReply")
            var named: [Int: [SendUser]] = [:]
            guard let step = Self.step(element, at: pointer, limits: limits, users: &named, &diagnostics) else {
                continue
            }
            for (action, users) in named.sorted(by: { $0.key < $1.key }) {
                escalationUsers.append(EscalationUsers(step: steps.count, action: action, users: users))
            }
            escalated += step.actions.reduce(0) {
                if case .escalate(let devices, _) = $1 { return $0 + devices.count }
                return $0
            }
            if let previous = steps.last, step.afterSeconds <= previous.afterSeconds {
                diagnostics.invalid(
                    JSONPointer.appending("afterSeconds", to: pointer), "must be later than the step before")
            }
            steps.append(step)
        }
        if escalated > limits.maxEscalationDevices {
            diagnostics.invalid("/onNoReply", "must escalate to at most \(limits.maxEscalationDevices) devices")
        }
        return (steps, escalationUsers)
    }

    /// Checks what depends on the devices the send goes to, once they are known (at once with `to`;
    /// for a send to a subject's devices, once the store has read them): there is one, no escalation repeats one of
    /// them, the outbox rows stay within ``SendLimits/maxRowsPerSend``, and the push with each device's
    /// key (its recipient label included) fits ``SendLimits/maxPayloadBytes``.
    /// A send to users is checked the same way once their devices are read, with at most
    /// ``SendLimits/maxDevices`` in all.
    public func check(devices: [SendDevice], limits: SendLimits = SendLimits()) throws(ValidationFailure) {
        var diagnostics = Diagnostics()
        if devices.isEmpty && to == nil {
            diagnostics.invalid("/subject", "has no known devices: no send has named devices for it in `to` yet")
        }
        if devices.count > limits.maxDevices {
            diagnostics.invalid(
                "/to", "reaches \(devices.count) devices with its users' devices; at most \(limits.maxDevices)")
        }
        let escalated = onNoReply.flatMap(\.actions).reduce(0) {
            if case .escalate(let devices, _) = $1 { return $0 + devices.count }
            return $0
        }
        if escalated > limits.maxEscalationDevices {
            diagnostics.invalid(
                "/onNoReply",
                "escalates to \(escalated) devices with its users' devices; at most \(limits.maxEscalationDevices)")
        }
        Self.checkDevices(devices, steps: onNoReply, limits: limits, &diagnostics)
        try diagnostics.check()
        var resolved = self
        resolved.to = devices
        try resolved.checkPayloadSize(limits: limits)
    }

    /// The request with each escalation's users resolved to their active devices (`byUser`, each device with
    /// its user and environment) after the devices the escalation names, each token once; a user without an
    /// active device is a 422 at its place.
    public func resolvingEscalationUsers(_ byUser: [String: [SendDevice]]) throws(ValidationFailure) -> SendRequest {
        var resolved = self
        var missing: [FieldError] = []
        for entry in escalationUsers {
            guard case .escalate(var targets, let aps) = resolved.onNoReply[entry.step].actions[entry.action] else {
                continue
            }
            var seen = Set(targets.map(\.deviceToken))
            for user in entry.users {
                guard let devices = byUser[user.id] else {
                    missing.append(
                        FieldError(pointer: user.pointer, detail: "names a user with no active registered device"))
                    continue
                }
                for device in devices where seen.insert(device.deviceToken).inserted { targets.append(device) }
            }
            resolved.onNoReply[entry.step].actions[entry.action] = .escalate(to: targets, aps: aps)
        }
        if !missing.isEmpty { throw .invalid(missing) }
        return resolved
    }

    /// Every user the send names, in `to` and in escalations.
    public var allUsers: [SendUser] { users + escalationUsers.flatMap(\.users) }

    static func checkDevices(
        _ devices: [SendDevice], steps: [NoReplyStep], limits: SendLimits, _ diagnostics: inout Diagnostics
    ) {
        let given = Set(devices.map(\.deviceToken))
        for (stepIndex, step) in steps.enumerated() {
            for (actionIndex, action) in step.actions.enumerated() {
                guard case .escalate(let escalated, _) = action else { continue }
                for (deviceIndex, device) in escalated.enumerated() where given.contains(device.deviceToken) {
                    diagnostics.invalid(
                        "/onNoReply/\(stepIndex)/followUps/\(actionIndex)/to/\(deviceIndex)",
                        "is already one of the devices the notification goes to")
                }
            }
        }
        let rows = steps.reduce(devices.count) { total, step in
            total
                + step.actions.reduce(0) { count, action in
                    switch action {
                    case .remind: count + devices.count
                    case .webhook: count + 1
                    case .escalate(let escalated, _): count + escalated.count
                    }
                }
        }
        if rows > limits.maxRowsPerSend {
            diagnostics.invalid(
                "/onNoReply",
                "would queue \(rows) pushes and webhooks (one reminder is a push per device); at most \(limits.maxRowsPerSend)"
            )
        }
    }

    /// Every step webhook's own URL, with its pointer, in step order.
    public var stepWebhookURLs: [(pointer: String, url: String)] {
        onNoReply.enumerated().flatMap { stepIndex, step in
            step.actions.enumerated().compactMap { actionIndex, action -> (pointer: String, url: String)? in
                guard case .webhook(let url?, _) = action else { return nil }
                return ("/onNoReply/\(stepIndex)/followUps/\(actionIndex)/url", url)
            }
        }
    }

    /// Refuses step webhook URLs the app's definition does not allow, each a 422 at its pointer: a URL must be
    /// on the origin of the app's webhook endpoint (its scheme, host and port; the path may differ), since a
    /// send's key may reach the app's own backend but nothing else, and, unless `allowPrivate`, must not name a
    /// loopback, private or link-local address (the check app and rule URLs get when saved).
    public func checkWebhookTargets(appEndpoint: String?, allowPrivate: Bool) throws(ValidationFailure) {
        var diagnostics = Diagnostics()
        for (pointer, url) in stepWebhookURLs {
            if !WebhookURL.isAllowedTarget(url, allowPrivate: allowPrivate) {
                diagnostics.invalid(pointer, WebhookURL.refusedTargetDetail)
            } else if let appEndpoint {
                if !WebhookURL.isSameOrigin(url, as: appEndpoint) {
                    diagnostics.invalid(
                        pointer, "must be on the app's webhook origin (the scheme, host and port of its URL)")
                }
            } else {
                diagnostics.invalid(pointer, "needs the app's webhook endpoint: a step's URL must be on its origin")
            }
        }
        try diagnostics.check()
    }

    /// When the notification expires, for a send at `now`.
    public func expiry(now: Date, limits: SendLimits = SendLimits()) -> Date {
        expiresAt ?? now.addingTimeInterval(TimeInterval(ttlSeconds ?? limits.defaultTTLSeconds))
    }

    /// Every device an escalation adds, in step order.
    public var escalationDevices: [SendDevice] {
        onNoReply.flatMap { step in
            step.actions.flatMap { action -> [SendDevice] in
                if case .escalate(let devices, _) = action { return devices }
                return []
            }
        }
    }

    /// Refuses a push that would exceed APNs's limit once ActionHook's key is added (422 at `/aps`),
    /// measured with the longest recipient label and the largest values the key can take.
    func checkPayloadSize(limits: SendLimits) throws(ValidationFailure) {
        let longest = ((to ?? []) + escalationDevices).compactMap(\.recipient).max { $0.utf8.count < $1.utf8.count }
        let key = NotificationKey(
            notificationID: UUID(), device: limits.maxDevices + limits.maxEscalationDevices, recipient: longest,
            expiresAt: Date(timeIntervalSince1970: 9_999_999_999))
        let payloads =
            [apnsPayload(aps: aps, key: key)]
            + escalationApsList.map { apnsPayload(aps: $0, key: key) }
            + (replaceOnAnswer.map { [apnsPayload(aps: $0, key: nil)] } ?? [])
        if let size = payloads.map(\.jsonByteCount).max(), size > limits.maxPayloadBytes {
            throw .invalid([
                FieldError(
                    pointer: "/aps",
                    detail:
                        "the push must be at most \(limits.maxPayloadBytes) bytes with ActionHook's key added (it would be \(size))"
                )
            ])
        }
    }

    private var escalationApsList: [JSONObject] {
        onNoReply.flatMap { step in
            step.actions.compactMap { action -> JSONObject? in
                if case .escalate(_, let aps?) = action { return aps }
                return nil
            }
        }
    }

    /// The APNs payload: `aps` with the category, the app's `userInfo` keys, and ActionHook's key.
    public func apnsPayload(aps: JSONObject, key: NotificationKey?) -> JSONValue {
        var apsObject = aps
        if let category, apsObject["category"] == nil { apsObject["category"] = .string(category) }
        var payload: JSONObject = ["aps": .object(apsObject)]
        for member in userInfo.members { payload[member.key] = member.value }
        if let key { payload[NotificationKey.member] = key.json }
        return .object(payload)
    }

    /// `aps` with only the members a send may set; any other member is a 422 at its pointer.
    static func checkedAps(_ aps: JSONObject, at pointer: String, _ diagnostics: inout Diagnostics) -> JSONObject {
        for key in aps.keys where !apsMembers.contains(key) {
            diagnostics.invalid(
                JSONPointer.appending(key, to: pointer),
                key == "category" ? "is set from /category" : "is not an aps member a send may set")
        }
        return JSONObject(aps.members.filter { apsMembers.contains($0.key) })
    }

    static func devices(
        _ elements: [JSONValue], at pointer: String, limits: SendLimits, users: inout [SendUser],
        _ diagnostics: inout Diagnostics
    ) -> [SendDevice] {
        devices(elements, at: pointer, limits: limits, acceptingUsers: true, collecting: &users, &diagnostics)
    }

    /// The devices of `elements`; `{"user": …}` elements go to `collected` when `acceptingUsers`, and are
    /// refused otherwise.
    static func devices(
        _ elements: [JSONValue], at pointer: String, limits: SendLimits, acceptingUsers: Bool,
        collecting collected: inout [SendUser], _ diagnostics: inout Diagnostics
    ) -> [SendDevice] {
        var devices: [SendDevice] = []
        var seen = Set<String>()
        var seenUsers = Set<String>()
        for (index, element) in elements.enumerated() {
            let elementPointer = JSONPointer.appending(index, to: pointer)
            if case .object(let object) = element, object["user"] != nil {
                guard acceptingUsers else {
                    var reader = ObjectReader(object, at: elementPointer)
                    _ = reader.string("user", &diagnostics)
                    reader.reportUnknown(&diagnostics)
                    diagnostics.invalid(elementPointer, "must name a device")
                    continue
                }
                if let user = Self.user(object, at: elementPointer, &diagnostics) {
                    guard seenUsers.insert(user).inserted else {
                        diagnostics.invalid(elementPointer, "names a user already listed")
                        continue
                    }
                    collected.append(SendUser(id: user, pointer: elementPointer))
                }
                continue
            }
            guard let device = Self.device(element, at: elementPointer, limits: limits, &diagnostics) else { continue }
            guard seen.insert(device.deviceToken).inserted else {
                diagnostics.invalid(elementPointer, "names a device already listed")
                continue
            }
            devices.append(device)
        }
        return devices
    }

    /// The user a `{"user": …}` element names, when valid.
    private static func user(_ object: JSONObject, at pointer: String, _ diagnostics: inout Diagnostics) -> String? {
        var reader = ObjectReader(object, at: pointer)
        let user = reader.string("user", &diagnostics)
        reader.reportUnknown(&diagnostics)
        guard let user else { return nil }
        guard SendUser.isValid(user) else {
            diagnostics.invalid(JSONPointer.appending("user", to: pointer), "must be 1 to 64 characters")
            return nil
        }
        return user
    }

    /// The device a token or `{deviceToken, recipient}` element names, its token lowercased, when valid.
    private static func device(
        _ element: JSONValue, at pointer: String, limits: SendLimits, _ diagnostics: inout Diagnostics
    ) -> SendDevice? {
        var token: String?
        var recipient: String?
        switch element {
        case .string(let text): token = text
        case .object(let object):
            var reader = ObjectReader(object, at: pointer)
            token = reader.string("deviceToken", &diagnostics)
            recipient = reader.string("recipient", &diagnostics)
            if token == nil && !reader.has("deviceToken") {
                diagnostics.invalid(JSONPointer.appending("deviceToken", to: pointer), "is required")
            }
            reader.reportUnknown(&diagnostics)
        default:
            diagnostics.wrongType(pointer, expected: "a device token, {deviceToken, recipient} or {user}")
        }
        if let recipient {
            diagnostics.checkLength(
                recipient, JSONPointer.appending("recipient", to: pointer), max: limits.maxLabelLength)
        }
        guard let token else { return nil }
        guard let hasUpperCase = NotificationResponse.deviceTokenCase(token) else {
            diagnostics.invalid(
                element.stringValue == nil ? JSONPointer.appending("deviceToken", to: pointer) : pointer,
                "must be hexadecimal with an even length of 16 to 200 characters")
            return nil
        }
        return SendDevice(deviceToken: hasUpperCase ? token.lowercased() : token, recipient: recipient)
    }

    /// A no-reply step; the users each escalation names go to `users`, by the escalation's place in the step.
    static func step(
        _ value: JSONValue, at pointer: String, limits: SendLimits, users: inout [Int: [SendUser]],
        _ diagnostics: inout Diagnostics
    ) -> NoReplyStep? {
        guard let object = value.objectValue else {
            diagnostics.wrongType(pointer, expected: "an object")
            return nil
        }
        var reader = ObjectReader(object, at: pointer)
        let after = reader.integer("afterSeconds", in: 1...limits.maxTTLSeconds, &diagnostics)
        if after == nil && !reader.has("afterSeconds") {
            diagnostics.invalid(reader.pointer("afterSeconds"), "is required")
        }
        var actions: [NoReplyAction] = []
        let elements = reader.array("followUps", &diagnostics) ?? []
        if elements.isEmpty { diagnostics.invalid(reader.pointer("followUps"), "must have at least one follow-up") }
        if elements.count > limits.maxActionsPerStep {
            diagnostics.invalid(reader.pointer("followUps"), "must have at most \(limits.maxActionsPerStep) follow-ups")
        }
        for (index, element) in elements.enumerated() {
            let actionPointer = JSONPointer.appending(index, to: reader.pointer("followUps"))
            guard let actionObject = element.objectValue else {
                diagnostics.wrongType(actionPointer, expected: "an object")
                continue
            }
            var actionReader = ObjectReader(actionObject, at: actionPointer)
            switch actionReader.string("type", &diagnostics) {
            case "remind"?:
                actions.append(.remind)
            case "webhook"?:
                let url = actionReader.string("url", &diagnostics)
                if let url, !WebhookURL.isWellFormed(url) {
                    diagnostics.invalid(actionReader.pointer("url"), "must be an absolute http or https URL")
                }
                actions.append(.webhook(url: url, body: actionReader.raw("body").flatMap { $0.isNull ? nil : $0 }))
            case "escalate"?:
                var named: [SendUser] = []
                let devices = devices(
                    actionReader.array("to", &diagnostics) ?? [], at: actionReader.pointer("to"), limits: limits,
                    acceptingUsers: true, collecting: &named, &diagnostics)
                if devices.isEmpty && named.isEmpty {
                    diagnostics.invalid(actionReader.pointer("to"), "must name at least one device or user")
                }
                if !named.isEmpty { users[actions.count] = named }
                let escalationAps = actionReader.object("aps", &diagnostics).map {
                    Self.checkedAps($0, at: actionReader.pointer("aps"), &diagnostics)
                }
                actions.append(.escalate(to: devices, aps: escalationAps))
            case nil:
                if !actionReader.has("type") { diagnostics.invalid(actionReader.pointer("type"), "is required") }
            case let other?:
                _ = other
                diagnostics.invalid(actionReader.pointer("type"), "must be remind, webhook or escalate")
            }
            actionReader.reportUnknown(&diagnostics)
        }
        reader.reportUnknown(&diagnostics)
        guard let after else { return nil }
        return NoReplyStep(afterSeconds: after, actions: actions)
    }
}

/// ActionHook's key in a sent push's `userInfo` (`"actionhook": {"n", "d", "r", "exp"}`): which
/// notification, which of its devices, who holds it, and when it expires (UNIX seconds). A forwarded reply
/// that carries it is bound to that notification, when it is one of the same app's.
public struct NotificationKey: Sendable, Equatable {
    /// The member of `userInfo` that holds the key.
    public static let member = "actionhook"
    /// Positions a key may name: more than any send has (its devices and escalations).
    static let maxDevicePosition = 1 << 20

    /// The notification's id.
    public var notificationID: UUID
    /// The device's position in the send.
    public var device: Int
    /// The device's recipient label.
    public var recipient: String?
    /// When the notification expires.
    public var expiresAt: Date

    /// Creates a key.
    public init(notificationID: UUID, device: Int, recipient: String?, expiresAt: Date) {
        self.notificationID = notificationID
        self.device = device
        self.recipient = recipient
        self.expiresAt = expiresAt
    }

    /// `{"n": id, "d": position, "r": recipient (when there is one), "exp": UNIX seconds}`.
    public var json: JSONValue {
        var object: JSONObject = ["n": .string(notificationID.lowercasedString), "d": .integer(device)]
        if let recipient { object["r"] = .string(recipient) }
        object["exp"] = .integer(Int(expiresAt.timeIntervalSince1970.rounded(.up)))
        return .object(object)
    }

    /// The notification and device a reply's `userInfo` names, or `nil` when it carries no well-formed
    /// key. What it says is only a claim: the store binds the reply only to a notification of the
    /// reply's own app, and reads the recipient and expiry from what it stored.
    public static func read(from userInfo: JSONObject) -> (notificationID: UUID, device: Int)? {
        guard case .object(let key)? = userInfo[member], let text = key["n"]?.stringValue,
            let id = UUID(uuidString: text), let device = key["d"]?.intValue, (0..<maxDevicePosition).contains(device)
        else { return nil }
        return (id, device)
    }
}

/// The users one escalation names: the step's and the follow-up's place in `onNoReply`, and the users.
public struct EscalationUsers: Sendable, Equatable {
    /// The step's index in `onNoReply`.
    public var step: Int
    /// The escalation's index in the step's follow-ups.
    public var action: Int
    /// The users, each with its pointer.
    public var users: [SendUser]

    /// Creates the users of one escalation.
    public init(step: Int, action: Int, users: [SendUser]) {
        self.step = step
        self.action = action
        self.users = users
    }
}

/// A user a send names in `to` or in an escalation: the backend's own user id (1 to 64 characters), resolved by the store to the
/// user's active registered devices.
public struct SendUser: Sendable, Equatable, Hashable {
    /// The user id.
    public var id: String
    /// Where the send named it, for a 422 when the user has no active device.
    public var pointer: String

    /// Creates a named user.
    public init(id: String, pointer: String) {
        self.id = id
        self.pointer = pointer
    }

    /// Whether `id` is a user id: 1 to 64 characters.
    public static func isValid(_ id: String) -> Bool { (1...64).contains(id.count) }
}
