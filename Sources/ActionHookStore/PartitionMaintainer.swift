import ActionHookCore
import Foundation
import Locks
import Logging
import Postgres

/// How long history is kept and how it is cut: the partition width, the server's retention, and how far
/// ahead partitions are made.
public struct RetentionPolicy: Sendable, Equatable {
    /// The width of a partition, in seconds (a day by default; at least an hour).
    public var partitionSeconds: Int
    /// Days a response, a finished follow-up and a delivery attempt are kept (an app may keep fewer).
    public var retentionDays: Int
    /// How long an idempotency key is kept, in seconds: no reply is deleted younger than this, whatever
    /// its app keeps, since a key that outlived its reply could no longer replay it.
    public var idempotencyWindowSeconds: Int

    /// The defaults: daily partitions, 30 days kept, keys kept a day.
    public init(partitionSeconds: Int = 86_400, retentionDays: Int = 30, idempotencyWindowSeconds: Int = 86_400) {
        self.partitionSeconds = partitionSeconds
        self.retentionDays = retentionDays
        self.idempotencyWindowSeconds = idempotencyWindowSeconds
    }

    /// Partitions are made this far ahead of the present: two widths, and at least two days, so that a
    /// maintenance run missed for a day or two never leaves a write without its partition.
    public var aheadSeconds: Int { max(2 * partitionSeconds, 2 * 86_400) }

    /// How often maintenance runs: every quarter width, at most hourly.
    public var runInterval: Duration { .seconds(min(partitionSeconds / 4, 3600)) }
}

/// What one maintenance run did and found.
public struct MaintenanceReport: Sendable, Equatable {
    /// Whether this instance ran it (another one held the maintenance lock otherwise, and nothing was done).
    public var ran = false
    /// Partitions made.
    public var created = 0
    /// Partitions dropped, by partitioned table.
    public var dropped: [String: Int] = [:]
    /// Rows deleted for apps that keep less than the server does, by table.
    public var deleted: [String: Int] = [:]
    /// Partitions kept, by partitioned table.
    public var partitions: [String: Int] = [:]
    /// The start of the oldest kept partition, by partitioned table.
    public var oldest: [String: Date] = [:]
}

/// Keeps the partitioned tables (sql/migrations/011 and 014) within their windows: makes partitions ahead
/// of time and drops those wholly older than the retention (the history) or the idempotency window (the
/// keys), in every instance, one at a time.
///
/// A run takes a session-level advisory lock on a connection of its own (tried, never waited for: an
/// instance that finds it taken leaves the run to the holder), and waits at most 5 s for any table lock. Partitions are made by `actionhook_create_partitions`, attached without
/// blocking writes; old ones are detached with `DETACH PARTITION … CONCURRENTLY` (never a `DELETE`) and
/// dropped. An app with a shorter `retentionDays` has its older rows deleted in batches of
/// ``batchSize``, each its own statement; sent notifications, which are not partitioned, are deleted the
/// same way once past their app's retention, expired (a reply to it until then must find it, to be
/// bound, superseded or refused as late) and no longer waiting for a follow-up.
public final class PartitionMaintainer: Sendable {
    let pool: Database
    let policy: RetentionPolicy
    let batchSize: Int
    let logger: Logger
    let onReport: @Sendable (MaintenanceReport) -> Void
    private let background = BackgroundLoop("actionhook-partitions", LoopState(), loop: \.self)
    private var state: Monitor<LoopState> { background.state }

    /// The partitioned tables, as `actionhook_partitions` names them.
    public static let tables = ["responses", "followups_done", "delivery_attempts", "idempotency_keys"]

    /// Creates a maintainer; `onReport` receives each run's report (for metrics).
    public init(
        pool: PostgresPool, policy: RetentionPolicy, batchSize: Int = 1000, logger: Logger,
        onReport: @escaping @Sendable (MaintenanceReport) -> Void = { _ in }
    ) {
        self.pool = Database(pool)
        self.policy = policy
        self.batchSize = batchSize
        self.logger = logger
        self.onReport = onReport
    }

