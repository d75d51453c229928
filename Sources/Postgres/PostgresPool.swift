import Foundation
import Logging

/// A snapshot of a pool's counters.
public struct PostgresPoolStatistics: Sendable, Equatable {
    /// Connections lent out, or being opened for a caller.
    public let inUse: Int
    /// Open connections waiting to be lent.
    public let idle: Int
    /// The most connections the pool opens (its configured size).
    public let size: Int
    /// How many acquisitions, in total, found no connection free and had to wait.
    public let waits: Int
    /// How many acquisitions, in total, gave up after the acquire timeout.
    public let timeouts: Int

    /// Creates a snapshot, as a test double would.
    public init(inUse: Int, idle: Int, size: Int, waits: Int, timeouts: Int) {
        self.inUse = inUse
        self.idle = idle
        self.size = size
        self.waits = waits
        self.timeouts = timeouts
    }
}

/// A fixed-size pool of blocking connections, opened on demand.
///
/// Each caller gets a connection to itself for the duration of a closure. A connection that is
/// not healthy afterwards is closed, and opened anew on the next demand. When a connection turns
/// out to be lost, the idle ones are closed as well, since a server restart or failover takes
/// them all; so after such an event at most one call fails before fresh connections are used.
public final class PostgresPool: @unchecked Sendable {
    // @unchecked Sendable: all mutable state is guarded by `condition`, and each connection is lent to
    // one caller at a time.
    /// What each connection of the pool is opened with.
    public let configuration: PostgresConfiguration
    private let size: Int
    private let acquireTimeout: TimeInterval
    private let logger: Logger?

    private let condition = NSCondition()
    private var idle: [PostgresConnection] = []
    private var inUse = 0
    private var waits = 0
    private var timeouts = 0
    private var isClosed = false

    /// Creates a pool; it opens no connection until one is needed.
    ///
    /// - Parameters:
    ///   - configuration: How to open each connection.
    ///   - size: The most connections open at once; at least 1.
    ///   - acquireTimeoutMilliseconds: How long a caller waits for a free connection before `.poolTimeout`.
    ///   - logger: Receives a warning when a connection cannot be opened (never the connection string).
    public init(
        configuration: PostgresConfiguration, size: Int, acquireTimeoutMilliseconds: Int = 2000, logger: Logger? = nil
    ) {
        precondition(size >= 1, "a pool needs room for at least one connection")
        precondition(acquireTimeoutMilliseconds >= 0, "the acquire timeout cannot be negative")
        self.configuration = configuration
        self.size = size
        self.acquireTimeout = TimeInterval(acquireTimeoutMilliseconds) / 1000
        self.logger = logger
    }

