import ActionHookServer
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

/// Sends to people: devices the backend registers under its users (with their APNs environment), sends
/// `to` users, a dead token revived by a newer registration, and a user erased. From outside: HTTP and two
/// APNs stand-ins, one per environment.
@Suite("Users and their registered devices: sends to people", .serialized)
struct UserSendTests {
    final class Bed: @unchecked Sendable {
        // @unchecked: immutable after init; its parts are thread-safe.
        let production: APNsStandIn
        let sandbox: APNsStandIn
        let api: TestAPI
        let ingestKey: String
        let serverKey: String
        let app = "people"

        init() throws {
            let production = try APNsStandIn()
            let sandbox = try APNsStandIn(sharingKeysOf: production)
            self.production = production
            self.sandbox = sandbox
            api = try TestAPI {
                production.configure(&$0)
                $0.apnsSandboxURL = sandbox.baseURL
                $0.deviceRateLimitPerSecond = 10_000
            }
            ingestKey = try api.createApp(app, extra: production.appSettingsJSON)
            let category = try api.admin(
                "PUT", "/v1/apps/\(app)/categories/INVITE",
                json: #"{"actions": [{"identifier": "ACCEPT", "title": "Accept"}], "subjectKey": "eventId"}"#)
            try #require([200, 201].contains(category.status), "\(category.text)")
            try Hooks.saveRule(
                api, app: app,
                #"{"id": "accept", "match": {"category": "INVITE", "action": "ACCEPT"}, "handler": {"type": "accept"}}"#
            )
            serverKey = try #require(
                try api.admin("POST", "/v1/apps/\(app)/keys", json: #"{"scope": "send"}"#).json["secret"] as? String)
        }

        deinit {
            sandbox.stop()
            production.stop()
        }

        func call(_ method: String, _ path: String, json: String? = nil) throws -> TestResponse {
            try api.call(method, "/v1/apps/\(app)" + path, token: serverKey, json: json)
        }

        @discardableResult
        func register(_ token: String, user: String?, environment: String) throws -> [String: Any] {
            let user = user.map { #""user": "\#($0)", "# } ?? ""
            let answer = try call(
                "PUT", "/devices/\(token)",
                json:
                    #"{\#(user)"environment": "\#(environment)", "locale": "en_GB", "timeZone": "Europe/London", "appVersion": "2.1", "osVersion": "18.1", "model": "iPhone17,1"}"#
            )
            try #require(answer.status == 200, "register: \(answer.status) \(answer.text)")
            return answer.json
        }

        func send(_ json: String, status: Int = 202) throws -> [String: Any] {
            let answer = try call("POST", "/notifications", json: json)
            try #require(answer.status == status, "send: \(answer.status) \(answer.text)")
            return answer.json
        }

        func waitFor(_ notification: String, kind: String, count: Int) async throws {
            let deadline = Date().addingTimeInterval(30)
            while true {
                let done = try api.count(
                    """
                    SELECT count(*) AS n FROM followups WHERE notification_id = \(UUID(uuidString: notification)!)
                        AND kind = \(kind) AND status = 'delivered'
                    """)
                if done >= count { return }
                try #require(Date() < deadline, "\(kind) follow-ups of \(notification): \(done) of \(count) delivered")
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    @Test(
        "two users of two devices each, one sandbox and one production: four pushes, each from its own environment; the first answer replaces the other three"
    )
    func sendToUsers() async throws {
        let bed = try Bed()
        let (a1, a2, b1, b2) = (
            APNsStandIn.deviceToken(), APNsStandIn.deviceToken(), APNsStandIn.deviceToken(), APNsStandIn.deviceToken()
        )
        let registered = try bed.register(a1, user: "alice", environment: "sandbox")
        #expect(registered["user"] as? String == "alice")
        #expect(registered["status"] as? String == "active")
        #expect(registered["environment"] as? String == "sandbox")
        #expect(registered["model"] as? String == "iPhone17,1")
        try bed.register(a2, user: "alice", environment: "production")
        try bed.register(b1, user: "bob", environment: "production")
        try bed.register(b2, user: "bob", environment: "sandbox")
        // An anonymous device is never reached through a user.
        try bed.register(APNsStandIn.deviceToken(), user: nil, environment: "production")
        let alice = try bed.call("GET", "/users/alice")
        #expect(
            Set((alice.json["devices"] as? [[String: Any]] ?? []).compactMap { $0["deviceToken"] as? String }) == [
                a1, a2,
            ])

        let sent = try bed.send(
            #"{"to": [{"user": "alice"}, {"user": "bob"}], "category": "INVITE", "aps": {"alert": "Dinner?"}, "userInfo": {"eventId": "7"}, "replaceOnAnswer": true}"#
        )
        let id = try #require(sent["id"] as? String)
        let devices = try #require(sent["devices"] as? [[String: Any]])
        #expect(Set(devices.compactMap { $0["deviceToken"] as? String }) == [a1, a2, b1, b2])
        for device in devices {
            let token = device["deviceToken"] as? String
            #expect(device["user"] as? String == ([a1, a2].contains(token) ? "alice" : "bob"))
            #expect(device["recipient"] as? String == device["user"] as? String)
            #expect(device["environment"] as? String == ([a1, b2].contains(token) ? "sandbox" : "production"))
        }
        try await bed.waitFor(id, kind: "push", count: 4)
        // Each push went to its device's environment, and only there.
        for token in [a1, b2] {
            #expect(try bed.sandbox.requests(token: token).count >= 1)
            #expect(try bed.production.requests(token: token).isEmpty)
        }
        for token in [a2, b1] {
            #expect(try bed.production.requests(token: token).count >= 1)
            #expect(try bed.sandbox.requests(token: token).isEmpty)
        }

        // Alice answers on her production phone: the other three devices get the replacing push, each in
        // its own environment.
        let push = try #require(try bed.production.requests(token: a2).first?.payloadObject)
        let body = try JSONSerialization.data(withJSONObject: [
            "actionIdentifier": "ACCEPT", "deviceToken": a2, "userInfo": push,
            "responseId": UUID().uuidString.lowercased(),
        ])
        let answer = try bed.api.ingest(key: bed.ingestKey, json: String(decoding: body, as: UTF8.self))
        #expect(answer.status == 202)
        #expect(answer.json["outcome"] as? String == "accepted")
        #expect(answer.json["recipient"] as? String == "alice")
        try await bed.waitFor(id, kind: "replace", count: 3)
        #expect(try bed.sandbox.requests(token: a1).count == 2)
        #expect(try bed.sandbox.requests(token: b2).count == 2)
        #expect(try bed.production.requests(token: b1).count == 2)
        #expect(try bed.production.requests(token: a2).count == 1)
    }

    @Test(
        "who answered: a reply proving another user than the device's is stored but answers nothing; the device's user answers, verified, in the answer, the receipt and the webhook body"
    )
    func verifiedAnswers() async throws {
        let bed = try Bed()
        let mint = UserTokenMint.es256(kid: "backend")
        let patched = try bed.api.admin(
            "PATCH", "/v1/apps/\(bed.app)", json: #"{"identity": {"mode": "optional", "keys": [\#(mint.keyJSON)]}}"#)
        try #require(patched.status == 200, "\(patched.text)")
        let phone = APNsStandIn.deviceToken()
        try bed.register(phone, user: "alice", environment: "production")
        let sent = try bed.send(#"{"to": [{"user": "alice"}], "category": "INVITE", "aps": {"alert": "Dinner?"}}"#)
        let id = try #require(sent["id"] as? String)
        try await bed.waitFor(id, kind: "push", count: 1)
        let push = try #require(try bed.production.requests(token: phone).first?.payloadObject)
        func reply(_ token: String?) throws -> TestResponse {
            let body = try JSONSerialization.data(withJSONObject: [
                "actionIdentifier": "ACCEPT", "deviceToken": phone, "userInfo": push,
                "responseId": UUID().uuidString.lowercased(),
            ])
            return try bed.api.ingest(
                key: bed.ingestKey, json: String(decoding: body, as: UTF8.self),
                headers: token.map { [("ActionHook-User-Token", $0)] } ?? [])
        }
        // Bob signed in on Alice's phone (without registering it): his reply is his, and answers nothing.
        let bobs = try reply(try mint.token(user: "bob", app: bed.app))
        #expect(bobs.status == 202)
        #expect((bobs.json["user"] as? [String: Any])?["id"] as? String == "bob")
        #expect(try bed.api.count("SELECT count(*) AS n FROM notifications WHERE answered_at IS NOT NULL") == 0)
        // Alice's token: the answer, verified.
        let alices = try reply(try mint.token(user: "alice", app: bed.app))
        #expect(alices.json["outcome"] as? String == "accepted")
        #expect((alices.json["user"] as? [String: Any])?["id"] as? String == "alice")
        #expect((alices.json["user"] as? [String: Any])?["verified"] as? Bool == true)
        #expect(try bed.api.count("SELECT count(*) AS n FROM notifications WHERE answered_at IS NOT NULL") == 1)
        // A reply without a token names the device's user, unverified.
        let anonymous = try reply(nil)
        #expect((anonymous.json["user"] as? [String: Any])?["id"] as? String == "alice")
        #expect((anonymous.json["user"] as? [String: Any])?["verified"] as? Bool == false)
        let receipt = try bed.call("GET", "/notifications/\(id)")
        let answer = try #require(receipt.json["answer"] as? [String: Any])
        #expect((answer["user"] as? [String: Any])?["verified"] as? Bool == true)
        let others =
            (receipt.json["otherReplies"] as? [[String: Any]] ?? [])
            + (receipt.json["superseded"] as? [[String: Any]] ?? [])
        #expect(Set(others.compactMap { ($0["user"] as? [String: Any])?["id"] as? String }) == ["bob", "alice"])
    }

    @Test("a send to a user with no active device is a 422 naming it, and nothing is sent")
    func userWithoutDevices() throws {
        let bed = try Bed()
        try bed.register(APNsStandIn.deviceToken(), user: "carol", environment: "production")
        let refused = try bed.send(
            #"{"to": [{"user": "carol"}, {"user": "nobody"}], "aps": {"alert": "?"}}"#, status: 422)
        #expect((refused["errors"] as? [[String: Any]])?.map { $0["pointer"] as? String } == ["/to/1"])
        #expect(try bed.api.count("SELECT count(*) AS n FROM notifications WHERE app_id = 'people'") == 0)
        // An escalation's user without an active device is refused at its place too.
        let escalation = try bed.send(
            #"{"to": [{"user": "carol"}], "aps": {"alert": "?"}, "onNoReply": [{"afterSeconds": 60, "followUps": [{"type": "escalate", "to": [{"user": "dave"}]}]}]}"#,
            status: 422)
        #expect(
            (escalation["errors"] as? [[String: Any]])?.first?["pointer"] as? String == "/onNoReply/0/followUps/0/to/0")
    }

    @Test(
        "an escalation names a user: when nobody answers, each of the user's devices is pushed in its own environment")
    func escalationToUser() async throws {
        let bed = try Bed()
        let (ann, managerPhone, managerPad) = (
            APNsStandIn.deviceToken(), APNsStandIn.deviceToken(), APNsStandIn.deviceToken()
        )
        try bed.register(managerPhone, user: "manager", environment: "production")
        try bed.register(managerPad, user: "manager", environment: "sandbox")
        let sent = try bed.send(
            #"""
            {"to": [{"deviceToken": "\#(ann)", "recipient": "ann"}], "category": "INVITE", "aps": {"alert": "Timer done"},
             "onNoReply": [{"afterSeconds": 1, "followUps": [{"type": "escalate", "to": [{"user": "manager"}],
                                                             "aps": {"alert": "Ann did not answer"}}]}]}
            """#)
        let id = try #require(sent["id"] as? String)
        let devices = try #require(sent["devices"] as? [[String: Any]])
        #expect(
            devices.filter { $0["escalation"] as? Bool == true }.map { $0["user"] as? String } == [
                "manager", "manager",
            ])
        try await bed.waitFor(id, kind: "step", count: 2)
        #expect(
            try bed.production.requests(token: managerPhone).first?.aps?["alert"] as? String == "Ann did not answer")
        #expect(try bed.sandbox.requests(token: managerPad).first?.aps?["alert"] as? String == "Ann did not answer")
        #expect(try bed.sandbox.requests(token: managerPhone).isEmpty)
        #expect(try bed.production.requests(token: managerPad).isEmpty)
        let receipt = try bed.call("GET", "/notifications/\(id)")
        let escalated = (receipt.json["devices"] as? [[String: Any]] ?? []).filter { $0["escalation"] as? Bool == true }
        #expect(Set(escalated.compactMap { $0["deviceToken"] as? String }) == [managerPhone, managerPad])
    }

    @Test("APNs declares a token dead: later sends to its user skip it; a newer registration revives it")
    func deadTokenRevives() async throws {
        let bed = try Bed()
        let dead = APNsStandIn.deviceToken("dead")
        try bed.register(dead, user: "erin", environment: "production")
        let first = try #require(try bed.send(#"{"to": [{"user": "erin"}], "aps": {"alert": "1"}}"#)["id"] as? String)
        let deadline = Date().addingTimeInterval(30)
        while try bed.call("GET", "/users/erin").json["devices"].flatMap({ ($0 as? [[String: Any]])?.first?["status"] })
            as? String != "dead"
        {
            try #require(Date() < deadline, "the token was never marked dead")
            try await Task.sleep(for: .milliseconds(100))
        }
        _ = first
        let device = try #require((try bed.call("GET", "/users/erin").json["devices"] as? [[String: Any]])?.first)
        #expect(device["reason"] as? String == "Unregistered")
        // No active device: a send to erin is refused.
        _ = try bed.send(#"{"to": [{"user": "erin"}], "aps": {"alert": "2"}}"#, status: 422)
        // The app registers the token again (APNs gave it back): active, and reached.
        #expect(try bed.register(dead, user: "erin", environment: "production")["status"] as? String == "active")
        let again = try bed.send(#"{"to": [{"user": "erin"}], "aps": {"alert": "3"}}"#)
        #expect((again["devices"] as? [[String: Any]])?.count == 1)
    }

    @Test("a token registered by another user moves to that user; a user keeps at most 20 active devices")
    func tokensMoveAndTheBound() throws {
        let bed = try Bed()
        let shared = APNsStandIn.deviceToken()
        try bed.register(shared, user: "frank", environment: "production")
        try bed.register(shared, user: "grace", environment: "sandbox")
        #expect(try bed.call("GET", "/users/frank").status == 404)
        #expect((try bed.call("GET", "/users/grace").json["devices"] as? [[String: Any]])?.count == 1)
        var tokens: [String] = []
        for _ in 0..<21 {
            let token = APNsStandIn.deviceToken()
            tokens.append(token)
            try bed.register(token, user: "heidi", environment: "production")
        }
        let heidi = try #require(try bed.call("GET", "/users/heidi").json["devices"] as? [[String: Any]])
        #expect(heidi.filter { $0["status"] as? String == "active" }.count == 20)
        let removed = heidi.filter { $0["status"] as? String == "removed" }
        #expect(removed.map { $0["deviceToken"] as? String } == [tokens[0]])
        let invalid = try bed.call("PUT", "/devices/xyz", json: #"{"environment": "production"}"#)
        #expect(invalid.status == 422)
        let noEnvironment = try bed.call("PUT", "/devices/\(APNsStandIn.deviceToken())", json: #"{"user": "x"}"#)
        #expect(noEnvironment.status == 422)
        #expect((noEnvironment.json["errors"] as? [[String: Any]])?.first?["pointer"] as? String == "/environment")
        // An ingest key registers nothing here.
        let withIngestKey = try bed.api.call(
            "PUT", "/v1/apps/people/devices/\(APNsStandIn.deviceToken())", token: bed.ingestKey,
            json: #"{"user": "mallory", "environment": "production"}"#)
        #expect([401, 403].contains(withIngestKey.status))
    }

    @Test("erasing a user leaves nothing addressable: no device, no subject device, nothing pending to them")
    func eraseUser() throws {
        let bed = try Bed()
        let (one, two) = (APNsStandIn.deviceToken(), APNsStandIn.deviceToken())
        try bed.register(one, user: "ivan", environment: "production")
        try bed.register(two, user: "ivan", environment: "sandbox")
        let sent = try bed.send(
            #"{"to": [{"user": "ivan"}], "aps": {"alert": "?"}, "subject": "S-9", "onNoReply": [{"afterSeconds": 3600, "followUps": [{"type": "remind"}]}]}"#
        )
        #expect((sent["devices"] as? [[String: Any]])?.count == 2)
        let erased = try bed.api.admin("DELETE", "/v1/apps/people/users/ivan")
        #expect(erased.status == 200, "\(erased.text)")
        #expect(erased.json["devices"] as? Int == 2)
        #expect(try bed.call("GET", "/users/ivan").status == 404)
        _ = try bed.send(#"{"to": [{"user": "ivan"}], "aps": {"alert": "?"}}"#, status: 422)
        _ = try bed.send(#"{"subject": "S-9", "aps": {"alert": "?"}}"#, status: 422)
        #expect(
            try bed.api.count(
                """
                SELECT count(*) AS n FROM followups WHERE app_id = 'people' AND status IN ('pending', 'retrying')
                    AND device_token IN (\(one), \(two))
                """) == 0)
        #expect(try bed.api.admin("DELETE", "/v1/apps/people/users/ivan").status == 404)
    }
}
