import Foundation
import Locks
import Logging
import Postgres

/// Deletes idempotency keys older than the window in the background, a batch per statement, so that a
/// key past its window takes no room among kept keys and is a new request.
///
/// Ingest gives an expired key up by itself when it is used again (``IngestWriter``); this only tidies
/// the rest. Keys have a table of their own (`idempotency_keys`), read oldest first through its
/// `stored_at` index; each batch locks its rows with `SKIP LOCKED`, so a writer reusing one of them is
/// never kept waiting.
public final class IdempotencyKeySweeper: Sendable {
    let pool: Database
    let window: Duration
    let interval: Duration
    let batchSize: Int
    let logger: Logger
    private let state = Monitor(State())

    private struct State {
        var loop = LoopState()
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

    /// Deletes every key older than the window; returns how many.
    @discardableResult
    public func sweep() throws -> Int {
        var cleared = 0
        while !state.withLock({ $0.loop.phase == .stopping }) {
            let count = try clearBatch()
            cleared += count
            if count < batchSize { break }
        }
        if cleared > 0 { logger.info("cleared expired idempotency keys", metadata: ["keys": "\(cleared)"]) }
        return cleared
    }

    /// One batch of the oldest keys past the window.
    private func clearBatch() throws -> Int {
        let seconds = Int(window.components.seconds)
        return try pool.withConnection { connection in
            try connection.execute(
                """
                DELETE FROM idempotency_keys i USING (
                    SELECT app_id, key FROM idempotency_keys
                    WHERE stored_at < now() - make_interval(secs => \(seconds))
                    ORDER BY stored_at
                    LIMIT \(batchSize)
                    FOR UPDATE SKIP LOCKED
                ) AS old
                WHERE i.app_id = old.app_id AND i.key = old.key
                """)
        }
    }
}
