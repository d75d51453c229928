import ActionHookCore
import Testing

@Suite("Rules: decoding")
struct RuleDecodingTests {
    static let inviteAccept = """
        {
          "id": "invite-accept",
          "description": "Tell the calendar backend when an invite is accepted",
          "priority": 100,
          "enabled": true,
          "match": {
            "category": "event-invite",
            "action": ["accept", "ACCEPT"],
            "userInfo": [{"path": "eventId", "op": "exists"}, {"path": "kind", "op": "eq", "value": "party"}],
            "userText": {"required": false}
          },
          "handler": {"type": "accept"},
          "followUps": [
            {"channel": "webhook", "delaySeconds": 0,
             "body": {"event": "invite.accepted", "eventId": "{{userInfo.eventId}}", "text": "{{userText}}"}},
            {"channel": "apns", "delaySeconds": 0, "pushType": "alert",
             "payload": {"aps": {"alert": {"title": "Going!", "body": "See you at {{userInfo.location}}"},
                                 "category": "event-update"}}}
          ]
        }
        """

    @Test func decodesTheProductExample() throws {
        let rule = try Rule.decode(json(Self.inviteAccept), id: nil)
        #expect(rule.id == "invite-accept")
        #expect(rule.priority == 100)
        #expect(rule.enabled)
        #expect(
            rule.match
                == RuleMatch(
                    category: "event-invite", actions: ["accept", "ACCEPT"],
                    userInfo: [
                        Condition(path: "eventId", op: .exists),
                        Condition(path: "kind", op: .eq, value: .string("party")),
                    ],
                    userTextRequired: false))
        #expect(rule.handler == .accept)
        #expect(rule.followUps.count == 2)
        #expect(
            rule.followUps[0]
                == .webhook(
                    body: json(
                        #"{"event": "invite.accepted", "eventId": "{{userInfo.eventId}}", "text": "{{userText}}"}"#)))
        #expect(rule.followUps[1].channel == .apns)
        #expect(rule.followUps[1].deviceToken == "{{deviceToken}}")
        #expect(rule.followUps[1].pushType == "alert")
    }

    @Test(arguments: [
        (#"{"id": "r", "handler": {"type": "snooze"}}"#, RuleHandler.snooze(delaySeconds: 600, maxSnoozes: 3)),
        (
            #"{"id": "r", "handler": {"type": "snooze", "delaySeconds": 60, "maxSnoozes": 1}}"#,
            .snooze(delaySeconds: 60, maxSnoozes: 1)
        ),
        (#"{"id": "r", "handler": {"type": "comment"}}"#, .comment(maxLength: 2000)),
        (#"{"id": "r", "handler": {"type": "comment", "maxLength": 140}}"#, .comment(maxLength: 140)),
        (#"{"id": "r", "handler": {"type": "decline"}}"#, .decline),
        (#"{"id": "r", "handler": {"type": "record"}}"#, .record),
    ])
    func decodesHandlersWithDefaults(body: String, handler: RuleHandler) throws {
        let rule = try Rule.decode(json(body), id: nil)
        #expect(rule.handler == handler)
        #expect(rule.priority == 100)
        #expect(rule.enabled)
        #expect(rule.match == RuleMatch())
        #expect(rule.followUps.isEmpty)
    }

    static let roundTripRules: [Rule] = [
        try! Rule.decode(json(inviteAccept), id: nil),
        Rule(id: "catch-all", priority: 1_000_000, handler: .record),
        Rule(
            id: "snooze.timer", description: "", priority: -5, enabled: false,
            match: RuleMatch(category: "TIMER_EXPIRED", actions: ["SNOOZE_ACTION"], userTextRequired: true),
            handler: .snooze(delaySeconds: 300, maxSnoozes: 10)),
        Rule(
            id: "todo_input",
            match: RuleMatch(userInfo: [
                Condition(path: "todo.priority", op: .gt, value: .number("2.5")),
                Condition(path: "list", op: .in, value: json(#"["home", 3, null]"#)),
                Condition(path: "owner", op: .ne, value: .null),
                Condition(path: "archived", op: .absent),
                Condition(path: "title", op: .prefix, value: .string("Buy")),
                Condition(path: "due", op: .lt, value: .integer(1_800_000_000)),
            ]),
            handler: .comment(maxLength: 4000),
            followUps: [
                .webhook(url: "https://hooks.example.com/todo?x=1", delaySeconds: 2_592_000),
                .apns(
                    payload: json(#"{"aps": {"content-available": 1}, "todo": "{{userInfo.todoId}}"}"#),
                    delaySeconds: 5,
                    deviceToken: "{{userInfo.ownerToken}}", pushType: "background", priority: 5, expiration: 0,
                    collapseId: "todo-{{userInfo.todoId}}"),
            ]),
    ]

    @Test(arguments: roundTripRules)
    func roundTrips(rule: Rule) throws {
        #expect(try Rule.decode(rule.json, id: nil) == rule)
        #expect(try Rule.decode(rule.json, id: rule.id) == rule)
        #expect(try Rule.decode(json(rule.json.jsonText), id: nil) == rule)
    }

    @Test func actionMayBeOneString() throws {
        let rule = try Rule.decode(
            json(#"{"id": "r", "match": {"action": "accept"}, "handler": {"type": "accept"}}"#), id: nil)
        #expect(rule.match.actions == ["accept"])
    }

    @Test func putTakesThePathID() throws {
        let rule = try Rule.decode(json(#"{"handler": {"type": "accept"}}"#), id: "from-path")
        #expect(rule.id == "from-path")
        #expect(
            try Rule.decode(json(#"{"id": "from-path", "handler": {"type": "accept"}}"#), id: "from-path").id
                == "from-path")
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var body: String
        var id: String? = nil
        var expected: Expected
        var testDescription: String { name + " → " + expected.description }
    }

    /// A rule body around `members` (JSON text of extra or replaced members).
    static func rule(_ members: String) -> String {
        var object = json(#"{"id": "r", "handler": {"type": "accept"}}"#).objectValue!
        for member in json("{" + members + "}").objectValue!.members {
            object[member.key] = member.value
        }
        return JSONValue.object(object).jsonText
    }

    static func condition(_ text: String) -> String { rule(#""match": {"userInfo": [\#(text)]}"#) }
    static func followUp(_ text: String) -> String { rule(#""followUps": [\#(text)]"#) }

    static let errorCases: [Case] = [
        Case(name: "body is an array", body: "[]", expected: .shape("")),
        Case(name: "POST without id", body: #"{"handler": {"type": "accept"}}"#, expected: .invalid("/id")),
        Case(name: "id with a space", body: rule(#""id": "a b""#), expected: .invalid("/id")),
        Case(name: "id of 65 characters", body: rule(#""id": "\#(repeated("r", 65))""#), expected: .invalid("/id")),
        Case(name: "id number", body: rule(#""id": 7"#), expected: .shape("/id")),
        Case(name: "PUT with a different body id", body: rule(#""id": "other""#), id: "r", expected: .invalid("/id")),
        Case(
            name: "PUT with a bad path id", body: #"{"handler": {"type": "accept"}}"#, id: "a/b",
            expected: .invalid("/id")),
        Case(name: "server-owned etag", body: rule(#""etag": "\"abc\"""#), expected: .invalid("/etag")),
        Case(name: "server-owned version", body: rule(#""version": 3"#), expected: .invalid("/version")),
        Case(
            name: "server-owned createdAt", body: rule(#""createdAt": "2026-01-01T00:00:00Z""#),
            expected: .invalid("/createdAt")),
        Case(
            name: "server-owned updatedAt", body: rule(#""updatedAt": "2026-01-01T00:00:00Z""#),
            expected: .invalid("/updatedAt")),
        Case(name: "unknown field", body: rule(#""when": "always""#), expected: .invalid("/when")),
        Case(name: "priority string", body: rule(#""priority": "high""#), expected: .shape("/priority")),
        Case(name: "priority fraction", body: rule(#""priority": 1.5"#), expected: .invalid("/priority")),
        Case(name: "priority too large", body: rule(#""priority": 1000001"#), expected: .invalid("/priority")),
        Case(name: "enabled string", body: rule(#""enabled": "yes""#), expected: .shape("/enabled")),
        Case(
            name: "description too long", body: rule(#""description": "\#(repeated("d", 1001))""#),
            expected: .invalid("/description")),
        Case(name: "handler missing", body: #"{"id": "r"}"#, expected: .invalid("/handler")),
        Case(name: "handler string", body: rule(#""handler": "accept""#), expected: .shape("/handler")),
        Case(
            name: "handler type unknown", body: rule(#""handler": {"type": "forward"}"#),
            expected: .invalid("/handler/type")),
        Case(name: "handler type missing", body: rule(#""handler": {}"#), expected: .invalid("/handler/type")),
        Case(
            name: "accept with a delay", body: rule(#""handler": {"type": "accept", "delaySeconds": 5}"#),
            expected: .invalid("/handler/delaySeconds")),
        Case(
            name: "snooze delay 0", body: rule(#""handler": {"type": "snooze", "delaySeconds": 0}"#),
            expected: .invalid("/handler/delaySeconds")),
        Case(
            name: "snooze delay string", body: rule(#""handler": {"type": "snooze", "delaySeconds": "600"}"#),
            expected: .shape("/handler/delaySeconds")),
        Case(
            name: "snooze maxSnoozes 0", body: rule(#""handler": {"type": "snooze", "maxSnoozes": 0}"#),
            expected: .invalid("/handler/maxSnoozes")),
        Case(
            name: "comment maxLength 4001", body: rule(#""handler": {"type": "comment", "maxLength": 4001}"#),
            expected: .invalid("/handler/maxLength")),
        Case(name: "match string", body: rule(#""match": "all""#), expected: .shape("/match")),
        Case(
            name: "match unknown field", body: rule(#""match": {"device": "x"}"#), expected: .invalid("/match/device")),
        Case(name: "match actions empty", body: rule(#""match": {"action": []}"#), expected: .invalid("/match/action")),
        Case(name: "match action number", body: rule(#""match": {"action": [1]}"#), expected: .shape("/match/action")),
        Case(
            name: "match category empty", body: rule(#""match": {"category": ""}"#),
            expected: .invalid("/match/category")),
        Case(
            name: "match userText required string", body: rule(#""match": {"userText": {"required": "yes"}}"#),
            expected: .shape("/match/userText/required")),
        Case(
            name: "match userText unknown", body: rule(#""match": {"userText": {"min": 1}}"#),
            expected: .invalid("/match/userText/min")),
        Case(
            name: "conditions not an array", body: rule(#""match": {"userInfo": {"path": "a", "op": "exists"}}"#),
            expected: .shape("/match/userInfo")),
        Case(name: "condition not an object", body: condition(#""a""#), expected: .shape("/match/userInfo/0")),
        Case(
            name: "unknown operator", body: condition(#"{"path": "a", "op": "like", "value": "x"}"#),
            expected: .invalid("/match/userInfo/0/op")),
        Case(
            name: "operator missing", body: condition(#"{"path": "a", "value": "x"}"#),
            expected: .invalid("/match/userInfo/0/op")),
        Case(
            name: "operator number", body: condition(#"{"path": "a", "op": 1}"#),
            expected: .shape("/match/userInfo/0/op")),
        Case(name: "path missing", body: condition(#"{"op": "exists"}"#), expected: .invalid("/match/userInfo/0/path")),
        Case(
            name: "path empty", body: condition(#"{"path": "", "op": "exists"}"#),
            expected: .invalid("/match/userInfo/0/path")),
        Case(
            name: "path with an empty name", body: condition(#"{"path": "a..b", "op": "exists"}"#),
            expected: .invalid("/match/userInfo/0/path")),
        Case(
            name: "eq without a value", body: condition(#"{"path": "a", "op": "eq"}"#),
            expected: .invalid("/match/userInfo/0/value")),
        Case(
            name: "ne without a value", body: condition(#"{"path": "a", "op": "ne"}"#),
            expected: .invalid("/match/userInfo/0/value")),
        Case(
            name: "in without an array", body: condition(#"{"path": "a", "op": "in", "value": "x"}"#),
            expected: .invalid("/match/userInfo/0/value")),
        Case(
            name: "gt without a number", body: condition(#"{"path": "a", "op": "gt", "value": "5"}"#),
            expected: .invalid("/match/userInfo/0/value")),
        Case(
            name: "lt without a value", body: condition(#"{"path": "a", "op": "lt"}"#),
            expected: .invalid("/match/userInfo/0/value")),
        Case(
            name: "prefix with a number", body: condition(#"{"path": "a", "op": "prefix", "value": 5}"#),
            expected: .invalid("/match/userInfo/0/value")),
        Case(
            name: "exists with a value", body: condition(#"{"path": "a", "op": "exists", "value": true}"#),
            expected: .invalid("/match/userInfo/0/value")),
        Case(
            name: "absent with a null value", body: condition(#"{"path": "a", "op": "absent", "value": null}"#),
            expected: .invalid("/match/userInfo/0/value")),
        Case(
            name: "unknown condition field", body: condition(#"{"path": "a", "op": "exists", "not": true}"#),
            expected: .invalid("/match/userInfo/0/not")),
        Case(
            name: "second condition bad",
            body: condition(#"{"path": "a", "op": "exists"}, {"path": "b", "op": "gt", "value": []}"#),
            expected: .invalid("/match/userInfo/1/value")),
        Case(name: "followUps object", body: rule(#""followUps": {}"#), expected: .shape("/followUps")),
        Case(name: "follow-up not an object", body: followUp(#""webhook""#), expected: .shape("/followUps/0")),
        Case(
            name: "channel unknown", body: followUp(#"{"channel": "sms"}"#), expected: .invalid("/followUps/0/channel")),
        Case(
            name: "channel missing", body: followUp(#"{"delaySeconds": 0}"#), expected: .invalid("/followUps/0/channel")
        ),
        Case(
            name: "delay negative", body: followUp(#"{"channel": "webhook", "delaySeconds": -1}"#),
            expected: .invalid("/followUps/0/delaySeconds")),
        Case(
            name: "delay over 30 days", body: followUp(#"{"channel": "webhook", "delaySeconds": 2592001}"#),
            expected: .invalid("/followUps/0/delaySeconds")),
        Case(
            name: "url ftp", body: followUp(#"{"channel": "webhook", "url": "ftp://hooks.example.com/x"}"#),
            expected: .invalid("/followUps/0/url")),
        Case(
            name: "url relative", body: followUp(#"{"channel": "webhook", "url": "/hooks"}"#),
            expected: .invalid("/followUps/0/url")),
        Case(
            name: "url templated", body: followUp(#"{"channel": "webhook", "url": "https://{{userInfo.host}}/x"}"#),
            expected: .invalid("/followUps/0/url")),
        Case(
            name: "url over 2048",
            body: followUp(#"{"channel": "webhook", "url": "https://example.com/\#(repeated("p", 2029))"}"#),
            expected: .invalid("/followUps/0/url")),
        Case(
            name: "url number", body: followUp(#"{"channel": "webhook", "url": 1}"#),
            expected: .shape("/followUps/0/url")),
        Case(
            name: "webhook with payload", body: followUp(#"{"channel": "webhook", "payload": {}}"#),
            expected: .invalid("/followUps/0/payload")),
        Case(
            name: "apns with url", body: followUp(#"{"channel": "apns", "url": "https://x.example", "payload": {}}"#),
            expected: .invalid("/followUps/0/url")),
        Case(
            name: "apns without payload", body: followUp(#"{"channel": "apns"}"#),
            expected: .invalid("/followUps/0/payload")),
        Case(
            name: "apns payload string", body: followUp(#"{"channel": "apns", "payload": "{}"}"#),
            expected: .shape("/followUps/0/payload")),
        Case(
            name: "push type unknown", body: followUp(#"{"channel": "apns", "pushType": "sms", "payload": {}}"#),
            expected: .invalid("/followUps/0/pushType")),
        Case(
            name: "priority 7", body: followUp(#"{"channel": "apns", "priority": 7, "payload": {}}"#),
            expected: .invalid("/followUps/0/priority")),
        Case(
            name: "expiration negative", body: followUp(#"{"channel": "apns", "expiration": -1, "payload": {}}"#),
            expected: .invalid("/followUps/0/expiration")),
        Case(
            name: "collapseId 65 bytes",
            body: followUp(#"{"channel": "apns", "collapseId": "\#(repeated("c", 65))", "payload": {}}"#),
            expected: .invalid("/followUps/0/collapseId")),
        Case(
            name: "collapseId 33 two-byte characters",
            body: followUp(#"{"channel": "apns", "collapseId": "\#(repeated("é", 33))", "payload": {}}"#),
            expected: .invalid("/followUps/0/collapseId")),
        Case(
            name: "device token unknown placeholder",
            body: followUp(#"{"channel": "apns", "deviceToken": "{{token}}", "payload": {}}"#),
            expected: .invalid("/followUps/0/deviceToken")),
        Case(
            name: "device token empty", body: followUp(#"{"channel": "apns", "deviceToken": "", "payload": {}}"#),
            expected: .invalid("/followUps/0/deviceToken")),
        Case(
            name: "body unknown placeholder",
            body: followUp(#"{"channel": "webhook", "body": {"event": "{{event}}"}}"#),
            expected: .invalid("/followUps/0/body/event")),
        Case(
            name: "body unclosed placeholder",
            body: followUp(#"{"channel": "webhook", "body": {"a": ["x", "{{userText"]}}"#),
            expected: .invalid("/followUps/0/body/a/1")),
        Case(
            name: "body empty placeholder", body: followUp(#"{"channel": "webhook", "body": "{{ }}"}"#),
            expected: .invalid("/followUps/0/body")),
        Case(
            name: "payload unknown placeholder",
            body: followUp(#"{"channel": "apns", "payload": {"aps": {"alert": {"body": "{{userinfo.x}}"}}}}"#),
            expected: .invalid("/followUps/0/payload/aps/alert/body")),
        Case(
            name: "second follow-up bad",
            body: rule(#""followUps": [{"channel": "webhook"}, {"channel": "apns", "payload": {}, "priority": 2}]"#),
            expected: .invalid("/followUps/1/priority")),
    ]

    @Test(arguments: errorCases)
    func refuses(_ testCase: Case) {
        let failure = ruleFailure(json(testCase.body), id: testCase.id)
        #expect(failure?.status == testCase.expected.status)
        #expect(
            failure?.pointers.contains(testCase.expected.pointer) == true, "\(String(describing: failure?.pointers))")
    }

    @Test func collectsEveryError() {
        let body = json(
            #"{"id": "r", "etag": "x", "priority": 1.5, "handler": {"type": "snooze", "maxSnoozes": 0}, "match": {"userInfo": [{"path": "a", "op": "in"}]}}"#
        )
        #expect(
            ruleFailure(body)?.pointers == ["/priority", "/match/userInfo/0/value", "/handler/maxSnoozes", "/etag"])
    }

    @Test func shapeErrorsTakePrecedence() {
        let body = json(#"{"id": "a b", "etag": "x", "priority": "high", "handler": {"type": "forward"}}"#)
        let failure = ruleFailure(body)
        #expect(failure?.status == 400)
        #expect(failure?.pointers == ["/priority"])
    }

    /// An APNs follow-up whose payload is `{"aps":{"alert":"<text>"}}`.
    static func apnsRule(alert: String) -> JSONValue {
        json(rule(#""followUps": [{"channel": "apns", "payload": {"aps": {"alert": "\#(alert)"}}}]"#))
    }

    @Test(arguments: [
        // {"aps":{"alert":""}} is 20 bytes.
        (repeated("x", 4076), true),
        (repeated("x", 4077), false),
        // Placeholders render empty, so the names do not count.
        (repeated("x", 4076) + "{{userInfo.a.very.long.path.that.is.not.sent}}", true),
        (repeated("x", 4077) + "{{userText}}", false),
        // Two-byte characters count as two bytes.
        (repeated("é", 2038), true),
        (repeated("é", 2039), false),
    ])
    func apnsPayloadIsAtMost4096BytesWhenRenderedEmpty(alert: String, accepted: Bool) {
        let failure = ruleFailure(Self.apnsRule(alert: alert))
        #expect((failure == nil) == accepted)
        if !accepted {
            #expect(failure?.status == 422)
            #expect(failure?.pointers == ["/followUps/0/payload"])
        }
    }

    @Test func wholePlaceholdersRenderAsNullForTheSizeCheck() {
        // "{{userText}}" alone becomes null (4 bytes), not "" (2 bytes).
        let prefix = repeated("x", 4096 - #"{"aps":{"alert":""},"t":null}"#.utf8.count)
        let fits = json(
            Self.rule(
                #""followUps": [{"channel": "apns", "payload": {"aps": {"alert": "\#(prefix)"}, "t": "{{userText}}"}}]"#
            ))
        #expect(ruleFailure(fits) == nil)
        let over = json(
            Self.rule(
                #""followUps": [{"channel": "apns", "payload": {"aps": {"alert": "\#(prefix)x"}, "t": "{{userText}}"}}]"#
            ))
        #expect(ruleFailure(over)?.pointers == ["/followUps/0/payload"])
    }

    @Test func errorsNeverQuoteTheValue() throws {
        let seed = "SEEDED-7d1f-VALUE"
        let body = json(
            """
            {"id": "\(seed) x", "description": "\(seed)\(repeated("d", 1000))",
             "match": {"category": "", "userInfo": [{"path": "\(seed)..x", "op": "\(seed)", "value": "\(seed)"}]},
             "handler": {"type": "\(seed)"},
             "followUps": [{"channel": "\(seed)"}, {"channel": "webhook", "url": "\(seed)", "body": "{{\(seed)}}"},
                           {"channel": "apns", "pushType": "\(seed)", "collapseId": "\(seed)\(repeated("c", 64))",
                            "deviceToken": "{{\(seed)}}", "payload": {"aps": {"alert": "{{\(seed)"}}}]}
            """)
        let failure = try #require(ruleFailure(body))
        #expect(failure.status == 422)
        #expect(failure.errors.count == 13, "\(failure.pointers)")
        #expect(!failure.allText.contains(seed))
    }
}
