import ActionHookServer
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

/// `GET|PUT /v1/apps/{app}/config`: the whole set of categories and rules, replaced atomically.
@Suite("Configuration route")
struct ConfigurationRouteTests {
    static let invite = #"{"identifier":"event-invite","actions":[{"identifier":"accept","title":"Accept"}]}"#
    static let timer = #"{"identifier":"TIMER_EXPIRED","actions":[{"identifier":"SNOOZE_ACTION","title":"Snooze"}]}"#

    static func rule(_ id: String, handler: String = #"{"type":"record"}"#, priority: Int = 100) -> String {
        #"{"id":"\#(id)","priority":\#(priority),"match":{"category":"event-invite","action":"\#(id)"},"handler":\#(handler)}"#
    }

    static func body(categories: [String], rules: [String]) -> String {
        #"{"categories":[\#(categories.joined(separator: ","))],"rules":[\#(rules.joined(separator: ","))]}"#
    }

    static let five = ["a", "b", "c", "d", "e"].map { rule($0) }

    @Test("an empty app: PUT creates everything, GET shows it with the same ETag, a second PUT writes nothing")
    func createThenNoChange() throws {
        let api = try TestAPI()
        _ = try api.createApp("cfg")
        let empty = try api.admin("GET", "/v1/apps/cfg/config")
        #expect(empty.status == 200)
        #expect(empty.text == #"{"categories":[],"rules":[]}"#)
        let emptyTag = try #require(empty.headers["etag"])

        let put = try api.admin(
            "PUT", "/v1/apps/cfg/config", json: Self.body(categories: [Self.invite, Self.timer], rules: Self.five))
        #expect(put.status == 200, "\(put.text)")
        #expect(put.json["changed"] as? Bool == true)
        #expect((put.json["rules"] as? [String: Any])?["created"] as? [String] == ["a", "b", "c", "d", "e"])
        #expect(
            (put.json["categories"] as? [String: Any])?["created"] as? [String] == ["TIMER_EXPIRED", "event-invite"])
        let tag = try #require(put.headers["etag"])
        #expect(tag != emptyTag)
        #expect(put.json["etag"] as? String == tag)

        let read = try api.admin("GET", "/v1/apps/cfg/config")
        #expect(read.headers["etag"] == tag)
        #expect((read.json["rules"] as? [[String: Any]])?.count == 5)
        #expect(try api.admin("GET", "/v1/apps/cfg/rules/c").status == 200)

