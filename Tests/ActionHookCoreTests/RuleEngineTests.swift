import ActionHookCore
import Foundation
import Testing

@Suite("Rule engine")
struct RuleEngineTests {
    static func rule(_ id: String, priority: Int = 100, enabled: Bool = true, actions: [String]? = nil) -> Rule {
        Rule(id: id, priority: priority, enabled: enabled, match: RuleMatch(actions: actions), handler: .record)
    }

    static let any = NotificationResponse(actionIdentifier: "accept")

    @Test(
        arguments: [
            ([rule("b"), rule("a")], "a"),
            ([rule("a", priority: 101), rule("b", priority: 100)], "b"),
            ([rule("b", priority: -1), rule("a")], "b"),
            ([rule("a", enabled: false), rule("b")], "b"),
            ([rule("z", priority: 1, actions: ["decline"]), rule("y", priority: 2, actions: ["accept"])], "y"),
            ([rule("a", enabled: false)], nil),
            ([rule("a", actions: ["decline"])], nil),
            ([], nil),
            ([rule("a-2"), rule("a-10"), rule("A")], "A"),
        ] as [([Rule], String?)])
    func firstMatchOrdersByPriorityThenID(rules: [Rule], expected: String?) {
        #expect(RuleEngine.firstMatch(for: Self.any, in: rules)?.id == expected)
    }

