import ActionHookCore
import Foundation
import Postgres

extension StoreError {
    /// Runs `body`; a failure that means the database is away (a lost connection, a timeout, no free
    /// connection in time, a statement cancelled at its timeout) is thrown as ``StoreError/unavailable``,
    /// so that the HTTP mapping and the delivery worker act on it without reading database error codes.
    /// Other failures pass as they are.
    static func translatingUnavailable<Result>(_ body: () throws -> Result) throws -> Result {
        do {
            return try body()
        } catch let error as PostgresError where error.meansUnavailable {
            throw StoreError.unavailable
        }
    }
}

extension PostgresError {
    /// Whether the database did not answer in time or could not be reached: trying again later may succeed.
    var meansUnavailable: Bool {
        isConnectionError || kind == .poolTimeout || kind == .timedOut || kind == .notReplicated
            || sqlState == Self.queryCanceled
    }

    /// SQLSTATE 57014, `query_canceled`: a statement stopped at `statement_timeout`.
    static let queryCanceled = "57014"

    /// A check violation, which is also what a write for a time no partition covers fails with.
    var mayMeanMissingPartition: Bool { sqlState == "23514" }
}

/// The pool as the stores use it: the same calls, with the database being away reported as
/// ``StoreError/unavailable`` (see ``StoreError/translatingUnavailable(_:)``).
struct Database: Sendable {
    /// The pool underneath.
    let pool: PostgresPool

    init(_ pool: PostgresPool) {
        self.pool = pool
    }

    /// ``PostgresPool/withConnection(_:)``.
    @discardableResult
    func withConnection<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try StoreError.translatingUnavailable { try pool.withConnection(body) }
    }

    /// ``PostgresPool/transaction(_:)``.
    @discardableResult
    func transaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try StoreError.translatingUnavailable { try pool.transaction(body) }
    }

    /// ``PostgresPool/pipelinedTransaction(_:)``.
    func pipelinedTransaction(_ queries: [PostgresQuery]) throws -> [PostgresRows] {
        try StoreError.translatingUnavailable { try uncheckedPipelinedTransaction(queries) }
    }

    /// ``PostgresPool/pipelinedTransaction(_:)``, with reads before the writes.
    func pipelinedTransaction<T>(
        _ body: (_ send: ([PostgresQuery]) throws -> [PostgresRows]) throws -> (value: T, commitWith: [PostgresQuery])
    ) throws -> T {
        try StoreError.translatingUnavailable { try uncheckedPipelinedTransaction(body) }
    }

    /// ``pipelinedTransaction(_:)`` throwing the pool's own errors (a commit in doubt keeps its session),
    /// for ``settlingInDoubt(_:found:)``.
    func uncheckedPipelinedTransaction(_ queries: [PostgresQuery]) throws -> [PostgresRows] {
        try creatingMissingPartitions { try pool.pipelinedTransaction(queries) }
    }

    /// ``pipelinedTransaction(_:)`` with reads before the writes, throwing the pool's own errors.
    func uncheckedPipelinedTransaction<T>(
        _ body: (_ send: ([PostgresQuery]) throws -> [PostgresRows]) throws -> (value: T, commitWith: [PostgresQuery])
    ) throws -> T {
        try creatingMissingPartitions { try pool.pipelinedTransaction(body) }
    }

    /// Runs `write`, a transaction that commits; when its commit was sent and its answer never came (the
    /// database deadline passed, the connection was lost), waits until the session that sent it has
    /// ended — the transaction has then committed or not, for good — and returns what `found` reads on
    /// another connection instead of an error. A request without an idempotency key cannot be found by
    /// its retry, so it must never be answered "unavailable" while it may still be stored.
    ///
    /// It waits as long as the database stays unreachable, up to ``settleLimit``; past it the error is
    /// thrown after all. `found` runs its statements untranslated (``uncheckedPipelinedTransaction(_:)``),
    /// so that a read that could not be done is told apart from what the read decided.
    func settlingInDoubt<T>(_ write: () throws -> T, found: () throws -> T) throws -> T {
        do {
            return try StoreError.translatingUnavailable { try keepingUnresolved(write) }
        } catch let unresolved as Unresolved {
            let error = unresolved.error
            guard let session = error.unresolved else { throw StoreError.unavailable }
            let started = ContinuousClock.now
            var pause = Duration.milliseconds(20)
            while true {
                if (try? pool.end(session)) == true {
                    // The read confirms what it finds as replicated (``confirmReplicated``); during a
                    // failover it may not be able to yet, and is tried again. What it decides (found, not
                    // found) is its answer.
                    do {
                        return try found()
                    } catch let error as PostgresError where error.meansUnavailable {
                        guard ContinuousClock.now - started < Self.settleLimit else { throw StoreError.unavailable }
                    }
                }
                guard ContinuousClock.now - started < Self.settleLimit else {
                    throw StoreError.unavailable
                }
                Thread.sleep(forTimeInterval: Double(pause.components.attoseconds) / 1e18)
                pause = min(pause * 2, .milliseconds(500))
            }
        }
    }

    /// A commit in doubt, carried past ``StoreError/translatingUnavailable(_:)`` untranslated.
    private struct Unresolved: Error {
        let error: PostgresError
    }

    private func keepingUnresolved<T>(_ write: () throws -> T) throws -> T {
        do {
            return try write()
        } catch let error as PostgresError where error.unresolved != nil {
            throw Unresolved(error: error)
        }
    }

    /// How long ``settlingInDoubt(_:found:)`` waits for an unreachable database before giving up.
    static let settleLimit = Duration.seconds(60)

    /// Runs a write (a whole transaction) again once, after making the partitions for the present, when it
    /// failed as a write for a time no partition covers does. Partitions are made ahead of time by
    /// ``PartitionMaintainer``; this keeps a write from failing when it did not run (sql/migrations/011).
    private func creatingMissingPartitions<T>(_ write: () throws -> T) throws -> T {
        do {
            return try write()
        } catch let error as PostgresError where error.mayMeanMissingPartition {
            let made = try pool.withConnection { connection in
                try connection.query("SELECT actionhook_create_current_partitions() AS made")[0].decode(
                    "made", as: Int.self)
            }
            guard made > 0 else { throw error }
            return try write()
        }
    }
}

