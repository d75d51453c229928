import Basics
import Foundation

/// What ingest decided before touching the database: the matched rule and the subject.
public struct IngestDecision: Sendable {
    /// The first matching rule, or `nil` (outcome `unmatched`).
    public var rule: Rule?
    /// The subject read from `userInfo` through the category's `subjectKey`.
    public var subject: String?
    /// The reply's age limit (the category's, or the rule's in its place).
    public var ageLimit: ReplyAgeLimit
    /// Whether the reply's category or rule acts only on a reply signed by its device's key.
    public var requiresSignature: Bool

    /// Creates a decision.
    public init(
        rule: Rule?, subject: String?, ageLimit: ReplyAgeLimit = ReplyAgeLimit(), requiresSignature: Bool = false
    ) {
        self.rule = rule
        self.subject = subject
        self.ageLimit = ageLimit
        self.requiresSignature = requiresSignature
    }

    /// Decides for `response` with the app's rules and categories, at `now` on the server's clock: the
    /// first matching rule, the subject and the age limit. Handler checks (a comment's text), a
    /// `respondedAt` later than `now` by more than `clockSkewSeconds`, and a missing one that the age
    /// limit requires throw ``ValidationFailure``.
    public static func decide(
        _ response: NotificationResponse, rules: [Rule], categories: [String: NotificationCategory], now: Date,
        clockSkewSeconds: Int
    ) throws(ValidationFailure) -> IngestDecision {
        let category = response.categoryIdentifier.flatMap { categories[$0] }
        if let respondedAt = response.respondedAt, respondedAt.timeIntervalSince(now) > Double(clockSkewSeconds) {
            throw .invalid([
                FieldError(
                    pointer: "/respondedAt",
                    detail: "must not be later than the server's clock by more than \(clockSkewSeconds) seconds")
            ])
        }
        let rule = RuleEngine.firstMatch(for: response, in: rules)
        let ageLimit = ReplyAgeLimit.resolve(rule: rule, category: category)
        if ageLimit.requireRespondedAt && response.respondedAt == nil {
            throw .invalid([
                FieldError(
                    pointer: "/respondedAt",
                    detail: "is required: replies to this category or rule have an age limit, judged from respondedAt")
            ])
        }
        if let rule { try RuleEngine.check(rule.handler, response: response) }
        return IngestDecision(
            rule: rule, subject: RuleEngine.subject(of: response, category: category), ageLimit: ageLimit,
            requiresSignature: (category?.requireSignedReplies ?? false) || (rule?.requireSignedReplies ?? false))
    }

    /// Whether the reply snoozes: its snoozes of the notification are counted before it is planned.
    public var snoozes: Bool {
        if case .snooze? = rule?.handler { return true }
        return false
    }
}

/// One response to store: who sent it, under which idempotency key, and what was decided for it.
public struct IngestItem: Sendable {
    /// The app the ingest key belongs to.
    public var appID: String
    /// The idempotency key.
    public var idempotencyKey: String
    /// The normalised response.
    public var response: NotificationResponse
    /// The matched rule and subject.
    public var decision: IngestDecision
    /// Whether the client sent the idempotency key (header or `responseId`); a key the server made up
    /// cannot find a retry's earlier write.
    public var keyFromClient = true
    /// The normalised request's hash, which tells a replay from another body under the same key.
    public let requestHash: [UInt8]
    /// The item planned on receipt (with the database's clock as the writer last read it), for a write
    /// of one round trip; nil when its write must read first, or is planned by the writer.
    public var plan: IngestPlan?

    /// Creates an item.
    public init(appID: String, idempotencyKey: String, response: NotificationResponse, decision: IngestDecision) {
        self.appID = appID
        self.idempotencyKey = idempotencyKey
        self.response = response
        self.decision = decision
        requestHash = response.requestHash
    }
}

/// What a stored response answers: its outcome, typed, and the answer's body as it was stored (a
/// replay gives back exactly the first answer).
public struct StoredAnswer: Sendable, Equatable {
    /// The response's outcome.
    public var outcome: Outcome
    /// The answer's body: the 202's, or the members of the 410's problem for an expired reply.
    public let body: JSONValue
    /// The body's JSON text, as stored and sent.
    public let json: [UInt8]

    /// The sent notification this answer answered first, with its category and the time from the send
    /// (for metrics; not stored, so a replay has none).
    public var answered: (category: String?, seconds: Double)?

    /// Creates an answer.
    public init(outcome: Outcome, body: JSONValue) {
        self.outcome = outcome
        self.body = body
        json = body.jsonBytes
    }

