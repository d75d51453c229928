import ActionHookServer
import Foundation
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

/// F4: one app's credentials and paths never read or change another app's rows.
///
/// Two tenants A and B get the same kinds of objects (categories, rules, responses with follow-ups,
/// subject decisions, extra keys). Every route under `/v1/apps/{app}` is then called on A's path with
/// B's object ids: each answers 404 (PUT of a category creates A's own) and a digest of every row B
/// owns, in every table that has an `app_id`, stays the same.
@Suite("Tenant isolation (F4)", .serialized)
struct TenantIsolationTests {
    @Test("A's paths with B's object ids answer 404 on every app route and change none of B's rows")
    func crossTenantMatrix() throws {
        let api = try TestAPI()
        let a = try Isolation.seedTenant(api, "tenant-a")
        let b = try Isolation.seedTenant(api, "tenant-b")
        let baseline = try Isolation.snapshot(api, app: b.app)
        try Isolation.expectPopulated(baseline, app: b.app)

        // B's object ids by path parameter; more than one id means every one of them is tried.
        let bIDs: [String: [String]] = [
            "keyId": [b.keyID, b.extraKeyID], "category": [b.category], "rule": [b.rule],
            "responseId": [b.responseID], "subject": [b.subject], "deviceToken": [Isolation.deviceToken("\(b.app)-1")],
            "followUpId": [b.pendingFollowUpID, b.deadFollowUpID], "notificationId": [b.notificationID],
            "user": ["\(b.app)-user"],
        ]
        var covered = Set<String>()
        // A PUT of a category creates A's own category with B's id; it runs last so that the other
        // category routes still see no such category in A.
        let routes = Isolation.appRoutes(api).sorted {
            ($0.method == "PUT" && $0.pattern.hasSuffix("/categories/{category}") ? 1 : 0)
                < ($1.method == "PUT" && $1.pattern.hasSuffix("/categories/{category}") ? 1 : 0)
        }
        for route in routes where route.parameters.count > 1 {
            for name in route.parameters where name != "app" {
                guard bIDs[name] != nil else {
                    Issue.record("no B object id for {\(name)} in \(route); extend the matrix")
                    continue
                }
                covered.insert(name)
            }
            for path in Isolation.paths(route.pattern, app: a.app, values: bIDs) {
                let body = Isolation.body(for: route, path: path)
                var variants: [[(String, String)]] = [[]]
                if route.pattern.hasSuffix("/rules/{rule}") && route.method != "GET" {
                    variants.append([("If-Match", "\"1\"")])
                    variants.append([("If-Match", "*")])
                }
                for headers in variants {
                    let response = try api.admin(route.method, path, json: body, headers: headers)
                    if route.method == "PUT" && route.pattern.hasSuffix("/categories/{category}") {
                        // A PUT names A's own category with that id: it creates A's, never touches B's.
                        #expect(response.status == 201 || response.status == 200, "\(route.method) \(path)")
                        #expect(try Isolation.categoryCount(api, app: a.app, id: b.category) == 1)
                    } else if route.method == "PUT" && route.pattern.hasSuffix("/devices/{deviceToken}") {
                        // A PUT registers the token as A's own device; B's rows stay as they were (below).
                        #expect(response.status == 200, "\(route.method) \(path) answered \(response.status)")
                    } else {
                        #expect(
                            response.status == 404, "\(route.method) \(path) \(headers) answered \(response.status)")
                        #expect(response.headers["content-type"] == "application/problem+json")
                    }
                    #expect(
                        try Isolation.snapshot(api, app: b.app) == baseline,
                        "\(route.method) \(path) changed B's rows")
                }
            }
        }
        #expect(covered == Set(bIDs.keys), "app routes with object ids: \(covered.sorted())")

        // B's objects are still there and still B's: read them through B's own paths.
        #expect(try api.admin("GET", "/v1/apps/\(b.app)/rules/\(b.rule)").status == 200)
        #expect(try api.admin("GET", "/v1/apps/\(b.app)/categories/\(b.category)").status == 200)
        #expect(try api.admin("GET", "/v1/apps/\(b.app)/responses/\(b.responseID)").status == 200)
        #expect(try api.admin("GET", "/v1/apps/\(b.app)/subjects/\(b.subject)").status == 200)
        #expect(try api.call("GET", "/v1/categories", token: b.key).status == 200)
        // The retry on A's path did not revive B's dead follow-up; the cancel did not cancel B's pending one.
        #expect(try Isolation.followUpStatus(api, app: b.app, id: b.deadFollowUpID) == "dead")
        #expect(try Isolation.followUpStatus(api, app: b.app, id: b.pendingFollowUpID) == "pending")
        #expect(try api.admin("POST", "/v1/apps/\(b.app)/followups/\(b.deadFollowUpID)/retry").status == 200)
    }

    @Test("objects with the same id in A and B: A's writes change only A's rows")
    func sameIDsInBothTenants() throws {
        let api = try TestAPI()
        let a = try Isolation.seedTenant(api, "tenant-a")
        let b = try Isolation.seedTenant(api, "tenant-b")
        let baseline = try Isolation.snapshot(api, app: b.app)
        try Isolation.expectPopulated(baseline, app: b.app)
        let aBefore = try Isolation.snapshot(api, app: a.app)

        let category = Isolation.json([
            "actions": [["identifier": "changed", "title": "Changed"]], "subjectKey": "eventId",
        ])
        let put = try api.admin("PUT", "/v1/apps/\(a.app)/categories/shared", json: category)
        #expect(put.status == 200)
        let rule = Isolation.json([
            "id": "shared-rule", "description": "changed by A", "match": ["category": "shared"],
            "handler": ["type": "record"],
        ])
        let replaced = try api.admin("PUT", "/v1/apps/\(a.app)/rules/shared-rule", json: rule)
        #expect(replaced.status == 200)
        #expect(replaced.headers["etag"] == "\"2\"")
        #expect(try Isolation.snapshot(api, app: b.app) == baseline)
        #expect(try Isolation.snapshot(api, app: a.app) != aBefore)

        // B's versions are untouched: its shared rule is still at version 1 with no description.
        let bRule = try api.admin("GET", "/v1/apps/\(b.app)/rules/shared-rule")
        #expect(bRule.headers["etag"] == "\"1\"")
        #expect(bRule.json["description"] == nil)
        let bCategory = try api.admin("GET", "/v1/apps/\(b.app)/categories/shared")
        #expect((bCategory.json["actions"] as? [[String: Any]])?.first?["identifier"] as? String == "accept")

        // The shared subject: each app sees only its own decisions.
        let aSubject = try api.admin("GET", "/v1/apps/\(a.app)/subjects/ev-shared")
        #expect(aSubject.status == 200)
        let aDecisionResponses = ((aSubject.json["decisions"] as? [[String: Any]]) ?? []).compactMap {
            $0["responseId"] as? String
        }
        #expect(aDecisionResponses == [a.sharedSubjectResponseID])

        #expect(try api.admin("DELETE", "/v1/apps/\(a.app)/rules/shared-rule").status == 204)
        #expect(try api.admin("DELETE", "/v1/apps/\(a.app)/categories/shared").status == 204)
        #expect(try Isolation.snapshot(api, app: b.app) == baseline)
        #expect(try api.admin("GET", "/v1/apps/\(b.app)/rules/shared-rule").status == 200)
        #expect(try api.admin("GET", "/v1/apps/\(b.app)/categories/shared").status == 200)
        #expect(try api.admin("GET", "/v1/apps/\(a.app)/rules/shared-rule").status == 404)
    }

    @Test("A's lists, filters and dry runs show only A's objects")
    func listsShowOnlyTheirApp() throws {
        let api = try TestAPI()
        let a = try Isolation.seedTenant(api, "tenant-a")
        let b = try Isolation.seedTenant(api, "tenant-b")
        let baseline = try Isolation.snapshot(api, app: b.app)

        let lists: [(String, [String], [String])] = [
            ("categories", [a.category], [b.category]),
            ("rules", [a.rule], [b.rule]),
            ("responses", [a.responseID], [b.responseID]),
            ("followups", [a.pendingFollowUpID, a.deadFollowUpID], [b.pendingFollowUpID, b.deadFollowUpID]),
        ]
        for (name, own, others) in lists {
            let response = try api.admin("GET", "/v1/apps/\(a.app)/\(name)?limit=500")
            #expect(response.status == 200, "\(name)")
            for id in own { #expect(response.text.contains(id), "A's \(name) lack \(id)") }
            for id in others { #expect(!response.text.contains(id), "A's \(name) show B's \(id)") }
            #expect(!response.text.contains(b.app), "A's \(name) mention \(b.app)")
        }
        let filtered = try api.admin("GET", "/v1/apps/\(a.app)/responses?subject=\(b.subject)")
        #expect(filtered.status == 200)
        #expect(Isolation.items(filtered).isEmpty)
        let ownFiltered = try api.admin("GET", "/v1/apps/\(b.app)/responses?subject=\(b.subject)")
        #expect(Isolation.items(ownFiltered).count == 1)

        // A dry run on A's path never uses B's rules; the same body on B's path does.
        let probe = Isolation.json([
            "actionIdentifier": "accept", "categoryIdentifier": b.category, "userInfo": ["eventId": "x"],
        ])
        let onA = try api.admin("POST", "/v1/apps/\(a.app)/rules/test", json: probe)
        #expect(onA.status == 200)
        #expect(onA.json["matched"] as? Bool == false)
        let onB = try api.admin("POST", "/v1/apps/\(b.app)/rules/test", json: probe)
        #expect(onB.json["matched"] as? Bool == true)
        #expect(onB.json["ruleId"] as? String == b.rule)
        #expect(try Isolation.snapshot(api, app: b.app) == baseline)
    }

    @Test("ingest with A's key: A's categories only, and a response naming B is stored under A")
    func ingestKeyIsTheTenant() throws {
        let api = try TestAPI()
        let a = try Isolation.seedTenant(api, "tenant-a")
        let b = try Isolation.seedTenant(api, "tenant-b")
        let baseline = try Isolation.snapshot(api, app: b.app)

        let categories = try api.call("GET", "/v1/categories", token: a.key)
        #expect(categories.status == 200)
        let identifiers = Set(Isolation.items(categories).compactMap { $0["identifier"] as? String })
        #expect(identifiers == [a.category, "shared"])
        let bCategories = try api.call("GET", "/v1/categories", token: b.key)
        #expect(Set(Isolation.items(bCategories).compactMap { $0["identifier"] as? String }) == [b.category, "shared"])

        // Everything in the body points at B; the key says A.
        let body = Isolation.json([
            "actionIdentifier": "accept", "categoryIdentifier": b.category,
            "userInfo": [
                "app": b.app, "appId": b.app, "app_id": b.app, "eventId": b.subject,
                "aps": ["category": b.category],
            ],
            "deviceToken": Isolation.deviceToken("a-naming-b"), "responseId": "naming-b",
        ])
        let stored = try api.ingest(key: a.key, json: body)
        #expect(stored.status == 202)
        #expect(stored.json["outcome"] as? String == "unmatched")
        #expect(stored.json["ruleId"] is NSNull)
        let id = try #require(stored.json["id"] as? String)
        let owners = try api.query("SELECT app_id FROM responses WHERE id = \(UUID(uuidString: id))")
        #expect(owners.count == 1)
        #expect(try owners.first?.decode("app_id", as: String.self) == a.app)
        #expect(try api.admin("GET", "/v1/apps/\(a.app)/responses/\(id)").status == 200)
        #expect(try api.admin("GET", "/v1/apps/\(b.app)/responses/\(id)").status == 404)

        // A body that tries to name the app itself is refused, and nothing is stored.
        let before = try Isolation.snapshot(api, app: a.app)
        let named = Isolation.json(["actionIdentifier": "accept", "appId": b.app, "responseId": "named-app"])
        let refused = try api.ingest(key: a.key, json: named)
        #expect(refused.status == 422)
        #expect(Isolation.pointers(refused).contains("/appId"))
        #expect(try Isolation.snapshot(api, app: a.app) == before)

        #expect(try Isolation.snapshot(api, app: b.app) == baseline)
    }

    @Test("an app id that does not exist answers 404 on every app route and creates nothing")
    func unknownAppIsNotFound() throws {
        let api = try TestAPI()
        let a = try Isolation.seedTenant(api, "tenant-a")
        let aBefore = try Isolation.snapshot(api, app: a.app)
        let values: [String: [String]] = [
            "keyId": [a.keyID], "category": [a.category], "rule": [a.rule], "responseId": [a.responseID],
            "subject": [a.subject], "followUpId": [a.deadFollowUpID],
            "deviceToken": [Isolation.deviceToken("\(a.app)-1")],
        ]
        let routes = Isolation.appRoutes(api)
        #expect(routes.count >= 15, "app routes: \(routes.map(\.description))")
        let appCount = try api.count("SELECT count(*) AS n FROM apps")
        for missing in ["no-such-app", String(repeating: "x", count: 65), "tenant-A"] {
            for route in routes {
                for path in Isolation.paths(route.pattern, app: missing, values: values) {
                    let response = try api.admin(route.method, path, json: Isolation.body(for: route, path: path))
                    #expect(response.status == 404, "\(route.method) \(path) answered \(response.status)")
                }
            }
        }
        #expect(try api.count("SELECT count(*) AS n FROM apps") == appCount)
        #expect(try api.count("SELECT count(*) AS n FROM api_keys WHERE app_id <> \(a.app)") == 0)
        #expect(try Isolation.snapshot(api, app: a.app) == aBefore)
    }

    @Test(
        "ingest keys never authenticate admin routes (401; 403 on the send routes), even on their own app; admin tokens do"
    )
    func ingestKeysOnAdminRoutes() throws {
        let api = try TestAPI()
        let c = try Isolation.seedTenant(api, "tenant-c")
        let token = try api.admin("POST", "/v1/admin-tokens", json: #"{"name":"spare"}"#)
        let tokenID = try #require(token.json["id"] as? String)
        let fixture = Isolation.AdminFixture(tenant: c, tokenID: tokenID)

        let publicRoutes: Set<String> = [
            "POST /v1/responses", "GET /v1/categories", "GET /healthz", "GET /readyz", "GET /metrics",
            // The app registers and signs out its own device with its ingest key (IdentityTests).
            "PUT /v1/devices/{deviceToken}", "DELETE /v1/devices/{deviceToken}",
            // The console's static files: the same for everyone, holding no data (its pages call the admin API).
            "GET /console", "GET /console/{asset}",
        ]
        let all = api.service.routes.filter { !$0.hasPrefix("HEAD ") }
        let adminRoutes = Isolation.ordered(all.filter { !publicRoutes.contains($0) }.map(Isolation.Route.init))
        #expect(adminRoutes.count == all.count - publicRoutes.count, "public routes: \(publicRoutes.sorted())")
        #expect(adminRoutes.count >= 20)

        let before = try Isolation.snapshot(api, app: c.app)
        let tokensBefore = try api.count("SELECT count(*) AS n FROM admin_tokens")
        for route in adminRoutes {
            guard let call = fixture.call(for: route) else {
                Issue.record("no positive-control fixture for \(route); extend AdminFixture")
                continue
            }
            for credential in [c.key, "", "ahk_not-a-key"] {
                let response = try api.call(
                    route.method, call.path, token: credential.isEmpty ? nil : credential, json: call.body,
                    headers: call.headers)
                // The send routes take an app's server key: a valid ingest key there is the wrong scope (403).
                let senderRoute =
                    route.pattern.contains("/notifications") || route.pattern.hasSuffix("/devices")
                    || (route.method == "PUT" && route.pattern.hasSuffix("/devices/{deviceToken}"))
                    || (route.method == "GET" && route.pattern.hasSuffix("/users/{user}"))
                let wrongScope = senderRoute && credential == c.key
                #expect(
                    response.status == (wrongScope ? 403 : 401),
                    "\(route) with an ingest key answered \(response.status)")
                if !wrongScope { #expect(response.headers["www-authenticate"]?.hasPrefix("Bearer") == true) }
            }
        }
        #expect(try Isolation.snapshot(api, app: c.app) == before)
        #expect(try api.count("SELECT count(*) AS n FROM admin_tokens") == tokensBefore)
        #expect(try api.count("SELECT count(*) AS n FROM apps") == 1)

        // Positive controls: the very same requests with the bootstrap admin token succeed.
        for route in adminRoutes {
            guard let call = fixture.call(for: route) else { continue }
            let response = try api.admin(route.method, call.path, json: call.body, headers: call.headers)
            #expect(response.status == call.expected, "\(route) with the admin token answered \(response.status)")
        }
        #expect(try api.count("SELECT count(*) AS n FROM apps WHERE id = \(c.app)") == 0)
    }
}

/// Fixtures and checks for the isolation tests.
private enum Isolation: ResponseHelpers {
    /// What one seeded tenant owns.
    struct Tenant {
        let app: String
        let key: String
        let keyID: String
        let extraKeyID: String
        let category: String
        let rule: String
        let responseID: String
        let sharedSubjectResponseID: String
        let subject: String
        let pendingFollowUpID: String
        let deadFollowUpID: String
        let notificationID: String
    }

    /// A route from `service.routes`: method, pattern and its path parameters.
    struct Route: CustomStringConvertible {
        let method: String
        let pattern: String

        init(_ text: String) {
            let parts = text.split(separator: " ", maxSplits: 1).map(String.init)
            method = parts[0]
            pattern = parts.count > 1 ? parts[1] : ""
        }

        var parameters: [String] {
            pattern.split(separator: "/").compactMap { part in
                part.hasPrefix("{") && part.hasSuffix("}") ? String(part.dropFirst().dropLast()) : nil
            }
        }

        var description: String { "\(method) \(pattern)" }
    }

    static func appRoutes(_ api: TestAPI) -> [Route] {
        api.service.routes.map(Route.init).filter { $0.method != "HEAD" && $0.pattern.hasPrefix("/v1/apps/{app}") }
    }

    /// Non-DELETE routes first, DELETEs after, the app's own DELETE last.
    static func ordered(_ routes: [Route]) -> [Route] {
        func rank(_ route: Route) -> Int {
            if route.method == "DELETE" && route.pattern == "/v1/apps/{app}" { return 2 }
            return route.method == "DELETE" ? 1 : 0
        }
        return routes.enumerated().sorted { (rank($0.element), $0.offset) < (rank($1.element), $1.offset) }.map(
            \.element)
    }

    /// Every concrete path for `pattern`: `{app}` is `app`, other parameters take each of their values.
    static func paths(_ pattern: String, app: String, values: [String: [String]]) -> [String] {
        var results = [""]
        for part in pattern.split(separator: "/") {
            let choices: [String]
            if part == "{app}" {
                choices = [app]
            } else if part.hasPrefix("{") && part.hasSuffix("}") {
                choices = values[String(part.dropFirst().dropLast())] ?? ["missing-fixture"]
            } else {
                choices = [String(part)]
            }
            results = results.flatMap { prefix in choices.map { prefix + "/" + $0 } }
        }
        return results
    }

    /// A valid body for the route, so that only the path can make it fail.
    static func body(for route: Route, path: String) -> String? {
        let last = path.split(separator: "/").last.map(String.init) ?? ""
        switch (route.method, route.pattern) {
        case ("PUT", let pattern) where pattern.hasSuffix("/rules/{rule}"):
            return json(["id": last, "handler": ["type": "record"]])
        case ("PUT", let pattern) where pattern.hasSuffix("/categories/{category}"):
            return json(["actions": [["identifier": "accept", "title": "Accept"]]])
        case ("POST", "/v1/apps/{app}/rules"):
            return json(["id": "new-rule", "handler": ["type": "record"]])
        case ("POST", "/v1/apps/{app}/rules/test"):
            return json(["actionIdentifier": "accept"])
        case ("PATCH", "/v1/apps/{app}"):
            return json(["name": "renamed"])
        case ("PUT", "/v1/apps/{app}/devices/{deviceToken}"):
            return json(["user": "someone", "environment": "production"])
        default:
            return nil
        }
    }

    /// A request per admin route on tenant C, with the status the admin token gets for it.
    struct AdminFixture {
        struct Call {
            let path: String
            let body: String?
            var headers: [(String, String)] = []
            let expected: Int
        }

        let tenant: Tenant
        let tokenID: String

        func call(for route: Route) -> Call? {
            let app = "/v1/apps/\(tenant.app)"
            switch (route.method, route.pattern) {
            case ("POST", "/v1/apps"):
                return Call(path: "/v1/apps", body: json(["id": "tenant-d", "name": "D"]), expected: 201)
            case ("GET", "/v1/apps"):
                return Call(path: "/v1/apps", body: nil, expected: 200)
            case ("GET", "/v1/apps/{app}"):
                return Call(path: app, body: nil, expected: 200)
            case ("PATCH", "/v1/apps/{app}"):
                return Call(path: app, body: json(["name": "renamed"]), expected: 200)
            case ("DELETE", "/v1/apps/{app}"):
                return Call(path: app, body: nil, expected: 204)
            case ("POST", "/v1/apps/{app}/keys"):
                return Call(path: app + "/keys", body: nil, expected: 201)
            case ("DELETE", "/v1/apps/{app}/keys/{keyId}"):
                return Call(path: app + "/keys/\(tenant.extraKeyID)", body: nil, expected: 204)
            case ("POST", "/v1/admin-tokens"):
                return Call(path: "/v1/admin-tokens", body: json(["name": "another"]), expected: 201)
            case ("GET", "/v1/admin-tokens"):
                return Call(path: "/v1/admin-tokens", body: nil, expected: 200)
            case ("DELETE", "/v1/admin-tokens/{tokenId}"):
                return Call(path: "/v1/admin-tokens/\(tokenID)", body: nil, expected: 204)
            case ("GET", "/v1/apps/{app}/categories"):
                return Call(path: app + "/categories", body: nil, expected: 200)
            case ("GET", "/v1/apps/{app}/categories/{category}"):
                return Call(path: app + "/categories/\(tenant.category)", body: nil, expected: 200)
            case ("PUT", "/v1/apps/{app}/categories/{category}"):
                return Call(
                    path: app + "/categories/\(tenant.category)",
                    body: json(["actions": [["identifier": "accept", "title": "Yes"]], "subjectKey": "eventId"]),
                    expected: 200)
            case ("DELETE", "/v1/apps/{app}/categories/{category}"):
                return Call(path: app + "/categories/\(tenant.category)", body: nil, expected: 204)
            case ("POST", "/v1/apps/{app}/rules"):
                return Call(
                    path: app + "/rules", body: json(["id": "another-rule", "handler": ["type": "record"]]),
                    expected: 201)
            case ("GET", "/v1/apps/{app}/rules"):
                return Call(path: app + "/rules", body: nil, expected: 200)
            case ("GET", "/v1/apps/{app}/rules/{rule}"):
                return Call(path: app + "/rules/\(tenant.rule)", body: nil, expected: 200)
            case ("PUT", "/v1/apps/{app}/rules/{rule}"):
                return Call(
                    path: app + "/rules/\(tenant.rule)",
                    body: json(["id": tenant.rule, "handler": ["type": "decline"]]), headers: [("If-Match", "\"1\"")],
                    expected: 200)
            case ("DELETE", "/v1/apps/{app}/rules/{rule}"):
                return Call(path: app + "/rules/\(tenant.rule)", body: nil, expected: 204)
            case ("GET", "/v1/apps/{app}/config"):
                return Call(path: app + "/config", body: nil, expected: 200)
            case ("PUT", "/v1/apps/{app}/config"):
                // A dry run, so the routes after it still find the tenant's category and rule.
                return Call(path: app + "/config?dryRun=true", body: #"{"categories":[],"rules":[]}"#, expected: 200)
            case ("POST", "/v1/apps/{app}/rules/test"):
                return Call(path: app + "/rules/test", body: json(["actionIdentifier": "accept"]), expected: 200)
            case ("GET", "/v1/apps/{app}/responses"):
                return Call(path: app + "/responses", body: nil, expected: 200)
            case ("GET", "/v1/apps/{app}/responses/{responseId}"):
                return Call(path: app + "/responses/\(tenant.responseID)", body: nil, expected: 200)
            case ("GET", "/v1/apps/{app}/subjects/{subject}"):
                return Call(path: app + "/subjects/\(tenant.subject)", body: nil, expected: 200)
            case ("DELETE", "/v1/apps/{app}/subjects/{subject}"):
                // The shared subject's reply: the pending follow-up cancelled below belongs to the other one.
                return Call(path: app + "/subjects/ev-shared", body: nil, expected: 200)
            case ("DELETE", "/v1/apps/{app}/devices/{deviceToken}"):
                return Call(
                    path: app + "/devices/\(Isolation.deviceToken("\(tenant.app)-2"))", body: nil, expected: 200)
            case ("PUT", "/v1/apps/{app}/devices/{deviceToken}"):
                return Call(
                    path: app + "/devices/\(Isolation.deviceToken("\(tenant.app)-9"))",
                    body: json(["user": "fixture-user", "environment": "sandbox"]), expected: 200)
            case ("GET", "/v1/apps/{app}/devices"):
                return Call(path: app + "/devices", body: nil, expected: 200)
            case ("GET", "/v1/apps/{app}/users/{user}"):
                // No user is registered in the fixture: the admin token gets past authentication to the 404.
                return Call(path: app + "/users/nobody", body: nil, expected: 404)
            case ("DELETE", "/v1/apps/{app}/users/{user}"):
                return Call(path: app + "/users/nobody", body: nil, expected: 404)
            case ("GET", "/v1/apps/{app}/followups"):
                return Call(path: app + "/followups?status=pending", body: nil, expected: 200)
            case ("POST", "/v1/apps/{app}/followups/{followUpId}/retry"):
                return Call(path: app + "/followups/\(tenant.deadFollowUpID)/retry", body: nil, expected: 200)
            case ("DELETE", "/v1/apps/{app}/followups/{followUpId}"):
                return Call(path: app + "/followups/\(tenant.pendingFollowUpID)", body: nil, expected: 200)
            case ("POST", "/v1/apps/{app}/notifications"):
                return Call(
                    path: app + "/notifications",
                    body: json(["to": [Isolation.deviceToken("\(tenant.app)-3")], "aps": ["alert": "Hi"]]),
                    expected: 202)
            case ("GET", "/v1/apps/{app}/notifications"):
                return Call(path: app + "/notifications?status=pending", body: nil, expected: 200)
            case ("GET", "/v1/apps/{app}/notifications/{notificationId}"):
                return Call(path: app + "/notifications/\(tenant.notificationID)", body: nil, expected: 200)
            case ("GET", "/v1/apps/{app}/stats"):
                return Call(path: app + "/stats?window=24h", body: nil, expected: 200)
            default:
                return nil
            }
        }
    }

    /// An app with keys, categories, rules, two stored responses with follow-ups (one dead), decisions.
    static func seedTenant(_ api: TestAPI, _ app: String) throws -> Tenant {
        let created = try api.admin(
            "POST", "/v1/apps",
            json: json(["id": app, "name": app, "webhook": ["url": "https://hooks.example.com/\(app)"]]))
        guard created.status == 201, let ingestKey = created.json["ingestKey"] as? [String: Any],
            let key = ingestKey["secret"] as? String, let keyID = ingestKey["id"] as? String
        else { throw TestClientError(description: "creating \(app) answered \(created.status): \(created.text)") }
        let extra = try api.admin("POST", "/v1/apps/\(app)/keys")
        guard extra.status == 201, let extraKeyID = extra.json["id"] as? String else {
            throw TestClientError(description: "creating a key for \(app) answered \(extra.status)")
        }

        let category = "\(app)-cat"
        let categoryBody = json([
            "actions": [["identifier": "accept", "title": "Accept"], ["identifier": "decline", "title": "Decline"]],
            "subjectKey": "eventId",
        ])
        for id in [category, "shared"] {
            let put = try api.admin("PUT", "/v1/apps/\(app)/categories/\(id)", json: categoryBody)
            guard put.status == 201 else {
                throw TestClientError(description: "PUT category \(id) answered \(put.status): \(put.text)")
            }
        }
        let rule = "\(app)-rule"
        let followUps: [[String: Any]] = [
            ["channel": "webhook", "delaySeconds": 86400, "url": "https://hooks.example.com/\(app)/accepted"],
            [
                "channel": "apns", "delaySeconds": 86400,
                "payload": ["aps": ["alert": ["title": "Accepted", "body": "{{userInfo.eventId}}"]]],
            ],
        ]
        let rules: [[String: Any]] = [
            [
                "id": rule, "priority": 10, "match": ["category": category, "action": "accept"],
                "handler": ["type": "accept"], "followUps": followUps,
            ],
            ["id": "shared-rule", "match": ["category": "shared"], "handler": ["type": "record"]],
        ]
        for body in rules {
            let post = try api.admin("POST", "/v1/apps/\(app)/rules", json: json(body))
            guard post.status == 201 else {
                throw TestClientError(description: "POST rule answered \(post.status): \(post.text)")
            }
        }

        func ingest(_ n: Int, subject: String) throws -> (String, [String]) {
            let body = json([
                "actionIdentifier": "accept", "categoryIdentifier": category,
                "notificationIdentifier": "\(app)-notification-\(n)",
                "userInfo": ["eventId": subject, "aps": ["category": category]],
                "deviceToken": deviceToken("\(app)-\(n)"), "responseId": "\(app)-response-\(n)",
            ])
            let answer = try api.ingest(key: key, json: body)
            guard answer.status == 202, let id = answer.json["id"] as? String,
                let followUps = answer.json["followUps"] as? [[String: Any]], followUps.count == 2
            else { throw TestClientError(description: "ingest for \(app) answered \(answer.status): \(answer.text)") }
            return (id, followUps.compactMap { $0["id"] as? String })
        }
        let subject = "ev-\(app)"
        let (responseID, followUps1) = try ingest(1, subject: subject)
        let (sharedResponseID, followUps2) = try ingest(2, subject: "ev-shared")
        let dead = followUps2[0]
        let marked = try api.query(
            "UPDATE followups SET status = 'dead', finished_at = now() WHERE app_id = \(app) AND id = \(UUID(uuidString: dead)) RETURNING id"
        )
        guard marked.count == 1 else { throw TestClientError(description: "could not mark \(dead) dead") }
        // A sent notification, answered by the first device (so a reply, its push and a no-reply step exist).
        let sent = try api.admin(
            "POST", "/v1/apps/\(app)/notifications",
            json: json([
                "to": [["deviceToken": deviceToken("\(app)-1"), "recipient": "\(app)-user"]], "category": category,
                "aps": ["alert": "Coming?"], "subject": subject,
                "onNoReply": [["afterSeconds": 86400, "followUps": [["type": "remind"]]]],
            ]))
        guard sent.status == 202, let notificationID = sent.json["id"] as? String else {
            throw TestClientError(description: "sending for \(app) answered \(sent.status): \(sent.text)")
        }
        return Tenant(
            app: app, key: key, keyID: keyID, extraKeyID: extraKeyID, category: category, rule: rule,
            responseID: responseID, sharedSubjectResponseID: sharedResponseID, subject: subject,
            pendingFollowUpID: followUps1[0], deadFollowUpID: dead, notificationID: notificationID)
    }

    /// `count:md5` of every row the app owns, per table: `apps` by id, every table with an `app_id` column.
    static func snapshot(_ api: TestAPI, app: String) throws -> [String: String] {
        let tables = try api.query(
            """
            SELECT table_name::text AS name FROM information_schema.columns
            WHERE table_schema = current_schema() AND column_name = 'app_id'
                -- A partition's rows are its parent's; partitions come and go with the maintenance.
                AND NOT (SELECT c.relispartition FROM pg_class c
                    WHERE c.oid = (quote_ident(table_schema) || '.' || quote_ident(table_name))::regclass)
            ORDER BY table_name
            """
        ).map { try $0.decode("name", as: String.self) }
        var result: [String: String] = [:]
        for table in tables + ["apps"] {
            let column = table == "apps" ? "id" : "app_id"
            // Table names come from the catalog, never from input.
            let query = PostgresQuery(
                unsafeSQL: """
                    SELECT count(*)::text || ':' || md5(coalesce(string_agg(t::text, ',' ORDER BY t::text), '')) AS h
                    FROM "\(table)" t WHERE t.\(column) = $1
                    """, binds: [app])
            result[table] = try api.query(query)[0].decode("h", as: String.self)
        }
        return result
    }

    /// The snapshot covers rows in the tables the matrix could touch (so comparing it can fail).
    static func expectPopulated(_ snapshot: [String: String], app: String) throws {
        for table in ["apps", "api_keys", "categories", "rules", "responses", "followups", "notifications"] {
            let count = snapshot[table].flatMap { Int($0.split(separator: ":")[0]) } ?? 0
            #expect(count > 0, "\(app) has no rows in \(table)")
        }
    }

    static func categoryCount(_ api: TestAPI, app: String, id: String) throws -> Int {
        try api.count("SELECT count(*) AS n FROM categories WHERE app_id = \(app) AND id = \(id)")
    }

    static func followUpStatus(_ api: TestAPI, app: String, id: String) throws -> String? {
        try api.query("SELECT status FROM followups WHERE app_id = \(app) AND id = \(UUID(uuidString: id))")
            .first?.decode("status", as: String.self)
    }

    /// A stable 64-digit hex device token for a seed.
    static func deviceToken(_ seed: String) -> String {
        var bytes = Array(seed.utf8)
        while bytes.count < 32 { bytes.append(UInt8(bytes.count)) }
        return bytes.prefix(32).map { String(format: "%02x", $0) }.joined()
    }

}
