import ActionHookCore
import ActionHookStore
import Foundation
import Logging
import Postgres
import ServiceTestSupport
import Testing

/// History is partitioned by time and kept for the retention window (sql/migrations/011): time is
/// injected into maintenance (`maintain(now:)`) and into the rows written for past days, never waited for.
@Suite("Partitions and retention")
struct PartitionTests: ResponseHelpers {
    static let logger = Logger(label: "partitions-test")
    static let day: TimeInterval = 86_400

    /// The start of the UTC day of `date`.
    static func dayStart(_ date: Date) -> Date {
        Date(timeIntervalSince1970: (date.timeIntervalSince1970 / day).rounded(.down) * day)
    }

    static func partitions(_ api: TestAPI, _ parent: String) throws -> [Date] {
        try api.query("SELECT lower FROM actionhook_partitions WHERE parent = \(parent) ORDER BY lower").map {
            try $0.decode("lower", as: Date.self)
        }
    }

    /// A run at `now`, once the service's own run (at its start) has let go of the maintenance lock.
    static func run(_ maintainer: PartitionMaintainer, now: Date) throws -> MaintenanceReport {
        var report = try maintainer.maintain(now: now)
        for _ in 0..<300 where !report.ran {
            Thread.sleep(forTimeInterval: 0.1)
            report = try maintainer.maintain(now: now)
        }
        return report
    }