    /// Starts the background thread: a run at once, then one per ``RetentionPolicy/runInterval``.
    public func start() {
        background.start { [self] _ in loop() }
    }

    /// Stops the thread after its current step and waits for it.
    public func stop() {
        background.stop()
    }

    private func loop() {
        var next = ContinuousClock.now
        while state.wait(until: next, for: \.mustWake, then: { $0.takeWakeUp() }) {
            next = .now + policy.runInterval
            do {
                onReport(try maintain())
            } catch {
                logger.warning("partition maintenance failed", metadata: ["error": "\(error)"])
            }
        }
    }

    private var stopping: Bool { state.withLock { $0.phase == .stopping } }

    /// One run at `now` (the database's clock when `nil`; tests move it).
    @discardableResult
    public func maintain(now: Date? = nil) throws -> MaintenanceReport {
        var report = MaintenanceReport()
        // A connection of its own, closed when the run ends: the run's session lock and `lock_timeout`
        // end with it, and never stay behind on a pooled connection.
        try StoreError.translatingUnavailable {
            let connection = try PostgresConnection(configuration: pool.pool.configuration)
            let locked = try connection.query(
                "SELECT pg_try_advisory_lock(hashtext('actionhook.maintenance.' || current_schema())) AS locked")
            guard try locked[0].decode("locked", as: Bool.self) else { return }
            report.ran = true
            // Waiting long for a parent's lock would hold up the writes queued behind it: retried next run.
            try connection.execute("SET lock_timeout = '5s'")
            let clock = try connection.query("SELECT coalesce(\(now)::timestamptz, now()) AS now")
            let present: Date = try clock[0].decode("now")
            report.created = try connection.transaction { transaction in
                try transaction.query(
                    """
                    SELECT actionhook_create_partitions(\(present)::timestamptz,
                        \(present)::timestamptz + make_interval(secs => \(policy.aheadSeconds)),
                        make_interval(secs => \(policy.partitionSeconds))) AS made
                    """)[0].decode("made", as: Int.self)
            }
            let cutoff = present.addingTimeInterval(-Double(policy.retentionDays) * 86_400)
            // Keys are kept for the idempotency window, the history for the retention.
            let keysCutoff = present.addingTimeInterval(-Double(policy.idempotencyWindowSeconds))
            let expired = try connection.query(
                """
                SELECT p.parent, p.name, i.inhdetachpending AS pending, i.inhrelid IS NOT NULL AS attached
                FROM actionhook_partitions p
                LEFT JOIN pg_inherits i ON i.inhrelid = to_regclass(quote_ident(p.name))
                WHERE p.upper <= CASE WHEN p.parent = 'idempotency_keys' THEN \(keysCutoff)::timestamptz
                    ELSE \(cutoff)::timestamptz END
                ORDER BY p.lower
                """)
            for row in expired where !stopping {
                let parent: String = try row.decode("parent")
                let name: String = try row.decode("name")
                try drop(
                    parent: parent, name: name, attached: try row.decode("attached"),
                    pending: try row.decode("pending", as: Bool?.self) ?? false, connection: connection)
                report.dropped[parent, default: 0] += 1
            }
            try deleteForShorterRetention(present: present, connection: connection, report: &report)
            for row in try connection.query(
                "SELECT parent, count(*)::int AS n, min(lower) AS oldest FROM actionhook_partitions GROUP BY parent")
            {
                let parent: String = try row.decode("parent")
                report.partitions[parent] = try row.decode("n")
                report.oldest[parent] = try row.decode("oldest")
            }
        }
        if report.created > 0 || !report.dropped.isEmpty || !report.deleted.isEmpty {
            logger.info(
                "partition maintenance",
                metadata: [
                    "created": "\(report.created)", "dropped": "\(report.dropped.values.reduce(0, +))",
                    "deleted": "\(report.deleted.values.reduce(0, +))",
                ])
        }
        return report
    }

