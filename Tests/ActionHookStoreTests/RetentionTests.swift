import ActionHookCore
import ActionHookStore
import Foundation
import Logging
import Postgres
import TestSupport
import Testing

/// An app's `retentionDays` as stored, and what partition maintenance deletes for an app that keeps
/// less than the server does.
@Suite("Per-app retention")
struct RetentionTests {
    /// Old and current rows of every kind the shorter retention applies to, for `app`.
    static func seed(_ app: String, connection: PostgresConnection) throws {
        try connection.execute(
            """
            INSERT INTO responses (app_id, id, request_hash, action_identifier, received_at, outcome, answer)
            SELECT \(app), actionhook_uuid_v7(t), '\\x00', 'open', t, 'recorded', '{}'
            FROM (SELECT CASE WHEN g <= 5 THEN now() - interval '3 days' ELSE now() END AS t
                FROM generate_series(1, 7) AS g) AS times
            """)
        try connection.execute(
            """
            INSERT INTO followups (app_id, id, response_id, ordinal, channel, payload, due_at, status, created_at,
                finished_at)
            SELECT \(app), gen_random_uuid(), gen_random_uuid(), 0, 'webhook', '{}', t, 'delivered', t, t
            FROM (SELECT CASE WHEN g <= 3 THEN now() - interval '3 days' ELSE now() END AS t
                FROM generate_series(1, 4) AS g) AS times
            """)
        // A follow-up still queued since three days ago is not history: it stays whatever the retention.
        try connection.execute(
            """
            INSERT INTO followups (app_id, id, response_id, ordinal, channel, payload, due_at, status, created_at)
            VALUES (\(app), gen_random_uuid(), gen_random_uuid(), 0, 'webhook', '{}', now() + interval '1 hour',
                'retrying', now() - interval '3 days')
            """)
        try connection.execute(
            """
            INSERT INTO delivery_attempts (app_id, followup_id, attempt, started_at, finished_at, result, duration_ms)
            SELECT \(app), gen_random_uuid(), 1, t, t, 'delivered', 5
            FROM (SELECT CASE WHEN g <= 3 THEN now() - interval '3 days' ELSE now() END AS t
                FROM generate_series(1, 4) AS g) AS times
            """)
        try connection.execute(
            """
            INSERT INTO notifications (app_id, id, request_hash, answers, collapse_id, devices, created_at, answer)
            SELECT \(app), gen_random_uuid(), '\\x00', 'first', 'c', '[]', t, '{}'
            FROM (SELECT CASE WHEN g <= 2 THEN now() - interval '3 days' ELSE now() END AS t
                FROM generate_series(1, 3) AS g) AS times
            """)
    }

    /// The app's rows of each kind: `old` (from three days ago) or current.
    static func counts(_ app: String, old: Bool, connection: PostgresConnection) throws -> [String: Int] {
        let rows = try connection.query(
            """
            WITH bound AS (SELECT now() - interval '1 day' AS t)
            SELECT 'responses' AS kind, count(*)::int AS n FROM responses, bound
                WHERE app_id = \(app) AND (received_at < bound.t) = \(old)
            UNION ALL SELECT 'followups_done', count(*)::int FROM followups_done, bound
                WHERE app_id = \(app) AND (finished_at < bound.t) = \(old)
            UNION ALL SELECT 'followups_queue', count(*)::int FROM followups_queue, bound
                WHERE app_id = \(app) AND (created_at < bound.t) = \(old)
            UNION ALL SELECT 'delivery_attempts', count(*)::int FROM delivery_attempts, bound
                WHERE app_id = \(app) AND (finished_at < bound.t) = \(old)
            UNION ALL SELECT 'notifications', count(*)::int FROM notifications, bound
                WHERE app_id = \(app) AND (created_at < bound.t) = \(old)
            """)
        var counts: [String: Int] = [:]
        for row in rows { counts[try row.decode("kind", as: String.self)] = try row.decode("n", as: Int.self) }
        return counts
    }

    @Test(
        "an app keeping 1 day loses its rows from 3 days ago, in batches; another app and current rows stay")
    func shorterRetentionDeletes() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let pool = PostgresPool(configuration: database.configuration, size: 2)
        defer { pool.close() }
        var logger = Logger(label: "retention-test")
        logger.logLevel = .warning
        try Migrator(pool: pool, logger: logger).migrate()

        let store = AppStore(pool: pool)
        let (brief, _) = try store.create(AppDefinition(id: "brief", name: "Brief", retentionDays: 1))
        #expect(brief.definition.retentionDays == 1)
        #expect(try store.app("brief")?.definition.retentionDays == 1)
        _ = try store.create(AppDefinition(id: "lasting", name: "Lasting"))
        #expect(try store.app("lasting")?.definition.retentionDays == nil)
        // Longer than the server's 30 days: it keeps what the server keeps.
        let lasting = try store.update("lasting") { app in
            var app = app
            app.retentionDays = 60
            return app
        }
        #expect(lasting.definition.retentionDays == 60)
        #expect(try store.app("lasting")?.json.objectValue?["retentionDays"] == .integer(60))

