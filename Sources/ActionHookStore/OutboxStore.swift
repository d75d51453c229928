import ActionHookCore
import Foundation
import Postgres

/// A follow-up claimed by a worker for one attempt.
public struct ClaimedFollowUp: Sendable {
    /// The owning app.
    public var appID: String
    /// The follow-up id: the `webhook-id` and `apns-id`.
    public var id: UUID
    /// The attempt number this claim owns; every later write is fenced by it.
    public var attempt: Int
    /// `webhook` or `apns`.
    public var channel: FollowUpChannel
    /// The rendered delivery.
    public var payload: JSONValue
    /// How late the claim is: claim time minus due time, in seconds.
    public var lateness: Double
}

/// How an attempt ended.
public enum AttemptResult: Sendable, Equatable {
    /// Delivered (2xx).
    case delivered(httpStatus: Int)
    /// Failed; retried after `retryAfterMilliseconds`, or dead when that is `nil`.
    case failed(httpStatus: Int?, errorClass: String, retryAfterMilliseconds: Int?)
    /// Not sent because the device token is known dead.
    case skipped(reason: String)
}

/// The outbox as the delivery worker sees it. Every write after a claim is fenced by
/// `(id, attempt, status = 'running')`, so a worker whose lease was taken over changes nothing.
public struct OutboxStore: Sendable {
    let pool: PostgresPool

    /// Creates the store over a pool.
    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// Claims up to `limit` due follow-ups (oldest due first) for `leaseSeconds`, skipping rows
    /// other workers hold.
    public func claim(limit: Int, leaseSeconds: Int) throws -> [ClaimedFollowUp] {
        let rows = try pool.withConnection { connection in
            try connection.query(
                """
                WITH due AS (
                    SELECT app_id, id FROM followups
                    WHERE status IN ('pending', 'retrying') AND due_at <= now()
                    ORDER BY due_at
                    LIMIT \(limit)
                    FOR UPDATE SKIP LOCKED
                )
                UPDATE followups f
                SET status = 'running', attempt = f.attempt + 1,
                    lease_until = now() + make_interval(secs => \(leaseSeconds)), updated_at = now()
                FROM due
                WHERE f.app_id = due.app_id AND f.id = due.id
                RETURNING f.app_id, f.id, f.attempt, f.channel, f.payload,
                    extract(epoch FROM now() - f.due_at)::float8 AS lateness
                """)
        }
        return try rows.map { row in
            ClaimedFollowUp(
                appID: try row.decode("app_id"), id: try row.decode("id"), attempt: try row.decode("attempt"),
                channel: FollowUpChannel(rawValue: try row.decode("channel")) ?? .webhook,
                payload: try JSONParser.parse(try row.decode("payload", as: PostgresJSON.self).text),
                lateness: try row.decode("lateness"))
        }
    }

    /// Records an attempt's end, fenced by its attempt number. Returns `false` when the claim was
    /// lost (lease expired and taken over, or cancelled), in which case nothing changed.
    @discardableResult
    public func finish(
        _ claim: ClaimedFollowUp, result: AttemptResult, startedAt: Date, duration: Duration
    ) throws -> Bool {
        let milliseconds = Int(duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000)
        let status: String
        var retryAfter: Int?
        var httpStatus: Int?
        var errorClass: String?
        var attemptResult: String
        switch result {
        case .delivered(let code):
            status = "delivered"
            httpStatus = code
            attemptResult = "delivered"
        case .failed(let code, let error, let retry):
            status = retry == nil ? "dead" : "retrying"
            retryAfter = retry
            httpStatus = code
            errorClass = error
            attemptResult = "failed"
        case .skipped(let reason):
            status = "skipped"
            errorClass = reason
            attemptResult = "skipped"
        }
        return try pool.transaction { connection in
            let updated = try connection.execute(
                """
                UPDATE followups
                SET status = \(status), lease_until = NULL, updated_at = now(), last_error = \(errorClass),
                    due_at = CASE WHEN \(retryAfter)::integer IS NULL THEN due_at
                        ELSE now() + make_interval(secs => \(retryAfter)::integer / 1000.0) END
                WHERE app_id = \(claim.appID) AND id = \(claim.id) AND attempt = \(claim.attempt) AND status = 'running'
                """)
            guard updated == 1 else { return false }
            try connection.execute(
                """
                INSERT INTO delivery_attempts (app_id, followup_id, attempt, started_at, finished_at, result,
                    http_status, error_class, duration_ms)
                VALUES (\(claim.appID), \(claim.id), \(claim.attempt), \(startedAt), now(), \(attemptResult),
                    \(httpStatus), \(errorClass), \(milliseconds))
                ON CONFLICT DO NOTHING
                """)
            return true
        }
    }

