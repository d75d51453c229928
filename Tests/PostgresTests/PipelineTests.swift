import Foundation
import Postgres
import TestSupport
import Testing

@Suite("Pipelines")
struct PipelineTests {
    @Test("statements sent together run in order and return their rows in order")
    func ordered() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        try connection.execute("CREATE TABLE items (n int PRIMARY KEY, label text)")
        for prepared in [false, true, true] {
            let base = prepared ? 100 : 0
            let statements: [PostgresQuery] = [
                "INSERT INTO items SELECT n, 'x' FROM unnest(\([base + 1, base + 2, base + 3])::int[]) AS n",
                "UPDATE items SET label = \("it's \"quoted\"") WHERE n = \(base + 2)",
                "SELECT n, label FROM items WHERE n > \(base) ORDER BY n",
                "SELECT count(*)::int AS total FROM items",
            ]
            let results = try connection.pipeline(prepared ? statements.map(\.prepared) : statements)
            #expect(results.count == 4)
            #expect(results[0].affectedRows == 3)
            #expect(results[1].affectedRows == 1)
            #expect(try results[2].map { try $0.decode("n", as: Int.self) } == [base + 1, base + 2, base + 3])
            #expect(try results[2][1].decode("label", as: String.self) == "it's \"quoted\"")
            #expect(try results[3][0].decode("total", as: Int.self) == (base == 0 ? 3 : 6))
            try connection.execute("DELETE FROM items WHERE n > 100")
        }
        #expect(try connection.pipeline([]).isEmpty)
    }

    @Test("prepared statements are parsed once per connection and reused")
    func preparedOnce() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        func preparedCount() throws -> Int {
            try connection.query("SELECT count(*)::int AS n FROM pg_prepared_statements")[0].decode("n")
        }
        #expect(try preparedCount() == 0)
        for value in 1...5 {
            let statements: [PostgresQuery] = [
                "SELECT \(value)::int + 1 AS v", "SELECT \(value)::int * 2 AS v", "SELECT \(value)::int + 1 AS v",
            ]
            let rows = try connection.pipeline(statements.map(\.prepared) + ["SELECT \(value)::int - 1 AS v"])
            #expect(
                try rows.map { try $0[0].decode("v", as: Int.self) } == [value + 1, value * 2, value + 1, value - 1])
        }
        #expect(try preparedCount() == 2)
        // Past the limit, statements still run, unprepared.
        for value in 0..<80 {
            let rows = try connection.pipeline([PostgresQuery(unsafeSQL: "SELECT \(value)::int AS v").prepared])
            #expect(try rows[0][0].decode("v", as: Int.self) == value)
        }
        #expect(try preparedCount() == 64)
    }

    @Test("a failing statement skips the rest, throws its error, and leaves the connection usable")
    func failure() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        try connection.execute("CREATE TABLE items (n int PRIMARY KEY)")
        for prepared in [false, true] {
            // Outside a transaction the pipeline is one implicit transaction: nothing of it stays.
            let statements: [PostgresQuery] = [
                "INSERT INTO items VALUES (\(1))", "INSERT INTO items VALUES (\(1))", "INSERT INTO items VALUES (\(2))",
            ]
            let error = try #require(throws: PostgresError.self) {
                try connection.pipeline(prepared ? statements.map(\.prepared) : statements)
            }
            #expect(error.sqlState == "23505")
            #expect(connection.isHealthy)
            #expect(try connection.query("SELECT count(*)::int AS n FROM items")[0].decode("n", as: Int.self) == 0)
        }
        // Inside a transaction, the transaction has failed and rolls back.
        #expect(throws: PostgresError.self) {
            try connection.transaction { transaction in
                _ = try transaction.pipeline([
                    ("INSERT INTO items VALUES (\(3))" as PostgresQuery).prepared, "SELECT 1/0",
                ])
            }
        }
        #expect(connection.isHealthy)
        #expect(try connection.query("SELECT count(*)::int AS n FROM items")[0].decode("n", as: Int.self) == 0)
        // A statement that cannot be prepared fails the pipeline without being remembered.
        let typo = ("SELEC 1" as PostgresQuery).prepared
        #expect(throws: PostgresError.self) { try connection.pipeline([typo]) }
        #expect(throws: PostgresError.self) { try connection.pipeline([typo]) }
        #expect(
            try connection.pipeline([("SELECT 1 AS one" as PostgresQuery).prepared])[0][0].decode("one", as: Int.self)
                == 1)
        // NUL cannot travel in libpq's strings: refused before anything is sent.
        let nul = try #require(throws: PostgresError.self) { try connection.pipeline(["SELECT \("a\u{0}b")"]) }
        #expect(nul.kind == .misuse)
        #expect(connection.isHealthy)
    }

    @Test("a pipeline on a connection whose backend was terminated reports the connection lost")
    func lostConnection() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        let admin = try PostgresConnection(configuration: database.configuration)
        let pid: Int = try connection.query("SELECT pg_backend_pid() AS pid")[0].decode("pid")
        #expect(try terminateBackends([pid], using: admin))
        let error = try #require(throws: PostgresError.self) {
            try connection.pipeline([("SELECT 1" as PostgresQuery).prepared, "SELECT 2"])
        }
        #expect(error.isConnectionError)
        #expect(!connection.isHealthy)
        #expect(connection.reset())
        #expect(
            try connection.pipeline([("SELECT 3 AS v" as PostgresQuery).prepared])[0][0].decode("v", as: Int.self) == 3)
    }

    @Test("a pipelined transaction commits with its last statements, and rolls back on any failure")
    func pipelinedTransaction() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let pool = PostgresPool(configuration: database.configuration, size: 1)
        defer { pool.close() }
        try pool.withConnection { try $0.execute("CREATE TABLE items (n int PRIMARY KEY)") }
        func count() throws -> Int {
            try pool.withConnection { try $0.query("SELECT count(*)::int AS n FROM items")[0].decode("n") }
        }

        // Read, decide, write: the write goes out with COMMIT.
        let seen = try pool.pipelinedTransaction { send -> (value: Int, commitWith: [PostgresQuery]) in
            let rows = try send(["SELECT count(*)::int AS n FROM items", "SELECT txid_current_if_assigned() AS x"])
            return (try rows[0][0].decode("n"), [("INSERT INTO items VALUES (\(1))" as PostgresQuery).prepared])
        }
        #expect(seen == 0)
        #expect(try count() == 1)
        // Nothing sent before the end: BEGIN, the statements and COMMIT in one pipeline.
        try pool.pipelinedTransaction { _ in ((), ["INSERT INTO items VALUES (\(2))"]) }
        #expect(try count() == 2)

        // A failing write rolls back the writes sent before it, and the connection stays in the pool.
        #expect(throws: PostgresError.self) {
            try pool.pipelinedTransaction { send -> (value: Void, commitWith: [PostgresQuery]) in
                _ = try send(["INSERT INTO items VALUES (\(3))"])
                return ((), ["INSERT INTO items VALUES (\(1))"])
            }
        }
        // So does an error thrown by the body.
        struct Abort: Error {}
        #expect(throws: Abort.self) {
            try pool.pipelinedTransaction { send -> (value: Void, commitWith: [PostgresQuery]) in
                _ = try send(["INSERT INTO items VALUES (\(4))"])
                throw Abort()
            }
        }
        // A body that swallows a failed statement cannot commit: 25P02, nothing stays.
        let swallowed = try #require(throws: PostgresError.self) {
            try pool.pipelinedTransaction { send -> (value: Void, commitWith: [PostgresQuery]) in
                _ = try send(["INSERT INTO items VALUES (\(5))"])
                _ = try? send(["INSERT INTO items VALUES (\(1))"])
                return ((), [])
            }
        }
        #expect(swallowed.sqlState == "25P02")
        #expect(try count() == 2)
        #expect(pool.statistics.idle == 1)
    }

    @Test("a pipelined transaction whose pooled connection died while idle succeeds on a new one")
    func pipelinedTransactionRetry() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let pool = PostgresPool(configuration: database.configuration, size: 1)
        defer { pool.close() }
        let admin = try PostgresConnection(configuration: database.configuration)
        try admin.execute("CREATE TABLE items (n int PRIMARY KEY)")
        let pid: Int = try pool.withConnection { try $0.query("SELECT pg_backend_pid() AS pid")[0].decode("pid") }
        #expect(try terminateBackends([pid], using: admin))
        var runs = 0
        let newPid = try pool.pipelinedTransaction { send -> (value: Int, commitWith: [PostgresQuery]) in
            runs += 1
            let pid: Int = try send(["SELECT pg_backend_pid() AS pid"])[0][0].decode("pid")
            return (pid, ["INSERT INTO items VALUES (\(runs))"])
        }
        #expect(newPid != pid)
        #expect(try admin.query("SELECT n FROM items")[0].decode("n", as: Int.self) == runs)
    }

    @Test("a transaction of statements in one round trip commits all of them, or none when one fails")
    func oneTripTransaction() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let pool = PostgresPool(configuration: database.configuration, size: 1)
        defer { pool.close() }
        let admin = try PostgresConnection(configuration: database.configuration)
        try admin.execute("CREATE TABLE items (n int PRIMARY KEY)")
        func stored() throws -> [Int] {
            try admin.query("SELECT n FROM items ORDER BY n").map { try $0.decode("n", as: Int.self) }
        }

        let rows = try pool.pipelinedTransaction([
            "SELECT set_config('application_name', 'one-trip', true) AS name",
            "INSERT INTO items VALUES (1), (2) RETURNING n",
            "SELECT current_setting('application_name') AS name, count(*)::int AS n FROM items",
        ])
        // One result per statement (BEGIN and COMMIT are not among them), all in one transaction.
        #expect(rows.count == 3)
        #expect(rows[1].affectedRows == 2)
        #expect(try rows[2][0].decode("name", as: String.self) == "one-trip")
        #expect(try rows[2][0].decode("n", as: Int.self) == 2)
        #expect(try stored() == [1, 2])
        // Without BEGIN and COMMIT, the pipeline is the transaction: its local setting and its advisory
        // lock last from one statement to the next, and end with it.
        let locks = try pool.pipelinedTransaction([
            "SELECT pg_try_advisory_xact_lock(42) AS locked",
            """
            SELECT count(*)::int AS n FROM pg_locks
            WHERE locktype = 'advisory' AND objid = 42 AND pid = pg_backend_pid() AND granted
            """,
            "SELECT current_setting('application_name') AS name",
        ])
        #expect(try locks[1][0].decode("n", as: Int.self) == 1)
        #expect(try locks[2][0].decode("name", as: String.self) != "one-trip")
        // This lock only: the shared test cluster has other tests' advisory locks (ingest guards, maintenance).
        let released = try admin.query(
            """
            SELECT count(*)::int AS n FROM pg_locks
            WHERE locktype = 'advisory' AND classid = 0 AND objid = 42 AND objsubid = 1
            """)
        #expect(try released[0].decode("n", as: Int.self) == 0)

        // A failing statement: the ones before it are rolled back, and the connection is usable after.
        #expect(throws: PostgresError.self) {
            try pool.pipelinedTransaction(["INSERT INTO items VALUES (3)", "INSERT INTO items VALUES (1)"])
        }
        #expect(try stored() == [1, 2])
        #expect(pool.statistics.idle == 1)
        let after = try pool.pipelinedTransaction(["INSERT INTO items VALUES (3) RETURNING n"])
        #expect(try after[0][0].decode("n", as: Int.self) == 3)
        #expect(try stored() == [1, 2, 3])
    }
}
