import ActionHookStore
import Foundation
import Logging
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

/// Decisions per category, snoozes that cannot work, idempotency keys that expire, and erasure.
@Suite("Contract: decisions per category, snooze requirements, key window, erasure")
struct ContractTests {
    static let device = String(repeating: "d1", count: 32)
    static let otherDevice = String(repeating: "e2", count: 32)

    /// An app with an invite category (subject `eventId`) and a to-do category (subject `taskId`).
    static func app(_ api: TestAPI, _ id: String) throws -> String {
        let key = try api.createApp(id, extra: #""webhook":{"url":"https://hooks.example.com/\#(id)"}"#)
        for (category, subjectKey) in [("invite", "eventId"), ("todo", "taskId")] {
            #expect(
                try api.admin(
                    "PUT", "/v1/apps/\(id)/categories/\(category)",
                    json: #"{"actions":[],"subjectKey":"\#(subjectKey)"}"#
                ).status == 201)
        }
        let rules = [
            #"{"id":"accept","match":{"action":"accept"},"handler":{"type":"accept"}}"#,
            #"{"id":"decline","match":{"action":"decline"},"handler":{"type":"decline"}}"#,
        ]
        for rule in rules { #expect(try api.admin("POST", "/v1/apps/\(id)/rules", json: rule).status == 201) }
        return key
    }

    @Test("an invite and a to-do sharing a subject value keep separate decisions; ?category narrows to one")
    func decisionsPerCategory() throws {
        let api = try TestAPI()
        let key = try Self.app(api, "c-dec")
        let invite =
            #"{"actionIdentifier":"accept","deviceToken":"\#(Self.device)","userInfo":{"aps":{"category":"invite"},"eventId":"42"}}"#
        let todo =
            #"{"actionIdentifier":"decline","deviceToken":"\#(Self.device)","userInfo":{"aps":{"category":"todo"},"taskId":"42"}}"#
        #expect(try api.ingest(key: key, json: invite).status == 202)
        #expect(try api.ingest(key: key, json: todo).status == 202)

        let all = try api.admin("GET", "/v1/apps/c-dec/subjects/42").json["decisions"] as? [[String: Any]] ?? []
        let byCategory = Dictionary(
            uniqueKeysWithValues: all.map { ($0["category"] as? String ?? "", $0["outcome"] as? String ?? "") })
        #expect(byCategory == ["invite": "accepted", "todo": "declined"])
        let invites =
            try api.admin("GET", "/v1/apps/c-dec/subjects/42?category=invite").json["decisions"] as? [[String: Any]]
        #expect(invites?.map { $0["outcome"] as? String } == ["accepted"])
        #expect(try api.admin("GET", "/v1/apps/c-dec/subjects/42?category=other").status == 404)
    }

    @Test(
        "a snooze without notificationIdentifier or deviceToken is refused 422 naming each, in ingest and the dry run, unless the rule allows it"
    )
    func snoozeRequirements() throws {
        let api = try TestAPI()
        let key = try Self.app(api, "c-snz")
        let snooze =
            #"{"id":"snooze","priority":1,"match":{"action":"snooze"},"handler":{"type":"snooze","delaySeconds":60}}"#
        #expect(try api.admin("POST", "/v1/apps/c-snz/rules", json: snooze).status == 201)
        func pointers(_ body: String) throws -> (Int, [String]) {
            let answer = try api.ingest(key: key, json: body)
            let errors = answer.json["errors"] as? [[String: Any]] ?? []
            return (answer.status, errors.compactMap { $0["pointer"] as? String }.sorted())
        }
        let userInfo = #""userInfo":{"aps":{"category":"invite"},"eventId":"1"}"#
        #expect(
            try pointers(#"{"actionIdentifier":"snooze","deviceToken":"\#(Self.device)",\#(userInfo)}"#) == (
                422, ["/notificationIdentifier"]
            ))
        #expect(
            try pointers(#"{"actionIdentifier":"snooze","notificationIdentifier":"n",\#(userInfo)}"#) == (
                422, ["/deviceToken"]
            ))
        #expect(
            try pointers(#"{"actionIdentifier":"snooze",\#(userInfo)}"#) == (
                422, ["/deviceToken", "/notificationIdentifier"]
            ))
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE app_id = 'c-snz'") == 0)

        let dryRun = try api.admin(
            "POST", "/v1/apps/c-snz/rules/test", json: #"{"actionIdentifier":"snooze",\#(userInfo)}"#)
        #expect(dryRun.status == 422)

        // Allowed explicitly: the backend re-sends the push itself, so no device token is needed here.
        let lenient =
            #"{"id":"snooze","priority":1,"match":{"action":"snooze"},"handler":{"type":"snooze","delaySeconds":60,"allowMissing":["deviceToken"]}}"#
        #expect(try api.admin("PUT", "/v1/apps/c-snz/rules/snooze", json: lenient).status == 200)
        let allowed = try api.ingest(
            key: key, json: #"{"actionIdentifier":"snooze","notificationIdentifier":"n",\#(userInfo)}"#)
        #expect(allowed.status == 202)
        #expect(allowed.json["outcome"] as? String == "snoozed")
        let rule = try api.admin("GET", "/v1/apps/c-snz/rules/snooze").json["handler"] as? [String: Any]
        #expect(rule?["allowMissing"] as? [String] == ["deviceToken"])
        let unknown = #"{"id":"x","handler":{"type":"snooze","allowMissing":["userText"]}}"#
        let refused = try api.admin("POST", "/v1/apps/c-snz/rules", json: unknown)
        #expect(refused.status == 422)
        #expect(
            ((refused.json["errors"] as? [[String: Any]])?.first?["pointer"]) as? String == "/handler/allowMissing/0")
    }

    @Test(
        "an idempotency key replays within its window; past it, the same key is a new reply; keys go with their partition after the window"
    )
    func keyWindow() throws {
        let api = try TestAPI()
        let key = try Self.app(api, "c-key")
        // Keys are partitioned by when they were stored: a key is moved into a past day's partition in the
        // transaction that makes it, since the service's own maintenance (at its start, concurrent with this
        // test) drops a partition wholly past the window the moment it finds one.
        func backdate(_ assignment: String, where condition: String) throws {
            _ = try api.query(
                PostgresQuery(
                    unsafeSQL: """
                        DO $$ BEGIN
                            PERFORM actionhook_create_partitions(now() - interval '4 days', now(), interval '1 day');
                            UPDATE idempotency_keys SET stored_at = \(assignment) WHERE \(condition);
                        END $$
                        """))
        }
        let body = #"{"actionIdentifier":"accept","userInfo":{"aps":{"category":"invite"},"eventId":"7"}}"#
        let headers = [("Idempotency-Key", "k-1")]
        let first = try api.ingest(key: key, json: body, headers: headers)
        #expect(first.status == 202)
        #expect(try api.ingest(key: key, json: body, headers: headers).status == 200)

        // A day and an hour later (the window is 24 hours by default).
        try backdate("stored_at - interval '25 hours'", where: "app_id = 'c-key'")
        let again = try api.ingest(key: key, json: body, headers: headers)
        #expect(again.status == 202)
        #expect(again.json["id"] as? String != first.json["id"] as? String)
        #expect(try api.ingest(key: key, json: body, headers: headers).status == 200)
        // Both responses record the key they were stored under; within the window the key is the newer one's
        // (the older stays in its partition, never read, until the partition is dropped).
        let keys = try api.query("SELECT idempotency_key FROM responses WHERE app_id = 'c-key' ORDER BY received_at")
            .map { try $0.decode("idempotency_key", as: String?.self) }
        #expect(keys == ["k-1", "k-1"])
        #expect(
            try api.query(
                "SELECT response_id FROM idempotency_keys WHERE app_id = 'c-key' AND stored_at >= now() - interval '24 hours'"
            ).map {
                try $0.decode("response_id", as: UUID.self).lowercasedString
            } == [again.json["id"] as? String])

        // Keys of three days ago are in a partition wholly past the window: maintenance drops it.
        for index in 0..<3 {
            #expect(try api.ingest(key: key, json: body, headers: [("Idempotency-Key", "old-\(index)")]).status == 202)
        }
        try backdate("now() - interval '3 days'", where: "app_id = 'c-key' AND key LIKE 'old-%'")
        // The key of 25 hours ago is past the window too, but its partition (a UTC day) is dropped only once
        // the whole day is: in the first hour of a day it is, later it is not. Its partition's end, to know which.
        let backdatedEnd = try #require(
            try api.query(
                """
                SELECT p.upper FROM idempotency_keys k JOIN actionhook_partitions p ON p.parent = 'idempotency_keys'
                    AND p.lower <= k.stored_at AND p.upper > k.stored_at
                WHERE k.app_id = 'c-key' AND k.stored_at < now() - interval '24 hours' AND k.key = 'k-1'
                """
            ).first?.decode("upper", as: Date.self))
        let window = TimeInterval(RetentionPolicy().idempotencyWindowSeconds)
        let maintainer = PartitionMaintainer(pool: api.pool, policy: RetentionPolicy(), logger: Logger(label: "test"))
        let before = Date()
        var report = try maintainer.maintain()
        // The service's own run at its start may hold the maintenance lock a moment.
        for _ in 0..<300 where !report.ran {
            Thread.sleep(forTimeInterval: 0.1)
            report = try maintainer.maintain()
        }
        let after = Date()
        #expect(report.dropped["idempotency_keys", default: 0] >= 1)
        #expect(try api.count("SELECT count(*) AS n FROM idempotency_keys WHERE key LIKE 'old-%'") == 0)
        // The newer k-1 always stays; the older one with its partition unless that ended a window before.
        let remaining = try api.count("SELECT count(*) AS n FROM idempotency_keys WHERE app_id = 'c-key'")
        if backdatedEnd > after.addingTimeInterval(-window) {
            #expect(remaining == 2)
        } else if backdatedEnd <= before.addingTimeInterval(-window) {
            #expect(remaining == 1)
        } else {
            // The day's partition ended while maintenance ran: either is right.
            #expect((1...2).contains(remaining))
        }
        #expect(
            try api.count(
                "SELECT count(*) AS n FROM idempotency_keys WHERE app_id = 'c-key' AND stored_at >= now() - interval '24 hours'"
            ) == 1)
        #expect(try api.ingest(key: key, json: body, headers: [("Idempotency-Key", "old-0")]).status == 202)
    }

    @Test("a reply without Idempotency-Key or responseId stores no key: the key the server made can never come again")
    func keylessStoresNoKey() throws {
        let api = try TestAPI()
        let key = try Self.app(api, "c-keyless")
        let body = #"{"actionIdentifier":"accept","userInfo":{"aps":{"category":"invite"},"eventId":"8"}}"#
        for _ in 0..<3 { #expect(try api.ingest(key: key, json: body).status == 202) }
        #expect(
            try api.ingest(
                key: key, json: #"{"actionIdentifier":"accept","responseId":"r-1","userInfo":{"eventId":"8"}}"#
            ).status == 202)
        #expect(try api.ingest(key: key, json: body, headers: [("Idempotency-Key", "h-1")]).status == 202)
        #expect(
            try api.query("SELECT key FROM idempotency_keys WHERE app_id = 'c-keyless' ORDER BY key").map {
                try $0.decode("key", as: String.self)
            } == ["h-1", "r-1"])
        #expect(
            try api.count("SELECT count(*) AS n FROM responses WHERE app_id = 'c-keyless' AND idempotency_key IS NULL")
                == 3)
    }

    @Test(
        "erasing a subject or a device leaves no user text in any row, cancels pending follow-ups and keeps the counts")
    func erasure() throws {
        let api = try TestAPI()
        let key = try Self.app(api, "c-erase")
        let later =
            #"{"id":"comment","priority":1,"match":{"action":"comment"},"handler":{"type":"comment"},"followUps":[{"channel":"webhook","delaySeconds":3600,"body":{"text":"{{userText}}","note":"{{userInfo.note}}"}}]}"#
        #expect(try api.admin("POST", "/v1/apps/c-erase/rules", json: later).status == 201)
        func comment(_ event: String, _ device: String, _ marker: String) -> String {
            #"{"actionIdentifier":"comment","userText":"text-\#(marker)","deviceToken":"\#(device)","userInfo":{"aps":{"category":"invite"},"eventId":"\#(event)","note":"info-\#(marker)"}}"#
        }
        #expect(try api.ingest(key: key, json: comment("42", Self.device, "SUBJ1")).status == 202)
        #expect(try api.ingest(key: key, json: comment("42", Self.otherDevice, "SUBJ2")).status == 202)
        #expect(try api.ingest(key: key, json: comment("43", Self.otherDevice, "DEV1")).status == 202)
        #expect(try api.ingest(key: key, json: comment("44", Self.device, "KEEP")).status == 202)

        // The export holds exactly the subject's replies, text included, one per line.
        let export = try api.admin("GET", "/v1/apps/c-erase/responses?subject=42&format=ndjson")
        #expect(export.status == 200)
        #expect(export.headers["content-type"] == "application/x-ndjson")
        let lines = export.text.split(separator: "\n").map {
            (try? JSONSerialization.jsonObject(with: Data($0.utf8))) as? [String: Any] ?? [:]
        }
        #expect(lines.count == 2)
        #expect(Set(lines.compactMap { $0["userText"] as? String }) == ["text-SUBJ1", "text-SUBJ2"])
        let byDevice = try api.admin("GET", "/v1/apps/c-erase/responses?deviceToken=\(Self.otherDevice)&format=ndjson")
        #expect(byDevice.text.split(separator: "\n").count == 2)
        #expect(try api.admin("GET", "/v1/apps/c-erase/responses?format=ndjson").status == 400)

        // Sent notifications hold the same data: one about subject 42 (a push and a reminder step, a label
        // naming the person), one to the erased device.
        let subjectSend = try api.admin(
            "POST", "/v1/apps/c-erase/notifications",
            json: #"""
                {"to": [{"deviceToken": "\#(String(repeating: "5e", count: 32))", "recipient": "SUBJ1-person"}],
                 "aps": {"alert": "About 42"}, "subject": "42",
                 "onNoReply": [{"afterSeconds": 3600, "followUps": [{"type": "remind"}]}]}
                """#)
        #expect(subjectSend.status == 202)
        let deviceSend = try api.admin(
            "POST", "/v1/apps/c-erase/notifications",
            json:
                #"{"to": [{"deviceToken": "\#(Self.otherDevice)", "recipient": "DEV1-person"}], "aps": {"alert": "Hi"}}"#
        )
        #expect(deviceSend.status == 202)

        let erased = try api.admin("DELETE", "/v1/apps/c-erase/subjects/42")
        #expect(erased.status == 200)
        #expect(erased.json["responses"] as? Int == 2)
        #expect(erased.json["notifications"] as? Int == 1)
        // The replies' two pending follow-ups, the notification's push and its reminder.
        #expect(erased.json["followUpsCancelled"] as? Int == 4)
        _ = try api.query(
            "INSERT INTO devices (app_id, token, status, reason) VALUES ('c-erase', \(Self.otherDevice), 'dead', 'Unregistered')"
        )
        let device = try api.admin("DELETE", "/v1/apps/c-erase/devices/\(Self.otherDevice)")
        #expect(device.json["responses"] as? Int == 2)
        #expect(device.json["notifications"] as? Int == 1)
        // A reply's follow-up and the push sent to the device.
        #expect(device.json["followUpsCancelled"] as? Int == 2)

        // No row of any table holds the erased text, the erased userInfo or the erased device token.
        for marker in ["SUBJ1", "SUBJ2", "DEV1", Self.otherDevice] {
            let found = try api.count(
                """
                SELECT (SELECT count(*) FROM responses t WHERE t::text LIKE '%' || \(marker) || '%')
                    + (SELECT count(*) FROM notifications t WHERE t::text LIKE '%' || \(marker) || '%')
                    + (SELECT count(*) FROM followups t WHERE t::text LIKE '%' || \(marker) || '%')
                    + (SELECT count(*) FROM delivery_attempts t WHERE t::text LIKE '%' || \(marker) || '%')
                    + (SELECT count(*) FROM devices t WHERE t::text LIKE '%' || \(marker) || '%') AS n
                """)
            #expect(found == 0, "\(marker) left in \(found) rows")
        }
        // What was not erased is intact; the counts remain.
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE user_text = 'text-KEEP'") == 1)
        #expect(
            try api.count("SELECT count(*) AS n FROM responses WHERE app_id = 'c-erase' AND outcome = 'commented'") == 4
        )
        #expect(
            try api.count("SELECT count(*) AS n FROM followups WHERE app_id = 'c-erase' AND status = 'pending'") == 1)
        let after = try api.admin("GET", "/v1/apps/c-erase/responses?subject=42&format=ndjson")
        #expect(after.text.split(separator: "\n").allSatisfy { !$0.contains("SUBJ") })
    }
}