    /// Gives claims back without counting a failure (graceful shutdown): due again at once.
    public func release(_ claims: [ClaimedFollowUp]) throws {
        try pool.transaction { connection in
            for claim in claims {
                try connection.execute(
                    """
                    UPDATE followups SET status = 'retrying', lease_until = NULL, due_at = now(), updated_at = now()
                    WHERE app_id = \(claim.appID) AND id = \(claim.id) AND attempt = \(claim.attempt)
                        AND status = 'running'
                    """)
            }
        }
    }

    /// Returns follow-ups whose lease expired (their worker died) to the queue, due now.
    @discardableResult
    public func sweepExpiredLeases() throws -> Int {
        try pool.withConnection { connection in
            try connection.execute(
                """
                UPDATE followups SET status = 'retrying', lease_until = NULL, due_at = now(), updated_at = now(),
                    last_error = 'lease expired'
                WHERE status = 'running' AND lease_until < now()
                """)
        }
    }

    /// Seconds until the next follow-up is due (0 when one is due now), or `nil` when none waits.
    public func secondsUntilNextDue() throws -> Double? {
        try pool.withConnection { connection in
            let rows = try connection.query(
                """
                SELECT greatest(0, extract(epoch FROM min(due_at) - now()))::float8 AS wait
                FROM followups WHERE status IN ('pending', 'retrying')
                """)
            return try rows[0].decode("wait", as: Double?.self)
        }
    }

    /// Queue depth and the age in seconds of the oldest due follow-up (0 when none is due).
    public func queueStatistics() throws -> (due: Int, oldestDueAge: Double) {
        try pool.withConnection { connection in
            let rows = try connection.query(
                """
                SELECT count(*) AS due, coalesce(extract(epoch FROM now() - min(due_at)), 0)::float8 AS age
                FROM followups WHERE status IN ('pending', 'retrying') AND due_at <= now()
                """)
            return (try rows[0].decode("due"), try rows[0].decode("age"))
        }
    }

    /// Whether APNs reported this device token dead for the app.
    public func isDeviceDead(appID: String, token: String) throws -> Bool {
        try pool.withConnection { connection in
            try !connection.query(
                "SELECT 1 AS one FROM devices WHERE app_id = \(appID) AND token = \(token) AND status = 'dead'"
            ).isEmpty
        }
    }

    /// Marks a device token dead (APNs 410 Unregistered or 400 BadDeviceToken).
    public func markDeviceDead(appID: String, token: String, reason: String) throws {
        try pool.withConnection { connection in
            try connection.execute(
                """
                INSERT INTO devices (app_id, token, status, reason) VALUES (\(appID), \(token), 'dead', \(reason))
                ON CONFLICT (app_id, token) DO UPDATE SET status = 'dead', reason = EXCLUDED.reason, updated_at = now()
                """)
        }
    }

    /// Disables an app's webhook endpoint after it answered 410 Gone, until the webhook is updated.
    public func disableWebhook(appID: String) throws {
        try pool.transaction { connection in
            try connection.execute(
                "UPDATE apps SET webhook_disabled_at = now() WHERE id = \(appID) AND webhook_disabled_at IS NULL")
            try connection.notify(channel: Channels.invalidate, payload: appID)
        }
    }
}