    static func app(_ api: TestAPI, _ id: String) throws -> String {
        let key = try api.createApp(id, extra: #""webhook":{"url":"https://hooks.example.com/\#(id)"}"#)
        let rule =
            #"{"id":"accept","match":{"action":"accept"},"handler":{"type":"accept"},"followUps":[{"channel":"webhook","url":"https://hooks.example.com/x","body":{}}]}"#
        #expect(try api.admin("POST", "/v1/apps/\(id)/rules", json: rule).status == 201)
        return key
    }

    /// A reply stored through the API, then copied `days` back: the copy's id, receipt time, follow-up and
    /// attempt carry that day, as rows written then would.
    static func copyBack(_ api: TestAPI, responseID: String, days: Int) throws -> String {
        let rows = try api.query(
            """
            WITH source AS (SELECT * FROM responses WHERE id = \(UUID(uuidString: responseID))),
            copied AS (
                INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier, user_info, outcome,
                    rule_id, answer, received_at)
                SELECT app_id, actionhook_uuid_v7(received_at - make_interval(days => \(days))), 'copy-' || \(days),
                    request_hash, action_identifier, user_info, outcome, rule_id, answer,
                    received_at - make_interval(days => \(days))
                FROM source
                RETURNING app_id, id, received_at
            ),
            followup AS (
                INSERT INTO followups (app_id, id, response_id, ordinal, channel, payload, due_at, status, attempt,
                    created_at, finished_at)
                SELECT app_id, gen_random_uuid(), id, 0, 'webhook', '{}', received_at, 'delivered', 1, received_at,
                    received_at + interval '1 second'
                FROM copied
                RETURNING app_id, id, finished_at
            ),
            attempt AS (
                INSERT INTO delivery_attempts (app_id, followup_id, attempt, started_at, finished_at, result, duration_ms)
                SELECT app_id, id, 1, finished_at, finished_at, 'delivered', 5 FROM followup
            )
            SELECT id FROM copied
            """)
        return try rows[0].decode("id", as: UUID.self).lowercasedString
    }

    @Test(
        "three days of history: maintenance drops the day past the window, makes the days ahead, and every kept reply reads through the API"
    )
    func threeDays() throws {
        let api = try TestAPI()
        let key = try Self.app(api, "days")
        let now = Date()
        let today = Self.dayStart(now)
        // The partitions of two days ago onwards, as a maintenance run then would have made them.
        let earlier = PartitionMaintainer(
            pool: api.pool, policy: RetentionPolicy(partitionSeconds: 86_400, retentionDays: 30), logger: Self.logger)
        #expect(try Self.run(earlier, now: now.addingTimeInterval(-2 * Self.day)).ran)
        #expect(try Self.partitions(api, "responses").first == today.addingTimeInterval(-2 * Self.day))

        var kept: [String] = []
        for index in 0..<2 {
            let reply = try api.ingest(
                key: key, json: #"{"actionIdentifier":"accept","userInfo":{"n":\#(index)}}"#,
                headers: [("Idempotency-Key", "today-\(index)")])
            #expect(reply.status == 202)
            kept.append(try #require(reply.json["id"] as? String))
        }
        let yesterday = try Self.copyBack(api, responseID: kept[0], days: 1)
        let dropped = try Self.copyBack(api, responseID: kept[0], days: 2)
        kept.append(yesterday)
        // Each day's rows are in that day's partition.
        let placed = try api.query(
            """
            SELECT tableoid::regclass::text AS partition FROM responses WHERE id IN (\(UUID(uuidString: dropped)),
                \(UUID(uuidString: yesterday)), \(UUID(uuidString: kept[0]))) ORDER BY id
            """
        ).map { try $0.decode("partition", as: String.self) }
        let names = [2, 1, 0].map { days in
            let lower = today.addingTimeInterval(-Double(days) * Self.day)
            let formatter = DateFormatter()
            formatter.timeZone = TimeZone(identifier: "UTC")
            formatter.dateFormat = "yyyyMMdd"
            return "responses_p\(formatter.string(from: lower))t0000"
        }
        #expect(placed == names)

        // One day kept: the day before yesterday ends before the window starts; yesterday does not.
        let maintainer = PartitionMaintainer(
            pool: api.pool, policy: RetentionPolicy(partitionSeconds: 86_400, retentionDays: 1), logger: Self.logger)
        let report = try Self.run(maintainer, now: now)
        #expect(report.ran)
        #expect(
            report.dropped == ["responses": 1, "followups_done": 1, "delivery_attempts": 1, "idempotency_keys": 1])
        for parent in PartitionMaintainer.tables {
            let lowers = try Self.partitions(api, parent)
            #expect(lowers.first == today.addingTimeInterval(-Self.day), "\(parent): \(lowers)")
            #expect(lowers.contains(today.addingTimeInterval(Self.day)), "\(parent): tomorrow's is not made")
            #expect(report.oldest[parent] == today.addingTimeInterval(-Self.day))
            #expect(report.partitions[parent] == lowers.count)
        }
        // pg_class is the database's: another test's schema may have a partition of the same name.
        #expect(
            try api.count(
                """
                SELECT count(*) AS n FROM pg_class WHERE relname = \(names[0])
                    AND relnamespace = current_schema()::regnamespace
                """) == 0)
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE id = \(UUID(uuidString: dropped))") == 0)
        #expect(try api.count("SELECT count(*) AS n FROM followups_done WHERE finished_at < \(today - Self.day)") == 0)

        // Every kept reply is found by id, and the history pages through all of them.
        for id in kept {
            #expect(try api.admin("GET", "/v1/apps/days/responses/\(id)").status == 200)
        }
        #expect(try api.admin("GET", "/v1/apps/days/responses/\(dropped)").status == 404)
        var listed: [String] = []
        var cursor: String?
        repeat {
            let page = try api.admin(
                "GET", "/v1/apps/days/responses?limit=1" + (cursor.map { "&cursor=\($0)" } ?? ""))
            #expect(page.status == 200)
            listed += (page.json["items"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
            cursor = page.json["nextCursor"] as? String
        } while cursor != nil
        #expect(Set(listed) == Set(kept))
        #expect(listed.count == kept.count)

        // A second run drops and makes nothing more.
        let again = try Self.run(maintainer, now: now)
        #expect(again.dropped.isEmpty && again.created == 0)
    }

    @Test("maintenance runs in one instance at a time: one that finds the lock taken does nothing")
    func oneAtATime() throws {
        let api = try TestAPI()
        let holder = try PostgresConnection(configuration: api.database.configuration)
        try holder.execute("SELECT pg_advisory_lock(hashtext('actionhook.maintenance.' || current_schema()))")
        let maintainer = PartitionMaintainer(
            pool: api.pool, policy: RetentionPolicy(partitionSeconds: 86_400, retentionDays: 1), logger: Self.logger)
        let before = try Self.partitions(api, "responses")
        let skipped = try maintainer.maintain(now: Date().addingTimeInterval(10 * Self.day))
        #expect(!skipped.ran)
        #expect(try Self.partitions(api, "responses") == before)
        try holder.execute("SELECT pg_advisory_unlock_all()")
        #expect(try Self.run(maintainer, now: Date().addingTimeInterval(10 * Self.day)).ran)
    }

    @Test("a write for a time no partition covers is not lost: the partition is made and the write runs again")
    func missingPartitionIsMade() throws {
        let api = try TestAPI()
        let key = try Self.app(api, "gap")
        // Maintenance never ran, and the present's partitions are gone (as across a midnight with no run).
        for row in try api.query(
            "SELECT name FROM actionhook_partitions WHERE lower <= now() AND upper > now() AND parent = 'responses'")
        {
            let name: String = try row.decode("name")
            _ = try api.query(PostgresQuery(unsafeSQL: "DROP TABLE \(name)"))
            _ = try api.query("DELETE FROM actionhook_partitions WHERE name = \(name)")
        }
        #expect(
            try api.count(
                "SELECT count(*) AS n FROM actionhook_partitions WHERE parent = 'responses' AND lower <= now() AND upper > now()"
            ) == 0)
        let reply = try api.ingest(
            key: key, json: #"{"actionIdentifier":"accept"}"#, headers: [("Idempotency-Key", "after-midnight")])
        #expect(reply.status == 202)
        let id = try #require(reply.json["id"] as? String)
        #expect(try api.admin("GET", "/v1/apps/gap/responses/\(id)").status == 200)
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE app_id = 'gap'") == 1)
        #expect(try api.count("SELECT count(*) AS n FROM idempotency_keys WHERE app_id = 'gap'") == 1)
    }

    @Test("partitions made at 23:59:59 cover the writes of 00:00:01: no write waits for a run after midnight")
    func acrossMidnight() throws {
        let api = try TestAPI()
        let midnight = Self.dayStart(Date()).addingTimeInterval(5 * Self.day)
        let maintainer = PartitionMaintainer(
            pool: api.pool, policy: RetentionPolicy(partitionSeconds: 86_400, retentionDays: 30), logger: Self.logger)
        #expect(try Self.run(maintainer, now: midnight.addingTimeInterval(-1)).ran)
        let after = midnight.addingTimeInterval(1)
        _ = try api.query(
            """
            INSERT INTO responses (app_id, id, request_hash, action_identifier, outcome, answer, received_at)
            VALUES ('night', actionhook_uuid_v7(\(after)), '\\x00', 'accept', 'accepted', '{}', \(after))
            """)
        _ = try api.query(
            """
            INSERT INTO delivery_attempts (app_id, followup_id, attempt, started_at, finished_at, result, duration_ms)
            VALUES ('night', gen_random_uuid(), 1, \(after), \(after), 'delivered', 1)
            """)
        let placed = try api.query("SELECT tableoid::regclass::text AS p FROM responses WHERE app_id = 'night'")
        #expect(try placed.map { try $0.decode("p", as: String.self) }.first?.hasSuffix("t0000") == true)
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE app_id = 'night'") == 1)
    }

    @Test("the same idempotency key before and after midnight: one row, and the second request is its replay")
    func idempotencyAcrossPartitions() throws {
        let api = try TestAPI()
        let key = try Self.app(api, "keys")
        let body = #"{"actionIdentifier":"accept","userInfo":{"eventId":"9"}}"#
        let first = try api.ingest(key: key, json: body, headers: [("Idempotency-Key", "across")])
        #expect(first.status == 202)
        let firstID = try #require(first.json["id"] as? String)
        // Stored at 23:59:59.9 yesterday: the response moves to yesterday's partition, the key stays.
        let lastNight = Self.dayStart(Date()).addingTimeInterval(-0.1)
        let maintainer = PartitionMaintainer(
            pool: api.pool, policy: RetentionPolicy(partitionSeconds: 86_400, retentionDays: 30), logger: Self.logger)
        #expect(try Self.run(maintainer, now: lastNight).ran)
        let moved = try api.query(
            """
            WITH new AS (SELECT actionhook_uuid_v7(\(lastNight)) AS id),
            moved AS (
                UPDATE responses r SET id = new.id, received_at = \(lastNight),
                    answer = jsonb_set(r.answer::jsonb, '{id}', to_jsonb(new.id::text))::json
                FROM new WHERE r.id = \(UUID(uuidString: firstID)) RETURNING r.id
            )
            UPDATE idempotency_keys k SET response_id = moved.id, stored_at = \(lastNight) FROM moved
            WHERE k.app_id = 'keys' AND k.key = 'across' RETURNING moved.id
            """)
        let storedID = try moved[0].decode("id", as: UUID.self).lowercasedString
        let yesterday = try api.query(
            "SELECT tableoid::regclass::text AS p FROM responses WHERE id = \(UUID(uuidString: storedID))")
        let todays = try api.query(
            "SELECT name FROM actionhook_partitions WHERE parent = 'responses' AND lower <= now() AND upper > now()")
        #expect(try yesterday[0].decode("p", as: String.self) != todays[0].decode("name", as: String.self))

        let replay = try api.ingest(key: key, json: body, headers: [("Idempotency-Key", "across")])
        #expect(replay.status == 200)
        #expect(replay.json["id"] as? String == storedID)
        let reused = try api.ingest(
            key: key, json: #"{"actionIdentifier":"decline"}"#, headers: [("Idempotency-Key", "across")])
        #expect(reused.status == 422)
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE app_id = 'keys'") == 1)
        #expect(try api.count("SELECT count(*) AS n FROM idempotency_keys WHERE app_id = 'keys'") == 1)
    }
}