    /// Detaches a partition without blocking writes to its parent, then drops it. A detach left halfway
    /// (the instance stopped between its two transactions) is finished first.
    private func drop(parent: String, name: String, attached: Bool, pending: Bool, connection: PostgresConnection)
        throws
    {
        if attached {
            let form = pending ? "FINALIZE" : "CONCURRENTLY"
            let statement = try connection.query(
                "SELECT format('ALTER TABLE %I DETACH PARTITION %I ' || \(form)::text, \(parent)::text, \(name)::text) AS sql"
            )[0]
            .decode("sql", as: String.self)
            try connection.execute(PostgresQuery(unsafeSQL: statement))
        }
        try connection.transaction { transaction in
            let statement = try transaction.query("SELECT format('DROP TABLE IF EXISTS %I', \(name)::text) AS sql")[0]
                .decode("sql", as: String.self)
            try transaction.execute(PostgresQuery(unsafeSQL: statement))
            try transaction.execute("DELETE FROM actionhook_partitions WHERE name = \(name)")
        }
    }

    /// Deletes, a batch per statement, what apps keep for less than the server does (never a reply younger
    /// than the idempotency window), and every app's sent notifications past its retention that have
    /// expired and that no queued follow-up waits on.
    private func deleteForShorterRetention(
        present: Date, connection: PostgresConnection, report: inout MaintenanceReport
    ) throws {
        let apps = try connection.query("SELECT id, retention_days FROM apps ORDER BY id")
        for app in apps where !stopping {
            let appID: String = try app.decode("id")
            let days = min(
                try app.decode("retention_days", as: Int?.self) ?? policy.retentionDays, policy.retentionDays)
            // An app saved before the window grew keeps its replies for the window at least.
            let cutoff = min(
                present.addingTimeInterval(-Double(days) * 86_400),
                present.addingTimeInterval(-Double(policy.idempotencyWindowSeconds)))
            var statements: [(table: String, query: PostgresQuery)] = [
                (
                    "notifications",
                    """
                    DELETE FROM notifications WHERE app_id = \(appID) AND id IN (
                        SELECT n.id FROM notifications n
                        WHERE n.app_id = \(appID) AND n.created_at < \(cutoff)
                            AND coalesce(n.expires_at, n.created_at) <= \(present) AND NOT EXISTS (
                            SELECT 1 FROM followups_queue q WHERE q.app_id = n.app_id AND q.notification_id = n.id)
                        LIMIT \(batchSize))
                    """
                )
            ]
            if days < policy.retentionDays {
                statements += [
                    (
                        "responses",
                        """
                        DELETE FROM responses WHERE app_id = \(appID) AND id IN (
                            SELECT id FROM responses WHERE app_id = \(appID) AND id < actionhook_uuid_at(\(cutoff))
                            LIMIT \(batchSize))
                        """
                    ),
                    (
                        "followups_done",
                        """
                        DELETE FROM followups_done WHERE app_id = \(appID) AND (id, finished_at) IN (
                            SELECT id, finished_at FROM followups_done WHERE app_id = \(appID) AND finished_at < \(cutoff)
                            LIMIT \(batchSize))
                        """
                    ),
                    (
                        "delivery_attempts",
                        """
                        DELETE FROM delivery_attempts WHERE app_id = \(appID) AND (followup_id, attempt, finished_at) IN (
                            SELECT followup_id, attempt, finished_at FROM delivery_attempts
                            WHERE app_id = \(appID) AND finished_at < \(cutoff)
                            LIMIT \(batchSize))
                        """
                    ),
                ]
            }
            for statement in statements {
                while !stopping {
                    let count = try connection.execute(statement.query)
                    if count > 0 { report.deleted[statement.table, default: 0] += count }
                    if count < batchSize { break }
                }
            }
        }
    }
}