    static let inviteRules: [Rule] = [
        try! Rule.decode(
            json(
                #"{"id": "invite-accept", "match": {"category": "event-invite", "action": ["accept"]}, "handler": {"type": "accept"}}"#
            ),
            id: nil),
        try! Rule.decode(
            json(
                #"{"id": "invite-decline", "match": {"category": "event-invite", "action": "decline"}, "handler": {"type": "decline"}}"#
            ),
            id: nil),
        try! Rule.decode(
            json(
                #"{"id": "invite-comment", "match": {"category": "event-invite", "action": "comment", "userText": {"required": true}}, "handler": {"type": "comment"}}"#
            ),
            id: nil),
        try! Rule.decode(
            json(
                #"{"id": "timer-snooze", "match": {"category": "TIMER_EXPIRED", "action": "SNOOZE_ACTION"}, "handler": {"type": "snooze", "delaySeconds": 300}}"#
            ),
            id: nil),
        try! Rule.decode(json(#"{"id": "zz-record", "priority": 1000, "handler": {"type": "record"}}"#), id: nil),
    ]

    @Test(arguments: [
        (
            #"{"actionIdentifier": "accept", "userInfo": {"aps": {"category": "event-invite"}}}"#, "invite-accept",
            Outcome.accepted
        ),
        (
            #"{"actionIdentifier": "decline", "userInfo": {"aps": {"category": "event-invite"}}}"#, "invite-decline",
            .declined
        ),
        (
            #"{"actionIdentifier": "comment", "userText": "Late", "categoryIdentifier": "event-invite"}"#,
            "invite-comment", .commented
        ),
        (
            #"{"actionIdentifier": "comment", "userText": " ", "categoryIdentifier": "event-invite"}"#, "zz-record",
            .recorded
        ),
        (#"{"actionIdentifier": "SNOOZE_ACTION", "categoryIdentifier": "TIMER_EXPIRED"}"#, "timer-snooze", .snoozed),
        (#"{"actionIdentifier": "com.apple.UNNotificationDismissActionIdentifier"}"#, "zz-record", .recorded),
        (#"{"actionIdentifier": "accept", "categoryIdentifier": "other"}"#, "zz-record", .recorded),
    ])
    func routesRealResponses(body: String, ruleID: String, outcome: Outcome) throws {
        let response = try NotificationResponse.decode(json(body))
        let rule = RuleEngine.firstMatch(for: response, in: Self.inviteRules)
        #expect(rule?.id == ruleID)
        #expect(RuleEngine.outcome(of: rule?.handler) == outcome)
    }

    @Test(arguments: [
        (RuleHandler?.none, Outcome.unmatched),
        (.accept, .accepted),
        (.decline, .declined),
        (.snooze(delaySeconds: 1, maxSnoozes: 1), .snoozed),
        (.comment(maxLength: 10), .commented),
        (.record, .recorded),
    ])
    func outcomes(handler: RuleHandler?, outcome: Outcome) {
        #expect(RuleEngine.outcome(of: handler) == outcome)
    }

    @Test(arguments: [
        (RuleHandler.comment(maxLength: 2000), String?.none, false),
        (.comment(maxLength: 2000), "", false),
        (.comment(maxLength: 2000), " \n\t", false),
        (.comment(maxLength: 2000), "Running late", true),
        (.comment(maxLength: 5), "12345", true),
        (.comment(maxLength: 5), "123456", false),
        (.comment(maxLength: 2), "👍🏽🎉", true),
        (.comment(maxLength: 2000), repeated("x", 2000), true),
        (.comment(maxLength: 2000), repeated("x", 2001), false),
        (.accept, nil, true),
        (.decline, "", true),
        (
            .snooze(delaySeconds: 600, maxSnoozes: 3, allowMissing: ["deviceToken", "notificationIdentifier"]), nil,
            true
        ),
        (.record, nil, true),
    ])
    func handlerChecks(handler: RuleHandler, userText: String?, passes: Bool) {
        let response = NotificationResponse(actionIdentifier: "comment", userText: userText)
        do {
            try RuleEngine.check(handler, response: response)
            #expect(passes)
        } catch {
            #expect(!passes)
            #expect(error.status == 422)
            #expect(error.pointers == ["/userText"])
            #expect(!error.allText.contains("123456"))
        }
    }

    @Test(
        arguments: [
            (#"{"eventId": "42"}"#, "eventId", "42"),
            (#"{"eventId": 42}"#, "eventId", "42"),
            (#"{"eventId": 12345678901234567890}"#, "eventId", "12345678901234567890"),
            (#"{"eventId": true}"#, "eventId", nil),
            (#"{"eventId": {"id": 1}}"#, "eventId", nil),
            (#"{"eventId": ""}"#, "eventId", nil),
            (#"{}"#, "eventId", nil),
            (#"{"event": {"id": "e-1"}}"#, "event.id", "e-1"),
            (#"{"event.id": "flat", "event": {"id": "nested"}}"#, "event.id", "flat"),
            (#"{"eventId": "42"}"#, nil, nil),
        ] as [(String, String?, String?)])
    func subject(userInfo: String, subjectKey: String?, expected: String?) {
        let response = NotificationResponse(actionIdentifier: "accept", userInfo: json(userInfo).objectValue!)
        let category = NotificationCategory(id: "event-invite", subjectKey: subjectKey)
        #expect(RuleEngine.subject(of: response, category: category) == expected)
    }

    @Test func noCategoryNoSubject() {
        let response = NotificationResponse(actionIdentifier: "accept", userInfo: ["eventId": .string("42")])
        #expect(RuleEngine.subject(of: response, category: nil) == nil)
    }

    static let receivedAt = Date(timeIntervalSince1970: 1_795_168_800)
    static let inviteResponse = try! NotificationResponse.decode(
        json(
            """
            {"actionIdentifier": "accept", "userText": "\\",\\"x\\":\\"", "notificationIdentifier": "invite-42",
             "userInfo": {"aps": {"alert": {"title": "Party", "body": "Join?"}, "category": "event-invite"},
                          "eventId": 42, "location": "Rooftop"},
             "deviceToken": "ABCDEF0123456789", "responseId": "r-1"}
            """))

    @Test func plansTheProductExample() throws {
        let rule = try Rule.decode(json(RuleDecodingTests.inviteAccept), id: nil)
        let planned = RuleEngine.plan(
            rule, response: Self.inviteResponse, responseID: fixedID, receivedAt: Self.receivedAt, subject: "42",
            outcome: .accepted)
        #expect(
            planned == [
                PlannedFollowUp(
                    ordinal: 0, channel: .webhook, delaySeconds: 0,
                    payload: json(
                        #"{"url": null, "body": {"event": "invite.accepted", "eventId": 42, "text": "\",\"x\":\""}}"#)),
                PlannedFollowUp(
                    ordinal: 1, channel: .apns, delaySeconds: 0,
                    payload: json(
                        #"{"deviceToken": "abcdef0123456789", "pushType": "alert", "payload": {"aps": {"alert": {"title": "Going!", "body": "See you at Rooftop"}, "category": "event-update"}}}"#
                    )),
            ])
    }

    @Test func plansTheDefaultWebhookBodyAndAPNsOptions() {
        let rule = Rule(
            id: "invite-accept", handler: .accept,
            followUps: [
                .webhook(url: "https://hooks.example.com/a", delaySeconds: 60),
                .apns(
                    payload: json(#"{"aps": {"content-available": 1}, "id": "{{response.id}}"}"#),
                    deviceToken: "{{userInfo.missing}}",
                    pushType: "background", priority: 5, expiration: 0, collapseId: "c-1"),
            ])
        let planned = RuleEngine.plan(
            rule, response: Self.inviteResponse, responseID: fixedID, receivedAt: Self.receivedAt, subject: "42",
            outcome: .accepted)
        #expect(planned.map(\.ordinal) == [0, 1])
        #expect(planned[0].delaySeconds == 60)
        let expectedBody = json(
            """
            {"type": "response.accepted", "timestamp": "2026-11-20T10:00:00.000Z",
             "data": {"response": {
               "id": "5f0c4b7e-1d2a-4c3b-9e8f-0123456789ab", "actionIdentifier": "accept", "userText": "\\",\\"x\\":\\"",
               "categoryIdentifier": "event-invite", "notificationIdentifier": "invite-42",
               "userInfo": {"aps": {"alert": {"title": "Party", "body": "Join?"}, "category": "event-invite"},
                            "eventId": 42, "location": "Rooftop"},
               "deviceToken": "abcdef0123456789", "responseId": "r-1", "respondedAt": null,
               "receivedAt": "2026-11-20T10:00:00.000Z", "outcome": "accepted", "ruleId": "invite-accept",
               "subject": "42", "user": null, "signature": null}}}
            """)
        #expect(
            planned[0].payload == object([("url", .string("https://hooks.example.com/a")), ("body", expectedBody)]))
        #expect(
            planned[1].payload
                == json(
                    #"{"deviceToken": "", "pushType": "background", "priority": 5, "expiration": 0, "collapseId": "c-1", "payload": {"aps": {"content-available": 1}, "id": "5f0c4b7e-1d2a-4c3b-9e8f-0123456789ab"}}"#
                ))
        #expect(planned[1].payload.jsonText.hasPrefix(#"{"deviceToken":"","pushType":"background","priority":5"#))
    }

    @Test(arguments: Outcome.allCases)
    func defaultBodyTypeNamesTheOutcome(outcome: Outcome) {
        let rule = Rule(id: "r", handler: .record, followUps: [.webhook()])
        let planned = RuleEngine.plan(
            rule, response: Self.inviteResponse, responseID: fixedID, receivedAt: Self.receivedAt, subject: nil,
            outcome: outcome)
        let body = planned.first?.payload.objectValue?["body"]
        #expect(body?.objectValue?["type"] == .string("response." + outcome.rawValue))
        #expect(body?.value(atPath: "data.response.outcome") == .string(outcome.rawValue))
        #expect(body?.value(atPath: "data.response.subject") == .null)
    }

    /// A notification sent through ActionHook, bound to the replying device at position 0 (or to no device).
    static func sent(device: Int?, push: JSONObject?) -> BoundNotification {
        BoundNotification(
            id: fixedID, answers: .first, expiresAt: receivedAt.addingTimeInterval(3600), answered: false,
            collapseId: "collapse-1", category: "event-invite", subject: nil, createdAt: receivedAt, events: [],
            replacement: nil, device: device, recipient: nil, devices: [], push: push)
    }

    static let sentPush: JSONObject = [
        "deviceToken": .string("abcdef0123456789"), "pushType": .string("alert"), "expiration": .integer(1_800_000_000),
        "collapseId": .string("collapse-1"),
        "payload": .object(["aps": .object(["alert": .string("Dinner?"), "category": .string("event-invite")])]),
    ]

    static let erasedPush: JSONObject = {
        var push = sentPush
        push["deviceToken"] = .string("")
        return push
    }()

    @Test(
        "a snooze re-delivers exactly the push ActionHook sent the replying device, and nothing else",
        arguments: [
            ("bound to its device, with the push it was sent", sent(device: 0, push: sentPush), true),
            ("not bound to a notification (the reply's own userInfo)", nil, false),
            ("bound to the notification from another device", sent(device: nil, push: sentPush), false),
            ("bound, but its push was not read", sent(device: 0, push: nil), false),
            ("bound, its push erased (no token)", sent(device: 0, push: erasedPush), false),
        ] as [(String, BoundNotification?, Bool)])
    func snoozeRedelivery(_ name: String, notification: BoundNotification?, redelivers: Bool) throws {
        let planned = RuleEngine.snoozeRedelivery(of: notification, delaySeconds: 600)
        #expect((planned != nil) == redelivers, "\(name)")
        guard let planned else { return }
        #expect(planned.ordinal == -1)
        #expect(planned.channel == .apns)
        #expect(planned.delaySeconds == 600)
        #expect(planned.kind == .snooze)
        #expect(planned.payload == .object(Self.sentPush))
        // The reply's own userInfo plays no part.
        #expect(planned.payload.value(atPath: "payload.aps.alert") == .string("Dinner?"))
    }
}
