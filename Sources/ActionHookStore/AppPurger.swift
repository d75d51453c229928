import ActionHookCore
import Foundation
import Locks
import Logging
import Postgres

/// One transaction of a purge: what it removed of which deleted app.
public enum PurgeStep: Sendable, Equatable {
    /// Up to a batch of the app's rows of one table.
    case deleted(appID: String, table: String, rows: Int)
    /// The app had no rows left: its deletion record is gone, and its id may be used again.
    case finished(appID: String)
}

/// Removes the rows deleted apps own (sql/migrations/013) in the background, a batch per transaction, so
/// that deleting an app with real history answers at once and never holds up ingest.
///
/// Every instance runs one. It looks for work when it starts, when an app is deleted (`NOTIFY` on
/// ``Channels/appDeleted``, through ``wake()``) and when the listener reconnects (a notification may
/// have been missed); while there is work it goes on batch after batch, and once there is none it
/// sleeps until woken, never polling. A batch locks its app's deletion record `FOR UPDATE SKIP LOCKED`,
/// so instances purge different apps at once and never the same rows; an instance that finds every
/// record locked leaves them to their holders.
public final class AppPurger: Sendable {
    let pool: Database
    let batchSize: Int
    let logger: Logger
    private let background = BackgroundLoop("actionhook-app-purge", LoopState(), loop: \.self)
    private var state: Monitor<LoopState> { background.state }

    /// Creates a purger that deletes up to `batchSize` rows per transaction.
    public init(pool: PostgresPool, batchSize: Int = 1000, logger: Logger) {
        self.pool = Database(pool)
        self.batchSize = batchSize
        self.logger = logger
    }

    /// Starts the background thread, which looks for work at once.
    public func start() {
        background.start { [self] _ in loop() }
    }

    /// Stops the thread after its current batch and waits for it.
    public func stop() {
        background.stop()
    }

    /// Tells the purger that an app was deleted (or that a notification of one may have been missed).
    public func wake() {
        background.wake()
    }

    private func loop() {
        // nil: asleep until woken. A failed batch (the database away) is tried again a little later.
        var next: ContinuousClock.Instant? = .now
        while state.wait(until: next, for: \.mustWake, then: { $0.takeWakeUp() }) {
            do {
                next = try purgeBatch() == nil ? nil : .now
            } catch {
                logger.warning("app purge failed", metadata: ["error": "\(error)"])
                next = .now + .seconds(5)
            }
        }
    }

    /// Every batch there is to do, one after the other, until none is left (or the purger is stopping).
    @discardableResult
    public func purge() throws -> [PurgeStep] {
        var steps: [PurgeStep] = []
        while !state.withLock({ $0.phase == .stopping }), let step = try purgeBatch() {
            steps.append(step)
        }
        return steps
    }

    /// One transaction: up to a batch of the oldest deleted app's rows from the first table that still has
    /// some, or, when none has, the end of its deletion. `nil` when no deletion waits (or each is another
    /// instance's).
    @discardableResult
    public func purgeBatch() throws -> PurgeStep? {
        let step = try pool.transaction { connection -> PurgeStep? in
            let pending = try connection.query(
                """
                SELECT app_id FROM app_deletions ORDER BY requested_at, app_id LIMIT 1 FOR UPDATE SKIP LOCKED
                """)
            guard let row = pending.first else { return nil }
            let appID: String = try row.decode("app_id")
            for table in PurgedTable.allCases {
                let rows = try connection.execute(table.deleteBatch(appID: appID, limit: batchSize))
                if rows > 0 { return .deleted(appID: appID, table: table.rawValue, rows: rows) }
            }
            try connection.execute("DELETE FROM app_deletions WHERE app_id = \(appID)")
            return .finished(appID: appID)
        }
        if case .finished(let appID)? = step {
            logger.info("deleted app's rows removed", metadata: ["app": "\(appID)"])
        }
        return step
    }
}

/// The tables a deleted app's rows are purged from, in order: what is still to be delivered first.
enum PurgedTable: String, CaseIterable {
    case followupsQueue = "followups_queue"
    case followupsDone = "followups_done"
    case deliveryAttempts = "delivery_attempts"
    case responses
    case idempotencyKeys = "idempotency_keys"
    case notifications
    case devices
    case subjectDevices = "subject_devices"

    /// The columns that, with `app_id`, name one row of the table (its key, the partition key included).
    var key: String {
        switch self {
        case .followupsQueue, .responses, .notifications: "id"
        case .followupsDone: "id, finished_at"
        case .deliveryAttempts: "followup_id, attempt, finished_at"
        case .idempotencyKeys: "key, stored_at"
        case .devices: "token"
        case .subjectDevices: "subject, device_token"
        }
    }

    /// Deletes up to `limit` of the app's rows, found by the app's index and deleted by their key. The table
    /// and column names are this type's own, never input.
    func deleteBatch(appID: String, limit: Int) -> PostgresQuery {
        PostgresQuery(
            unsafeSQL: """
                DELETE FROM \(rawValue) WHERE app_id = $1 AND (\(key)) IN (
                    SELECT \(key) FROM \(rawValue) WHERE app_id = $1 LIMIT $2)
                """, binds: [appID, limit])
    }
}
