import ActionHookCore
import Foundation
import Testing

/// What a reply plans before anything is written (``IngestPlan``): its outcome, whether it answers the
/// sent notification it is bound to, whether it cancels that notification's snoozes, and the follow-ups it
/// adds. A pure decision, as a table of cases.
@Suite("Ingest plan: a reply's outcome and follow-ups")
struct IngestPlanTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let token1 = String(repeating: "ab", count: 32)
    static let token2 = String(repeating: "cd", count: 32)

    static func rule(_ text: String) -> Rule {
        try! Rule.decode(json(text), id: nil)
    }

    static let accept = rule(#"{"id": "ok", "handler": {"type": "accept"}}"#)
    static let acceptWithWebhook = rule(
        #"{"id": "ok", "handler": {"type": "accept"}, "followUps": [{"channel": "webhook", "body": {"done": true}}]}"#)
    /// A snooze of at most two per notification, re-delivered after ten minutes.
    static let snooze = rule(
        #"{"id": "zz", "handler": {"type": "snooze", "delaySeconds": 600, "maxSnoozes": 2, "allowMissing": ["notificationIdentifier"]}}"#
    )

    /// The push sent to the replying device, as the store reads it for a snooze's re-delivery.
    static let sentPush: JSONObject = [
        "deviceToken": .string(token1), "pushType": .string("alert"), "collapseId": .string("c"),
        "payload": .object(["aps": .object(["alert": .string("Dinner?"), "category": .string("cat")])]),
    ]

    static func item(_ rule: Rule?, token: String = token1, respondedAt: Date? = nil, ageLimit: Int? = nil)
        -> IngestItem
    {
        IngestItem(
            appID: "a", idempotencyKey: UUID().uuidString,
            response: NotificationResponse(
                actionIdentifier: rule?.id ?? "other", deviceToken: token, respondedAt: respondedAt),
            decision: IngestDecision(rule: rule, subject: nil, ageLimit: ReplyAgeLimit(maxAgeSeconds: ageLimit)))
    }

    /// A sent notification the reply is bound to, sent to two devices (the reply's is the first).
    static func bound(
        answered: Bool = false, answers: AnswerPolicy = .first, expiresIn: TimeInterval = 60, replace: Bool = false,
        push: JSONObject? = nil
    ) -> BoundNotification {
        BoundNotification(
            id: UUID(), answers: answers, expiresAt: now.addingTimeInterval(expiresIn), answered: answered,
            collapseId: "c", category: "cat", subject: nil, createdAt: now.addingTimeInterval(-5), events: ["answered"],
            replacement: replace ? ["alert": .string("Answered")] : nil, device: 0, recipient: "ann",
            devices: [
                SendDevice(deviceToken: token1, recipient: "ann"), SendDevice(deviceToken: token2, recipient: "bob"),
            ], push: push)
    }

    /// One row of the table: the reply and what it must plan.
    struct Case: Sendable, CustomStringConvertible {
        var description: String
        var item: IngestItem
        var previousSnoozes = 0
        var notification: BoundNotification?
        var outcome: Outcome
        var answersNotification = false
        var cancelsSnoozes: Bool
        var followUps: [FollowUpKind] = []
    }

    static let cases: [Case] = [
        Case(description: "no rule matched", item: item(nil), outcome: .unmatched, cancelsSnoozes: true),
        Case(description: "a rule, unbound", item: item(accept), outcome: .accepted, cancelsSnoozes: true),
        Case(
            description: "a rule's follow-up", item: item(acceptWithWebhook), outcome: .accepted,
            cancelsSnoozes: true, followUps: [.rule]),
        Case(
            description: "within the reply's age limit", item: item(accept, respondedAt: now - 30, ageLimit: 60),
            outcome: .accepted, cancelsSnoozes: true),
        Case(
            description: "past the reply's age limit: expired, nothing planned",
            item: item(acceptWithWebhook, respondedAt: now - 120, ageLimit: 60), outcome: .expired,
            cancelsSnoozes: false),
        Case(
            description: "a snooze, the first", item: item(snooze), outcome: .snoozed, cancelsSnoozes: false),
        Case(
            description: "a snooze below the limit", item: item(snooze), previousSnoozes: 1, outcome: .snoozed,
            cancelsSnoozes: false),
        Case(
            description: "the snooze limit: a snooze after maxSnoozes snoozes plans nothing", item: item(snooze),
            previousSnoozes: 2, outcome: .snoozeLimitReached, cancelsSnoozes: false),
        Case(
            description: "the snooze limit: long past it", item: item(snooze), previousSnoozes: 50,
            outcome: .snoozeLimitReached, cancelsSnoozes: false),
        Case(
            description: "the snooze limit, bound: neither answers nor re-delivers", item: item(snooze),
            previousSnoozes: 2, notification: bound(expiresIn: 3600, push: sentPush), outcome: .snoozeLimitReached,
            cancelsSnoozes: false),
        Case(
            description: "a bound snooze re-delivers the push it was sent", item: item(snooze),
            notification: bound(expiresIn: 3600, push: sentPush), outcome: .snoozed, cancelsSnoozes: false,
            followUps: [.snooze]),
        Case(
            description: "a bound snooze whose re-delivery would come after the notification expired",
            item: item(snooze), notification: bound(expiresIn: 60, push: sentPush), outcome: .snoozed,
            cancelsSnoozes: false),
        Case(
            description: "the first answer to a bound notification", item: item(accept), notification: bound(),
            outcome: .accepted, answersNotification: true, cancelsSnoozes: true, followUps: [.answered]),
        Case(
            description: "the first answer, replacing the push on the other device", item: item(accept),
            notification: bound(replace: true), outcome: .accepted, answersNotification: true,
            cancelsSnoozes: true, followUps: [.replace, .answered]),
        Case(
            description: "a later answer when the first answers: superseded", item: item(accept, token: token2),
            notification: bound(answered: true), outcome: .superseded, cancelsSnoozes: false),
        Case(
            description: "a later answer when each answers: acts, answers nothing",
            item: item(acceptWithWebhook, token: token2), notification: bound(answered: true, answers: .each),
            outcome: .accepted, cancelsSnoozes: true, followUps: [.rule]),
        Case(
            description: "an answer at the notification's expiry: expired", item: item(acceptWithWebhook),
            notification: bound(expiresIn: 0), outcome: .expired, cancelsSnoozes: false),
    ]

    @Test("plans", arguments: cases)
    func plans(_ row: Case) {
        let plan = IngestPlan(
            row.item, receivedAt: Self.now, previousSnoozes: row.previousSnoozes, notification: row.notification)
        #expect(plan.outcome == row.outcome)
        #expect(plan.answer.outcome == row.outcome)
        #expect(plan.answersNotification == row.answersNotification)
        #expect(plan.cancelsSnoozes == row.cancelsSnoozes)
        #expect(plan.followUps.map(\.planned.kind) == row.followUps)
        #expect(
            plan.followUps.allSatisfy { $0.dueAt == Self.now.addingTimeInterval(TimeInterval($0.planned.delaySeconds)) }
        )
    }

    @Test("the first answer: the replacing push goes to the other device, and the answer names its recipient")
    func firstAnswer() {
        let first = IngestPlan(
            Self.item(Self.accept), receivedAt: Self.now, previousSnoozes: 0,
            notification: Self.bound(replace: true))
        #expect(first.followUps[0].planned.payload.value(atPath: "deviceToken")?.stringValue == Self.token2)
        #expect(first.followUps[0].planned.payload.value(atPath: "collapseId")?.stringValue == "c")
        #expect(first.followUps[1].planned.payload.value(atPath: "body.data.latencyMs")?.intValue == 5000)
        #expect(first.answer.body.value(atPath: "recipient")?.stringValue == "ann")
        #expect(first.answer.answered?.seconds == 5)
    }

    @Test("a snooze's re-delivery is the push it was sent, due after the delay")
    func snoozeRedelivery() throws {
        let plan = IngestPlan(
            Self.item(Self.snooze), receivedAt: Self.now, previousSnoozes: 1,
            notification: Self.bound(expiresIn: 3600, push: Self.sentPush))
        let redelivery = try #require(plan.followUps.first)
        #expect(redelivery.isSnooze)
        #expect(redelivery.dueAt == Self.now.addingTimeInterval(600))
        #expect(redelivery.planned.payload.value(atPath: "payload.aps.alert")?.stringValue == "Dinner?")
    }

    @Test("an answer past the notification's expiry tells when it expired")
    func expiredAnswer() {
        let late = IngestPlan(
            Self.item(Self.accept), receivedAt: Self.now, previousSnoozes: 0, notification: Self.bound(expiresIn: 0))
        #expect(late.answer.body.value(atPath: "expiresAt")?.stringValue == Timestamp.format(Self.now))
    }
}
