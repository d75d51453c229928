import ActionHookCore
import Foundation
import Locks
import Postgres

extension FinishedAttempt {
    /// The columns the result sets: the follow-up's new status and the attempt's row.
    var row:
        (status: String, retryAfterMilliseconds: Int?, httpStatus: Int?, errorClass: String?, attemptResult: String)
    {
        switch result {
        case .delivered(let code):
            return ("delivered", nil, code, nil, "delivered")
        case .failed(let code, let error, let retry):
            return (retry == nil ? "dead" : "retrying", retry, code, error, "failed")
        case .skipped(let reason):
            return ("skipped", nil, nil, reason, "skipped")
        }
    }
}

/// The outbox as the delivery worker sees it. Every write after a claim is fenced by
/// `(id, attempt, status = 'running')`, so a worker whose lease was taken over changes nothing.
public struct OutboxStore: Outbox {
    let pool: Database
    /// Claims whose answer never came (the database was away): each claim's token, with when the lease
    /// it asked for ends. Every later claim gives back the rows they took, if they did commit, until
    /// then; past it the lease sweep returns them anyway.
    private let lostClaims = Locked<[(token: UUID, until: ContinuousClock.Instant)]>([])

    /// Creates the store over a pool.
    public init(pool: PostgresPool) {
        self.pool = Database(pool)
    }

    /// The delivery settings of an app, or `nil` when it was deleted.
    public func deliverySettings(appID: String) throws -> DeliverySettings? {
        try AppStore(pool: pool.pool).app(appID).map {
            DeliverySettings(
                webhook: $0.definition.webhook, apns: $0.definition.apns, webhookDisabled: $0.webhookDisabledAt != nil)
        }
    }

    /// Claims up to `limit` due follow-ups (oldest due first) for `leaseSeconds`, skipping rows
    /// other workers hold.
    ///
    /// Planned with the finishing transaction's settings: the due index, oldest first, and each row by
    /// primary key, whatever the statistics say. Left to statistics taken while the outbox was small (a
    /// new install, a burst of ingest before autovacuum), a plan may scan the whole table per claim.
    ///
    /// One round trip: the settings and the claim go out as one pipeline, which the server runs as one
    /// transaction committed at the pipeline's end (no `BEGIN` or `COMMIT` is sent; see
    /// ``PostgresPool/pipelinedTransaction(_:)``), and each push comes back with whether its device token
    /// is known dead. A claim whose answer is lost (the connection dropped, or the database did not answer
    /// in time) may still commit once the database answers: its token is kept, and each later claim first
    /// gives back whatever running rows carry a lost token, so they are due again at once rather than
    /// after their lease, with the attempt number they had (the claim does not count). Nothing is sent twice
    /// within an attempt (the rows given back were never sent) and nothing is lost.
    /// A claim that fails is tried once more at once (a pooled connection may have died while idle).
    public func claim(limit: Int, leaseSeconds: Int) throws -> [ClaimedFollowUp] {
        func attempt() throws -> PostgresRows {
            let now = ContinuousClock.now
            let lost = lostClaims.withLock { claims in
                claims.removeAll { $0.until <= now }
                return claims.map(\.token)
            }
            let token = UUID()
            var statements = [Self.planSettings]
            if !lost.isEmpty { statements.append(Self.releaseLostClaims(lost)) }
            statements.append(Self.claimBatch(limit: limit, leaseSeconds: leaseSeconds, token: token))
            do {
                // Lost tokens are kept until their lease ends: a lost claim may commit after this release ran.
                return try pool.pipelinedTransaction(statements)[statements.count - 1]
            } catch StoreError.unavailable {
                lostClaims.withLock { $0.append((token, now + .seconds(leaseSeconds))) }
                throw StoreError.unavailable
            }
        }
        let rows: PostgresRows
        do {
            rows = try attempt()
        } catch StoreError.unavailable {
            rows = try attempt()
        }
        // A no-reply step or expiry whose notification was answered is cancelled by the claim itself
        // (fenced), and never reaches the worker.
        return try rows.map { row in
            ClaimedFollowUp(
                appID: try row.decode("app_id"), id: try row.decode("id"), attempt: try row.decode("attempt"),
                channel: FollowUpChannel(rawValue: try row.decode("channel")) ?? .webhook,
                payload: try JSONParser.parse(try row.decode("payload", as: PostgresJSON.self).text),
                lateness: try row.decode("lateness"), dueAt: try row.decode("due_at"),
                deviceDead: try row.decode("device_dead"), row: try row.decode("row"))
        }
    }