    /// An answer read back: `json` is the stored text of `body`.
    public init(outcome: Outcome, body: JSONValue, json: [UInt8]) {
        self.outcome = outcome
        self.body = body
        self.json = json
    }

    public static func == (lhs: StoredAnswer, rhs: StoredAnswer) -> Bool {
        lhs.outcome == rhs.outcome && lhs.body == rhs.body
    }
}

/// The result of an ingest: the stored answer, new or replayed.
public enum IngestResult: Sendable, Equatable {
    /// The response was stored now.
    case created(StoredAnswer)
    /// The same key and body were stored before; the answer is the one given then.
    case replayed(StoredAnswer)

    /// The answer, new or replayed.
    public var answer: StoredAnswer {
        switch self {
        case .created(let answer), .replayed(let answer): answer
        }
    }
}

/// The rows a new response produces, planned before writing: the domain's whole decision for one
/// reply, from the decision, the database's clock and how often its notification was snoozed before.
public struct IngestPlan: Sendable {
    /// A follow-up to write, with its id and due time.
    public struct FollowUp: Sendable {
        /// The follow-up's id (the `webhook-id` / `apns-id`).
        public var id: UUID
        /// What to deliver.
        public var planned: PlannedFollowUp
        /// When.
        public var dueAt: Date
        /// The payload's JSON text, as stored.
        public let payloadJSON: [UInt8]

        init(id: UUID, planned: PlannedFollowUp, dueAt: Date) {
            self.id = id
            self.planned = planned
            self.dueAt = dueAt
            payloadJSON = planned.payload.jsonBytes
        }
        /// Whether it re-delivers a snoozed notification (cancelled by a later answer to it).
        public var isSnooze: Bool { planned.kind == .snooze }
    }

    /// The new response's id.
    public var responseID: UUID
    /// When the response was received (the database's clock), as planned and stored.
    public var receivedAt: Date
    /// The reply's `userInfo` as JSON text, as stored.
    public let userInfoJSON: [UInt8]
    /// What the reply did.
    public var outcome: Outcome
    /// The follow-ups to write.
    public var followUps: [FollowUp]
    /// The answer, as stored and replayed.
    public var answer: StoredAnswer

    /// The sent notification the reply is bound to, as read under its lock.
    public var notification: BoundNotification?
    /// Whether this reply is the first to answer its sent notification: it marks it answered, cancels its
    /// no-reply steps and expiry, and adds the replacing pushes and `notification.answered`.
    public var answersNotification: Bool

    /// Whether this answer cancels the pending snoozes of its notification (any answer but a snooze, or
    /// one that came too late to act or after another had answered).
    public var cancelsSnoozes: Bool {
        ![.snoozed, .snoozeLimitReached, .expired, .superseded, .unverified].contains(outcome)
    }

    /// Plans a response received at `receivedAt` (the database's clock), after `previousSnoozes`
    /// snoozes of its notification, bound to `notification` when it carried the key of a notification
    /// of its app.
    ///
    /// A reply whose category, rule or notification requires a signature and that has no valid one is
    /// `unverified`; a bound reply after the notification's `expiresAt` is `expired`; one to a notification
    /// another reply answered first (`answers: first`) is `superseded`; none of them acts. Any other reply but
    /// a snooze answers the notification when it is the first.
    ///
    /// The response's id carries `receivedAt` (a UUIDv7's time): responses are partitioned by id, so a
    /// response lands in the partition of the time it was received.
    public init(_ item: IngestItem, receivedAt: Date, previousSnoozes: Int, notification: BoundNotification? = nil) {
        responseID = UUID.timeOrdered(at: receivedAt)
        self.receivedAt = receivedAt
        userInfoJSON = JSONValue.object(item.response.userInfo).jsonBytes
        self.notification = notification
        let response = item.response
        let decision = item.decision
        let age = ReplyAgeLimit.age(respondedAt: response.respondedAt, receivedAt: receivedAt)
        let lateForNotification = notification.flatMap(\.expiresAt).map { receivedAt >= $0 } ?? false
        let (outcome, ruled) = Self.act(
            item, responseID: responseID, receivedAt: receivedAt, previousSnoozes: previousSnoozes,
            notification: notification, expired: lateForNotification || decision.ageLimit.isExpired(age: age))
        var planned = ruled
        let unanswered = notification.map { !$0.answered } ?? false
        // A device the send reached as a user answers for that user only: a reply proving another user
        // (the device moved to them since) is stored, and its rule acts for that user, but it does not answer.
        let answeredByItsUser =
            notification.map { $0.deviceUser == nil || response.user == nil || $0.deviceUser == response.user } ?? true
        answersNotification =
            unanswered && answeredByItsUser
            && ![.expired, .superseded, .snoozed, .snoozeLimitReached, .unverified].contains(outcome)
        if answersNotification, let notification {
            planned += notification.answerFollowUps(
                response,
                view: StoredResponseView(
                    id: responseID, response: response, receivedAt: receivedAt, outcome: outcome,
                    ruleId: decision.rule?.id, subject: decision.subject, deviceUser: notification.deviceUser))
        }
        self.outcome = outcome
        followUps = planned.map {
            FollowUp(
                id: UUID.timeOrdered(), planned: $0, dueAt: receivedAt.addingTimeInterval(TimeInterval($0.delaySeconds))
            )
        }
        var body = Self.body(responseID, item, outcome: outcome, followUps: followUps, notification: notification)
        // What the 410 tells the client, replayed with it.
        if outcome == .expired, lateForNotification, let expiresAt = notification?.expiresAt {
            body["expiresAt"] = .string(Timestamp.format(expiresAt))
        } else if outcome == .expired, let limit = decision.ageLimit.maxAgeSeconds, let age {
            body["maxReplyAgeSeconds"] = .integer(limit)
            body["ageSeconds"] = ReplyAgeLimit.json(age: age)
        }
        answer = StoredAnswer(outcome: outcome, body: .object(body))
        if answersNotification, let notification {
            answer.answered = (notification.category, receivedAt.timeIntervalSince(notification.createdAt))
        }
    }