        let before = try api.fingerprint(app: "cfg")
        let again = try api.admin(
            "PUT", "/v1/apps/cfg/config",
            json: Self.body(categories: [Self.timer, Self.invite], rules: Self.five.reversed()))
        #expect(again.status == 200)
        #expect(again.json["changed"] as? Bool == false)
        #expect((again.json["rules"] as? [String: Any])?["unchanged"] as? [String] == ["a", "b", "c", "d", "e"])
        #expect(again.headers["etag"] == tag)
        #expect(try api.fingerprint(app: "cfg") == before)
    }

    @Test("one edited rule is one change (its version goes up); a missing item is deleted")
    func editAndDelete() throws {
        let api = try TestAPI()
        _ = try api.createApp("cfg")
        _ = try api.admin("PUT", "/v1/apps/cfg/config", json: Self.body(categories: [Self.invite], rules: Self.five))
        var edited = Self.five
        edited[1] = Self.rule("b", priority: 5)
        let put = try api.admin("PUT", "/v1/apps/cfg/config", json: Self.body(categories: [Self.invite], rules: edited))
        let rules = try #require(put.json["rules"] as? [String: Any])
        #expect(rules["updated"] as? [String] == ["b"])
        #expect(rules["created"] as? [String] == [])
        #expect(rules["unchanged"] as? [String] == ["a", "c", "d", "e"])
        #expect(try api.admin("GET", "/v1/apps/cfg/rules/b").headers["etag"] == #""2""#)
        #expect(try api.admin("GET", "/v1/apps/cfg/rules/a").headers["etag"] == #""1""#)

        let pruned = try api.admin(
            "PUT", "/v1/apps/cfg/config", json: Self.body(categories: [], rules: Array(edited.prefix(3))))
        #expect((pruned.json["rules"] as? [String: Any])?["deleted"] as? [String] == ["d", "e"])
        #expect((pruned.json["categories"] as? [String: Any])?["deleted"] as? [String] == ["event-invite"])
        #expect(try api.count("SELECT count(*) AS n FROM rules WHERE app_id = 'cfg'") == 3)
        #expect(try api.count("SELECT count(*) AS n FROM categories WHERE app_id = 'cfg'") == 0)
    }

    @Test("one invalid rule among five changes nothing; every error comes back with its pointer")
    func invalidChangesNothing() throws {
        let api = try TestAPI()
        _ = try api.createApp("cfg")
        _ = try api.admin("PUT", "/v1/apps/cfg/config", json: Self.body(categories: [Self.invite], rules: Self.five))
        let before = try api.fingerprint(app: "cfg")
        var bad = Self.five.map { $0.replacingOccurrences(of: #""priority":100"#, with: #""priority":7"#) }
        bad[2] = Self.rule("c", handler: #"{"type":"explode"}"#)
        bad[4] = Self.rule("a")
        let put = try api.admin("PUT", "/v1/apps/cfg/config", json: Self.body(categories: [Self.invite], rules: bad))
        #expect(put.status == 422, "\(put.text)")
        #expect(put.headers["content-type"] == "application/problem+json")
        let pointers = Set(Config.pointers(put))
        #expect(pointers.contains("/rules/2/handler/type"))
        #expect(pointers.contains("/rules/4/id"))
        #expect(try api.fingerprint(app: "cfg") == before)

        let shape = try api.admin("PUT", "/v1/apps/cfg/config", json: #"{"categories":[{"identifier":3}],"extra":1}"#)
        #expect(shape.status == 400)
        #expect(Set(Config.pointers(shape)) == ["/categories/0/identifier", "/rules", "/extra"])
        let privateHook = try api.admin(
            "PUT", "/v1/apps/cfg/config",
            json: Self.body(
                categories: [],
                rules: [
                    #"{"id":"h","handler":{"type":"record"},"followUps":[{"channel":"webhook","url":"http://127.0.0.1/x"}]}"#
                ]))
        #expect(privateHook.status == 422)
        #expect(Config.pointers(privateHook) == ["/rules/0/followUps/0/url"])
        #expect(try api.fingerprint(app: "cfg") == before)
    }

    @Test("If-Match: a configuration changed since it was read is refused with 412; the current tag applies")
    func ifMatch() throws {
        let api = try TestAPI()
        _ = try api.createApp("cfg")
        let first = try api.admin("PUT", "/v1/apps/cfg/config", json: Self.body(categories: [], rules: Self.five))
        let tag = try #require(first.headers["etag"])
        // Another writer changes one rule through its own route.
        #expect(try api.admin("PUT", "/v1/apps/cfg/rules/a", json: Self.rule("a", priority: 1)).status == 200)
        let stale = try api.admin(
            "PUT", "/v1/apps/cfg/config", json: Self.body(categories: [], rules: []), headers: [("If-Match", tag)])
        #expect(stale.status == 412)
        #expect(try api.count("SELECT count(*) AS n FROM rules WHERE app_id = 'cfg'") == 5)
        #expect(
            try api.admin("PUT", "/v1/apps/cfg/config", json: "{}", headers: [("If-Match", "garbage")]).status == 422)
        #expect(
            try api.admin(
                "PUT", "/v1/apps/cfg/config", json: Self.body(categories: [], rules: []),
                headers: [("If-Match", "garbage")]
            ).status == 412)

        let current = try #require(try api.admin("GET", "/v1/apps/cfg/config").headers["etag"])
        let applied = try api.admin(
            "PUT", "/v1/apps/cfg/config", json: Self.body(categories: [], rules: []), headers: [("If-Match", current)])
        #expect(applied.status == 200)
        #expect(try api.count("SELECT count(*) AS n FROM rules WHERE app_id = 'cfg'") == 0)
    }

    @Test("dryRun=true reports the changes and writes nothing")
    func dryRun() throws {
        let api = try TestAPI()
        _ = try api.createApp("cfg")
        let put = try api.admin(
            "PUT", "/v1/apps/cfg/config?dryRun=true", json: Self.body(categories: [Self.invite], rules: Self.five))
        #expect(put.status == 200)
        #expect(put.json["dryRun"] as? Bool == true)
        #expect((put.json["rules"] as? [String: Any])?["created"] as? [String] == ["a", "b", "c", "d", "e"])
        #expect(try api.count("SELECT count(*) AS n FROM rules WHERE app_id = 'cfg'") == 0)
        #expect(try api.admin("PUT", "/v1/apps/cfg/config?dryRun=maybe", json: "{}").status == 400)
        #expect(try api.admin("PUT", "/v1/apps/none/config", json: Self.body(categories: [], rules: [])).status == 404)
    }

    @Test("a replaced configuration takes effect on another instance at once")
    func otherInstanceSeesIt() throws {
        let api = try TestAPI()
        let other = TestService.make(database: api.database, migrate: false)
        try other.start()
        defer { other.stop() }
        let key = try api.createApp("cfg")
        let reply = #"{"actionIdentifier":"a","userInfo":{"aps":{"category":"event-invite"}}}"#
        func ingestOnOther() throws -> String? {
            try HTTPTestClient(port: other.port).request(
                "POST", "/v1/responses", headers: [("Authorization", "Bearer \(key)")], json: reply
            ).json["outcome"] as? String
        }
        #expect(try ingestOnOther() == "unmatched")
        _ = try api.admin(
            "PUT", "/v1/apps/cfg/config",
            json: Self.body(categories: [Self.invite], rules: [Self.rule("a", handler: #"{"type":"accept"}"#)]))
        #expect(try eventually(within: 2) { try ingestOnOther() == "accepted" })
        _ = try api.admin("PUT", "/v1/apps/cfg/config", json: Self.body(categories: [Self.invite], rules: []))
        #expect(try eventually(within: 2) { try ingestOnOther() == "unmatched" })
    }
}

private enum Config: ResponseHelpers {}