    // A no-reply step is sent only if its notification is still unanswered and unexpired when it is
    // claimed, an expiry webhook only if it is still unanswered: the claim reads the notification as it
    // locks the row (`fenced`) and moves the row out of the queue cancelled instead, leaving its attempt
    // number as it was. An answer that commits before the claim's snapshot cancels it (or the answer's own
    // transaction did); one that commits after the claim came after the silence the step waited for.
    // The due rows are locked by the CTE and updated through their ctid (a TID scan, the usual queue
    // pattern): joined back by (app_id, id) instead, a generic plan made while the table looked empty
    // went through `followups_by_status` and read every entry of the app for each row (0.5 ms a row
    // at 20,000 queued). Only `followups_queue` is read: finished follow-ups live elsewhere, so the
    // claim costs the same however much history there is.
    static func claimBatch(limit: Int, leaseSeconds: Int, token: UUID) -> PostgresQuery {
        ("""
        WITH due AS (
            SELECT ctid AS row, kind IN ('step', 'expiry') AND EXISTS (
                    SELECT 1 FROM notifications n
                    WHERE n.app_id = q.app_id AND n.id = q.notification_id
                        AND (n.answered_at IS NOT NULL OR (q.kind = 'step' AND n.expires_at <= now()))
                ) AS fenced
            FROM followups_queue q
            WHERE status IN ('pending', 'retrying') AND due_at <= now()
            ORDER BY due_at
            LIMIT \(limit)
            FOR UPDATE SKIP LOCKED
        ),
        fenced AS (
            DELETE FROM followups_queue f USING due WHERE f.ctid = due.row AND due.fenced
            RETURNING f.*, 'cancelled'::text AS final_status, coalesce(f.last_error, '') AS error_class
        ),
        cancelled AS (
            INSERT INTO followups_done (\(unsafeSQL: Self.doneColumns))
            SELECT \(unsafeSQL: Self.doneValues) FROM fenced
        )
        UPDATE followups_queue f
        SET status = 'running', attempt = f.attempt + 1,
            lease_until = now() + make_interval(secs => \(leaseSeconds)), lease_token = \(token)::uuid,
            updated_at = now()
        FROM due
        WHERE f.ctid = due.row AND NOT due.fenced
        RETURNING f.app_id, f.id, f.attempt, f.channel, f.payload,
            f.ctid::text AS row, f.due_at,
            extract(epoch FROM now() - f.due_at)::float8 AS lateness,
            f.channel = 'apns' AND EXISTS (
                SELECT 1 FROM devices d
                WHERE d.app_id = f.app_id AND d.token = f.payload ->> 'deviceToken' AND d.status = 'dead'
            ) AS device_dead
        """ as PostgresQuery).prepared
    }

    /// The columns of a follow-up moved out of the queue into `followups_done`, and their values from
    /// the queue's row as a DELETE returned it with `final_status` and `error_class` ('' for none): the
    /// one column list of the claim's fenced rows and of the finish (the SQL functions of
    /// sql/migrations/011 have the others).
    static let doneColumns: StaticString = """
        app_id, id, response_id, ordinal, channel, is_snooze, notification_identifier, device_token, payload, status,
        due_at, attempt, lease_until, last_error, created_at, updated_at, lease_token, notification_id, kind, step,
        finished_at
        """

    static let doneValues: StaticString = """
        app_id, id, response_id, ordinal, channel, is_snooze, notification_identifier, device_token, payload,
        final_status, due_at, attempt, NULL, nullif(error_class, ''), created_at, now(), NULL, notification_id, kind,
        step, now()
        """

    /// Gives back the running rows of claims whose answer was lost, due again at once, as a release
    /// does: they were never sent, so the claim does not count (their attempt number goes back). Reached
    /// through the lease index (running rows only).
    static func releaseLostClaims(_ tokens: [UUID]) -> PostgresQuery {
        """
        UPDATE followups_queue SET status = 'retrying', lease_until = NULL, lease_token = NULL, due_at = now(),
            updated_at = now(), attempt = attempt - 1
        WHERE status = 'running' AND lease_until IS NOT NULL AND lease_token = ANY(\(tokens)::uuid[])
        """
    }

    /// Records an attempt's end, fenced by its attempt number. Returns `false` when the claim was
    /// lost (lease expired and taken over, or cancelled), in which case nothing changed.
    @discardableResult
    public func finish(
        _ claim: ClaimedFollowUp, result: AttemptResult, startedAt: Date, duration: Duration
    ) throws -> Bool {
        try !finish([FinishedAttempt(claim: claim, result: result, startedAt: startedAt, duration: duration)]).isEmpty
    }

