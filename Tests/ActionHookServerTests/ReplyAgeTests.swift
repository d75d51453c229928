import Foundation
import ServiceTestSupport
import TestSupport
import Testing

/// Late replies never act: a category's (or rule's) `maxReplyAgeSeconds` against the real service.
@Suite("Reply age limits")
struct ReplyAgeTests {
    static let device = String(repeating: "c4", count: 32)

    /// A time `seconds` before now (negative: after), as the device writes `respondedAt`.
    static func timestamp(_ seconds: Double) -> String {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.string(from: Date().addingTimeInterval(-seconds))
    }

    /// An invite reply; `age` nil leaves `respondedAt` out.
    static func invite(_ action: String, age: Double?, event: String = "42", extra: String = "") -> String {
        let respondedAt = age.map { #","respondedAt":"\#(timestamp($0))""# } ?? ""
        return #"""
            {"actionIdentifier":"\#(action)","deviceToken":"\#(device)"\#(respondedAt)\#(extra),
             "userInfo":{"aps":{"category":"invite"},"eventId":"\#(event)"}}
            """#
    }

    /// An app with an `invite` category limited to 60 s, accept/decline rules that send a webhook,
    /// and an `urgent` rule whose own limit is 10 s.
    static func app(_ api: TestAPI, _ id: String, category: String = #""maxReplyAgeSeconds":60"#) throws -> String {
        let key = try api.createApp(id, extra: #""webhook":{"url":"https://hooks.example.com/\#(id)"}"#)
        let put = try api.admin(
            "PUT", "/v1/apps/\(id)/categories/invite",
            json: #"{"subjectKey":"eventId","actions":[{"identifier":"accept","title":"Accept"}],\#(category)}"#)
        #expect(put.status == 200 || put.status == 201, "category answered \(put.status)")
        let rules = [
            #"{"id":"urgent","priority":10,"maxReplyAgeSeconds":10,"match":{"action":"accept","userInfo":[{"path":"kind","op":"eq","value":"urgent"}]},"handler":{"type":"accept"},"followUps":[{"channel":"webhook"}]}"#,
            #"{"id":"accept","match":{"action":"accept"},"handler":{"type":"accept"},"followUps":[{"channel":"webhook"}]}"#,
            #"{"id":"decline","match":{"action":"decline"},"handler":{"type":"decline"}}"#,
        ]
        for rule in rules {
            #expect(try api.admin("POST", "/v1/apps/\(id)/rules", json: rule).status == 201)
        }
        return key
    }

    @Test(
        "fresh and borderline replies act; past the limit they get 410 reply-expired, are stored as expired and make nothing"
    )
    func categoryLimit() throws {
        let api = try TestAPI()
        let key = try Self.app(api, "age-cat")
        for (age, index) in [(5.0, 0), (59.0, 1)] {
            let answer = try api.ingest(key: key, json: Self.invite("accept", age: age, event: "ok-\(index)"))
            #expect(answer.status == 202, "\(age) s old answered \(answer.status)")
            #expect(answer.json["outcome"] as? String == "accepted")
            #expect((answer.json["followUps"] as? [Any])?.count == 1)
        }
        for (age, index) in [(61.0, 0), (3600.0, 1)] {
            let answer = try api.ingest(key: key, json: Self.invite("accept", age: age, event: "late-\(index)"))
            #expect(answer.status == 410, "\(age) s old answered \(answer.status)")
            #expect(answer.headers["content-type"] == "application/problem+json")
            #expect(answer.json["type"] as? String == "https://actionhook.dev/problems/reply-expired")
            #expect(answer.json["maxReplyAgeSeconds"] as? Int == 60)
            let reported = try #require(answer.json["ageSeconds"] as? Double)
            #expect(reported >= age && reported < age + 30)
            #expect(answer.json["id"] is String)
        }
        let stored = try api.query(
            "SELECT subject, outcome, rule_id FROM responses WHERE app_id = 'age-cat' ORDER BY subject")
        let outcomes = try stored.map {
            try $0.decode("subject", as: String.self) + "=" + $0.decode("outcome", as: String.self)
        }
        #expect(outcomes == ["late-0=expired", "late-1=expired", "ok-0=accepted", "ok-1=accepted"])
        #expect(try api.count("SELECT count(*) AS n FROM followups WHERE app_id = 'age-cat'") == 2)

        // The history lists them; the metric counts them by app and category.
        let history = try api.admin("GET", "/v1/apps/age-cat/responses?outcome=expired")
        #expect((history.json["items"] as? [Any])?.count == 2)
        let metrics = try api.call("GET", "/metrics", token: nil).text
        #expect(metrics.contains(#"actionhook_replies_expired_total{app="age-cat",category="invite"} 2"#))
    }

    @Test("a rule's limit overrides the category's, in both directions")
    func ruleOverride() throws {
        let api = try TestAPI()
        let key = try Self.app(api, "age-rule")
        let urgent = #","notificationIdentifier":"u""#
        // 30 s is within the category's 60 s but past the urgent rule's 10 s.
        let late = try api.ingest(
            key: key,
            json:
                #"{"actionIdentifier":"accept","respondedAt":"\#(Self.timestamp(30))","userInfo":{"aps":{"category":"invite"},"eventId":"1","kind":"urgent"}\#(urgent)}"#
        )
        #expect(late.status == 410)
        #expect(late.json["maxReplyAgeSeconds"] as? Int == 10)
        #expect(late.json["ruleId"] as? String == "urgent")
        let fresh = try api.ingest(
            key: key,
            json:
                #"{"actionIdentifier":"accept","respondedAt":"\#(Self.timestamp(3))","userInfo":{"aps":{"category":"invite"},"eventId":"2","kind":"urgent"}}"#
        )
        #expect(fresh.status == 202)

        // A longer rule limit lets a reply through that the category alone would refuse.
        let relaxed =
            #"{"id":"decline","maxReplyAgeSeconds":3600,"match":{"action":"decline"},"handler":{"type":"decline"}}"#
        #expect(try api.admin("PUT", "/v1/apps/age-rule/rules/decline", json: relaxed).status == 200)
        #expect(try api.ingest(key: key, json: Self.invite("decline", age: 600, event: "3")).status == 202)
        #expect(try api.ingest(key: key, json: Self.invite("decline", age: 4000, event: "4")).status == 410)
        // The rule reads back with its limit.
        let rule = try api.admin("GET", "/v1/apps/age-rule/rules/decline")
        #expect(rule.json["maxReplyAgeSeconds"] as? Int == 3600)
    }

    @Test("respondedAt in the future beyond the clock-skew allowance is refused 422; within it, accepted")
    func futureRespondedAt() throws {
        let api = try TestAPI()
        let key = try Self.app(api, "age-future")
        let ahead = try api.ingest(key: key, json: Self.invite("accept", age: -600, event: "f1"))
        #expect(ahead.status == 422)
        #expect(((ahead.json["errors"] as? [[String: Any]])?.first?["pointer"]) as? String == "/respondedAt")
        #expect(try api.ingest(key: key, json: Self.invite("accept", age: -60, event: "f2")).status == 202)
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE app_id = 'age-future'") == 1)
    }

    @Test("requireRespondedAt: a reply whose age cannot be judged is refused 422, unless its rule says otherwise")
    func requireRespondedAt() throws {
        let api = try TestAPI()
        let key = try Self.app(api, "age-req", category: #""maxReplyAgeSeconds":60,"requireRespondedAt":true"#)
        let refused = try api.ingest(key: key, json: Self.invite("accept", age: nil, event: "r1"))
        #expect(refused.status == 422)
        #expect(((refused.json["errors"] as? [[String: Any]])?.first?["pointer"]) as? String == "/respondedAt")
        #expect(try api.ingest(key: key, json: Self.invite("accept", age: 1, event: "r2")).status == 202)
        let lenient =
            #"{"id":"decline","requireRespondedAt":false,"match":{"action":"decline"},"handler":{"type":"decline"}}"#
        #expect(try api.admin("PUT", "/v1/apps/age-req/rules/decline", json: lenient).status == 200)
        #expect(try api.ingest(key: key, json: Self.invite("decline", age: nil, event: "r3")).status == 202)
        // Without the requirement and without respondedAt, the category's limit cannot apply.
        let categories = try api.call("GET", "/v1/categories", token: key)
        let invite = (categories.json["items"] as? [[String: Any]])?.first { $0["identifier"] as? String == "invite" }
        #expect(invite?["maxReplyAgeSeconds"] as? Int == 60)
        #expect(invite?["requireRespondedAt"] as? Bool == true)
    }

    @Test("a late answer leaves a pending snooze pending and the subject's decision unchanged")
    func lateAnswerChangesNothing() throws {
        let api = try TestAPI()
        let key = try Self.app(api, "age-side")
        let snooze =
            #"{"id":"snooze","priority":5,"match":{"action":"snooze"},"handler":{"type":"snooze","delaySeconds":600}}"#
        #expect(try api.admin("POST", "/v1/apps/age-side/rules", json: snooze).status == 201)
        let notification = #","notificationIdentifier":"n-1""#
        // The snooze answers a notification sent through ActionHook to the device: only its push is re-sent.
        let serverKey = try #require(
            try api.admin("POST", "/v1/apps/age-side/keys", json: #"{"scope": "send"}"#).json["secret"] as? String)
        let sent = try api.call(
            "POST", "/v1/apps/age-side/notifications", token: serverKey,
            json: #"{"to": ["\#(Self.device)"], "aps": {"alert": "Party?"}, "ttlSeconds": 3600}"#)
        let sentID = try #require(sent.json["id"] as? String)
        let snoozeBody = #"""
            {"actionIdentifier":"snooze","deviceToken":"\#(Self.device)","respondedAt":"\#(Self.timestamp(1))"\#(notification),
             "userInfo":{"aps":{"category":"invite"},"eventId":"42","actionhook":{"n":"\#(sentID)","d":0}}}
            """#
        #expect(try api.ingest(key: key, json: snoozeBody).status == 202)
        #expect(
            try api.ingest(key: key, json: Self.invite("decline", age: 1, extra: #","notificationIdentifier":"n-2""#))
                .status == 202)

        // An accept to the same notification and subject, an hour late.
        let late = try api.ingest(key: key, json: Self.invite("accept", age: 3600, extra: notification))
        #expect(late.status == 410)
        #expect(
            try api.count(
                "SELECT count(*) AS n FROM followups WHERE app_id = 'age-side' AND is_snooze AND status = 'pending'")
                == 1)
        let decisions =
            try api.admin("GET", "/v1/apps/age-side/subjects/42").json["decisions"] as? [[String: Any]] ?? []
        #expect(decisions.map { $0["outcome"] as? String } == ["declined"])
    }

    @Test("a 410 is replayed as the same 410 for the same key and body, with one stored row")
    func replayedExpiry() throws {
        let api = try TestAPI()
        let key = try Self.app(api, "age-replay")
        let body = Self.invite("accept", age: 120, event: "rp")
        let first = try api.ingest(key: key, json: body, headers: [("Idempotency-Key", "late-1")])
        let second = try api.ingest(key: key, json: body, headers: [("Idempotency-Key", "late-1")])
        #expect(first.status == 410)
        #expect(second.status == 410)
        #expect(second.headers["idempotent-replayed"] == "true")
        #expect(first.text == second.text)
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE app_id = 'age-replay'") == 1)
    }

    @Test("the rule dry run shows a late reply as expired, with no follow-ups")
    func dryRun() throws {
        let api = try TestAPI()
        _ = try Self.app(api, "age-dry")
        let late = try api.admin("POST", "/v1/apps/age-dry/rules/test", json: Self.invite("accept", age: 300))
        #expect(late.status == 200)
        #expect(late.json["outcome"] as? String == "expired")
        #expect(late.json["ruleId"] as? String == "accept")
        #expect(late.json["maxReplyAgeSeconds"] as? Int == 60)
        #expect((late.json["followUps"] as? [Any])?.isEmpty == true)
        let fresh = try api.admin("POST", "/v1/apps/age-dry/rules/test", json: Self.invite("accept", age: 2))
        #expect(fresh.json["outcome"] as? String == "accepted")
        #expect((fresh.json["followUps"] as? [Any])?.count == 1)
    }

    @Test("limits out of range or of the wrong type are refused with their pointer")
    func invalidLimits() throws {
        let api = try TestAPI()
        _ = try api.createApp("age-bad")
        let zero = try api.admin(
            "PUT", "/v1/apps/age-bad/categories/c", json: #"{"actions":[],"maxReplyAgeSeconds":0}"#)
        #expect(zero.status == 422)
        #expect(((zero.json["errors"] as? [[String: Any]])?.first?["pointer"]) as? String == "/maxReplyAgeSeconds")
        let text = try api.admin(
            "POST", "/v1/apps/age-bad/rules",
            json: #"{"id":"r","handler":{"type":"record"},"requireRespondedAt":"yes"}"#)
        #expect(text.status == 400)
    }
}
