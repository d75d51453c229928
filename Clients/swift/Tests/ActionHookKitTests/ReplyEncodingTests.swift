import ActionHookKit
import Foundation
import Testing

@Suite("Reply encoding: every response shape of the seeds becomes the ingest body the server expects")
struct ReplyEncodingTests {
    struct Case: Sendable, CustomTestStringConvertible {
        let name: String
        let reply: Reply
        let expected: [String: String]
        let userText: String?
        var testDescription: String { name }
    }

    static let respondedAt = Date(timeIntervalSince1970: 1_795_600_000.25)
    static let inviteInfo: [String: JSONValue] = [
        "aps": .object(["alert": .string("Party at 8"), "category": .string("event-invite")]),
        "eventId": .string("42"),
    ]

    static func reply(_ action: String, category: String?, text: String? = nil) -> Reply {
        Reply(
            actionIdentifier: action, userText: text, categoryIdentifier: category, notificationIdentifier: "n-1",
            userInfo: inviteInfo, deviceToken: "a1b2", respondedAt: respondedAt, responseId: "r-\(action)")
    }

    static let cases: [Case] = [
        Case(name: "invite accept", reply: reply("accept", category: "event-invite"), expected: ["actionIdentifier": "accept", "categoryIdentifier": "event-invite"], userText: nil),
        Case(name: "invite decline", reply: reply("decline", category: "event-invite"), expected: ["actionIdentifier": "decline"], userText: nil),
        Case(name: "invite comment with text", reply: reply("comment", category: "event-invite", text: "Running late, <b>save</b> me a seat 🎉"), expected: ["actionIdentifier": "comment"], userText: "Running late, <b>save</b> me a seat 🎉"),
        Case(name: "timer snooze", reply: reply("SNOOZE_ACTION", category: "TIMER_EXPIRED"), expected: ["actionIdentifier": "SNOOZE_ACTION", "categoryIdentifier": "TIMER_EXPIRED"], userText: nil),
        Case(name: "timer stop", reply: reply("STOP_ACTION", category: "TIMER_EXPIRED"), expected: ["actionIdentifier": "STOP_ACTION"], userText: nil),
        Case(name: "to-do done", reply: reply("MARK_DONE", category: "TODO_CATEGORY"), expected: ["actionIdentifier": "MARK_DONE", "categoryIdentifier": "TODO_CATEGORY"], userText: nil),
        Case(name: "to-do input", reply: reply("INPUT", category: "TODO_CATEGORY", text: "buy milk"), expected: ["actionIdentifier": "INPUT"], userText: "buy milk"),
        Case(name: "default action", reply: reply(Reply.defaultActionIdentifier, category: "TODO_CATEGORY"), expected: ["actionIdentifier": "com.apple.UNNotificationDefaultActionIdentifier"], userText: nil),
        Case(name: "dismiss action", reply: reply(Reply.dismissActionIdentifier, category: "GENERAL"), expected: ["actionIdentifier": "com.apple.UNNotificationDismissActionIdentifier", "categoryIdentifier": "GENERAL"], userText: nil),
    ]

    @Test("the body carries the action, text, category, ids, userInfo, token and time", arguments: cases)
    func body(_ testCase: Case) throws {
        let body = try #require(try JSONSerialization.jsonObject(with: testCase.reply.ingestBody()) as? [String: Any])
        for (key, value) in testCase.expected {
            #expect(body[key] as? String == value, "\(key)")
        }
        #expect(body["userText"] as? String == testCase.userText)
        #expect(body["responseId"] as? String == testCase.reply.responseId)
        #expect(body["notificationIdentifier"] as? String == "n-1")
        #expect(body["deviceToken"] as? String == "a1b2")
        #expect(body["respondedAt"] as? String == "2026-11-25T09:46:40.250Z")
        let userInfo = try #require(body["userInfo"] as? [String: Any])
        #expect(userInfo["eventId"] as? String == "42")
        #expect((userInfo["aps"] as? [String: Any])?["category"] as? String == "event-invite")
    }