    /// What the reply does and the follow-ups its rule plans: none when it acts on nothing (unverified,
    /// expired, superseded, past its snooze limit). A snooze's re-delivery is planned only when it would
    /// come before the notification expires (it would show what can no longer be answered).
    private static func act(
        _ item: IngestItem, responseID: UUID, receivedAt: Date, previousSnoozes: Int,
        notification: BoundNotification?, expired: Bool
    ) -> (Outcome, [PlannedFollowUp]) {
        let response = item.response
        let decision = item.decision
        let outcome = RuleEngine.outcome(of: decision.rule?.handler)
        let unverified =
            (decision.requiresSignature || notification?.signedReplies == true) && !response.signature.isValid
        if unverified { return (.unverified, []) }
        if expired { return (.expired, []) }
        if let notification, notification.answered, notification.answers == .first { return (.superseded, []) }
        guard let rule = decision.rule else { return (outcome, []) }
        if case .snooze(_, let maxSnoozes, _) = rule.handler, previousSnoozes >= maxSnoozes {
            return (.snoozeLimitReached, [])
        }
        var planned = RuleEngine.plan(
            rule, response: response, responseID: responseID, receivedAt: receivedAt,
            subject: decision.subject, outcome: outcome, notification: notification)
        if case .snooze(let delaySeconds, _, _) = rule.handler,
            let redelivery = RuleEngine.snoozeRedelivery(of: notification, delaySeconds: delaySeconds),
            notification?.expiresAt.map({ receivedAt.addingTimeInterval(TimeInterval(delaySeconds)) < $0 }) ?? true
        {
            planned.append(redelivery)
        }
        return (outcome, planned)
    }

    /// The 202's body, as stored and replayed: the response's id, outcome, rule, subject and follow-ups, the
    /// notification it answers and for whom, its user and its signature.
    private static func body(
        _ responseID: UUID, _ item: IngestItem, outcome: Outcome, followUps: [FollowUp],
        notification: BoundNotification?
    ) -> JSONObject {
        let decision = item.decision
        var body: JSONObject = [
            "id": .string(responseID.lowercasedString), "outcome": .string(outcome.rawValue),
            "ruleId": decision.rule.map { .string($0.id) } ?? .null,
            "subject": decision.subject.map(JSONValue.string) ?? .null,
            "followUps": .array(
                followUps.map {
                    .object([
                        "id": .string($0.id.lowercasedString), "channel": .string($0.planned.channel.rawValue),
                        "dueAt": .string(Timestamp.format($0.dueAt)),
                    ])
                }),
        ]
        if let notification {
            body["notificationId"] = .string(notification.id.lowercasedString)
            body["recipient"] = notification.recipient.map(JSONValue.string) ?? .null
        }
        body["user"] = StoredResponseView.userJSON(verified: item.response.user, deviceUser: notification?.deviceUser)
        if item.response.signature != .absent { body["signature"] = item.response.signature.json }
        return body
    }
}