        let current = [
            "responses": 2, "followups_done": 1, "followups_queue": 0, "delivery_attempts": 1,
            "notifications": 1,
        ]
        let old = [
            "responses": 5, "followups_done": 3, "followups_queue": 1, "delivery_attempts": 3,
            "notifications": 2,
        ]
        try pool.withConnection { connection in
            _ = try connection.query(
                "SELECT actionhook_create_partitions(now() - interval '4 days', now(), interval '1 day') AS made")
            try Self.seed("brief", connection: connection)
            try Self.seed("lasting", connection: connection)
            for app in ["brief", "lasting"] {
                #expect(try Self.counts(app, old: true, connection: connection) == old, "\(app) before")
                #expect(try Self.counts(app, old: false, connection: connection) == current, "\(app) before")
            }
        }

        let maintainer = PartitionMaintainer(
            pool: pool, policy: RetentionPolicy(partitionSeconds: 86_400, retentionDays: 30), batchSize: 2,
            logger: logger)
        let report = try maintainer.maintain()
        #expect(report.ran)
        // Of the partitions made from four days ago, only the keys' are past their (24-hour) window.
        #expect(report.dropped == ["idempotency_keys": 3])
        #expect(report.deleted["responses"] == 5)
        #expect(report.deleted["followups_done"] == 3)
        #expect(report.deleted["delivery_attempts"] == 3)
        #expect(report.deleted["notifications"] == 2)

        let after = try pool.withConnection { connection in
            try ["brief", "lasting"].map { app in
                (
                    old: try Self.counts(app, old: true, connection: connection),
                    current: try Self.counts(app, old: false, connection: connection)
                )
            }
        }
        #expect(
            after[0].old == [
                "responses": 0, "followups_done": 0, "followups_queue": 1, "delivery_attempts": 0, "notifications": 0,
            ])
        #expect(after[0].current == current)
        #expect(after[1].old == old)
        #expect(after[1].current == current)

        // A second run finds nothing more to delete.
        #expect(try maintainer.maintain().deleted.isEmpty)
    }
}

/// What retention must not take: a sent notification a reply may still answer, and a reply whose
/// idempotency key is still kept.
@Suite("Retention keeps what is still answered")
struct RetentionKeepsTests {
    static func migratedPool(_ database: TestDatabase) throws -> PostgresPool {
        let pool = PostgresPool(configuration: database.configuration, size: 2)
        var logger = Logger(label: "retention-test")
        logger.logLevel = .warning
        try Migrator(pool: pool, logger: logger).migrate()
        return pool
    }

    @Test("a notification sent 3 days ago to an app keeping 1 day stays until it has expired, then goes")
    func notificationStaysUntilExpired() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let pool = try Self.migratedPool(database)
        defer { pool.close() }
        _ = try AppStore(pool: pool).create(AppDefinition(id: "brief", name: "Brief", retentionDays: 1))
        // Sent 3 days ago: one expiring tomorrow (30 days is the longest a send may ask), one that expired
        // two days ago. Neither has a queued follow-up left.
        try pool.withConnection { connection in
            try connection.execute(
                """
                INSERT INTO notifications (app_id, id, request_hash, answers, collapse_id, devices, created_at,
                    expires_at, answer)
                VALUES ('brief', '00000000-0000-7000-8000-000000000001', '\\x00', 'first', 'c', '[]',
                        now() - interval '3 days', now() + interval '1 day', '{}'),
                    ('brief', '00000000-0000-7000-8000-000000000002', '\\x00', 'first', 'c', '[]',
                        now() - interval '3 days', now() - interval '2 days', '{}')
                """)
        }
        let maintainer = PartitionMaintainer(
            pool: pool, policy: RetentionPolicy(partitionSeconds: 86_400, retentionDays: 30),
            logger: Logger(label: "retention-test"))
        let report = try maintainer.maintain()
        #expect(report.deleted["notifications"] == 1)
        let kept = try pool.withConnection { connection in
            try connection.query("SELECT id FROM notifications WHERE app_id = 'brief'").map {
                try $0.decode("id", as: UUID.self).lowercasedString
            }
        }
        #expect(kept == ["00000000-0000-7000-8000-000000000001"])
        // Once it has expired (a run four days on), it goes.
        let later = try maintainer.maintain(now: Date().addingTimeInterval(4 * 86_400))
        #expect(later.deleted["notifications"] == 1)
        #expect(
            try pool.withConnection { try $0.query("SELECT count(*)::int AS n FROM notifications")[0].decode("n") }
                == 0)
    }

    @Test("an app keeping 1 day under a 4-day idempotency window keeps its replies of 3 days ago")
    func repliesOutliveTheirKeys() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let pool = try Self.migratedPool(database)
        defer { pool.close() }
        // Saved while the window was shorter: the store takes it, the maintenance must still keep the replies.
        _ = try AppStore(pool: pool).create(AppDefinition(id: "brief", name: "Brief", retentionDays: 1))
        try pool.withConnection { connection in
            _ = try connection.query(
                "SELECT actionhook_create_partitions(now() - interval '4 days', now(), interval '1 day') AS made")
            try RetentionTests.seed("brief", connection: connection)
        }
        let maintainer = PartitionMaintainer(
            pool: pool,
            policy: RetentionPolicy(partitionSeconds: 86_400, retentionDays: 30, idempotencyWindowSeconds: 4 * 86_400),
            logger: Logger(label: "retention-test"))
        let report = try maintainer.maintain()
        #expect(report.deleted["responses"] == nil)
        let old = try pool.withConnection { try RetentionTests.counts("brief", old: true, connection: $0) }
        #expect(old["responses"] == 5)
    }
}
