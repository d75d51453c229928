import ActionHookCore
import Testing

@Suite("Categories")
struct NotificationCategoryTests {
    static let inviteBody = """
        {"identifier": "event-invite",
         "actions": [
           {"identifier": "accept", "title": "Accept", "options": ["foreground"]},
           {"identifier": "decline", "title": "Decline", "options": ["destructive", "authenticationRequired"]},
           {"identifier": "comment", "title": "Comment", "options": [],
            "textInput": {"buttonTitle": "Send", "placeholder": "Say something"}}
         ],
         "options": ["customDismissAction", "hiddenPreviewsShowTitle"],
         "intentIdentifiers": [],
         "subjectKey": "eventId"}
        """

    @Test func decodesTheInviteCategory() throws {
        let category = try NotificationCategory.decode(json(Self.inviteBody), id: "event-invite")
        #expect(
            category
                == NotificationCategory(
                    id: "event-invite",
                    actions: [
                        NotificationAction(identifier: "accept", title: "Accept", options: ["foreground"]),
                        NotificationAction(
                            identifier: "decline", title: "Decline", options: ["destructive", "authenticationRequired"]),
                        NotificationAction(
                            identifier: "comment", title: "Comment",
                            textInput: TextInput(buttonTitle: "Send", placeholder: "Say something")),
                    ],
                    options: ["customDismissAction", "hiddenPreviewsShowTitle"],
                    subjectKey: "eventId"))
        #expect(category.json == json(Self.inviteBody))
    }

    @Test(arguments: [
        #"{}"#,
        #"{"actions": [{"identifier": "SNOOZE_ACTION", "title": "Snooze"}, {"identifier": "STOP_ACTION", "title": "Stop", "options": ["destructive"]}]}"#,
        #"{"identifier": "TODO_CATEGORY", "options": ["allowInCarPlay", "allowAnnouncement", "hiddenPreviewsShowSubtitle"], "intentIdentifiers": ["INSendMessageIntent"]}"#,
        inviteBody,
    ])
    func roundTrips(body: String) throws {
        let id = json(body).objectValue?["identifier"]?.stringValue ?? "TIMER_EXPIRED"
        let category = try NotificationCategory.decode(json(body), id: id)
        #expect(try NotificationCategory.decode(category.json, id: id) == category)
    }

    struct Case: Sendable, CustomTestStringConvertible {
        var name: String
        var id = "event-invite"
        var body: String
        var expected: Expected
        var testDescription: String { name + " → " + expected.description }
    }

    static let errorCases: [Case] = [
        Case(name: "body is an array", body: "[]", expected: .shape("")),
        Case(name: "path id with a space", id: "event invite", body: "{}", expected: .invalid("/identifier")),
        Case(
            name: "path id of 65 characters", id: String(repeating: "c", count: 65), body: "{}",
            expected: .invalid("/identifier")),
        Case(name: "body identifier differs", body: #"{"identifier": "other"}"#, expected: .invalid("/identifier")),
        Case(name: "body identifier number", body: #"{"identifier": 1}"#, expected: .shape("/identifier")),
        Case(name: "unknown field", body: #"{"foo": true}"#, expected: .invalid("/foo")),
        Case(
            name: "server-owned createdAt", body: #"{"createdAt": "2026-01-01T00:00:00Z"}"#,
            expected: .invalid("/createdAt")),
        Case(name: "actions not an array", body: #"{"actions": {}}"#, expected: .shape("/actions")),
        Case(name: "action not an object", body: #"{"actions": ["accept"]}"#, expected: .shape("/actions/0")),
        Case(
            name: "duplicate action identifier",
            body: #"{"actions": [{"identifier": "a", "title": "A"}, {"identifier": "a", "title": "B"}]}"#,
            expected: .invalid("/actions/1/identifier")),
        Case(
            name: "action without title", body: #"{"actions": [{"identifier": "a"}]}"#,
            expected: .invalid("/actions/0/title")),
        Case(
            name: "action without identifier", body: #"{"actions": [{"title": "A"}]}"#,
            expected: .invalid("/actions/0/identifier")),
        Case(
            name: "action empty identifier", body: #"{"actions": [{"identifier": "", "title": "A"}]}"#,
            expected: .invalid("/actions/0/identifier")),
        Case(
            name: "unknown action option",
            body: #"{"actions": [{"identifier": "a", "title": "A", "options": ["loud"]}]}"#,
            expected: .invalid("/actions/0/options/0")),
        Case(
            name: "action option not a string",
            body: #"{"actions": [{"identifier": "a", "title": "A", "options": [1]}]}"#,
            expected: .shape("/actions/0/options/0")),
        Case(
            name: "unknown action field",
            body: #"{"actions": [{"identifier": "a", "title": "A", "icon": "star"}]}"#,
            expected: .invalid("/actions/0/icon")),
        Case(
            name: "text input without placeholder",
            body: #"{"actions": [{"identifier": "a", "title": "A", "textInput": {"buttonTitle": "Send"}}]}"#,
            expected: .invalid("/actions/0/textInput/placeholder")),
        Case(
            name: "text input unknown field",
            body:
                #"{"actions": [{"identifier": "a", "title": "A", "textInput": {"buttonTitle": "S", "placeholder": "", "max": 3}}]}"#,
            expected: .invalid("/actions/0/textInput/max")),
        Case(
            name: "unknown category option", body: #"{"options": ["allowInCarPlay", "loud"]}"#,
            expected: .invalid("/options/1")),
        Case(
            name: "repeated category option", body: #"{"options": ["allowInCarPlay", "allowInCarPlay"]}"#,
            expected: .invalid("/options/1")),
        Case(name: "options not an array", body: #"{"options": "allowInCarPlay"}"#, expected: .shape("/options")),
        Case(
            name: "intent identifier number", body: #"{"intentIdentifiers": [1]}"#,
            expected: .shape("/intentIdentifiers/0")),
        Case(name: "subjectKey empty", body: #"{"subjectKey": ""}"#, expected: .invalid("/subjectKey")),
        Case(name: "subjectKey number", body: #"{"subjectKey": 1}"#, expected: .shape("/subjectKey")),
    ]

    @Test(arguments: errorCases)
    func refuses(_ testCase: Case) {
        let failure = categoryFailure(json(testCase.body), id: testCase.id)
        #expect(failure?.status == testCase.expected.status)
        #expect(
            failure?.pointers.contains(testCase.expected.pointer) == true, "\(String(describing: failure?.pointers))")
    }

    @Test func errorsNeverQuoteTheValue() throws {
        let seed = "SEEDED-7d1f-VALUE"
        let body = object([
            ("identifier", .string(seed)),
            ("options", .array([.string(seed)])),
            (
                "actions",
                .array([
                    object([
                        ("identifier", .string(seed)), ("title", .string(seed + String(repeating: "x", count: 300))),
                        ("options", .array([.string(seed)])),
                    ])
                ])
            ),
        ])
        let failure = try #require(categoryFailure(body, id: "event-invite"))
        #expect(failure.errors.count == 4)
        #expect(!failure.allText.contains(seed))
    }
}