    /// Lends a connection to `body` and takes it back afterwards.
    ///
    /// - Throws: ``PostgresError`` of kind `.poolTimeout` when no connection is free within the
    ///   acquire timeout, `.connectionFailed` when a new one cannot be opened, `.misuse` after
    ///   ``close()``; or whatever `body` throws.
    public func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let connection = try acquire()
        let value: T
        do {
            value = try body(connection)
        } catch {
            release(connection)
            throw error
        }
        release(connection)
        return value
    }

    /// Runs `body` in a transaction on a pooled connection.
    ///
    /// If `BEGIN` itself fails with a connection error (say the backend was terminated while the
    /// connection sat idle), that connection is discarded and the transaction is tried once more on
    /// another. Failures after `BEGIN` are never retried, since the body may have had effects.
    ///
    /// - Throws: As ``withConnection(_:)`` and ``PostgresConnection/transaction(_:)``.
    public func transaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        var connection = try acquire()
        do {
            try connection.begin()
        } catch let error as PostgresError where error.isConnectionError {
            release(connection)
            logger?.warning(
                "PostgreSQL connection was lost before BEGIN; retrying on another connection",
                metadata: ["error": "\(error)"]
            )
            connection = try acquire()
            do {
                try connection.begin()
            } catch {
                release(connection)
                throw error
            }
        } catch {
            release(connection)
            throw error
        }
        let value: T
        do {
            value = try connection.finishTransaction(body)
        } catch {
            release(connection)
            throw error
        }
        release(connection)
        return value
    }

    /// Runs `queries` as one transaction in one round trip: they go out as one pipeline (see
    /// ``PostgresConnection/pipeline(_:)``) on a pooled connection, which the server runs as one
    /// transaction, committed at the pipeline's end (its Sync message): no `BEGIN` and `COMMIT` to run.
    /// The queries cannot be statements that need a transaction block (`SET LOCAL`, `LOCK`,
    /// savepoints); `set_config(…, true)` and transaction-level advisory locks last to the commit.
    ///
    /// If a query fails, the rest are skipped and the transaction is rolled back. A
    /// connection lost during the round trip leaves it unknown whether the transaction committed, so
    /// nothing is retried here: callers whose writes are fenced or leased may try again themselves.
    ///
    /// - Returns: Each query's rows, in order.
    /// - Throws: As ``withConnection(_:)`` and ``PostgresConnection/pipeline(_:)``.
    public func pipelinedTransaction(_ queries: [PostgresQuery]) throws -> [PostgresRows] {
        try withConnection { connection in
            do {
                return try connection.pipeline(queries)
            } catch let error as PostgresError {
                connection.rollbackIfOpen()
                throw error.unresolved(on: connection.session)
            } catch {
                connection.rollbackIfOpen()
                throw error
            }
        }
    }

    /// Runs a transaction as pipelines (see ``PostgresConnection/pipeline(_:)``) on a pooled
    /// connection: `BEGIN` goes out with the first statements `body` sends and `COMMIT` with the
    /// statements it returns, so a transaction that reads once and then writes takes two round trips.
    ///
    /// `body` gets a `send` function that runs statements and returns their rows; it returns its
    /// value and the statements to run just before `COMMIT`. If anything fails the transaction is
    /// rolled back. A connection error before `COMMIT` was sent (say a backend that died while the
    /// connection sat idle) runs `body` once more on another connection, as ``transaction(_:)``
    /// retries `BEGIN`: nothing of the first try can have taken effect.
    ///
    /// - Throws: As ``withConnection(_:)`` and ``PostgresConnection/pipeline(_:)``, or what
    ///   `body` throws.
    public func pipelinedTransaction<T>(
        _ body: (_ send: ([PostgresQuery]) throws -> [PostgresRows]) throws -> (value: T, commitWith: [PostgresQuery])
    ) throws -> T {
        var attempt = 0
        while true {
            attempt += 1
            var sends = 0
            var committing = false
            do {
                return try withConnection { connection in
                    do {
                        let (value, last) = try body { queries in
                            sends += 1
                            guard sends == 1 else { return try connection.pipeline(queries) }
                            return Array(try connection.pipeline(["BEGIN"] + queries).dropFirst())
                        }
                        if connection.transactionFailed {
                            // `body` went on after a failed statement: COMMIT would only roll back.
                            throw PostgresError(
                                kind: .server, sqlState: "25P02",
                                message: "a statement failed inside the transaction, so it cannot commit")
                        }
                        committing = true
                        do {
                            _ = try connection.pipeline((sends == 0 ? ["BEGIN"] : []) + last + ["COMMIT"])
                        } catch let error as PostgresError {
                            throw error.unresolved(on: connection.session)
                        }
                        return value
                    } catch {
                        connection.rollbackIfOpen()
                        throw error
                    }
                }
            } catch let error as PostgresError where error.isConnectionError && !committing && attempt == 1 {
                // COMMIT was never sent, so the transaction died with the connection: nothing took effect.
                logger?.warning(
                    "PostgreSQL connection was lost at the start of a transaction; retrying on another connection",
                    metadata: ["error": "\(error)"])
            }
        }
    }

    /// Ends `session` if it is still there (`pg_terminate_backend`, from another connection) and tells
    /// whether it is gone: once it is, a transaction it was committing has either committed or not, for
    /// good, and a read shows which. Call it again until it answers `true`.
    ///
    /// - Throws: As ``withConnection(_:)``.
    public func end(_ session: PostgresSession) throws -> Bool {
        try withConnection { connection in
            try connection.query(
                """
                SELECT pg_terminate_backend(pid) AS signalled FROM pg_stat_activity
                WHERE pid = \(session.processID)
                    AND (extract(epoch FROM backend_start) * 1000000)::bigint = \(session.startMicroseconds)
                """
            ).isEmpty
        }
    }

    /// The pool's counters at this moment.
    public var statistics: PostgresPoolStatistics {
        condition.lock()
        defer { condition.unlock() }
        return PostgresPoolStatistics(inUse: inUse, idle: idle.count, size: size, waits: waits, timeouts: timeouts)
    }

    /// Closes the idle connections and refuses further use; lent connections close when they come back.
    ///
    /// Callers waiting for a connection are woken and get `.misuse`.
    public func close() {
        condition.lock()
        isClosed = true
        let closing = idle
        idle.removeAll()
        condition.broadcast()
        condition.unlock()
        // The connections are finished here, outside the lock: closing a socket may take a moment.
        withExtendedLifetime(closing) {}
    }

    // MARK: - Lending

    private func acquire() throws -> PostgresConnection {
        let deadline = Date(timeIntervalSinceNow: acquireTimeout)
        condition.lock()
        var hasWaited = false
        var timedOut = false
        while true {
            if isClosed {
                condition.unlock()
                throw PostgresError(kind: .misuse, message: "the pool is closed")
            }
            if let connection = idle.popLast() {
                inUse += 1
                condition.unlock()
                return try checkOut(connection)
            }
            if inUse + idle.count < size {
                // The slot is counted before the connection exists, so concurrent callers cannot overshoot.
                inUse += 1
                condition.unlock()
                return try openInReservedSlot()
            }
            if timedOut {
                timeouts += 1
                condition.unlock()
                throw PostgresError(kind: .poolTimeout, message: "no connection became free in time")
            }
            if !hasWaited {
                hasWaited = true
                waits += 1
            }
            // Spurious wake-ups and lost races just go round the loop again; once the deadline has
            // passed, the loop looks one last time before giving up.
            timedOut = !condition.wait(until: deadline)
        }
    }

    /// Returns an idle connection if it still works, or a new one in its slot.
    private func checkOut(_ connection: PostgresConnection) throws -> PostgresConnection {
        if connection.isHealthy && connection.isAliveWithoutWaiting() {
            return connection
        }
        // The dead connection is released here; its deinit calls PQfinish.
        return try openInReservedSlot()
    }

    private func openInReservedSlot() throws -> PostgresConnection {
        do {
            return try PostgresConnection(configuration: configuration)
        } catch {
            logger?.warning("could not open a PostgreSQL connection", metadata: ["error": "\(error)"])
            condition.lock()
            inUse -= 1
            condition.signal()
            condition.unlock()
            throw error
        }
    }

    private func release(_ connection: PostgresConnection) {
        // The connection's own state decides, not the body's error, which may come from elsewhere.
        // A connection on the wrong node (a standby, a server going down) means its siblings are too.
        let isLost = connection.wasOnWrongNode || !connection.isAliveWithoutWaiting()
        let keep = !isLost && connection.isHealthy
        var evicted: [PostgresConnection] = []
        condition.lock()
        inUse -= 1
        if keep && !isClosed {
            idle.append(connection)
        }
        if isLost {
            evicted = idle
            idle.removeAll()
            condition.broadcast()
        } else {
            condition.signal()
        }
        condition.unlock()
        // Discarded connections are finished here, outside the lock.
        withExtendedLifetime(evicted) {}
    }
}
