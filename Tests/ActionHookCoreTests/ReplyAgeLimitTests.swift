import ActionHookCore
import Foundation
import Testing

@Suite("Reply age limits")
struct ReplyAgeLimitTests {
    static let category = NotificationCategory(id: "garage", maxReplyAgeSeconds: 60, requireRespondedAt: true)

    static func rule(maxAge: Int? = nil, require: Bool? = nil) -> Rule {
        Rule(id: "open", handler: .accept, maxReplyAgeSeconds: maxAge, requireRespondedAt: require)
    }

    @Test(
        "the rule's settings replace the category's, each on its own",
        arguments: [
            (nil as Int?, nil as Bool?, ReplyAgeLimit(maxAgeSeconds: 60, requireRespondedAt: true)),
            (10, nil, ReplyAgeLimit(maxAgeSeconds: 10, requireRespondedAt: true)),
            (nil, false, ReplyAgeLimit(maxAgeSeconds: 60, requireRespondedAt: false)),
            (3600, false, ReplyAgeLimit(maxAgeSeconds: 3600, requireRespondedAt: false)),
        ])
    func resolve(maxAge: Int?, require: Bool?, expected: ReplyAgeLimit) {
        #expect(
            ReplyAgeLimit.resolve(rule: Self.rule(maxAge: maxAge, require: require), category: Self.category)
                == expected)
    }

    @Test("no category and no rule: no limit; a rule alone sets one")
    func defaults() {
        #expect(ReplyAgeLimit.resolve(rule: nil, category: nil) == ReplyAgeLimit())
        #expect(ReplyAgeLimit.resolve(rule: Self.rule(maxAge: 5), category: nil).maxAgeSeconds == 5)
    }

    @Test(
        "an age over the limit is expired; at the limit, under it or unknown it is not",
        arguments: [
            (59.0 as Double?, false), (60.0, false), (60.001, true), (86_400.0, true), (nil, false), (-5.0, false),
        ])
    func expiry(age: Double?, expired: Bool) {
        #expect(ReplyAgeLimit(maxAgeSeconds: 60).isExpired(age: age) == expired)
        #expect(!ReplyAgeLimit().isExpired(age: age))
    }

    @Test("age is receivedAt − respondedAt, nil without respondedAt")
    func age() {
        let received = Date(timeIntervalSince1970: 1_000_000)
        #expect(ReplyAgeLimit.age(respondedAt: received.addingTimeInterval(-90), receivedAt: received) == 90)
        #expect(ReplyAgeLimit.age(respondedAt: nil, receivedAt: received) == nil)
    }

    @Test("categories and rules read and write the settings, and refuse them out of range")
    func decoding() throws {
        let category = try NotificationCategory.decode(
            json(#"{"actions":[],"maxReplyAgeSeconds":900,"requireRespondedAt":true}"#), id: "garage")
        #expect(category.replyAgeLimit == ReplyAgeLimit(maxAgeSeconds: 900, requireRespondedAt: true))
        #expect(try NotificationCategory.decode(category.json, id: "garage") == category)
        #expect(NotificationCategory(id: "plain").json.objectValue?["maxReplyAgeSeconds"] == nil)

        let rule = try Rule.decode(
            json(#"{"id":"r","handler":{"type":"accept"},"maxReplyAgeSeconds":30,"requireRespondedAt":false}"#), id: nil
        )
        #expect(rule.maxReplyAgeSeconds == 30)
        #expect(rule.requireRespondedAt == false)
        #expect(try Rule.decode(rule.json, id: nil) == rule)

        for limit in ["0", "-1", "31536001"] {
            #expect(throws: ValidationFailure.self) {
                try NotificationCategory.decode(json(#"{"maxReplyAgeSeconds":\#(limit)}"#), id: "c")
            }
            #expect(throws: ValidationFailure.self) {
                try Rule.decode(
                    json(#"{"id":"r","handler":{"type":"record"},"maxReplyAgeSeconds":\#(limit)}"#), id: nil)
            }
        }
    }
}
