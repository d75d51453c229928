import Foundation
import Postgres
import TestSupport
import Testing

private struct Abort: Error {}

/// The backend pids of `count` pool connections, all checked out at once so they are distinct.
private func checkOutAll(_ pool: PostgresPool, count: Int) throws -> [Int] {
    func nest(_ remaining: Int, _ pids: [Int]) throws -> [Int] {
        guard remaining > 0 else { return pids }
        return try pool.withConnection { connection in
            let pid: Int = try connection.query("SELECT pg_backend_pid() AS pid")[0].decode("pid")
            return try nest(remaining - 1, pids + [pid])
        }
    }
    return try nest(count, [])
}

/// Runs `body` on `count` new threads at once and waits for all of them.
private func runOnThreads(_ count: Int, _ body: @escaping @Sendable (Int) -> Void) {
    let group = DispatchGroup()
    for index in 0..<count {
        group.enter()
        Thread {
            body(index)
            group.leave()
        }.start()
    }
    group.wait()
}

@Suite("Connection pool")
struct PoolTests {
    @Test("connections open lazily, are reused, and are counted")
    func lazyAndReused() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let pool = PostgresPool(configuration: database.configuration, size: 3)
        defer { pool.close() }
        #expect(pool.statistics == PostgresPoolStatistics(inUse: 0, idle: 0, size: 3, waits: 0, timeouts: 0))
        let first = try pool.withConnection { connection in
            #expect(pool.statistics.inUse == 1)
            return try connection.query("SELECT pg_backend_pid() AS pid")[0].decode("pid", as: Int.self)
        }
        let second = try pool.withConnection { connection in
            try connection.query("SELECT pg_backend_pid() AS pid")[0].decode("pid", as: Int.self)
        }
        #expect(first == second)
        #expect(pool.statistics == PostgresPoolStatistics(inUse: 0, idle: 1, size: 3, waits: 0, timeouts: 0))
        let pids = try checkOutAll(pool, count: 3)
        #expect(Set(pids).count == 3)
        #expect(pool.statistics.idle == 3)
    }

    @Test("a connection left in a transaction is discarded, not reused")
    func unhealthyDiscarded() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let pool = PostgresPool(configuration: database.configuration, size: 1)
        defer { pool.close() }
        let leaked = try pool.withConnection { connection in
            try connection.execute("BEGIN")
            return try connection.query("SELECT pg_backend_pid() AS pid")[0].decode("pid", as: Int.self)
        }
        #expect(pool.statistics.idle == 0)
        let next = try pool.withConnection { connection in
            #expect(connection.isHealthy)
            return try connection.query("SELECT pg_backend_pid() AS pid")[0].decode("pid", as: Int.self)
        }
        #expect(next != leaked)
    }

    @Test("with size 1 held, a second acquisition times out with poolTimeout on time")
    func timeout() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let pool = PostgresPool(configuration: database.configuration, size: 1, acquireTimeoutMilliseconds: 300)
        defer { pool.close() }
        try pool.withConnection { _ in
            let started = Date()
            let error = try #require(throws: PostgresError.self) { try pool.withConnection { _ in } }
            let elapsed = Date().timeIntervalSince(started)
            #expect(error.kind == .poolTimeout)
            #expect(!error.isConnectionError)
            #expect(elapsed >= 0.29)
            #expect(elapsed < 1.5)
        }
        #expect(pool.statistics == PostgresPoolStatistics(inUse: 0, idle: 1, size: 1, waits: 1, timeouts: 1))
    }

    @Test("waiters get the connection when it comes back")
    func waitersServed() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        try PostgresConnection(configuration: database.configuration).execute("CREATE TABLE hits (n int)")
        let pool = PostgresPool(configuration: database.configuration, size: 2, acquireTimeoutMilliseconds: 10_000)
        defer { pool.close() }
        let threads = 6
        let perThread = 10
        // Real threads, not concurrentPerform, which runs only as many at once as there are cores.
        runOnThreads(threads) { thread in
            for index in 0..<perThread {
                do {
                    try pool.transaction { connection in
                        try connection.execute("INSERT INTO hits VALUES (\(thread * 100 + index))")
                        _ = try connection.query("SELECT pg_sleep(0.005)")
                    }
                } catch {
                    Issue.record("pool transaction failed: \(error)")
                }
            }
        }
        let total = try pool.withConnection { connection in
            try connection.query("SELECT count(*) AS n FROM hits")[0].decode("n", as: Int.self)
        }
        #expect(total == threads * perThread)
        let statistics = pool.statistics
        #expect(statistics.inUse == 0)
        #expect(statistics.idle <= 2)
        #expect(statistics.waits > 0)
        #expect(statistics.timeouts == 0)
    }

    @Test("after every pooled backend is terminated, the next transaction succeeds at once")
    func transactionRecovers() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let admin = try PostgresConnection(configuration: database.configuration)
        try admin.execute("CREATE TABLE items (n int)")
        let pool = PostgresPool(configuration: database.configuration, size: 3)
        defer { pool.close() }
        let pids = try checkOutAll(pool, count: 3)
        #expect(try terminateBackends(pids, using: admin))

        let inserted = try pool.transaction { connection in
            try connection.execute("INSERT INTO items VALUES (\(1))")
        }
        #expect(inserted == 1)
        #expect(try admin.query("SELECT count(*) AS n FROM items")[0].decode("n", as: Int.self) == 1)
        let newPids = try checkOutAll(pool, count: 3)
        #expect(Set(newPids).isDisjoint(with: pids))
    }

    @Test("after every pooled backend is terminated, withConnection fails at most once, with a connection error")
    func withConnectionRecovers() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let admin = try PostgresConnection(configuration: database.configuration)
        let pool = PostgresPool(configuration: database.configuration, size: 3)
        defer { pool.close() }
        let pids = try checkOutAll(pool, count: 3)
        #expect(try terminateBackends(pids, using: admin))

        var failures = 0
        var answer: Int?
        for _ in 0..<2 where answer == nil {
            do {
                answer = try pool.withConnection { connection in
                    try connection.query("SELECT 42 AS n")[0].decode("n", as: Int.self)
                }
            } catch let error as PostgresError {
                #expect(error.isConnectionError)
                failures += 1
            }
        }
        #expect(answer == 42)
        #expect(failures <= 1)
        // No dead connection is left idle to fail a later caller.
        let newPids = try checkOutAll(pool, count: 3)
        #expect(Set(newPids).isDisjoint(with: pids))
        #expect(pool.statistics.idle == 3)
    }

    @Test("a failure inside a pool transaction is not retried and rolls back")
    func bodyFailureNotRetried() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        try PostgresConnection(configuration: database.configuration).execute("CREATE TABLE items (n int)")
        let pool = PostgresPool(configuration: database.configuration, size: 2)
        defer { pool.close() }
        var calls = 0
        #expect(throws: Abort.self) {
            try pool.transaction { connection in
                calls += 1
                try connection.execute("INSERT INTO items VALUES (\(1))")
                throw Abort()
            }
        }
        #expect(calls == 1)
        let count = try pool.withConnection { connection in
            try connection.query("SELECT count(*) AS n FROM items")[0].decode("n", as: Int.self)
        }
        #expect(count == 0)
        #expect(pool.statistics.idle == 1)
    }

    @Test("a pool that cannot connect throws connectionFailed and frees its slot; a closed pool refuses")
    func connectFailureAndClose() throws {
        let pool = PostgresPool(
            configuration: PostgresConfiguration(connectionString: "postgresql://127.0.0.1:1/nothing"), size: 1,
            acquireTimeoutMilliseconds: 100
        )
        for _ in 0..<2 {
            let error = try #require(throws: PostgresError.self) { try pool.withConnection { _ in } }
            #expect(error.kind == .connectionFailed)
        }
        #expect(pool.statistics.inUse == 0)
        pool.close()
        let closed = try #require(throws: PostgresError.self) { try pool.withConnection { _ in } }
        #expect(closed.kind == .misuse)
    }
}
