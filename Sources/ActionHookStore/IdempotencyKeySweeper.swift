import Foundation
import Locks
import Logging
import Postgres

/// Clears idempotency keys older than the window in the background, a batch per statement, so that a
/// key past its window takes no room among kept keys and is a new request.
///
/// Ingest gives an expired key up by itself when it is used again (``IngestWriter``); this only tidies
/// the rest. Each batch locks its rows with `SKIP LOCKED`, so a writer reusing one of them is never
/// kept waiting, and follows the app's history index from where the last sweep of that app ended.
public final class IdempotencyKeySweeper: Sendable {
    let pool: Database
    let window: Duration
    let interval: Duration
    let batchSize: Int
    let logger: Logger
    private let state = Monitor(State())

    private struct State {
        var loop = LoopState()
        /// Per app, the received time up to which keys are known to be cleared.
        var sweptUntil: [String: Date] = [:]
    }

    /// Creates a sweeper that runs every `interval`.
    public init(
        pool: PostgresPool, window: Duration, interval: Duration = .seconds(60), batchSize: Int = 1000, logger: Logger
    ) {
        self.pool = Database(pool)
        self.window = window
        self.interval = interval
        self.batchSize = batchSize
        self.logger = logger
    }

    /// Starts the background thread.
    public func start() {
        state.withLock { $0.loop.start() }
        let thread = Thread { [self] in loop() }
        thread.name = "actionhook-idempotency-sweep"
        thread.start()
    }

    /// Stops the thread after its current batch and waits for it, so the pool can close after.
    public func stop() {
        guard state.withLockWakingAll({ $0.loop.stop() }) else { return }
        state.wait(for: { $0.loop.phase == .stopped }, then: { _ in })
    }

    /// Sweeps once per interval; nothing wakes it early but a stop.
    private func loop() {
        while state.wait(until: .now + interval, for: \.loop.mustWake, then: { $0.loop.takeWakeUp() }) {
            do {
                _ = try sweep()
            } catch {
                logger.warning("idempotency key sweep failed", metadata: ["error": "\(error)"])
            }
        }
        state.withLockWakingAll { $0.loop.finish() }
    }

    /// Clears every key older than the window, app by app; returns how many.
    @discardableResult
    public func sweep() throws -> Int {
        let apps = try pool.withConnection { connection in
            try connection.query("SELECT id FROM apps ORDER BY id").map { try $0.decode("id", as: String.self) }
        }
        var cleared = 0
        for app in apps {
            if state.withLock({ $0.loop.phase == .stopping }) { break }
            while true {
                let since = state.withLock { $0.sweptUntil[app] } ?? Date.distantPast
                let cutoff = Date().addingTimeInterval(-Double(window.components.seconds))
                let (count, last) = try clearBatch(appID: app, since: since)
                cleared += count
                if count < batchSize {
                    // Nothing older is left to clear: the next sweep starts where this one's window ended
                    // (a row locked by a writer now is one that writer clears itself).
                    // A minute back from the cutoff: this clock and the database's may differ a little.
                    state.withLock { $0.sweptUntil[app] = max(since, cutoff.addingTimeInterval(-60)) }
                    break
                }
                if let last { state.withLock { $0.sweptUntil[app] = last } }
            }
        }
        if cleared > 0 { logger.info("cleared expired idempotency keys", metadata: ["keys": "\(cleared)"]) }
        return cleared
    }

    /// One batch of one app's oldest kept keys past the window, received at or after `since`.
    private func clearBatch(appID: String, since: Date) throws -> (Int, Date?) {
        let seconds = Int(window.components.seconds)
        return try pool.transaction { connection in
            // The app's history index, read oldest first from `since`, whatever the statistics say.
            _ = try connection.query("SELECT set_config('enable_seqscan', 'off', true) AS s")
            let rows = try connection.query(
                """
                WITH old AS (
                    SELECT id FROM responses
                    WHERE app_id = \(appID) AND received_at >= \(since)
                        AND received_at < now() - make_interval(secs => \(seconds))
                        AND idempotency_key IS NOT NULL
                    ORDER BY received_at, id
                    LIMIT \(batchSize)
                    FOR UPDATE SKIP LOCKED
                )
                UPDATE responses r SET idempotency_key = NULL FROM old
                WHERE r.app_id = \(appID) AND r.id = old.id
                RETURNING r.received_at
                """)
            let last = try rows.map { try $0.decode("received_at", as: Date.self) }.max()
            return (rows.count, last)
        }
    }
}
