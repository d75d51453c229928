import ActionHookCore
import Foundation
import Testing

@Suite("Templates")
struct TemplateTests {
    static let response = NotificationResponse(
        actionIdentifier: "accept",
        userText: "Hi \"there\"",
        categoryIdentifier: "event-invite",
        notificationIdentifier: "invite-42",
        userInfo: json(
            """
            {"aps": {"category": "event-invite"}, "eventId": 42, "location": "Rooftop",
             "items": [{"name": "first"}, {"name": "second"}], "flag": true, "obj": {"a": 1}, "nil": null,
             "big": 12345678901234567890}
            """
        ).objectValue!,
        deviceToken: "abcdef0123456789"
    )
    static let context = TemplateContext(response: response, responseID: fixedID, subject: "42")

    @Test(arguments: [
        ("{{userInfo.eventId}}", JSONValue.number("42")),
        ("{{ userInfo.eventId }}", .number("42")),
        ("{{userInfo.big}}", .number("12345678901234567890")),
        ("Event {{userInfo.eventId}}", .string("Event 42")),
        ("{{userInfo.location}}", .string("Rooftop")),
        ("See you at {{userInfo.location}}!", .string("See you at Rooftop!")),
        ("{{userInfo.items.1.name}}", .string("second")),
        ("{{userInfo.items.0}}", json(#"{"name": "first"}"#)),
        ("{{userInfo.items.2.name}}", .null),
        ("{{userInfo.flag}}", .bool(true)),
        ("flag={{userInfo.flag}}", .string("flag=true")),
        ("{{userInfo.obj}}", json(#"{"a": 1}"#)),
        ("x{{userInfo.obj}}", .string(#"x{"a":1}"#)),
        ("{{userInfo.missing}}", .null),
        ("a{{userInfo.missing}}b", .string("ab")),
        ("{{userInfo.nil}}", .null),
        ("a{{userInfo.nil}}", .string("anull")),
        ("{{userInfo.aps.category}}", .string("event-invite")),
        ("{{userText}}", .string("Hi \"there\"")),
        ("{{actionIdentifier}}/{{categoryIdentifier}}", .string("accept/event-invite")),
        ("{{notificationIdentifier}}", .string("invite-42")),
        ("{{deviceToken}}", .string("abcdef0123456789")),
        ("{{subject}}", .string("42")),
        ("{{response.id}}", .string("5f0c4b7e-1d2a-4c3b-9e8f-0123456789ab")),
        ("{{userInfo.eventId}}{{userInfo.eventId}}", .string("4242")),
        ("no placeholders", .string("no placeholders")),
        ("é {{subject}} 🎉 {{\tsubject }}", .string("é 42 🎉 42")),
        ("{{{subject}}}", .string("}")),
        ("a{{{subject}}}", .string("a}")),
        ("}} stray {", .string("}} stray {")),
        ("", .string("")),
    ])
    func rendersStrings(template: String, expected: JSONValue) {
        #expect(Template.render(template, context: Self.context) == expected)
    }

    @Test(arguments: [
        "{{userText}}", "{{subject}}", "{{deviceToken}}", "{{categoryIdentifier}}", "{{notificationIdentifier}}",
    ])
    func missingResponseValuesRenderAsNull(template: String) {
        let bare = TemplateContext(response: NotificationResponse(actionIdentifier: "a"), responseID: fixedID)
        #expect(Template.render(template, context: bare) == .null)
        #expect(Template.render("[" + template + "]", context: bare) == .string("[]"))
    }

    @Test func rendersTreesButNotMemberNames() {
        let template = json(
            #"{"{{userText}}": "{{userInfo.eventId}}", "list": ["{{userInfo.location}}", 3, null, {"n": "{{userInfo.flag}}"}]}"#
        )
        #expect(
            Template.render(template, context: Self.context)
                == json(#"{"{{userText}}": 42, "list": ["Rooftop", 3, null, {"n": true}]}"#))
    }

    @Test(arguments: [
        #"","x":""#,
        #"\"},"admin":true,"x":{"#,
        "line\nbreak\u{2028}and\u{0}nul",
        "{{userInfo.eventId}}",
        #"</script><script>alert(1)</script>"#,
    ])
    func insertedValuesStayData(userText: String) throws {
        var response = Self.response
        response.userText = userText
        let context = TemplateContext(response: response, responseID: fixedID)
        let rendered = Template.render(
            json(#"{"text": "{{userText}}", "quoted": "said: {{userText}}"}"#), context: context)
        #expect(rendered == object([("text", .string(userText)), ("quoted", .string("said: " + userText))]))
        // The serialised form reads back as the same two members.
        let reparsed = try JSONParser.parse(rendered.jsonText)
        #expect(reparsed.objectValue?.keys == ["text", "quoted"])
        #expect(reparsed == rendered)
    }

    @Test func userInfoStringsAreNotRenderedAgain() {
        var response = Self.response
        response.userInfo["location"] = .string("{{deviceToken}}")
        let context = TemplateContext(response: response, responseID: fixedID)
        #expect(Template.render("at {{userInfo.location}}", context: context) == .string("at {{deviceToken}}"))
    }

    @Test(arguments: [
        ("{{userText}}", 0),
        ("{{ userText }}", 0),
        ("{{response.id}} and {{subject}}", 0),
        ("{{userInfo.items.0.name}}", 0),
        ("{{userInfo.a-b_c.d}}", 0),
        ("plain }} text", 0),
        ("{{unknown}}", 1),
        ("{{response}}", 1),
        ("{{response.ID}}", 1),
        ("{{UserText}}", 1),
        ("{{userInfo}}", 1),
        ("{{userInfo.}}", 1),
        ("{{userInfo..a}}", 1),
        ("{{userInfo.a b}}", 1),
        ("{{userInfo.a.}}", 1),
        ("{{userInfo.a\u{3000}b}}", 1),
        ("{{userInfo.café.ü}}", 0),
        ("{{}}", 1),
        ("{{  }}", 1),
        ("{{userText", 1),
        ("ok {{userText}} then {{", 1),
        ("{{a}} {{b}}", 1),
        ("{{}} {{x}} {{y", 3),
    ])
    func validatesStrings(template: String, problems: Int) {
        let errors = Template.validate(.string(template), pointer: "/body")
        #expect(errors.count == problems)
        #expect(errors.allSatisfy { $0.pointer == "/body" })
    }

    @Test func validationPointsIntoTrees() {
        let template = json(#"{"ok": "{{userText}}", "a/b": {"list": [1, "{{nope}}"]}, "{{keys}}": "are not checked"}"#)
        #expect(
            Template.validate(template, pointer: "/followUps/0/body").map(\.pointer) == [
                "/followUps/0/body/a~1b/list/1"
            ])
    }

    @Test func validationNeverQuotesTheTemplate() {
        let errors = Template.validate(.string("{{SEEDED-name}} {{"), pointer: "")
        #expect(errors.count == 2)
        #expect(errors.allSatisfy { !$0.detail.contains("SEEDED") })
    }
}
