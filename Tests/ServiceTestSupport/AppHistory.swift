import Postgres

/// The rows an app owns in every table that grows with its traffic, written straight into the schema
/// (for the tests of deleting an app).
package enum AppHistory {
    /// The tables a deleted app's rows are purged from.
    package static let tables = [
        "followups_queue", "followups_done", "delivery_attempts", "responses", "idempotency_keys", "notifications",
        "devices",
    ]

    /// `rows` rows of `app` in each of ``tables`` (in the partitions of the present, which must exist).
    package static func seed(_ app: String, rows: Int, connection: PostgresConnection) throws {
        try connection.execute(
            """
            INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier, outcome, answer)
            SELECT \(app), actionhook_uuid_v7(now()), 'k-' || g, '\\x00', 'open', 'recorded', '{}'
            FROM generate_series(1, \(rows)) AS g
            """)
        try connection.execute(
            """
            INSERT INTO idempotency_keys (app_id, key, response_id, request_hash)
            SELECT app_id, idempotency_key, id, request_hash FROM responses WHERE app_id = \(app)
            """)
        try connection.execute(
            """
            INSERT INTO followups (app_id, id, response_id, ordinal, channel, payload, due_at, status, finished_at)
            SELECT \(app), gen_random_uuid(), gen_random_uuid(), 0, 'webhook', '{}', now() + interval '1 day',
                CASE WHEN g % 2 = 0 THEN 'pending' ELSE 'delivered' END, CASE WHEN g % 2 = 1 THEN now() END
            FROM generate_series(1, \(2 * rows)) AS g
            """)
        try connection.execute(
            """
            INSERT INTO delivery_attempts (app_id, followup_id, attempt, started_at, finished_at, result, duration_ms)
            SELECT \(app), gen_random_uuid(), 1, now(), now(), 'delivered', 5 FROM generate_series(1, \(rows))
            """)
        try connection.execute(
            """
            INSERT INTO notifications (app_id, id, request_hash, answers, collapse_id, devices, answer)
            SELECT \(app), gen_random_uuid(), '\\x00', 'first', 'c', '[]', '{}' FROM generate_series(1, \(rows))
            """)
        try connection.execute(
            """
            INSERT INTO devices (app_id, token, status) SELECT \(app), 'token-' || g, 'dead'
            FROM generate_series(1, \(rows)) AS g
            """)
    }
}