extension Database {
    /// A statement that makes its transaction write WAL (a transactional logical message, which any role
    /// may emit and no one decodes unless a logical replication slot asks), so that the transaction's
    /// commit waits for the synchronous standby like a write's does.
    ///
    /// A transaction that only reads commits without waiting for replication, so a read alone could
    /// confirm a row that is committed on the primary but not yet on its standby (a commit whose wait was
    /// cancelled, or whose session ended while waiting), which a failover then loses. A replay of a stored
    /// answer, or a read that settles a commit in doubt, sends this with its commit: the commit comes
    /// after the row's, and a standby confirms WAL in order, so once it is confirmed the row is on the
    /// standby too; if it is not, the commit fails as ``PostgresError/Kind-swift.enum/notReplicated``
    /// and nothing is confirmed. On a server without synchronous standbys it costs one small WAL record.
    static let confirmReplicated: PostgresQuery = "SELECT pg_logical_emit_message(true, 'actionhook', '') AS lsn"

    /// Runs `query` in a transaction of one round trip after `settings` (`SET LOCAL`-style
    /// `set_config` calls that pin its plan), and returns the query's rows.
    func pinned(_ settings: PostgresQuery, _ query: PostgresQuery) throws -> PostgresRows {
        let rows = try pipelinedTransaction([settings, query])
        return rows[rows.count - 1]
    }
}

/// Statements sent together as one pipeline, each read back by the name its `add` gave it, so that
/// code reading the results never counts positions.
struct PipelinedReads {
    /// The statements, in the order they run.
    private(set) var queries: [PostgresQuery] = []

    /// Where one statement's rows will be.
    struct Read {
        fileprivate let index: Int
    }

    /// Adds a statement; its rows are `results[read]`.
    @discardableResult
    mutating func add(_ query: PostgresQuery) -> Read {
        queries.append(query)
        return Read(index: queries.count - 1)
    }

    /// The rows of every statement, read by name.
    struct Results {
        let rows: [PostgresRows]

        subscript(read: Read) -> PostgresRows { rows[read.index] }
    }
}

/// A name within an app (an idempotency key, a notification id), as a set and dictionary key.
struct AppScoped: Hashable {
    var appID: String
    var name: String

    /// The text whose hash names the advisory lock of this (app, key): the two joined by U+001F, which
    /// is in neither.
    var lockText: String { UnitSeparated.join(appID, name) }
}
