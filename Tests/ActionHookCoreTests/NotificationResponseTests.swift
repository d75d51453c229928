import Foundation
import Testing

@testable import ActionHookCore

@Suite("Ingest: the shapes iOS sends")
struct IngestShapeTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var body: String
        var expected: NotificationResponse
        var testDescription: String { name }
    }

    static let inviteUserInfo: JSONObject = json(
        """
        {"aps": {"alert": {"title": "Rooftop party", "body": "Friday 8pm — are you in?"},
                 "category": "event-invite", "mutable-content": 1},
         "eventId": "42", "location": "Rooftop, 5th floor"}
        """
    ).objectValue!
    static let inviteUserInfoText = """
        {"aps": {"alert": {"title": "Rooftop party", "body": "Friday 8pm — are you in?"},
                 "category": "event-invite", "mutable-content": 1},
         "eventId": "42", "location": "Rooftop, 5th floor"}
        """
    static let token = "740f4707bebcf74f9b7c25d48e3358945f6aa01da5ddb387462c7eaf61bb78ad"

    static let cases: [Case] = [
        Case(
            name: "event-invite accept (iOS 10+)",
            body: """
                {"actionIdentifier": "accept", "notificationIdentifier": "invite-42",
                 "userInfo": \(inviteUserInfoText), "deviceToken": "\(token.uppercased())",
                 "responseId": "r-1", "respondedAt": "2026-11-20T11:00:00+01:00"}
                """,
            expected: NotificationResponse(
                actionIdentifier: "accept", categoryIdentifier: "event-invite", notificationIdentifier: "invite-42",
                userInfo: inviteUserInfo, deviceToken: token, responseId: "r-1",
                respondedAt: Date(timeIntervalSince1970: 1_795_168_800))),
        Case(
            name: "event-invite decline, userText null",
            body: #"{"actionIdentifier": "decline", "userText": null, "userInfo": \#(inviteUserInfoText)}"#,
            expected: NotificationResponse(
                actionIdentifier: "decline", categoryIdentifier: "event-invite", userInfo: inviteUserInfo)),
        Case(
            name: "event-invite comment with typed text",
            body: #"{"actionIdentifier": "comment", "userText": "Running late 🏃🏽", "userInfo": \#(inviteUserInfoText)}"#,
            expected: NotificationResponse(
                actionIdentifier: "comment", userText: "Running late 🏃🏽", categoryIdentifier: "event-invite",
                userInfo: inviteUserInfo)),
        Case(
            name: "iOS 9 legacy reply category, comment-reply with typed text",
            body: """
                {"identifier": "comment-reply",
                 "responseInfo": {"UIUserNotificationActionResponseTypedTextKey": "On my way"},
                 "userInfo": {"aps": {"alert": "Anna: are you coming?", "category": "reply"}, "threadId": 7}}
                """,
            expected: NotificationResponse(
                actionIdentifier: "comment-reply", userText: "On my way", categoryIdentifier: "reply",
                userInfo: json(#"{"aps": {"alert": "Anna: are you coming?", "category": "reply"}, "threadId": 7}"#)
                    .objectValue!)),
        Case(
            name: "iOS 8 category identifier, action test2",
            body: #"{"identifier": "test2", "userInfo": {"aps": {"alert": "Test", "category": "identifier"}}}"#,
            expected: NotificationResponse(
                actionIdentifier: "test2", categoryIdentifier: "identifier",
                userInfo: json(#"{"aps": {"alert": "Test", "category": "identifier"}}"#).objectValue!)),
        Case(
            name: "TIMER_EXPIRED SNOOZE_ACTION",
            body: """
                {"actionIdentifier": "SNOOZE_ACTION", "notificationIdentifier": "timer-1",
                 "userInfo": {"aps": {"alert": "Time is up", "category": "TIMER_EXPIRED", "sound": "default"},
                              "timerId": 17}}
                """,
            expected: NotificationResponse(
                actionIdentifier: "SNOOZE_ACTION", categoryIdentifier: "TIMER_EXPIRED",
                notificationIdentifier: "timer-1",
                userInfo: json(
                    #"{"aps": {"alert": "Time is up", "category": "TIMER_EXPIRED", "sound": "default"}, "timerId": 17}"#
                ).objectValue!)),
        Case(
            name: "TIMER_EXPIRED STOP_ACTION with explicit category",
            body:
                #"{"actionIdentifier": "STOP_ACTION", "categoryIdentifier": "TIMER_EXPIRED", "userInfo": {"timerId": 17}}"#,
            expected: NotificationResponse(
                actionIdentifier: "STOP_ACTION", categoryIdentifier: "TIMER_EXPIRED",
                userInfo: json(#"{"timerId": 17}"#).objectValue!)),
        Case(
            name: "TODO_CATEGORY MARK_DONE",
            body:
                #"{"actionIdentifier": "MARK_DONE", "userInfo": {"aps": {"category": "TODO_CATEGORY"}, "todoId": "t-9"}}"#,
            expected: NotificationResponse(
                actionIdentifier: "MARK_DONE", categoryIdentifier: "TODO_CATEGORY",
                userInfo: json(#"{"aps": {"category": "TODO_CATEGORY"}, "todoId": "t-9"}"#).objectValue!)),
        Case(
            name: "TODO_CATEGORY text INPUT",
            body:
                #"{"actionIdentifier": "INPUT", "userText": "Buy milk", "userInfo": {"aps": {"category": "TODO_CATEGORY"}}}"#,
            expected: NotificationResponse(
                actionIdentifier: "INPUT", userText: "Buy milk", categoryIdentifier: "TODO_CATEGORY",
                userInfo: json(#"{"aps": {"category": "TODO_CATEGORY"}}"#).objectValue!)),
        Case(
            name: "default action (body tapped)",
            body:
                #"{"actionIdentifier": "com.apple.UNNotificationDefaultActionIdentifier", "userInfo": {"aps": {"category": "event-invite"}}}"#,
            expected: NotificationResponse(
                actionIdentifier: NotificationResponse.defaultActionIdentifier, categoryIdentifier: "event-invite",
                userInfo: json(#"{"aps": {"category": "event-invite"}}"#).objectValue!)),
        Case(
            name: "dismiss action (customDismissAction)",
            body: #"{"actionIdentifier": "com.apple.UNNotificationDismissActionIdentifier"}"#,
            expected: NotificationResponse(actionIdentifier: NotificationResponse.dismissActionIdentifier)),
    ]

    @Test(arguments: cases)
    func decodes(_ testCase: Case) throws {
        let response = try NotificationResponse.decode(json(testCase.body))
        #expect(response == testCase.expected)
        // The normalised form reads back to the same response.
        #expect(try NotificationResponse.decode(response.json) == response)
    }

    @Test func normalisedFormHasStableMemberOrder() throws {
        let response = try NotificationResponse.decode(
            json(#"{"respondedAt": "2026-11-20T10:00:00.5Z", "actionIdentifier": "a"}"#))
        #expect(
            response.json.jsonText
                == #"{"actionIdentifier":"a","userText":null,"categoryIdentifier":null,"notificationIdentifier":null,"userInfo":{},"deviceToken":null,"responseId":null,"respondedAt":"2026-11-20T10:00:00.500Z"}"#
        )
    }
}

@Suite("Ingest: category fallback and request hash")
struct IngestNormalisationTests {
    @Test(
        arguments: [
            (#"{"actionIdentifier": "a", "userInfo": {"aps": {"category": "from-aps"}}}"#, "from-aps"),
            (
                #"{"actionIdentifier": "a", "categoryIdentifier": "given", "userInfo": {"aps": {"category": "from-aps"}}}"#,
                "given"
            ),
            (
                #"{"actionIdentifier": "a", "categoryIdentifier": null, "userInfo": {"aps": {"category": "from-aps"}}}"#,
                "from-aps"
            ),
            (#"{"actionIdentifier": "a", "userInfo": {"aps": {"category": 5}}}"#, nil),
            (#"{"actionIdentifier": "a", "userInfo": {"aps": {"category": ""}}}"#, nil),
            (#"{"actionIdentifier": "a", "userInfo": {"aps": "category"}}"#, nil),
            (#"{"actionIdentifier": "a", "userInfo": {"category": "top-level"}}"#, nil),
            (#"{"actionIdentifier": "a"}"#, nil),
        ] as [(String, String?)])
    func categoryFallsBackToAps(body: String, expected: String?) throws {
        #expect(try NotificationResponse.decode(json(body)).categoryIdentifier == expected)
    }

    @Test(arguments: [
        (
            #"{"identifier": "comment-reply", "responseInfo": {"UIUserNotificationActionResponseTypedTextKey": "On my way"}, "userInfo": {"aps": {"category": "reply"}}}"#,
            #"{"actionIdentifier": "comment-reply", "userText": "On my way", "categoryIdentifier": "reply", "userInfo": {"aps": {"category": "reply"}}}"#
        ),
        (
            #"{"identifier": "test2", "userInfo": {"aps": {"category": "identifier"}, "x": 1}}"#,
            #"{"userInfo": {"x": 1, "aps": {"category": "identifier"}}, "actionIdentifier": "test2", "userText": null}"#
        ),
        (
            #"{"actionIdentifier": "accept", "deviceToken": "ABCDEF0123456789", "respondedAt": "2026-11-20T11:00:00+01:00"}"#,
            #"{"actionIdentifier": "accept", "deviceToken": "abcdef0123456789", "respondedAt": "2026-11-20T10:00:00.000Z"}"#
        ),
    ])
    func equivalentBodiesHashEqual(first: String, second: String) throws {
        let a = try NotificationResponse.decode(json(first))
        let b = try NotificationResponse.decode(json(second))
        #expect(a == b)
        #expect(a.requestHash == b.requestHash)
        #expect(a.requestHash.count == 32)
    }

    /// The hash is taken over bytes written member by member; stored hashes stay valid only while they
    /// equal the canonical text of `json`.
    @Test(arguments: [
        #"{"actionIdentifier": "accept"}"#,
        #"{"actionIdentifier": "comment", "userText": "Line\nbreak \"quoted\" \u00e9 \ud83d\ude00 tab\t", "categoryIdentifier": "c", "notificationIdentifier": "n-1", "responseId": "r", "deviceToken": "ABCDEF0123456789", "respondedAt": "2026-11-20T11:00:00.5+01:00"}"#,
        #"{"actionIdentifier": "a", "userInfo": {"z": [3, {"b": null, "a": true}], "aps": {"category": "x", "alert": {"title": "é", "body": "\u0001"}}, "Z": -1.5e3, "é": "", "a/b~c": {}}}"#,
        #"{"identifier": "legacy", "responseInfo": {"UIUserNotificationActionResponseTypedTextKey": ""}}"#,
    ])
    func canonicalBytesMatchTheJSONForm(body: String) throws {
        let response = try NotificationResponse.decode(json(body))
        #expect(response.canonicalBytes == response.json.canonicalBytes)
    }

    @Test(arguments: [
        #"{"actionIdentifier": "accept", "userText": "x"}"#,
        #"{"actionIdentifier": "accept", "userText": ""}"#,
        #"{"actionIdentifier": "Accept"}"#,
        #"{"actionIdentifier": "accept", "userInfo": {"eventId": 43}}"#,
        #"{"actionIdentifier": "accept", "responseId": "r-2"}"#,
    ])
    func differentBodiesHashDifferently(other: String) throws {
        let base = try NotificationResponse.decode(json(#"{"actionIdentifier": "accept"}"#))
        let changed = try NotificationResponse.decode(json(other))
        #expect(base.requestHash != changed.requestHash)
    }
}

@Suite("Ingest: limits, types, unknown fields")
struct IngestValidationTests {
    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var body: JSONValue
        var expected: Expected?
        var testDescription: String { name + " → " + (expected?.description ?? "accepted") }
    }

    static func body(_ members: (String, JSONValue)...) -> JSONValue {
        object([("actionIdentifier", .string("accept"))] + members)
    }

    static func legacy(_ identifier: String, text: String) -> JSONValue {
        object([
            ("identifier", .string(identifier)),
            ("responseInfo", object([("UIUserNotificationActionResponseTypedTextKey", .string(text))])),
        ])
    }

    /// `{"k": "xxx…"}` of exactly `bytes` bytes as compact JSON.
    static func userInfo(bytes: Int) -> JSONValue {
        object([("k", .string(repeated("x", bytes - 8)))])
    }

    static let limitCases: [Case] = [
        Case(
            name: "actionIdentifier 256", body: object([("actionIdentifier", .string(repeated("a", 256)))]),
            expected: nil),
        Case(
            name: "actionIdentifier 257", body: object([("actionIdentifier", .string(repeated("a", 257)))]),
            expected: .invalid("/actionIdentifier")),
        Case(
            name: "actionIdentifier empty", body: object([("actionIdentifier", .string(""))]),
            expected: .invalid("/actionIdentifier")),
        Case(
            name: "actionIdentifier missing", body: object([("userText", .string("x"))]),
            expected: .invalid("/actionIdentifier")),
        Case(name: "legacy identifier 256", body: legacy(repeated("a", 256), text: ""), expected: nil),
        Case(
            name: "legacy identifier 257", body: legacy(repeated("a", 257), text: ""), expected: .invalid("/identifier")
        ),
        Case(
            name: "legacy identifier missing",
            body: object([("responseInfo", object([("UIUserNotificationActionResponseTypedTextKey", .string("x"))]))]),
            expected: .invalid("/identifier")),
        Case(name: "userText 4000", body: body(("userText", .string(repeated("x", 4000)))), expected: nil),
        Case(
            name: "userText 4000 emoji characters", body: body(("userText", .string(repeated("👍🏽", 4000)))),
            expected: nil),
        Case(
            name: "userText 4001", body: body(("userText", .string(repeated("x", 4001)))),
            expected: .invalid("/userText")),
        Case(name: "userText empty", body: body(("userText", .string(""))), expected: nil),
        Case(name: "legacy typed text 4000", body: legacy("reply", text: repeated("x", 4000)), expected: nil),
        Case(
            name: "legacy typed text 4001", body: legacy("reply", text: repeated("x", 4001)),
            expected: .invalid("/responseInfo/UIUserNotificationActionResponseTypedTextKey")),
        Case(name: "userInfo 8192 bytes", body: body(("userInfo", userInfo(bytes: 8192))), expected: nil),
        Case(
            name: "userInfo 8193 bytes", body: body(("userInfo", userInfo(bytes: 8193))),
            expected: .invalid("/userInfo")),
        Case(name: "userInfo depth 32", body: body(("userInfo", nested(depth: 32))), expected: nil),
        Case(name: "userInfo depth 33", body: body(("userInfo", nested(depth: 33))), expected: .invalid("/userInfo")),
        Case(
            name: "categoryIdentifier 256", body: body(("categoryIdentifier", .string(repeated("c", 256)))),
            expected: nil),
        Case(
            name: "categoryIdentifier 257", body: body(("categoryIdentifier", .string(repeated("c", 257)))),
            expected: .invalid("/categoryIdentifier")),
        Case(
            name: "categoryIdentifier empty", body: body(("categoryIdentifier", .string(""))),
            expected: .invalid("/categoryIdentifier")),
        Case(
            name: "aps.category 257",
            body: body(("userInfo", object([("aps", object([("category", .string(repeated("c", 257)))]))]))),
            expected: .invalid("/userInfo/aps/category")),
        Case(
            name: "notificationIdentifier 256", body: body(("notificationIdentifier", .string(repeated("n", 256)))),
            expected: nil),
        Case(
            name: "notificationIdentifier 257", body: body(("notificationIdentifier", .string(repeated("n", 257)))),
            expected: .invalid("/notificationIdentifier")),
        Case(name: "responseId 256", body: body(("responseId", .string(repeated("r", 256)))), expected: nil),
        Case(
            name: "responseId 257", body: body(("responseId", .string(repeated("r", 257)))),
            expected: .invalid("/responseId")),
        Case(name: "responseId empty", body: body(("responseId", .string(""))), expected: .invalid("/responseId")),
        Case(name: "deviceToken 16 hex", body: body(("deviceToken", .string(repeated("ab", 8)))), expected: nil),
        Case(
            name: "deviceToken 14 hex", body: body(("deviceToken", .string(repeated("ab", 7)))),
            expected: .invalid("/deviceToken")),
        Case(name: "deviceToken 200 hex", body: body(("deviceToken", .string(repeated("AB", 100)))), expected: nil),
        Case(
            name: "deviceToken 202 hex", body: body(("deviceToken", .string(repeated("ab", 101)))),
            expected: .invalid("/deviceToken")),
        Case(
            name: "deviceToken odd length", body: body(("deviceToken", .string(repeated("a", 17)))),
            expected: .invalid("/deviceToken")),
        Case(
            name: "deviceToken not hex", body: body(("deviceToken", .string(repeated("zz", 16)))),
            expected: .invalid("/deviceToken")),
        Case(name: "respondedAt Z", body: body(("respondedAt", .string("2026-11-20T10:00:00Z"))), expected: nil),
        Case(
            name: "respondedAt offset and fraction",
            body: body(("respondedAt", .string("2026-11-20T10:00:00.123456-05:30"))), expected: nil),
        Case(
            name: "respondedAt without offset", body: body(("respondedAt", .string("2026-11-20T10:00:00"))),
            expected: .invalid("/respondedAt")),
        Case(
            name: "respondedAt date only", body: body(("respondedAt", .string("2026-11-20"))),
            expected: .invalid("/respondedAt")),
        Case(
            name: "respondedAt 30 February", body: body(("respondedAt", .string("2026-02-30T10:00:00Z"))),
            expected: .invalid("/respondedAt")),
        Case(
            name: "respondedAt past year 9999 in UTC",
            body: body(("respondedAt", .string("9999-12-31T23:00:00-01:00"))),
            expected: .invalid("/respondedAt")),
        Case(
            name: "respondedAt epoch seconds text", body: body(("respondedAt", .string("1795687200"))),
            expected: .invalid("/respondedAt")),
    ]

    static let typeCases: [Case] = [
        Case(name: "body is an array", body: json("[]"), expected: .shape("")),
        Case(name: "body is a string", body: json(#""accept""#), expected: .shape("")),
        Case(name: "body is null", body: .null, expected: .shape("")),
        Case(
            name: "actionIdentifier number", body: json(#"{"actionIdentifier": 1}"#),
            expected: .shape("/actionIdentifier")),
        Case(name: "userText number", body: body(("userText", .integer(5))), expected: .shape("/userText")),
        Case(name: "userText boolean", body: body(("userText", .bool(true))), expected: .shape("/userText")),
        Case(name: "userInfo string", body: body(("userInfo", .string("{}"))), expected: .shape("/userInfo")),
        Case(name: "userInfo array", body: body(("userInfo", json("[]"))), expected: .shape("/userInfo")),
        Case(
            name: "categoryIdentifier object", body: body(("categoryIdentifier", json("{}"))),
            expected: .shape("/categoryIdentifier")),
        Case(name: "deviceToken number", body: body(("deviceToken", .integer(1))), expected: .shape("/deviceToken")),
        Case(
            name: "respondedAt number", body: body(("respondedAt", .integer(1_795_168_800))),
            expected: .shape("/respondedAt")),
        Case(name: "responseId number", body: body(("responseId", .integer(7))), expected: .shape("/responseId")),
        Case(
            name: "identifier mixed with actionIdentifier",
            body: json(#"{"identifier": "a", "actionIdentifier": "a"}"#), expected: .shape("/identifier")),
        Case(
            name: "responseInfo mixed with userText",
            body: json(#"{"identifier": "a", "responseInfo": {}, "userText": "x"}"#), expected: .shape("/responseInfo")),
        Case(
            name: "responseInfo mixed with actionIdentifier",
            body: json(#"{"actionIdentifier": "a", "responseInfo": {}}"#), expected: .shape("/responseInfo")),
        Case(
            name: "responseInfo string", body: json(#"{"identifier": "a", "responseInfo": "x"}"#),
            expected: .shape("/responseInfo")),
        Case(
            name: "typed text number",
            body: json(#"{"identifier": "a", "responseInfo": {"UIUserNotificationActionResponseTypedTextKey": 3}}"#),
            expected: .shape("/responseInfo/UIUserNotificationActionResponseTypedTextKey")),
    ]

    static let unknownFieldCases: [Case] = [
        Case(name: "unknown top-level field", body: body(("foo", .integer(1))), expected: .invalid("/foo")),
        Case(name: "server-owned id", body: body(("id", .string("x"))), expected: .invalid("/id")),
        Case(
            name: "outcome is not the client's", body: body(("outcome", .string("accepted"))),
            expected: .invalid("/outcome")),
        Case(name: "name with slash and tilde", body: body(("a/b~c", .null)), expected: .invalid("/a~1b~0c")),
        Case(
            name: "unknown member of responseInfo",
            body: json(
                #"{"identifier": "a", "responseInfo": {"UIUserNotificationActionResponseTypedTextKey": "x", "extra": 1}}"#
            ),
            expected: .invalid("/responseInfo/extra")),
    ]

    @Test(arguments: limitCases + typeCases + unknownFieldCases)
    func validates(_ testCase: Case) {
        let failure = ingestFailure(testCase.body)
        guard let expected = testCase.expected else {
            #expect(failure == nil)
            return
        }
        #expect(failure?.status == expected.status)
        #expect(failure?.pointers.contains(expected.pointer) == true, "\(String(describing: failure?.pointers))")
        #expect(failure?.title == (expected.status == 400 ? "Malformed Request" : "Validation Failed"))
    }

    /// Ingest passes the body's length so that short bodies skip measuring `userInfo`: the outcome is
    /// the same as measuring, at the limit and past it, and for the escape that grows most.
    @Test func sizeLimitWithTheSourceLength() throws {
        func outcome(_ text: String) -> Int? {
            do {
                _ = try NotificationResponse.decode(json(text), sourceByteCount: text.utf8.count)
                return nil
            } catch {
                return error.status
            }
        }
        for bytes in [8_192, 8_193] {
            let text = String(decoding: Self.body(("userInfo", Self.userInfo(bytes: bytes))).jsonBytes, as: UTF8.self)
            #expect(outcome(text) == ingestFailure(json(text))?.status, "\(bytes)")
            #expect(outcome(text) == (bytes > 8_192 ? 422 : nil))
        }
        // The longest body that skips: every escape in it grows threefold and still fits.
        let prefix = #"{"actionIdentifier":"a","userInfo":{"k":""#
        let escapes = (8_192 / 3 - prefix.utf8.count - 3) / 2
        let text = prefix + String(repeating: #"\b"#, count: escapes) + #""}}"#
        #expect(text.utf8.count <= 8_192 / 3)
        #expect(outcome(text) == nil)
        #expect(ingestFailure(json(text)) == nil)
    }

    @Test func collectsEveryError() {
        let failure = ingestFailure(
            json(
                #"{"actionIdentifier": "", "deviceToken": "xyz", "respondedAt": "yesterday", "foo": 1, "responseId": ""}"#
            ))
        #expect(failure?.status == 422)
        #expect(
            Set(failure?.pointers ?? [])
                == ["/actionIdentifier", "/deviceToken", "/respondedAt", "/foo", "/responseId"])
    }

    @Test func shapeErrorsTakePrecedence() {
        let failure = ingestFailure(json(#"{"actionIdentifier": "", "userText": 5, "foo": 1, "userInfo": []}"#))
        #expect(failure?.status == 400)
        #expect(failure?.pointers == ["/userText", "/userInfo"])
    }

    enum Limit: String, Sendable, CaseIterable {
        case actionIdentifier, userText, notificationIdentifier
    }

    @Test(arguments: Limit.allCases)
    func configuredLimitsApply(limit: Limit) {
        var limits = IngestLimits()
        switch limit {
        case .actionIdentifier: limits.maxActionIdentifierLength = 3
        case .userText: limits.maxUserTextLength = 3
        case .notificationIdentifier: limits.maxIdentifierLength = 3
        }
        let body = json(#"{"actionIdentifier": "abc", "userText": "abc", "notificationIdentifier": "abc"}"#)
        #expect(ingestFailure(body, limits: limits) == nil)
        let longer = json(#"{"actionIdentifier": "abcd", "userText": "abcd", "notificationIdentifier": "abcd"}"#)
        #expect(ingestFailure(longer, limits: limits)?.pointers == ["/" + limit.rawValue])
    }

    static let seed = "SEEDED-7d1f-VALUE"

    @Test(arguments: [
        object([("actionIdentifier", .string(seed + repeated("x", 300)))]),
        object([("actionIdentifier", .string("a")), ("userText", .string(seed + repeated("x", 4000)))]),
        object([("actionIdentifier", .string("a")), ("deviceToken", .string(seed))]),
        object([("actionIdentifier", .string("a")), ("respondedAt", .string(seed))]),
        object([("actionIdentifier", .string("a")), ("categoryIdentifier", .string(seed + repeated("x", 300)))]),
        object([("actionIdentifier", .string("a")), ("unknown", .string(seed))]),
        object([("actionIdentifier", .string("a")), ("userInfo", object([("k", .string(seed + repeated("x", 9000)))]))]
        ),
        object([("identifier", .string(seed)), ("actionIdentifier", .string(seed))]),
        object([("identifier", .string(seed + repeated("x", 300)))]),
    ])
    func errorsNeverQuoteTheValue(body: JSONValue) throws {
        let failure = try #require(ingestFailure(body))
        #expect(!failure.allText.contains(Self.seed))
        #expect(!failure.allText.contains("xxxxxxxx"))
    }
}