    @Test("absent values are left out and an empty category (a notification without one) is no category")
    func absentValues() throws {
        let reply = Reply(actionIdentifier: "OPEN", categoryIdentifier: "")
        let body = try #require(try JSONSerialization.jsonObject(with: reply.ingestBody()) as? [String: Any])
        #expect(Set(body.keys) == ["responseId", "actionIdentifier", "userInfo", "respondedAt"])
        #expect(reply.categoryIdentifier == nil)
    }

    @Test("a reply's responseId is made once: a lowercased UUID, different for each reply")
    func responseIds() {
        let first = Reply(actionIdentifier: "accept")
        let second = Reply(actionIdentifier: "accept")
        #expect(first.responseId != second.responseId)
        #expect(UUID(uuidString: first.responseId) != nil)
        #expect(first.responseId == first.responseId.lowercased())
    }

    @Test("device tokens are written as lowercase hex, two digits a byte")
    func deviceTokenHex() {
        #expect(DeviceToken.hex(Data([0x00, 0x0f, 0xa0, 0xff, 0x12])) == "000fa0ff12")
        #expect(DeviceToken.hex(Data()) == "")
        #expect(DeviceToken.hex(Data(repeating: 0xab, count: 32)).count == 64)
    }
}

@Suite("userInfo made JSON-safe")
struct SanitisingTests {
    @Test("JSON values are kept, with booleans told apart from numbers")
    func jsonValues() throws {
        let payload = #"{"aps":{"alert":{"title":"Hi"},"badge":3,"content-available":1},"flag":true,"off":false,"ratio":0.5,"none":null,"list":[1,"two",false]}"#
        let userInfo = try #require(try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [AnyHashable: Any])
        let clean = JSONValue.sanitizing(userInfo: userInfo)
        #expect(clean["flag"] == .bool(true))
        #expect(clean["off"] == .bool(false))
        #expect(clean["ratio"] == .number(0.5))
        #expect(clean["none"] == .null)
        #expect(clean["list"] == .array([.number(1), .string("two"), .bool(false)]))
        #expect(clean["aps"]?["badge"] == .number(3))
        #expect(clean["aps"]?["content-available"] == .number(1))
        #expect(clean["aps"]?["alert"]?["title"] == .string("Hi"))
    }

    @Test("dates, data, URLs and UUIDs become strings; non-JSON values and non-finite numbers are dropped")
    func conversions() {
        let id = UUID()
        let userInfo: [AnyHashable: Any] = [
            "when": Date(timeIntervalSince1970: 0),
            "blob": Data([1, 2, 3]),
            "link": URL(string: "https://example.com/a?b=1")!,
            "id": id,
            "nan": Double.nan,
            "inf": Double.infinity,
            "object": NSObject(),
            "nested": ["deep": [Date(timeIntervalSince1970: 1), NSObject(), 7]] as [String: Any],
            42: "number key",
            "int": 12,
            "swiftBool": true,
        ]
        let clean = JSONValue.sanitizing(userInfo: userInfo)
        #expect(clean["when"] == .string("1970-01-01T00:00:00.000Z"))
        #expect(clean["blob"] == .string("AQID"))
        #expect(clean["link"] == .string("https://example.com/a?b=1"))
        #expect(clean["id"] == .string(id.uuidString))
        #expect(clean["nan"] == nil)
        #expect(clean["inf"] == nil)
        #expect(clean["object"] == nil)
        #expect(clean["nested"]?["deep"] == .array([.string("1970-01-01T00:00:01.000Z"), .number(7)]))
        #expect(clean["42"] == .string("number key"))
        #expect(clean["int"] == .number(12))
        #expect(clean["swiftBool"] == .bool(true))
    }

    @Test("whole numbers are written without a fraction, others as they are")
    func numbers() throws {
        let text = String(decoding: JSONValue.object(["a": .number(3), "b": .number(2.5), "c": .number(-1e300)]).encodedForTests(), as: UTF8.self)
        #expect(text.contains(#""a":3"#))
        #expect(text.contains(#""b":2.5"#))
        #expect(!text.contains(#""a":3.0"#))
    }
}

extension JSONValue {
    func encodedForTests() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return (try? encoder.encode(self)) ?? Data()
    }
}
