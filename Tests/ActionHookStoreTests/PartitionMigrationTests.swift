import ActionHookCore
import ActionHookSchema
import ActionHookStore
import Foundation
import Logging
import Postgres
import TestSupport
import Testing

/// Migration 011 turns the unpartitioned tables of a database written by the previous schema into the
/// partitioned layout, every row kept.
@Suite("Migrating to partitions")
struct PartitionMigrationTests {
    @Test("a database filled by the previous schema keeps every row, each in its partition, and reads as before")
    func migratesEveryRow() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let pool = PostgresPool(configuration: database.configuration, size: 2)
        defer { pool.close() }
        let logger = Logger(label: "migration-test")
        try Migrator(pool: pool, migrations: Migrations.all.filter { $0.version <= 10 }, logger: logger).migrate()

        // Three days of replies as the previous schema stored them: ids time-ordered (UUIDv7), keys on the
        // responses (one cleared by the sweep), follow-ups in every status, attempts for the finished ones.
        try pool.withConnection { connection in
            try connection.execute("INSERT INTO apps (id, name) VALUES ('old', 'Old')")
            try connection.execute(
                """
                INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier, outcome, answer,
                    received_at, subject)
                SELECT 'old',
                    encode(overlay(uuid_send(gen_random_uuid()) PLACING substring(int8send(
                        (extract(epoch FROM now() - d * interval '1 day') * 1000)::int8) FROM 3) FROM 1 FOR 6), 'hex')::uuid,
                    CASE WHEN d = 2 AND n = 0 THEN NULL ELSE 'key-' || d || '-' || n END, sha256(('b' || n)::bytea),
                    'accept', 'accepted', ('{"n": ' || n || '}')::json, now() - d * interval '1 day', 'subject-' || n
                FROM generate_series(0, 2) AS d, generate_series(0, 9) AS n
                """)
            try connection.execute(
                """
                INSERT INTO followups (app_id, id, response_id, ordinal, channel, payload, due_at, status, attempt,
                    created_at, updated_at, kind)
                SELECT r.app_id, gen_random_uuid(), r.id, s.ordinal, 'webhook', '{"body": {}}', r.received_at, s.status,
                    CASE WHEN s.status = 'pending' THEN 0 ELSE 1 END, r.received_at,
                    r.received_at + interval '1 minute', 'rule'
                FROM responses r, (VALUES (0, 'delivered'), (1, 'dead'), (2, 'pending'), (3, 'cancelled'),
                    (4, 'retrying')) AS s(ordinal, status)
                """)
            try connection.execute(
                """
                INSERT INTO delivery_attempts (app_id, followup_id, attempt, started_at, finished_at, result, duration_ms)
                SELECT app_id, id, 1, updated_at, updated_at, CASE WHEN status = 'delivered' THEN 'delivered'
                    ELSE 'failed' END, 3
                FROM followups WHERE status IN ('delivered', 'dead', 'retrying')
                """)
        }
        func counts(_ connection: PostgresConnection) throws -> [String: Int] {
            var result: [String: Int] = [:]
            for table in ["responses", "followups", "delivery_attempts"] {
                result[table] = try connection.query(
                    PostgresQuery(unsafeSQL: "SELECT count(*)::int AS n FROM \(table)"))[0].decode("n")
            }
            return result
        }
        let before = try pool.withConnection(counts)
        let sample = try pool.withConnection { connection in
            try connection.query("SELECT id, received_at FROM responses ORDER BY received_at").map {
                (try $0.decode("id", as: UUID.self), try $0.decode("received_at", as: Date.self))
            }
        }

        #expect(try Migrator(pool: pool, logger: logger).migrate() == Migrations.all.map(\.version).filter { $0 > 10 })

        try pool.withConnection { connection in
            #expect(try counts(connection) == before)
            #expect(before == ["responses": 30, "followups": 150, "delivery_attempts": 90])
            // Queued follow-ups in the queue; finished ones outside it, finished when they were last updated.
            let queued = try connection.query(
                "SELECT status, count(*)::int AS n FROM followups_queue GROUP BY 1 ORDER BY 1"
            ).map { "\(try $0.decode("status", as: String.self)) \(try $0.decode("n", as: Int.self))" }
            #expect(queued == ["pending 30", "retrying 30"])
            #expect(
                try connection.query(
                    "SELECT count(*)::int AS n FROM followups_done WHERE finished_at = updated_at AND status <> 'pending'"
                )[
                    0
                ].decode("n", as: Int.self) == 90)
            // Each response in the partition of its day; every partition recorded.
            let misplaced = try connection.query(
                """
                SELECT count(*)::int AS n FROM responses r
                JOIN actionhook_partitions p ON p.name = r.tableoid::regclass::text
                WHERE NOT (r.received_at >= p.lower AND r.received_at < p.upper)
                """)
            #expect(try misplaced[0].decode("n", as: Int.self) == 0)
            #expect(
                try connection.query("SELECT count(DISTINCT tableoid)::int AS n FROM responses")[0].decode(
                    "n", as: Int.self) == 3)
            // Kept keys moved to their table; the cleared one stays cleared.
            #expect(
                try connection.query("SELECT count(*)::int AS n FROM idempotency_keys")[0].decode("n", as: Int.self)
                    == 29)
            #expect(
                try connection.query(
                    """
                    SELECT count(*)::int AS n FROM idempotency_keys k JOIN responses r ON r.app_id = k.app_id
                        AND r.id = k.response_id AND r.idempotency_key = k.key AND r.request_hash = k.request_hash
                    """)[0].decode("n", as: Int.self) == 29)
            #expect(
                try connection.query("SELECT count(*)::int AS n FROM pg_class WHERE relname LIKE '%_unpartitioned'")[0]
                    .decode("n", as: Int.self) == 0)
        }
        // The stores read the migrated rows: each response by id, with its follow-ups and their attempts.
        let responses = ResponseStore(pool: pool)
        let followUps = FollowUpStore(pool: pool)
        for (id, receivedAt) in sample {
            let stored = try #require(try responses.get(appID: "old", id: id))
            #expect(abs(stored.receivedAt.timeIntervalSince(receivedAt)) < 0.001)
            let rows = try followUps.forResponse(appID: "old", responseID: id)
            #expect(rows.count == 5)
            #expect(
                rows.map { $0.value(atPath: "attempts")?.arrayValue?.count ?? -1 } == [1, 1, 0, 0, 1],
                "\(rows.map { $0.value(atPath: "status")?.stringValue ?? "" })")
        }
    }

    @Test("a migration may run longer than the statement timeout requests have")
    func migrationsHaveNoStatementTimeout() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        var configuration = database.configuration
        configuration.statementTimeoutMilliseconds = 100
        let pool = PostgresPool(configuration: configuration, size: 1)
        defer { pool.close() }
        let slow = Migration(version: 1, name: "001_slow.sql", sql: "SELECT pg_sleep(0.5);")
        #expect(throws: PostgresError.self) { try pool.withConnection { try $0.execute("SELECT pg_sleep(0.5)") } }
        #expect(try Migrator(pool: pool, migrations: [slow], logger: Logger(label: "migration-test")).migrate() == [1])
    }
}
