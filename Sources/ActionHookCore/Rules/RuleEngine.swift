import Basics
import Foundation

/// A follow-up rendered for one response, ready to be written to the outbox.
public struct PlannedFollowUp: Sendable, Equatable {
    /// Its position among the rule's follow-ups (from 0); -1 for a snooze re-delivery.
    public var ordinal: Int
    /// The channel.
    public var channel: FollowUpChannel
    /// How long after the response to deliver it, in seconds.
    public var delaySeconds: Int
    /// Webhook: `{"url": <string or null>, "body": …}`. APNs: `{"deviceToken", "pushType", ("priority"),
    /// ("expiration"), ("collapseId"), "payload"}`.
    public var payload: JSONValue
    /// What produced it: a rule, a snooze, or the answer to a sent notification.
    public var kind: FollowUpKind

    /// Creates a planned follow-up.
    public init(
        ordinal: Int, channel: FollowUpChannel, delaySeconds: Int, payload: JSONValue, kind: FollowUpKind = .rule
    ) {
        self.ordinal = ordinal
        self.channel = channel
        self.delaySeconds = delaySeconds
        self.payload = payload
        self.kind = kind
    }
}

/// Matching responses to rules, running handler checks and rendering follow-ups. Pure functions.
public enum RuleEngine {
    /// The first enabled rule, in ascending (priority, id), whose match holds for `response`, or nil.
    public static func firstMatch(for response: NotificationResponse, in rules: [Rule]) -> Rule? {
        // Rules usually arrive in order already (the cache keeps them so): then no copy is made.
        let ordered = rules.indices.dropLast().allSatisfy { !precedes(rules[$0 + 1], rules[$0]) }
        return (ordered ? rules : rules.sorted(by: precedes)).first { $0.enabled && $0.match.matches(response) }
    }

    /// The order rules are tried in: lower priority first, then by id.
    public static func precedes(_ lhs: Rule, _ rhs: Rule) -> Bool {
        (lhs.priority, lhs.id) < (rhs.priority, rhs.id)
    }

    /// The subject: `userInfo[category.subjectKey]` (a member of that name, else a dot path) as text,
    /// strings as they are and numbers as their literal; nil when the category has no subject key or the
    /// value is missing, empty or of another type.
    public static func subject(of response: NotificationResponse, category: NotificationCategory?) -> String? {
        guard let key = category?.subjectKey else { return nil }
        let value = response.userInfo[key] ?? JSONValue.object(response.userInfo).value(atPath: key)
        switch value {
        case .string(let text)?: return text.isEmpty ? nil : text
        case .number(let literal)?: return literal
        default: return nil
        }
    }

    /// The checks a handler makes on the response: `comment` needs non-blank `userText` of at most
    /// `maxLength` characters, else a 422 at `/userText`; `snooze` needs `notificationIdentifier` and
    /// `deviceToken` (each a 422 at its pointer) unless the handler's `allowMissing` names it. Other
    /// handlers accept any response.
    public static func check(_ handler: RuleHandler, response: NotificationResponse) throws(ValidationFailure) {
        if case .snooze(_, _, let allowMissing) = handler {
            var missing: [FieldError] = []
            if response.notificationIdentifier == nil && !allowMissing.contains("notificationIdentifier") {
                missing.append(
                    FieldError(
                        pointer: "/notificationIdentifier",
                        detail:
                            "is required for a snooze: maxSnoozes is counted and later answers cancel it per notification"
                    ))
            }
            if response.deviceToken == nil && !allowMissing.contains("deviceToken") {
                missing.append(
                    FieldError(
                        pointer: "/deviceToken",
                        detail: "is required for a snooze: the notification is sent again to this device"))
            }
            if !missing.isEmpty { throw .invalid(missing) }
            return
        }
        guard case .comment(let maxLength) = handler else { return }
        guard let text = response.userText, !text.isBlank else {
            throw .invalid([FieldError(pointer: "/userText", detail: "must not be empty for this action")])
        }
        if text.count > maxLength {
            throw .invalid([FieldError(pointer: "/userText", detail: "must be at most \(maxLength) characters")])
        }
    }

