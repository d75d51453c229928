import Foundation
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

/// F6: idempotent ingest. The key is `Idempotency-Key`, else the body's `responseId`; the same key
/// and body replay the stored answer, another body is a 422, a key still in flight is a 409, and
/// exactly one response row exists per (app, key).
@Suite("Ingest idempotency (F6)")
struct IdempotencyTests {
    static let app = "idem-app"

    /// An app with a `record` rule that asks for one webhook and a `comment` rule.
    static func setUp(_ api: TestAPI, app: String = IdempotencyTests.app) throws -> String {
        let key = try api.createApp(app)
        try IOSScenario.createRule(
            api, app: app,
            #"""
            {"id": "idem-record", "match": {"action": ["open", "accept"]}, "handler": {"type": "record"},
             "followUps": [{"channel": "webhook", "url": "https://backend.example/hook",
                            "body": {"action": "{{actionIdentifier}}", "text": "{{userText}}"}}]}
            """#)
        try IOSScenario.createRule(
            api, app: app, #"{"id": "idem-comment", "match": {"action": "comment"}, "handler": {"type": "comment"}}"#)
        return key
    }

    static func body(_ action: String = "open", text: String = "hello", responseId: String? = nil) -> String {
        let id = responseId.map { #", "responseId": "\#($0)""# } ?? ""
        return #"""
            {"actionIdentifier": "\#(action)", "userText": "\#(text)", "notificationIdentifier": "n-1",
             "userInfo": {"aps": {"alert": "Hi"}, "orderId": 7}\#(id)}
            """#
    }

    static func responses(_ api: TestAPI, key: String) throws -> Int {
        try api.count("SELECT count(*) AS n FROM responses WHERE idempotency_key = \(key)")
    }

    @Test("same key, same body: 200, Idempotent-Replayed, the identical body, nothing new stored")
    func sameKeySameBody() throws {
        let api = try IOSScenario.makeAPI()
        let key = try Self.setUp(api)
        let first = try api.ingest(key: key, json: Self.body(), headers: [("Idempotency-Key", "k-same")])
        try #require(first.status == 202, "\(first.text)")
        #expect(first.headers["idempotent-replayed"] == nil)
        #expect((first.json["followUps"] as? [Any])?.count == 1)

        for _ in 0..<2 {
            let again = try api.ingest(key: key, json: Self.body(), headers: [("Idempotency-Key", "k-same")])
            #expect(again.status == 200)
            #expect(again.headers["idempotent-replayed"] == "true")
            #expect(again.headers["content-type"] == "application/json")
            #expect(again.body == first.body)
        }
        // The same normalised body in another layout (member order, whitespace) is the same body.
        let relaid = try api.ingest(
            key: key,
            json: #"""
                {  "userInfo": {"orderId": 7, "aps": {"alert": "Hi"}},
                   "notificationIdentifier": "n-1", "userText": "hello", "actionIdentifier": "open" }
                """#,
            headers: [("Idempotency-Key", "k-same")])
        #expect(relaid.status == 200)
        #expect(relaid.body == first.body)

        #expect(try api.count("SELECT count(*) AS n FROM responses") == 1)
        #expect(try Self.responses(api, key: "k-same") == 1)
        #expect(try api.count("SELECT count(*) AS n FROM followups") == 1)
    }

    @Test("same key, different body: 422 without echoing the body; the stored row is unchanged")
    func sameKeyDifferentBody() throws {
        let api = try IOSScenario.makeAPI()
        let key = try Self.setUp(api)
        let first = try api.ingest(key: key, json: Self.body(), headers: [("Idempotency-Key", "k-diff")])
        try #require(first.status == 202, "\(first.text)")

        let variants = [
            Self.body(text: "secret-reply-7d1f"),
            Self.body("accept"),
            #"{"actionIdentifier": "open", "userText": "hello", "notificationIdentifier": "n-1", "userInfo": {"aps": {"alert": "Hi"}, "orderId": 8}}"#,
            #"{"actionIdentifier": "open", "userText": "hello", "notificationIdentifier": "n-1", "userInfo": {"aps": {"alert": "Hi"}, "orderId": 7}, "deviceToken": "\#(IOSScenario.deviceA)"}"#,
        ]
        for (index, variant) in variants.enumerated() {
            let refused = try api.ingest(key: key, json: variant, headers: [("Idempotency-Key", "k-diff")])
            #expect(refused.status == 422, "variant \(index): \(refused.text)")
            #expect(refused.headers["content-type"] == "application/problem+json")
            #expect(refused.headers["idempotent-replayed"] == nil)
            #expect(refused.json["status"] as? Int == 422)
            #expect(!refused.text.contains("secret-reply-7d1f"))
        }
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 1)
        #expect(try api.count("SELECT count(*) AS n FROM followups") == 1)
        #expect(try IOSScenario.responseRow(api, id: first.json["id"] as? String ?? "")["user_text"] == "hello")
        // The original body still replays.
        let replay = try api.ingest(key: key, json: Self.body(), headers: [("Idempotency-Key", "k-diff")])
        #expect(replay.status == 200)
        #expect(replay.body == first.body)
    }

    @Test("responseId is the key when no header is sent; the header wins when both are")
    func responseIdAsKey() throws {
        let api = try IOSScenario.makeAPI()
        let key = try Self.setUp(api)
        let first = try api.ingest(key: key, json: Self.body(responseId: "resp-1"))
        try #require(first.status == 202, "\(first.text)")
        let id = try #require(first.json["id"] as? String)
        let row = try IOSScenario.responseRow(api, id: id)
        #expect(row["idempotency_key"] == "resp-1")
        #expect(row["client_response_id"] == "resp-1")

        let replay = try api.ingest(key: key, json: Self.body(responseId: "resp-1"))
        #expect(replay.status == 200)
        #expect(replay.headers["idempotent-replayed"] == "true")
        #expect(replay.body == first.body)

        let other = try api.ingest(key: key, json: Self.body(text: "changed", responseId: "resp-1"))
        #expect(other.status == 422)
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 1)

        // With a header, the header is the key: the same responseId under a new header is new.
        let headed = try api.ingest(
            key: key, json: Self.body(responseId: "resp-1"), headers: [("Idempotency-Key", "hdr-1")])
        #expect(headed.status == 202)
        #expect(headed.json["id"] as? String != id)
        #expect(try Self.responses(api, key: "hdr-1") == 1)
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 2)

        // With neither, nothing is deduplicated, and no key is stored.
        for _ in 0..<2 {
            #expect(try api.ingest(key: key, json: Self.body()).status == 202)
        }
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 4)
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE idempotency_key IS NULL") == 2)
        #expect(try api.count("SELECT count(*) AS n FROM idempotency_keys") == 2)
    }

    @Test("keys are per app; a refused request does not use up its key; a replay survives rule changes")
    func scopeAndLifetime() throws {
        let api = try IOSScenario.makeAPI()
        let key = try Self.setUp(api)
        let otherKey = try Self.setUp(api, app: "idem-other")

        let mine = try api.ingest(key: key, json: Self.body(), headers: [("Idempotency-Key", "shared")])
        let theirs = try api.ingest(key: otherKey, json: Self.body(), headers: [("Idempotency-Key", "shared")])
        #expect(mine.status == 202)
        #expect(theirs.status == 202)
        #expect(mine.json["id"] as? String != theirs.json["id"] as? String)
        #expect(try Self.responses(api, key: "shared") == 2)
        #expect(
            try api.count("SELECT count(DISTINCT app_id) AS n FROM responses WHERE idempotency_key = 'shared'") == 2)

        // A comment without text is refused before anything is stored; the key stays free.
        let refused = try api.ingest(
            key: key, json: Self.body("comment", text: " "), headers: [("Idempotency-Key", "after-422")])
        #expect(refused.status == 422)
        #expect(try Self.responses(api, key: "after-422") == 0)
        let accepted = try api.ingest(
            key: key, json: Self.body("comment", text: "fine"), headers: [("Idempotency-Key", "after-422")])
        #expect(accepted.status == 202)
        #expect(accepted.json["outcome"] as? String == "commented")

        // The stored answer is replayed even after the rule that produced it is gone.
        #expect(try api.admin("DELETE", "/v1/apps/\(Self.app)/rules/idem-record").status == 204)
        let replay = try api.ingest(key: key, json: Self.body(), headers: [("Idempotency-Key", "shared")])
        #expect(replay.status == 200)
        #expect(replay.body == mine.body)
        #expect(replay.json["ruleId"] as? String == "idem-record")
        let fresh = try api.ingest(key: key, json: Self.body(), headers: [("Idempotency-Key", "fresh")])
        #expect(fresh.json["outcome"] as? String == "unmatched")

        // A key that is not 1 to 255 visible ASCII characters is a 400.
        for bad in [String(repeating: "k", count: 256), "two words"] {
            let answer = try api.ingest(key: key, json: Self.body(), headers: [("Idempotency-Key", bad)])
            #expect(answer.status == 400)
            #expect(answer.headers["content-type"] == "application/problem+json")
        }
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE app_id = \(Self.app)") == 3)
    }

    @Test("20 concurrent requests with one key: exactly one 202, the rest replays or 409, one row")
    func concurrentSameKey() throws {
        let api = try IOSScenario.makeAPI()
        let key = try Self.setUp(api)
        let port = api.port
        let body = Self.body()
        let collected = IdempotencyAnswers()
        let ready = DispatchGroup()
        let done = DispatchGroup()
        let start = DispatchSemaphore(value: 0)
        let count = 20
        for _ in 0..<count {
            ready.enter()
            done.enter()
            let thread = Thread {
                defer { done.leave() }
                let client = try? HTTPTestClient(port: port, timeoutSeconds: 30)
                ready.leave()
                start.wait()
                guard let client else { return collected.fail("connect failed") }
                do {
                    let answer = try client.request(
                        "POST", "/v1/responses",
                        headers: [("Authorization", "Bearer \(key)"), ("Idempotency-Key", "race-key")], json: body)
                    collected.add(answer)
                } catch {
                    collected.fail("\(error)")
                }
            }
            thread.start()
        }
        try #require(ready.wait(timeout: .now() + 30) == .success)
        for _ in 0..<count { start.signal() }
        try #require(done.wait(timeout: .now() + 60) == .success)

        let (answers, failures) = collected.snapshot()
        #expect(failures.isEmpty, "\(failures)")
        #expect(answers.count == count)
        let created = answers.filter { $0.status == 202 }
        try #require(created.count == 1, "statuses: \(answers.map(\.status))")
        #expect(answers.allSatisfy { [200, 202, 409].contains($0.status) }, "statuses: \(answers.map(\.status))")
        for replay in answers where replay.status == 200 {
            #expect(replay.headers["idempotent-replayed"] == "true")
            #expect(replay.body == created[0].body)
        }
        for conflict in answers where conflict.status == 409 {
            #expect(conflict.headers["content-type"] == "application/problem+json")
            #expect(conflict.headers["idempotent-replayed"] == nil)
        }
        #expect(try Self.responses(api, key: "race-key") == 1)
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 1)
        let id = try #require(UUID(uuidString: created[0].json["id"] as? String ?? ""))
        #expect(try api.count("SELECT count(*) AS n FROM followups") == 1)
        #expect(try api.count("SELECT count(*) AS n FROM followups WHERE response_id = \(id) AND ordinal = 0") == 1)

        // After the race the key replays.
        let after = try api.ingest(key: key, json: body, headers: [("Idempotency-Key", "race-key")])
        #expect(after.status == 200)
        #expect(after.body == created[0].body)
    }

    @Test("a key held by another transaction is 409, stores nothing, and works once released")
    func inFlightKeyIs409() throws {
        let api = try IOSScenario.makeAPI()
        let key = try Self.setUp(api)
        // The service takes pg_try_advisory_xact_lock(hashtextextended(app || chr(31) || key, 0));
        // holding the same lock at session level from another connection makes the key "in flight".
        let holder = try PostgresConnection(configuration: api.database.configuration)
        func lock(_ idempotencyKey: String) throws {
            _ = try holder.query(
                "SELECT pg_advisory_lock(hashtextextended(\(Self.app + "\u{1F}" + idempotencyKey), 0))::text AS l")
        }
        func unlock(_ idempotencyKey: String) throws {
            let rows = try holder.query(
                "SELECT pg_advisory_unlock(hashtextextended(\(Self.app + "\u{1F}" + idempotencyKey), 0)) AS released")
            try #require(try rows[0].decode("released", as: Bool.self))
        }

        try lock("held-key")
        let blocked = try api.ingest(key: key, json: Self.body(), headers: [("Idempotency-Key", "held-key")])
        #expect(blocked.status == 409, "\(blocked.text)")
        #expect(blocked.headers["content-type"] == "application/problem+json")
        #expect(blocked.json["status"] as? Int == 409)
        // responseId as the key is locked the same way.
        let blockedByBody = try api.ingest(key: key, json: Self.body(responseId: "held-key"))
        #expect(blockedByBody.status == 409)
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 0)
        #expect(try api.count("SELECT count(*) AS n FROM followups") == 0)
        // Another key is not affected.
        #expect(try api.ingest(key: key, json: Self.body(), headers: [("Idempotency-Key", "free-key")]).status == 202)

        try unlock("held-key")
        let retried = try api.ingest(key: key, json: Self.body(), headers: [("Idempotency-Key", "held-key")])
        #expect(retried.status == 202)
        #expect(try Self.responses(api, key: "held-key") == 1)

        // A stored key that is in flight again is a 409 too, not a replay.
        try lock("held-key")
        let again = try api.ingest(key: key, json: Self.body(), headers: [("Idempotency-Key", "held-key")])
        #expect(again.status == 409)
        try unlock("held-key")
        let replay = try api.ingest(key: key, json: Self.body(), headers: [("Idempotency-Key", "held-key")])
        #expect(replay.status == 200)
        #expect(replay.body == retried.body)
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 2)
    }
}

/// Answers gathered by several threads.
private final class IdempotencyAnswers: @unchecked Sendable {
    private let lock = NSLock()
    private var answers: [TestResponse] = []
    private var failures: [String] = []

    func add(_ answer: TestResponse) {
        lock.lock()
        answers.append(answer)
        lock.unlock()
    }

    func fail(_ message: String) {
        lock.lock()
        failures.append(message)
        lock.unlock()
    }

    func snapshot() -> ([TestResponse], [String]) {
        lock.lock()
        defer { lock.unlock() }
        return (answers, failures)
    }
}
