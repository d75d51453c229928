import ActionHookCore
import Foundation
import Testing

/// The send side's pure parts: a send body decoded and validated, the rows it plans, and what a reply
/// bound to a sent notification decides.
@Suite("Send: request, plan, and replies bound to it")
struct SendPlanTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let token1 = String(repeating: "ab", count: 32)
    static let token2 = String(repeating: "cd", count: 32)

    static func failure(_ text: String) -> [String] {
        do {
            _ = try SendRequest.decode(json(text), now: now)
            return []
        } catch {
            return error.errors.map(\.pointer).sorted()
        }
    }

    @Test(
        "bad bodies: each problem at its pointer",
        arguments: [
            (#"{"aps": {"alert": "x"}}"#, ["/to"]),
            (#"{"to": [], "aps": {}}"#, ["/to"]),
            (#"{"to": ["zz"], "aps": {}}"#, ["/to/0"]),
            (#"{"to": [{"recipient": "a"}]}"#, ["/to/0/deviceToken"]),
            (#"{"to": ["\#(token1)", "\#(token1.uppercased())"]}"#, ["/to/1"]),
            (#"{"to": ["\#(token1)"], "aps": {"category": "c"}}"#, ["/aps/category"]),
            (#"{"to": ["\#(token1)"], "userInfo": {"actionhook": {}}}"#, ["/userInfo/actionhook"]),
            (#"{"to": ["\#(token1)"], "ttlSeconds": 0}"#, ["/ttlSeconds"]),
            (
                #"{"to": ["\#(token1)"], "ttlSeconds": 60, "expiresAt": "2099-01-01T00:00:00Z"}"#,
                ["/expiresAt", "/ttlSeconds"]
            ),
            (#"{"to": ["\#(token1)"], "expiresAt": "2020-01-01T00:00:00Z"}"#, ["/expiresAt"]),
            (#"{"to": ["\#(token1)"], "priority": 7}"#, ["/priority"]),
            (#"{"to": ["\#(token1)"], "answers": "each", "replaceOnAnswer": true}"#, ["/replaceOnAnswer"]),
            (
                #"{"to": ["\#(token1)"], "onNoReply": [{"afterSeconds": 5, "followUps": []}]}"#,
                ["/onNoReply/0/followUps"]
            ),
            (
                #"{"to": ["\#(token1)"], "onNoReply": [{"afterSeconds": 5, "followUps": [{"type": "remind"}]}, {"afterSeconds": 5, "followUps": [{"type": "remind"}]}]}"#,
                ["/onNoReply/1/afterSeconds"]
            ),
            (
                #"{"to": ["\#(token1)"], "onNoReply": [{"afterSeconds": 5, "followUps": [{"type": "call"}]}]}"#,
                ["/onNoReply/0/followUps/0/type"]
            ),
            (#"{"to": ["\#(token1)"], "webhookEvents": ["answered", "opened"]}"#, ["/webhookEvents/1"]),
            (#"{"to": ["\#(token1)"], "surprise": 1}"#, ["/surprise"]),
            (
                #"{"to": ["\#(token1)"], "onNoReply": [{"afterSeconds": 5, "followUps": [{"type": "escalate", "to": []}]}]}"#,
                ["/onNoReply/0/followUps/0/to"]
            ),
            (
                #"{"to": ["\#(token1)"], "onNoReply": [{"afterSeconds": 5, "followUps": [{"type": "escalate", "to": ["\#(token1)"]}]}]}"#,
                ["/onNoReply/0/followUps/0/to/0"]
            ),
            (
                #"{"to": ["\#(token1)"], "onNoReply": [{"afterSeconds": 5, "followUps": [{"type": "escalate", "to": ["\#(token2)"], "aps": {"category": "x"}}]}]}"#,
                ["/onNoReply/0/followUps/0/aps/category"]
            ),
            (
                #"{"to": ["\#(token1)"], "replaceOnAnswer": {"aps": {"category": "x"}}}"#,
                ["/replaceOnAnswer/aps/category"]
            ),
            (
                #"{"to": ["\#(token1)"], "replaceOnAnswer": {"aps": {"alert": "By {{nobody}}"}}}"#,
                ["/replaceOnAnswer/aps/alert"]
            ),
        ])
    func refused(_ body: String, pointers: [String]) {
        #expect(Self.failure(body) == pointers)
    }

    @Test("a payload over 4096 bytes once ActionHook's key is added is refused at /aps")
    func payloadLimit() {
        let fits = String(repeating: "x", count: 3800)
        #expect(Self.failure(#"{"to": ["\#(Self.token1)"], "aps": {"alert": "\#(fits)"}}"#).isEmpty)
        let over = String(repeating: "x", count: 4000)
        #expect(Self.failure(#"{"to": ["\#(Self.token1)"], "aps": {"alert": "\#(over)"}}"#) == ["/aps"])
    }

    @Test("the plan: one push per device with the key, expiration in epoch seconds, the collapse id; steps and expiry")
    func plan() throws {
        let request = try SendRequest.decode(
            json(
                #"""
                {"to": ["\#(Self.token1)", {"deviceToken": "\#(Self.token2)", "recipient": "bob"}], "category": "c",
                 "aps": {"alert": "Hi"}, "userInfo": {"k": 1}, "ttlSeconds": 600, "webhookEvents": ["expired"],
                 "onNoReply": [{"afterSeconds": 60, "followUps": [{"type": "remind"}, {"type": "webhook"}]},
                               {"afterSeconds": 120, "followUps": [{"type": "escalate", "to": [{"deviceToken": "\#(String(repeating: "ef", count: 32))", "recipient": "boss"}]}]}]}
                """#), now: Self.now)
        let id = UUID()
        let plan = SendPlan(request, devices: request.to ?? [], id: id, now: Self.now)
        #expect(plan.expiresAt == Self.now.addingTimeInterval(600))
        #expect(plan.collapseId == id.lowercasedString)
        #expect(plan.rows.map(\.kind) == [.push, .push, .step, .step, .step, .step, .expiry])
        #expect(
            plan.rows.map(\.dueAt) == [Self.now, Self.now] + Array(repeating: Self.now.addingTimeInterval(60), count: 3)
                + [Self.now.addingTimeInterval(120), plan.expiresAt])
        #expect(plan.devices.map(\.recipient) == [nil, "bob", "boss"])
        let push = plan.rows[1].payload
        #expect(push.value(atPath: "expiration")?.intValue == 1_800_000_600)
        #expect(push.value(atPath: "collapseId")?.stringValue == id.lowercasedString)
        #expect(push.value(atPath: "payload.aps.category")?.stringValue == "c")
        #expect(push.value(atPath: "payload.k")?.intValue == 1)
        #expect(push.value(atPath: "payload.actionhook.n")?.stringValue == id.lowercasedString)
        #expect(push.value(atPath: "payload.actionhook.d")?.intValue == 1)
        #expect(push.value(atPath: "payload.actionhook.r")?.stringValue == "bob")
        #expect(push.value(atPath: "payload.actionhook.exp")?.intValue == 1_800_000_600)
        #expect(plan.rows[4].payload.value(atPath: "body.type")?.stringValue == "notification.unanswered")
        #expect(plan.rows[5].payload.value(atPath: "payload.actionhook.d")?.intValue == 2)
        #expect(plan.rows[6].payload.value(atPath: "body.type")?.stringValue == "notification.expired")
        #expect(plan.silenceAt == Self.now.addingTimeInterval(60))
        // The key read back from a reply's userInfo.
        let userInfo = try #require(push.value(atPath: "payload")?.objectValue)
        let key = try #require(NotificationKey.read(from: userInfo))
        #expect(key.notificationID == id && key.device == 1)
        #expect(
            NotificationKey.read(from: ["actionhook": .object(["n": .string("not-a-uuid"), "d": .integer(0)])]) == nil)
        #expect(
            NotificationKey.read(from: ["actionhook": .object(["n": .string(id.uuidString), "d": .integer(1 << 31)])])
                == nil)
    }

    @Test("a send that would queue more than 20,000 rows (reminders are a push per device) is refused")
    func rowLimit() throws {
        let devices = (0..<1000).map { #""\#(String(format: "%064x", $0 + 1))""# }.joined(separator: ",")
        let steps = (1...10).map {
            #"{"afterSeconds": \#($0 * 60), "followUps": [{"type": "remind"}, {"type": "remind"}, {"type": "remind"}]}"#
        }
        .joined(separator: ",")
        #expect(Self.failure(#"{"to": [\#(devices)], "onNoReply": [\#(steps)]}"#) == ["/onNoReply"])
        // A send to a subject's devices is checked once the store knows them.
        let bySubject = try SendRequest.decode(json(#"{"subject": "s", "onNoReply": [\#(steps)]}"#), now: Self.now)
        let many = (0..<1000).map { SendDevice(deviceToken: String(format: "%064x", $0 + 1)) }
        #expect(throws: ValidationFailure.self) { try bySubject.check(devices: many) }
        #expect(throws: ValidationFailure.self) { try bySubject.check(devices: []) }
        #expect(throws: Never.self) { try bySubject.check(devices: Array(many.prefix(10))) }
        let fewer = (1...10).map { #"{"afterSeconds": \#($0 * 60), "followUps": [{"type": "remind"}]}"# }.joined(
            separator: ",")
        #expect(Self.failure(#"{"to": [\#(devices)], "onNoReply": [\#(fewer)]}"#).isEmpty)
    }

    static func item(_ action: String, token: String, rule: Rule?) -> IngestItem {
        IngestItem(
            appID: "a", idempotencyKey: UUID().uuidString,
            response: NotificationResponse(actionIdentifier: action, deviceToken: token),
            decision: IngestDecision(rule: rule, subject: nil))
    }

    static func bound(answered: Bool, answers: AnswerPolicy = .first, expiresAt: Date? = nil, replace: Bool = false)
        -> BoundNotification
    {
        BoundNotification(
            id: UUID(), answers: answers, expiresAt: expiresAt ?? now.addingTimeInterval(60), answered: answered,
            collapseId: "c", category: "cat", subject: nil, createdAt: now.addingTimeInterval(-5), events: ["answered"],
            replacement: replace ? ["alert": .string("Answered")] : nil, device: 0, recipient: "ann",
            devices: [
                SendDevice(deviceToken: token1, recipient: "ann"), SendDevice(deviceToken: token2, recipient: "bob"),
            ])
    }

    @Test(
        "a bound reply: the first acts and answers, a later one is superseded, a late one expired, a snooze does not answer"
    )
    func boundReplies() throws {
        let accept = try Rule.decode(json(#"{"id": "ok", "handler": {"type": "accept"}}"#), id: nil)
        let snooze = try Rule.decode(
            json(#"{"id": "zz", "handler": {"type": "snooze", "allowMissing": ["notificationIdentifier"]}}"#), id: nil)

        let first = IngestPlan(
            Self.item("ok", token: Self.token1, rule: accept), receivedAt: Self.now, previousSnoozes: 0,
            notification: Self.bound(answered: false, replace: true))
        #expect(first.outcome == .accepted)
        #expect(first.answersNotification)
        // The replacing push goes to the other device only; notification.answered once.
        #expect(first.followUps.map(\.planned.kind) == [.replace, .answered])
        #expect(first.followUps[0].planned.payload.value(atPath: "deviceToken")?.stringValue == Self.token2)
        #expect(first.followUps[0].planned.payload.value(atPath: "collapseId")?.stringValue == "c")
        #expect(first.followUps[1].planned.payload.value(atPath: "body.data.latencyMs")?.intValue == 5000)
        #expect(first.answer.body.value(atPath: "recipient")?.stringValue == "ann")
        #expect(first.answer.answered?.seconds == 5)

        let later = IngestPlan(
            Self.item("ok", token: Self.token2, rule: accept), receivedAt: Self.now, previousSnoozes: 0,
            notification: Self.bound(answered: true))
        #expect(later.outcome == .superseded)
        #expect(later.followUps.isEmpty && !later.answersNotification && !later.cancelsSnoozes)

        let each = IngestPlan(
            Self.item("ok", token: Self.token2, rule: accept), receivedAt: Self.now, previousSnoozes: 0,
            notification: Self.bound(answered: true, answers: .each))
        #expect(each.outcome == .accepted)
        #expect(!each.answersNotification)

        let late = IngestPlan(
            Self.item("ok", token: Self.token1, rule: accept), receivedAt: Self.now, previousSnoozes: 0,
            notification: Self.bound(answered: false, expiresAt: Self.now))
        #expect(late.outcome == .expired)
        #expect(late.followUps.isEmpty && !late.answersNotification)
        #expect(late.answer.body.value(atPath: "expiresAt")?.stringValue == Timestamp.format(Self.now))

        let snoozed = IngestPlan(
            Self.item("zz", token: Self.token1, rule: snooze), receivedAt: Self.now, previousSnoozes: 0,
            notification: Self.bound(answered: false))
        #expect(snoozed.outcome == .snoozed)
        #expect(!snoozed.answersNotification)
    }
}