    /// Records the ends of many attempts in one statement (one transaction, one round trip), each
    /// fenced by its own attempt number: a row whose claim was lost is left as it is. Returns the ids
    /// whose attempt was recorded.
    ///
    /// The worker calls this with everything that finished since its last call, so the cost of a
    /// commit is shared by every delivery of the batch (group commit, as ingest does). The settings and
    /// the statement go out as one pipeline, one transaction committed at its end without `BEGIN` or
    /// `COMMIT`: one round trip.
    @discardableResult
    public func finish(_ attempts: [FinishedAttempt]) throws -> Set<UUID> {
        guard !attempts.isEmpty else { return [] }
        var apps: [String] = []
        var ids: [UUID] = []
        var rowIDs: [String] = []
        var numbers: [Int] = []
        var statuses: [String] = []
        var errors: [String] = []
        var retries: [Int] = []
        var httpStatuses: [Int] = []
        var results: [String] = []
        var started: [Int] = []
        var durations: [Int] = []
        var due: [Int] = []
        for attempt in attempts {
            let row = attempt.row
            apps.append(attempt.claim.appID)
            ids.append(attempt.claim.id)
            rowIDs.append(attempt.claim.row)
            numbers.append(attempt.claim.attempt)
            statuses.append(row.status)
            // Arrays carry no NULL elements here: "" and -1 stand for none and become NULL in SQL.
            errors.append(row.errorClass ?? "")
            retries.append(row.retryAfterMilliseconds ?? -1)
            httpStatuses.append(row.httpStatus ?? -1)
            results.append(row.attemptResult)
            started.append(Self.milliseconds(attempt.startedAt))
            due.append(Self.milliseconds(attempt.claim.dueAt))
            durations.append(
                Int(
                    attempt.duration.components.seconds * 1000
                        + attempt.duration.components.attoseconds / 1_000_000_000_000_000))
        }
        let rows = try pool.pinned(
            Self.planSettings,
            Self.finishBatch(
                apps: apps, ids: ids, rows: rowIDs, attempts: numbers, statuses: statuses, errors: errors,
                retries: retries, httpStatuses: httpStatuses, results: results, started: started,
                durations: durations, due: due)
        )
        return Set(try rows.map { try $0.decode("id", as: UUID.self) })
    }

    /// Whole milliseconds since 1970, truncated as the service's RFC 3339 text truncates (to the microsecond
    /// first, the database's precision): an attempt's `dueAt` reads as its follow-up's does.
    static func milliseconds(_ date: Date) -> Int {
        Int(((date.timeIntervalSince1970 * 1_000_000).rounded() / 1000).rounded(.down))
    }

    /// Settings for the worker's statements (claim, finish, sweep, next due): their plans reach
    /// `followups` by the due or lease index and by primary key,
    /// whatever the statistics say. Left to them, right after a burst of ingest the planner took
    /// `followups_by_status` and walked every dead entry of it for each row (0.08 → 2.4 ms a call
    /// over 20,000 deliveries); a generic plan made once per connection also skips planning each batch.
    static let planSettings =
        ("""
    SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
        set_config('enable_bitmapscan', 'off', true), set_config('enable_hashjoin', 'off', true),
        set_config('enable_mergejoin', 'off', true)
    """ as PostgresQuery).prepared

    // One statement: every row still ours either stays in the queue to be retried (updated in place) or
    // leaves it finished (deleted from the queue and inserted into `followups_done`), and an attempt row
    // for each of them. Rows can be reached by the ctid their claim returned (a TID scan; see
    // `ClaimedFollowUp.row`) as well as by primary key. The attempt rows come from the statements' own
    // RETURNING (which sees the batch's columns): joining the batch to the changed rows again would be a
    // nested loop over both, quadratic in the batch, since the plan settings turn hash and merge joins off.
    static func finishBatch(
        apps: [String], ids: [UUID], rows: [String], attempts: [Int], statuses: [String], errors: [String],
        retries: [Int], httpStatuses: [Int], results: [String], started: [Int], durations: [Int], due: [Int]
    ) -> PostgresQuery {
        ("""
        WITH batch AS (
            SELECT * FROM unnest(\(apps)::text[], \(ids)::uuid[], \(rows)::tid[], \(attempts)::int[],
                \(statuses)::text[], \(errors)::text[], \(retries)::int[], \(httpStatuses)::int[],
                \(results)::text[], \(started)::bigint[], \(durations)::int[], \(due)::bigint[])
                AS b(app_id, id, row, attempt, status, error_class, retry_ms, http_status, result, started_ms,
                    duration_ms, due_ms)
        ),
        retried AS (
            UPDATE followups_queue f
            SET status = 'retrying', lease_until = NULL, updated_at = now(), last_error = nullif(b.error_class, ''),
                due_at = now() + make_interval(secs => b.retry_ms / 1000.0)
            FROM batch b
            WHERE f.ctid = b.row AND f.app_id = b.app_id AND f.id = b.id AND f.attempt = b.attempt
                AND f.status = 'running' AND b.status = 'retrying'
            RETURNING f.app_id, f.id, f.attempt, b.result, b.http_status, b.error_class, b.started_ms, b.duration_ms,
                b.due_ms
        ),
        moved AS (
            DELETE FROM followups_queue f
            USING batch b
            WHERE f.ctid = b.row AND f.app_id = b.app_id AND f.id = b.id AND f.attempt = b.attempt
                AND f.status = 'running' AND b.status <> 'retrying'
            RETURNING f.*, b.status AS final_status, b.error_class, b.result, b.http_status, b.started_ms,
                b.duration_ms, b.due_ms
        ),
        finished AS (
            INSERT INTO followups_done (\(unsafeSQL: Self.doneColumns))
            SELECT \(unsafeSQL: Self.doneValues) FROM moved
        ),
        ended AS (
            SELECT app_id, id, attempt, result, http_status, error_class, started_ms, duration_ms, due_ms FROM retried
            UNION ALL
            SELECT app_id, id, attempt, result, http_status, error_class, started_ms, duration_ms, due_ms FROM moved
        ),
        recorded AS (
            INSERT INTO delivery_attempts (app_id, followup_id, attempt, started_at, finished_at, result,
                http_status, error_class, duration_ms, due_at)
            SELECT app_id, id, attempt, to_timestamp(started_ms / 1000.0), now(), result,
                nullif(http_status, -1), nullif(error_class, ''), duration_ms, to_timestamp(due_ms / 1000.0)
            FROM ended
            ON CONFLICT DO NOTHING
        )
        SELECT id FROM ended
        """ as PostgresQuery).prepared
    }

