import ActionHookCore
import ActionHookServer
import Foundation
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

/// The admin API as the contract describes it: apps, keys, admin tokens, categories, rules with
/// ETag/If-Match, history and follow-ups, and the conventions of every list and id.
@Suite("Admin API", .serialized)
struct AdminAPITests {
    @Test("apps: create (201, Location), duplicate (409), get, patch, list with limit and cursor")
    func appsCRUD() throws {
        let api = try TestAPI()
        let created = try api.admin("POST", "/v1/apps", json: #"{"id":"crud","name":"CRUD"}"#)
        #expect(created.status == 201)
        #expect(created.headers["location"] == "/v1/apps/crud")
        #expect(created.json["id"] as? String == "crud")
        #expect(created.json["name"] as? String == "CRUD")
        #expect(Admin.isTime(created.json["createdAt"]))
        let key = try #require((created.json["ingestKey"] as? [String: Any])?["secret"] as? String)
        #expect(key.hasPrefix("ahk_"))

        let duplicate = try api.admin("POST", "/v1/apps", json: #"{"id":"crud","name":"Other"}"#)
        #expect(duplicate.status == 409)
        #expect(duplicate.headers["content-type"] == "application/problem+json")
        #expect(try api.admin("GET", "/v1/apps/crud").json["name"] as? String == "CRUD")
        #expect(try api.count("SELECT count(*) AS n FROM api_keys WHERE app_id = 'crud'") == 1)

        let patched = try api.admin("PATCH", "/v1/apps/crud", json: #"{"name":"Renamed","rateLimitPerSecond":5}"#)
        #expect(patched.status == 200)
        #expect(patched.json["name"] as? String == "Renamed")
        #expect(patched.json["rateLimitPerSecond"] as? Int == 5)
        let fetched = try api.admin("GET", "/v1/apps/crud")
        #expect(fetched.status == 200)
        #expect(fetched.json["name"] as? String == "Renamed")
        #expect(fetched.json["rateLimitPerSecond"] as? Int == 5)
        #expect(fetched.json["createdAt"] as? String == created.json["createdAt"] as? String)
        let cleared = try api.admin("PATCH", "/v1/apps/crud", json: #"{"rateLimitPerSecond":null}"#)
        #expect(cleared.json["rateLimitPerSecond"] is NSNull)
        #expect(cleared.json["name"] as? String == "Renamed")
        let invalid = try api.admin("PATCH", "/v1/apps/crud", json: #"{"rateLimitPerSecond":0}"#)
        #expect(invalid.status == 422)
        #expect(Admin.pointers(invalid) == ["/rateLimitPerSecond"])

        // retentionDays: set, kept by other changes, refused out of range or not an integer, cleared with null.
        #expect(created.json["retentionDays"] is NSNull)
        let retention = try api.admin("PATCH", "/v1/apps/crud", json: #"{"retentionDays":7}"#)
        #expect(retention.status == 200)
        #expect(retention.json["retentionDays"] as? Int == 7)
        #expect(
            try api.admin("PATCH", "/v1/apps/crud", json: #"{"name":"Renamed"}"#).json["retentionDays"] as? Int == 7)
        #expect(try api.admin("GET", "/v1/apps/crud").json["retentionDays"] as? Int == 7)
        #expect(try api.count("SELECT count(*) AS n FROM apps WHERE id = 'crud' AND retention_days = 7") == 1)
        for (value, status) in [("0", 422), ("40000", 422), ("1.5", 422), (#""x""#, 400)] {
            let refused = try api.admin("PATCH", "/v1/apps/crud", json: #"{"retentionDays":\#(value)}"#)
            #expect(refused.status == status, "retentionDays \(value)")
            #expect(refused.headers["content-type"] == "application/problem+json")
            #expect(Admin.pointers(refused) == ["/retentionDays"], "retentionDays \(value)")
            let refusedCreate = try api.admin(
                "POST", "/v1/apps", json: #"{"id":"bad-retention","retentionDays":\#(value)}"#)
            #expect(refusedCreate.status == status, "retentionDays \(value)")
            #expect(Admin.pointers(refusedCreate) == ["/retentionDays"], "retentionDays \(value)")
        }
        #expect(try api.admin("GET", "/v1/apps/crud").json["retentionDays"] as? Int == 7)
        let unretained = try api.admin("PATCH", "/v1/apps/crud", json: #"{"retentionDays":null}"#)
        #expect(unretained.status == 200)
        #expect(unretained.json["retentionDays"] is NSNull)
        #expect(try api.count("SELECT count(*) AS n FROM apps WHERE id = 'crud' AND retention_days IS NULL") == 1)
        let shortLived = try api.admin("POST", "/v1/apps", json: #"{"id":"short-lived","retentionDays":3}"#)
        #expect(shortLived.status == 201)
        #expect(shortLived.json["retentionDays"] as? Int == 3)
        #expect(try api.admin("DELETE", "/v1/apps/short-lived").status == 204)

        let badID = try api.admin("POST", "/v1/apps", json: #"{"id":"bad id!","name":"x"}"#)
        #expect(badID.status == 422)
        #expect(Admin.pointers(badID).contains("/id"))

        var expected = ["crud"]
        for n in 0..<7 {
            _ = try api.createApp("page-\(n)")
            expected.append("page-\(n)")
        }
        expected.sort()
        let pages = try Admin.pages(api, "/v1/apps", limit: 3)
        #expect(pages.map(\.count) == [3, 3, 2])
        #expect(pages.flatMap { $0 }.compactMap { $0["id"] as? String } == expected)
        let all = try api.admin("GET", "/v1/apps")
        #expect(Admin.items(all).count == 8)
        #expect(all.json["nextCursor"] is NSNull)
        #expect(!all.text.contains("ahk_"))
    }

    @Test("DELETE an app: 204, then 404 everywhere, its keys stop working and everything it owned goes")
    func deleteAppCascades() throws {
        let api = try TestAPI()
        let doomed = try Admin.seedFollowUps(api, app: "doomed", responses: 2)
        let survivor = try Admin.seedFollowUps(api, app: "survivor", responses: 1)
        // A sent notification too: its row and its push are the app's.
        let token = String(repeating: "0d", count: 32)
        let sent = try api.admin(
            "POST", "/v1/apps/doomed/notifications", json: #"{"to": ["\#(token)"], "aps": {"alert": "Hi"}}"#)
        #expect(sent.status == 202)
        #expect(try api.count("SELECT count(*) AS n FROM notifications WHERE app_id = 'doomed'") == 1)
        #expect(try Admin.ownedRows(api, app: "doomed") > 10)
        let survivorRows = try Admin.ownedRows(api, app: "survivor")

        #expect(try api.admin("DELETE", "/v1/apps/doomed").status == 204)
        #expect(try api.admin("GET", "/v1/apps/doomed").status == 404)
        #expect(try api.admin("DELETE", "/v1/apps/doomed").status == 404)
        #expect(try api.admin("PATCH", "/v1/apps/doomed", json: #"{"name":"x"}"#).status == 404)
        #expect(try api.admin("GET", "/v1/apps/doomed/rules").status == 404)
        #expect(try api.admin("GET", "/v1/apps/doomed/responses/\(doomed.responseIDs[0])").status == 404)
        #expect(try api.call("GET", "/v1/categories", token: doomed.key).status == 401)
        #expect(try api.ingest(key: doomed.key, json: #"{"actionIdentifier":"accept"}"#).status == 401)
        // Its history goes in the background (AppPurger), its deletion record last.
        #expect(try eventually(within: 30) { try Admin.ownedRows(api, app: "doomed") == 0 })
        #expect(try Admin.ownedRows(api, app: "survivor") == survivorRows)
        #expect(try api.call("GET", "/v1/categories", token: survivor.key).status == 200)

        // The id is free again; the new app starts empty.
        #expect(try api.admin("POST", "/v1/apps", json: #"{"id":"doomed"}"#).status == 201)
        #expect(try Admin.ownedRows(api, app: "doomed") == 2)
        #expect(try api.call("GET", "/v1/categories", token: doomed.key).status == 401)
    }

    @Test("ingest keys: create shows the secret once, revoke takes effect at once, other keys keep working")
    func ingestKeys() throws {
        let api = try TestAPI()
        let first = try api.createApp("keys")
        let created = try api.admin("POST", "/v1/apps/keys/keys")
        #expect(created.status == 201)
        let id = try #require(created.json["id"] as? String)
        let secret = try #require(created.json["secret"] as? String)
        #expect(UUID(uuidString: id) != nil)
        #expect(secret.hasPrefix("ahk_") && secret != first)
        #expect(try api.call("GET", "/v1/categories", token: secret).status == 200)
        #expect(try api.admin("POST", "/v1/apps/keys/keys", json: #"{"name":"x"}"#).status == 422)
        #expect(try api.admin("POST", "/v1/apps/keys/keys", json: "{}").status == 201)

        #expect(try api.admin("DELETE", "/v1/apps/keys/keys/\(id)").status == 204)
        #expect(try api.call("GET", "/v1/categories", token: secret).status == 401)
        #expect(try api.ingest(key: secret, json: #"{"actionIdentifier":"a"}"#).status == 401)
        #expect(try api.admin("DELETE", "/v1/apps/keys/keys/\(id)").status == 404)
        #expect(try api.call("GET", "/v1/categories", token: first).status == 200)
        #expect(
            try api.count(
                "SELECT count(*) AS n FROM api_keys WHERE app_id = 'keys' AND id = \(UUID(uuidString: id)) AND revoked_at IS NOT NULL"
            ) == 1)
        #expect(try api.admin("DELETE", "/v1/apps/keys/keys/\(UUID())").status == 404)
    }

    @Test("admin tokens: the token is shown once, works, is listed without its secret, and revokes")
    func adminTokens() throws {
        let api = try TestAPI()
        let created = try api.admin("POST", "/v1/admin-tokens", json: #"{"name":"ci"}"#)
        #expect(created.status == 201)
        let id = try #require(created.json["id"] as? String)
        let token = try #require(created.json["token"] as? String)
        #expect(token.hasPrefix("aha_"))
        #expect(created.json["name"] as? String == "ci")
        #expect(created.json["revokedAt"] is NSNull)

        #expect(try api.call("GET", "/v1/apps", token: token).status == 200)
        #expect(try api.call("POST", "/v1/apps", token: token, json: #"{"id":"by-token"}"#).status == 201)
        #expect(try api.call("GET", "/v1/categories", token: token).status == 401)

        let list = try api.admin("GET", "/v1/admin-tokens")
        #expect(list.status == 200)
        let items = Admin.items(list)
        #expect(items.compactMap { $0["id"] as? String } == [id])
        #expect(items.first?["name"] as? String == "ci")
        #expect(items.first?["token"] == nil)
        #expect(!list.text.contains(token))
        #expect(list.json["nextCursor"] is NSNull)
        #expect(try api.count("SELECT count(*) AS n FROM admin_tokens t WHERE position(\(token) IN t::text) > 0") == 0)

        #expect(try api.admin("POST", "/v1/admin-tokens", json: #"{"name":""}"#).status == 422)
        #expect(try api.admin("POST", "/v1/admin-tokens", json: "{}").status == 422)

        #expect(try api.admin("DELETE", "/v1/admin-tokens/\(id)").status == 204)
        #expect(try api.call("GET", "/v1/apps", token: token).status == 401)
        #expect(try api.admin("DELETE", "/v1/admin-tokens/\(id)").status == 404)
        #expect(try api.admin("DELETE", "/v1/admin-tokens/not-a-uuid").status == 404)
        let revoked = Admin.items(try api.admin("GET", "/v1/admin-tokens"))
        #expect(revoked.first.map { Admin.isTime($0["revokedAt"]) } == true)
    }

    @Test("categories: PUT 201 then 200, GET, list with paging, the app's own view, DELETE 204 then 404")
    func categories() throws {
        let api = try TestAPI()
        let key = try api.createApp("cats")
        let first: [String: Any] = [
            "actions": [
                ["identifier": "accept", "title": "Accept", "options": ["foreground"]],
                [
                    "identifier": "reply", "title": "Reply",
                    "textInput": ["buttonTitle": "Send", "placeholder": "Message"],
                ],
            ],
            "options": ["customDismissAction"], "intentIdentifiers": [], "subjectKey": "eventId",
        ]
        let put = try api.admin("PUT", "/v1/apps/cats/categories/invite", json: Admin.json(first))
        #expect(put.status == 201)
        #expect(put.json["identifier"] as? String == "invite")
        var second = first
        second["actions"] = [["identifier": "decline", "title": "Decline", "options": ["destructive"]]]
        let replaced = try api.admin("PUT", "/v1/apps/cats/categories/invite", json: Admin.json(second))
        #expect(replaced.status == 200)
        let got = try api.admin("GET", "/v1/apps/cats/categories/invite")
        #expect(got.status == 200)
        let actions = got.json["actions"] as? [[String: Any]] ?? []
        #expect(actions.compactMap { $0["identifier"] as? String } == ["decline"])
        #expect(got.json["subjectKey"] as? String == "eventId")
        #expect(got.json["options"] as? [String] == ["customDismissAction"])

        let mismatch = try api.admin("PUT", "/v1/apps/cats/categories/other", json: #"{"identifier":"invite"}"#)
        #expect(mismatch.status == 422)
        #expect(Admin.pointers(mismatch) == ["/identifier"])
        let badOption = try api.admin("PUT", "/v1/apps/cats/categories/other", json: #"{"options":["loud"]}"#)
        #expect(badOption.status == 422)
        #expect(Admin.pointers(badOption) == ["/options/0"])

        #expect(try api.admin("PUT", "/v1/apps/cats/categories/alpha", json: "{}").status == 201)
        let pages = try Admin.pages(api, "/v1/apps/cats/categories", limit: 1)
        #expect(pages.flatMap { $0 }.compactMap { $0["identifier"] as? String } == ["alpha", "invite"])
        #expect(pages.count == 2)

        let own = try api.call("GET", "/v1/categories", token: key)
        #expect(Set(Admin.items(own).compactMap { $0["identifier"] as? String }) == ["alpha", "invite"])

        #expect(try api.admin("DELETE", "/v1/apps/cats/categories/invite").status == 204)
        #expect(try api.admin("GET", "/v1/apps/cats/categories/invite").status == 404)
        #expect(try api.admin("DELETE", "/v1/apps/cats/categories/invite").status == 404)
        let after = try api.call("GET", "/v1/categories", token: key)
        #expect(Admin.items(after).compactMap { $0["identifier"] as? String } == ["alpha"])
    }

    @Test("rules: ETag on create and read; If-Match guards PUT and DELETE (412 leaves the rule unchanged)")
    func rulesWithETags() throws {
        let api = try TestAPI()
        _ = try api.createApp("rules")
        let body: [String: Any] = [
            "id": "invite-accept", "description": "first", "priority": 100,
            "match": ["category": "invite", "action": ["accept", "ACCEPT"]], "handler": ["type": "accept"],
        ]
        let created = try api.admin("POST", "/v1/apps/rules/rules", json: Admin.json(body))
        #expect(created.status == 201)
        #expect(created.headers["location"] == "/v1/apps/rules/rules/invite-accept")
        let etag1 = try #require(created.headers["etag"])
        let got = try api.admin("GET", "/v1/apps/rules/rules/invite-accept")
        #expect(got.status == 200)
        #expect(got.headers["etag"] == etag1)
        #expect(got.json["description"] as? String == "first")
        #expect(try api.admin("POST", "/v1/apps/rules/rules", json: Admin.json(body)).status == 409)

        func put(_ description: String, ifMatch: String?) throws -> TestResponse {
            var changed = body
            changed["description"] = description
            return try api.admin(
                "PUT", "/v1/apps/rules/rules/invite-accept", json: Admin.json(changed),
                headers: ifMatch.map { [("If-Match", $0)] } ?? [])
        }
        let before = try Admin.ruleRow(api, "invite-accept")
        for stale in ["\"7\"", "\"0\"", "garbage", "\"\""] {
            let refused = try put("stale", ifMatch: stale)
            #expect(refused.status == 412, "If-Match \(stale)")
            #expect(try Admin.ruleRow(api, "invite-accept") == before)
        }
        let second = try put("second", ifMatch: etag1)
        #expect(second.status == 200)
        let etag2 = try #require(second.headers["etag"])
        #expect(etag2 != etag1)
        #expect(second.json["description"] as? String == "second")
        #expect(try api.admin("GET", "/v1/apps/rules/rules/invite-accept").headers["etag"] == etag2)

        let outdated = try put("outdated", ifMatch: etag1)
        #expect(outdated.status == 412)
        #expect(try api.admin("GET", "/v1/apps/rules/rules/invite-accept").json["description"] as? String == "second")

        let unconditional = try put("third", ifMatch: nil)
        #expect(unconditional.status == 200)
        let etag3 = try #require(unconditional.headers["etag"])
        #expect(etag3 != etag2 && etag3 != etag1)

        let staleDelete = try api.admin("DELETE", "/v1/apps/rules/rules/invite-accept", headers: [("If-Match", etag2)])
        #expect(staleDelete.status == 412)
        #expect(try api.admin("GET", "/v1/apps/rules/rules/invite-accept").status == 200)
        let deleted = try api.admin("DELETE", "/v1/apps/rules/rules/invite-accept", headers: [("If-Match", etag3)])
        #expect(deleted.status == 204)
        #expect(try api.admin("GET", "/v1/apps/rules/rules/invite-accept").status == 404)
        #expect(try api.admin("DELETE", "/v1/apps/rules/rules/invite-accept").status == 404)
        #expect(try put("gone", ifMatch: nil).status == 404)
        #expect(try api.count("SELECT count(*) AS n FROM rules") == 0)

        // DELETE without If-Match deletes; lists run in priority order, then id, page by page.
        for (id, priority) in [("c", 5), ("a", 10), ("b", 5)] {
            let rule = Admin.json(["id": id, "priority": priority, "handler": ["type": "record"]])
            #expect(try api.admin("POST", "/v1/apps/rules/rules", json: rule).status == 201)
        }
        let pages = try Admin.pages(api, "/v1/apps/rules/rules", limit: 2)
        #expect(pages.flatMap { $0 }.compactMap { $0["id"] as? String } == ["b", "c", "a"])
        #expect(try api.admin("DELETE", "/v1/apps/rules/rules/a").status == 204)
        #expect(try api.count("SELECT count(*) AS n FROM rules") == 2)
    }

    @Test("invalid rules are 422 with the pointer of every broken field, and nothing is stored")
    func invalidRules() throws {
        let api = try TestAPI()
        _ = try api.createApp("bad")
        func rule(_ changes: [String: Any]) -> String {
            var body: [String: Any] = ["id": "r", "handler": ["type": "record"]]
            body.merge(changes) { $1 }
            return Admin.json(body)
        }
        func apns(_ payload: Any) -> [String: Any] {
            ["followUps": [["channel": "apns", "payload": payload]]]
        }
        let cases: [(String, [String])] = [
            (rule(["match": ["userInfo": [["path": "kind", "op": "regex", "value": "x"]]]]), ["/match/userInfo/0/op"]),
            (rule(["match": ["userInfo": [["path": "kind", "op": "in", "value": "x"]]]]), ["/match/userInfo/0/value"]),
            (rule(["match": ["userInfo": [["path": "a..b", "op": "exists"]]]]), ["/match/userInfo/0/path"]),
            (
                rule(["followUps": [["channel": "webhook", "body": ["eventId": "{{userInfo..eventId}}"]]]]),
                ["/followUps/0/body/eventId"]
            ),
            (
                rule(["followUps": [["channel": "webhook", "body": ["x": ["{{apnsKey}}"]]]]]),
                ["/followUps/0/body/x/0"]
            ),
            (rule(["followUps": [["channel": "webhook", "body": "{{userText"]]]), ["/followUps/0/body"]),
            (rule(apns(["aps": ["alert": "{{ }}"]])), ["/followUps/0/payload/aps/alert"]),
            (rule(apns(["aps": ["alert": String(repeating: "x", count: 4077)]])), ["/followUps/0/payload"]),
            (rule(["followUps": [["channel": "sms"]]]), ["/followUps/0/channel"]),
            (rule(["handler": ["type": "explode"]]), ["/handler/type"]),
            (rule(["handler": ["type": "snooze", "delaySeconds": 0]]), ["/handler/delaySeconds"]),
            (Admin.json(["id": "r"]), ["/handler"]),
            (rule(["id": "bad id!"]), ["/id"]),
            (
                rule([
                    "match": ["userInfo": [["path": "k", "op": "nope"]]],
                    "followUps": [["channel": "webhook", "body": "{{nope}}"]],
                ]), ["/match/userInfo/0/op", "/followUps/0/body"]
            ),
        ]
        for (body, pointers) in cases {
            let response = try api.admin("POST", "/v1/apps/bad/rules", json: body)
            #expect(response.status == 422, "\(pointers): \(response.text)")
            #expect(Set(Admin.pointers(response)) == Set(pointers), "\(response.text)")
            #expect(response.headers["content-type"] == "application/problem+json")
        }
        #expect(try api.count("SELECT count(*) AS n FROM rules") == 0)
        // Wrong JSON types are 400s.
        #expect(try api.admin("POST", "/v1/apps/bad/rules", json: rule(["priority": "high"])).status == 400)
        #expect(try api.admin("POST", "/v1/apps/bad/rules", json: "[]").status == 400)
        #expect(try api.admin("POST", "/v1/apps/bad/rules", json: "{").status == 400)
        // The APNs payload limit is 4096 bytes rendered with empty values: 4096 passes, 4097 does not.
        let limit = rule(apns(["aps": ["alert": String(repeating: "x", count: 4076)]]))
        let atLimit = try api.admin("POST", "/v1/apps/bad/rules", json: limit)
        #expect(atLimit.status == 201, "\(atLimit.text.prefix(300))")
        // Placeholders render empty for the check, so a long template can still fit.
        let templated = Admin.json([
            "id": "t", "handler": ["type": "record"],
            "followUps": [
                ["channel": "apns", "payload": ["aps": ["alert": String(repeating: "{{userText}}", count: 400)]]]
            ],
        ])
        #expect(try api.admin("POST", "/v1/apps/bad/rules", json: templated).status == 201)
    }

    @Test("follow-ups: list by status, cancel (200 then 409), retry only a dead one (409 otherwise)")
    func followUps() throws {
        let api = try TestAPI()
        let seeded = try Admin.seedFollowUps(api, app: "fu", responses: 3)
        #expect(seeded.followUpIDs.count == 6)
        func listed(_ query: String) throws -> [String] {
            let response = try api.admin("GET", "/v1/apps/fu/followups\(query)")
            #expect(response.status == 200, "\(query)")
            return Admin.items(response).compactMap { $0["id"] as? String }
        }
        #expect(Set(try listed("?status=pending")) == Set(seeded.followUpIDs))
        #expect(try listed("?status=dead").isEmpty)

        let dead = seeded.followUpIDs[0]
        let pending = seeded.followUpIDs[1]
        let other = seeded.followUpIDs[2]
        try Admin.setStatus(api, app: "fu", id: dead, "dead")
        #expect(try listed("?status=dead") == [dead])
        #expect(try listed("?status=pending").count == 5)
        let pages = try Admin.pages(api, "/v1/apps/fu/followups", limit: 4)
        #expect(pages.map(\.count) == [4, 2])
        #expect(Set(pages.flatMap { $0 }.compactMap { $0["id"] as? String }) == Set(seeded.followUpIDs))

        let cancelled = try api.admin("DELETE", "/v1/apps/fu/followups/\(pending)")
        #expect(cancelled.status == 200)
        #expect(cancelled.json["status"] as? String == "cancelled")
        #expect(try Admin.status(api, app: "fu", id: pending) == "cancelled")
        let again = try api.admin("DELETE", "/v1/apps/fu/followups/\(pending)")
        #expect(again.status == 409)
        #expect(try Admin.status(api, app: "fu", id: pending) == "cancelled")
        #expect(try listed("?status=cancelled") == [pending])

        let notDead = try api.admin("POST", "/v1/apps/fu/followups/\(other)/retry")
        #expect(notDead.status == 409)
        #expect(try Admin.status(api, app: "fu", id: other) == "pending")
        #expect(try api.admin("POST", "/v1/apps/fu/followups/\(pending)/retry").status == 409)
        #expect(try Admin.status(api, app: "fu", id: pending) == "cancelled")
        #expect(try api.admin("DELETE", "/v1/apps/fu/followups/\(dead)").status == 409)

        let dueBefore = try Admin.dueAt(api, app: "fu", id: dead)
        let retried = try api.admin("POST", "/v1/apps/fu/followups/\(dead)/retry")
        #expect(retried.status == 200)
        #expect(retried.json["status"] as? String == "pending")
        #expect(try Admin.status(api, app: "fu", id: dead) == "pending")
        #expect(try Admin.dueAt(api, app: "fu", id: dead) < dueBefore.addingTimeInterval(-3600))
        #expect(try api.admin("POST", "/v1/apps/fu/followups/\(dead)/retry").status == 409)
        #expect(try listed("?status=dead").isEmpty)
        #expect(try api.admin("POST", "/v1/apps/fu/followups/\(dead)/retry", json: #"{"now":true}"#).status == 422)

        for status in ["delivered", "running", "skipped"] {
            try Admin.setStatus(api, app: "fu", id: other, status)
            #expect(try api.admin("DELETE", "/v1/apps/fu/followups/\(other)").status == 409, "\(status)")
            #expect(try api.admin("POST", "/v1/apps/fu/followups/\(other)/retry").status == 409, "\(status)")
            #expect(try Admin.status(api, app: "fu", id: other) == status)
        }
        try Admin.setStatus(api, app: "fu", id: other, "retrying")
        #expect(try api.admin("DELETE", "/v1/apps/fu/followups/\(other)").status == 200)

        // A response shows its follow-ups with their attempts.
        let detail = try api.admin("GET", "/v1/apps/fu/responses/\(seeded.responseIDs[0])")
        #expect(detail.status == 200)
        let followUps = detail.json["followUps"] as? [[String: Any]] ?? []
        #expect(followUps.count == 2)
        #expect(followUps.allSatisfy { $0["attempts"] is [Any] })
    }

    @Test("history: filters and keyset paging of responses; the subject's current decision")
    func history() throws {
        let api = try TestAPI()
        let seeded = try Admin.seedFollowUps(api, app: "hist", responses: 5)
        let declined = try api.ingest(
            key: seeded.key,
            json: Admin.json([
                "actionIdentifier": "decline", "categoryIdentifier": "invite", "userInfo": ["eventId": "ev-declined"],
                "deviceToken": Admin.deviceToken(0), "responseId": "declined",
            ]))
        #expect(declined.status == 202)
        #expect(declined.json["outcome"] as? String == "unmatched")

        let pages = try Admin.pages(api, "/v1/apps/hist/responses", limit: 2)
        let ids = pages.flatMap { $0 }.compactMap { $0["id"] as? String }
        #expect(pages.map(\.count) == [2, 2, 2])
        #expect(Set(ids) == Set(seeded.responseIDs + [declined.json["id"] as? String ?? "?"]))
        #expect(ids.first == declined.json["id"] as? String, "newest first")

        func count(_ query: String) throws -> Int {
            let response = try api.admin("GET", "/v1/apps/hist/responses?\(query)")
            #expect(response.status == 200, "\(query)")
            return Admin.items(response).count
        }
        #expect(try count("subject=ev-0") == 1)
        #expect(try count("action=decline") == 1)
        #expect(try count("action=accept") == 5)
        #expect(try count("category=invite") == 6)
        #expect(try count("category=nope") == 0)
        #expect(try count("outcome=accepted") == 5)
        #expect(try count("outcome=unmatched") == 1)
        #expect(try count("since=2000-01-01T00:00:00Z") == 6)
        #expect(try count("until=2000-01-01T00:00:00Z") == 0)

        let subject = try api.admin("GET", "/v1/apps/hist/subjects/ev-1")
        #expect(subject.status == 200)
        let decisions = subject.json["decisions"] as? [[String: Any]] ?? []
        #expect(decisions.count == 1)
        #expect(decisions.first?["outcome"] as? String == "accepted")
        #expect(decisions.first?["responseId"] as? String == seeded.responseIDs[1])
        #expect(try api.admin("GET", "/v1/apps/hist/subjects/never").status == 404)
    }

    @Test("bad limit, cursor, outcome, status or time in a query are 400; good ones are 200")
    func badQueries() throws {
        let api = try TestAPI()
        _ = try Admin.seedFollowUps(api, app: "q", responses: 1)
        let lists = [
            "/v1/apps", "/v1/apps/q/categories", "/v1/apps/q/rules", "/v1/apps/q/responses", "/v1/apps/q/followups",
        ]
        let twoPartCursorOfOne = Data("x".utf8).base64EncodedString()
        for list in lists {
            for query in ["limit=0", "limit=501", "limit=abc", "limit=-1", "limit=1.5", "cursor=!!!", "cursor=%FF%FE"] {
                let response = try api.admin("GET", "\(list)?\(query)")
                #expect(response.status == 400, "\(list)?\(query) answered \(response.status)")
                #expect(response.headers["content-type"] == "application/problem+json")
            }
            for query in ["limit=1", "limit=500", ""] {
                #expect(try api.admin("GET", "\(list)?\(query)").status == 200, "\(list)?\(query)")
            }
        }
        for list in ["/v1/apps/q/rules", "/v1/apps/q/responses", "/v1/apps/q/followups"] {
            #expect(try api.admin("GET", "\(list)?cursor=\(twoPartCursorOfOne)").status == 400, "\(list)")
        }
        let bad = [
            "/v1/apps/q/responses?outcome=nope", "/v1/apps/q/responses?outcome=ACCEPTED",
            "/v1/apps/q/followups?status=nope", "/v1/apps/q/followups?status=Pending",
            "/v1/apps/q/responses?since=yesterday", "/v1/apps/q/responses?until=2020-13-01T00:00:00Z",
        ]
        for path in bad {
            #expect(try api.admin("GET", path).status == 400, "\(path)")
        }
        let good = [
            "/v1/apps/q/responses?outcome=accepted", "/v1/apps/q/followups?status=pending",
            "/v1/apps/q/responses?since=2020-01-01T00:00:00Z&until=2100-01-01T00:00:00Z",
        ]
        for path in good {
            #expect(try api.admin("GET", path).status == 200, "\(path)")
        }
    }

    @Test("ids that are not UUIDs (responses, keys, follow-ups, admin tokens) are 404, as are unknown UUIDs")
    func nonUUIDIDs() throws {
        let api = try TestAPI()
        _ = try Admin.seedFollowUps(api, app: "ids", responses: 1)
        for id in ["not-a-uuid", "1", "00000000-0000-0000-0000-00000000000g", UUID().uuidString.lowercased()] {
            let calls: [(String, String)] = [
                ("GET", "/v1/apps/ids/responses/\(id)"), ("DELETE", "/v1/apps/ids/keys/\(id)"),
                ("POST", "/v1/apps/ids/followups/\(id)/retry"), ("DELETE", "/v1/apps/ids/followups/\(id)"),
                ("DELETE", "/v1/admin-tokens/\(id)"),
            ]
            for (method, path) in calls {
                let response = try api.admin(method, path)
                #expect(response.status == 404, "\(method) \(path) answered \(response.status)")
            }
        }
        #expect(try api.count("SELECT count(*) AS n FROM api_keys WHERE revoked_at IS NOT NULL") == 0)
    }
}

/// Fixtures for the admin API tests.
private enum Admin: ResponseHelpers {
    struct Seeded {
        let key: String
        let responseIDs: [String]
        let followUpIDs: [String]
    }

    /// An app with a category `invite` (subject key `eventId`), a rule that accepts `accept` with a webhook
    /// and an APNs follow-up a day later, and `responses` accepted responses (subjects `ev-0`, `ev-1`, …).
    static func seedFollowUps(_ api: TestAPI, app: String, responses: Int) throws -> Seeded {
        let key = try api.createApp(app)
        let category = try api.admin(
            "PUT", "/v1/apps/\(app)/categories/invite",
            json: json([
                "actions": [["identifier": "accept", "title": "Accept"], ["identifier": "decline", "title": "No"]],
                "subjectKey": "eventId",
            ]))
        guard category.status == 201 else { throw TestClientError(description: "category: \(category.text)") }
        let rule = try api.admin(
            "POST", "/v1/apps/\(app)/rules",
            json: json([
                "id": "accept", "match": ["category": "invite", "action": "accept"], "handler": ["type": "accept"],
                "followUps": [
                    ["channel": "webhook", "delaySeconds": 86400, "url": "https://hooks.example.com/\(app)"],
                    [
                        "channel": "apns", "delaySeconds": 86400,
                        "payload": ["aps": ["alert": ["title": "Accepted", "body": "{{subject}}"]]],
                    ],
                ],
            ]))
        guard rule.status == 201 else { throw TestClientError(description: "rule: \(rule.text)") }
        var responseIDs: [String] = []
        var followUpIDs: [String] = []
        for n in 0..<responses {
            let answer = try api.ingest(
                key: key,
                json: json([
                    "actionIdentifier": "accept", "categoryIdentifier": "invite", "userInfo": ["eventId": "ev-\(n)"],
                    "deviceToken": deviceToken(n), "responseId": "\(app)-\(n)", "notificationIdentifier": "n-\(n)",
                ]))
            guard answer.status == 202, let id = answer.json["id"] as? String else {
                throw TestClientError(description: "ingest: \(answer.status) \(answer.text)")
            }
            responseIDs.append(id)
            followUpIDs += (answer.json["followUps"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
        }
        return Seeded(key: key, responseIDs: responseIDs, followUpIDs: followUpIDs)
    }

    /// Rows the app owns in every table with an `app_id` column, plus its `apps` row.
    static func ownedRows(_ api: TestAPI, app: String) throws -> Int {
        let tables = try api.query(
            """
            SELECT table_name::text AS name FROM information_schema.columns
            WHERE table_schema = current_schema() AND column_name = 'app_id'
            """
        ).map { try $0.decode("name", as: String.self) }
        var total = try api.count("SELECT count(*) AS n FROM apps WHERE id = \(app)")
        for table in tables {
            // Table names come from the catalog, never from input.
            let query = PostgresQuery(
                unsafeSQL: "SELECT count(*) AS n FROM \"\(table)\" WHERE app_id = $1", binds: [app])
            total += try api.count(query)
        }
        return total
    }

    static func setStatus(_ api: TestAPI, app: String, id: String, _ status: String) throws {
        let rows = try api.query(
            """
            UPDATE followups SET status = \(status),
                finished_at = CASE WHEN \(status) IN ('delivered', 'dead', 'cancelled', 'skipped') THEN now() END
            WHERE app_id = \(app) AND id = \(UUID(uuidString: id)) RETURNING id
            """
        )
        guard rows.count == 1 else { throw TestClientError(description: "no follow-up \(id)") }
    }

    static func status(_ api: TestAPI, app: String, id: String) throws -> String? {
        try api.query("SELECT status FROM followups WHERE app_id = \(app) AND id = \(UUID(uuidString: id))")
            .first?.decode("status", as: String.self)
    }

    static func dueAt(_ api: TestAPI, app: String, id: String) throws -> Date {
        try api.query("SELECT due_at FROM followups WHERE app_id = \(app) AND id = \(UUID(uuidString: id))")[0]
            .decode("due_at", as: Date.self)
    }

    static func ruleRow(_ api: TestAPI, _ id: String) throws -> String? {
        try api.query("SELECT md5(t::text) AS h FROM rules t WHERE t.id = \(id)").first?.decode("h", as: String.self)
    }

    /// Every page of a list, following `nextCursor` until it is null (at most 50 pages).
    static func pages(_ api: TestAPI, _ path: String, limit: Int) throws -> [[[String: Any]]] {
        var pages: [[[String: Any]]] = []
        var cursor: String?
        repeat {
            var url = "\(path)?limit=\(limit)"
            if let cursor { url += "&cursor=\(cursor)" }
            let response = try api.admin("GET", url)
            guard response.status == 200 else {
                throw TestClientError(description: "\(url) answered \(response.status): \(response.text)")
            }
            pages.append(items(response))
            cursor = response.json["nextCursor"] as? String
        } while cursor != nil && pages.count < 50
        return pages
    }

    static func deviceToken(_ n: Int) -> String {
        String(repeating: "0", count: 56) + String(format: "%08x", UInt32(n + 1))
    }

    static func isTime(_ value: Any?) -> Bool {
        guard let text = value as? String, text.hasSuffix("Z") else { return false }
        return Timestamp.parse(text) != nil
    }

}
