import ActionHookCore
import Testing

@Suite("App configuration: decoding, entity tag, changes")
struct AppConfigurationTests {
    static func configuration(_ text: String, allowPrivate: Bool = false) throws -> AppConfiguration {
        try AppConfiguration.decode(json(text), allowPrivateWebhooks: allowPrivate)
    }

    static let base = """
        {"categories": [{"identifier": "b"}, {"identifier": "a", "actions": [{"identifier": "x", "title": "X"}]}],
         "rules": [{"id": "r2", "handler": {"type": "record"}}, {"id": "r1", "priority": 100, "handler": {"type": "accept"}}]}
        """

    @Test("the entity tag ignores order, layout and defaults written out; any change gives another")
    func etag() throws {
        let one = try Self.configuration(Self.base)
        let reordered = try Self.configuration(
            """
            {"rules": [{"id": "r1", "handler": {"type": "accept"}, "enabled": true},
                       {"id": "r2", "handler": {"type": "record"}}],
             "categories": [{"identifier": "a", "actions": [{"identifier": "x", "title": "X", "options": []}]},
                            {"identifier": "b", "options": []}]}
            """)
        #expect(one == reordered)
        #expect(one.etag == reordered.etag)
        #expect(one.etag.count == 34 && one.etag.hasPrefix("\"") && one.etag.hasSuffix("\""))
        let changed = try Self.configuration(
            Self.base.replacingOccurrences(of: "\"priority\": 100", with: "\"priority\": 99"))
        #expect(changed.etag != one.etag)
        #expect(one.rules.map(\.id) == ["r1", "r2"])
        #expect(try AppConfiguration.decode(one.json, allowPrivateWebhooks: false) == one)
    }

    @Test("changes: created, updated, deleted and unchanged ids per kind")
    func changes() throws {
        let before = try Self.configuration(Self.base)
        let after = try Self.configuration(
            """
            {"categories": [{"identifier": "a", "actions": [{"identifier": "x", "title": "Y"}]}, {"identifier": "c"}],
             "rules": [{"id": "r1", "handler": {"type": "accept"}}, {"id": "r3", "handler": {"type": "record"}}]}
            """)
        let changes = after.changes(from: before)
        #expect(changes.categories.created == ["c"])
        #expect(changes.categories.updated == ["a"])
        #expect(changes.categories.deleted == ["b"])
        #expect(changes.rules.created == ["r3"])
        #expect(changes.rules.unchanged == ["r1"])
        #expect(changes.rules.deleted == ["r2"])
        #expect(!changes.isEmpty)
        #expect(before.changes(from: before).isEmpty)
    }

    @Test(
        "every error of every item comes back at once, rooted at the item",
        arguments: [
            (
                #"{"categories": [], "rules": [{"id": "a", "handler": {"type": "nope"}}]}"#, 422,
                ["/rules/0/handler/type"]
            ),
            (
                #"{"categories": [{"identifier": "a", "actions": [{"identifier": "x"}]}, {"actions": []}], "rules": []}"#,
                422, ["/categories/0/actions/0/title", "/categories/1/identifier"]
            ),
            (
                #"{"categories": [], "rules": [{"id": "a", "handler": {"type": "record"}}, {"id": "a", "handler": {"type": "record"}}]}"#,
                422, ["/rules/1/id"]
            ),
            (#"{"categories": [], "extra": true}"#, 422, ["/extra", "/rules"]),
            (#"{"categories": {}, "rules": [1]}"#, 400, ["/categories", "/rules/0"]),
            (
                #"{"categories": [], "rules": [{"id": "a", "handler": {"type": "record"}, "followUps": [{"channel": "webhook", "url": "http://10.0.0.1/x"}]}]}"#,
                422, ["/rules/0/followUps/0/url"]
            ),
            ("[]", 400, [""]),
        ])
    func errors(body: String, status: Int, pointers: [String]) throws {
        let failure = try #require(throws: ValidationFailure.self) { try Self.configuration(body) }
        #expect(failure.status == status)
        #expect(failure.errors.map(\.pointer).sorted() == pointers.sorted(), "\(failure.errors)")
    }

    @Test("a private webhook target is allowed when the server allows it")
    func privateTargets() throws {
        let body =
            #"{"categories": [], "rules": [{"id": "a", "handler": {"type": "record"}, "followUps": [{"channel": "webhook", "url": "http://127.0.0.1/x"}]}]}"#
        #expect(try Self.configuration(body, allowPrivate: true).rules.count == 1)
    }
}