    /// Gives claims back without recording an attempt (graceful shutdown): due again at once, the `unsent`
    /// ones with the attempt number they had before their claim (see ``Outbox/release(_:unsent:)``).
    public func release(_ claims: [ClaimedFollowUp], unsent: [ClaimedFollowUp]) throws {
        guard !claims.isEmpty || !unsent.isEmpty else { return }
        try pool.transaction { connection in
            for (claim, uncounted) in claims.map({ ($0, 0) }) + unsent.map({ ($0, 1) }) {
                try connection.execute(
                    """
                    UPDATE followups_queue SET status = 'retrying', lease_until = NULL, lease_token = NULL,
                        due_at = now(), updated_at = now(), attempt = attempt - \(uncounted)
                    WHERE app_id = \(claim.appID) AND id = \(claim.id) AND attempt = \(claim.attempt)
                        AND status = 'running'
                    """)
            }
        }
    }

    /// Returns follow-ups whose lease expired (their worker died) to the queue, due now. Planned with
    /// the claim's settings (by the lease index), as are the two reads below (by the due index).
    @discardableResult
    public func sweepExpiredLeases() throws -> Int {
        let rows = try pool.pinned(
            Self.planSettings,
            """
            WITH swept AS (
                UPDATE followups_queue SET status = 'retrying', lease_until = NULL, due_at = now(),
                    updated_at = now(), last_error = 'lease expired'
                WHERE status = 'running' AND lease_until < now()
                RETURNING 1
            )
            SELECT count(*) AS swept FROM swept
            """
        )
        return try rows[0].decode("swept")
    }

    /// Seconds until the next follow-up is due (0 when one is due now), or `nil` when none waits.
    ///
    /// The clamp to 0 is done here, not in SQL: PostgreSQL's `greatest` ignores a NULL argument, so
    /// `greatest(0, NULL)` is 0 and an empty outbox would read as "due now" (the worker then looked
    /// again every millisecond while idle).
    public func secondsUntilNextDue() throws -> Double? {
        let rows = try pool.pinned(
            Self.planSettings,
            """
            SELECT extract(epoch FROM min(due_at) - now())::float8 AS wait
            FROM followups_queue WHERE status IN ('pending', 'retrying')
            """
        )
        return try rows[0].decode("wait", as: Double?.self).map { max(0, $0) }
    }

    /// Queue depth and the age in seconds of the oldest due follow-up (0 when none is due).
    public func queueStatistics() throws -> (due: Int, oldestDueAge: Double) {
        let rows = try pool.pinned(
            Self.planSettings,
            """
            SELECT count(*) AS due, coalesce(extract(epoch FROM now() - min(due_at)), 0)::float8 AS age
            FROM followups_queue WHERE status IN ('pending', 'retrying') AND due_at <= now()
            """
        )
        return (try rows[0].decode("due"), try rows[0].decode("age"))
    }

    /// Marks a device token dead (APNs 410 Unregistered or 400 BadDeviceToken). Not for a deleted app, whose
    /// devices are being purged (a push in flight when it was deleted may end after that).
    public func markDeviceDead(appID: String, token: String, reason: String) throws {
        try pool.withConnection { connection in
            try connection.execute(
                """
                INSERT INTO devices (app_id, token, status, reason)
                SELECT \(appID), \(token), 'dead', \(reason) WHERE EXISTS (SELECT 1 FROM apps WHERE id = \(appID))
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