    /// The outcome a handler gives; nil (no rule matched) gives `unmatched`. A snooze gives `snoozed`:
    /// the caller makes it `snoozeLimitReached` when the notification was snoozed `maxSnoozes` times.
    public static func outcome(of handler: RuleHandler?) -> Outcome {
        switch handler {
        case .accept?: .accepted
        case .decline?: .declined
        case .snooze?: .snoozed
        case .comment?: .commented
        case .record?: .recorded
        case nil: .unmatched
        }
    }

    /// The rule's follow-ups rendered for a stored response, in order (ordinals from 0).
    ///
    /// A webhook without a body sends `{"type": "response.<outcome>", "timestamp": <receivedAt>,
    /// "data": {"response": <StoredResponseView.json>}}`. An APNs device token renders as text; it is
    /// empty when the response has no token.
    public static func plan(
        _ rule: Rule, response: NotificationResponse, responseID: UUID, receivedAt: Date, subject: String?,
        outcome: Outcome, notification: BoundNotification? = nil
    ) -> [PlannedFollowUp] {
        var context = TemplateContext(response: response, responseID: responseID, subject: subject)
        context.notificationID = notification?.id
        context.recipient = notification?.recipient
        return rule.followUps.enumerated().map { ordinal, followUp in
            let payload: JSONValue
            switch followUp.channel {
            case .webhook:
                let body =
                    followUp.body.map { Template.render($0, context: context) }
                    ?? defaultWebhookBody(
                        StoredResponseView(
                            id: responseID, response: response, receivedAt: receivedAt, outcome: outcome,
                            ruleId: rule.id, subject: subject, deviceUser: notification?.deviceUser))
                payload = .object(["url": followUp.url.map(JSONValue.string) ?? .null, "body": body])
            case .apns:
                var object: JSONObject = [
                    "deviceToken": .string(renderText(followUp.deviceToken, context: context)),
                    "pushType": .string(followUp.pushType),
                ]
                if let priority = followUp.priority { object["priority"] = .integer(priority) }
                if let expiration = followUp.expiration { object["expiration"] = .integer(expiration) }
                if let collapseId = followUp.collapseId { object["collapseId"] = .string(collapseId) }
                object["payload"] = Template.render(followUp.payload, context: context)
                payload = .object(object)
            }
            return PlannedFollowUp(
                ordinal: ordinal, channel: followUp.channel, delaySeconds: followUp.delaySeconds, payload: payload)
        }
    }

    /// The body of a webhook follow-up that has none of its own.
    public static func defaultWebhookBody(_ view: StoredResponseView) -> JSONValue {
        .object([
            "type": .string("response." + view.outcome.rawValue),
            "timestamp": .string(Timestamp.format(view.receivedAt)),
            "data": .object(["response": view.json]),
        ])
    }

    /// The snooze re-delivery: an APNs follow-up (ordinal -1) after `delaySeconds` of the push ActionHook
    /// sent the replying device for the notification the reply is bound to, exactly as it was sent (same
    /// token, payload and collapse id). nil for a reply bound to no notification of its device: what a
    /// client sends is never pushed, nor to a token it chose.
    public static func snoozeRedelivery(of notification: BoundNotification?, delaySeconds: Int) -> PlannedFollowUp? {
        guard let notification, notification.device != nil, let push = notification.push,
            push["deviceToken"]?.stringValue?.isEmpty == false, push["payload"]?.objectValue != nil
        else { return nil }
        var payload = push
        // The re-delivery shows the notification again: the send's own expiry still bounds it.
        payload["collapseId"] = .string(notification.collapseId)
        return PlannedFollowUp(
            ordinal: -1, channel: .apns, delaySeconds: delaySeconds, payload: .object(payload), kind: .snooze)
    }

    /// A template rendered as text, whatever the type of the value a lone placeholder names.
    private static func renderText(_ template: String, context: TemplateContext) -> String {
        switch Template.render(template, context: context) {
        case .string(let text): text
        case .null: ""
        case let other: other.jsonText
        }
    }
}
