import Foundation
import Postgres
import TestSupport
import Testing

private struct Abort: Error {}

@Suite("Transactions on one connection")
struct TransactionTests {
    @Test("a throwing body rolls back and leaves no row; a returning one commits")
    func rollbackAndCommit() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        try connection.execute("CREATE TABLE items (n int)")

        #expect(throws: Abort.self) {
            try connection.transaction { transaction in
                try transaction.execute("INSERT INTO items VALUES (\(1))")
                throw Abort()
            }
        }
        #expect(connection.isHealthy)
        #expect(try connection.query("SELECT count(*) AS n FROM items")[0].decode("n", as: Int.self) == 0)

        let value = try connection.transaction { transaction in
            try transaction.execute("INSERT INTO items VALUES (\(2))")
            return "done"
        }
        #expect(value == "done")
        #expect(try connection.query("SELECT n FROM items")[0].decode("n", as: Int.self) == 2)
    }

    @Test("a failed statement swallowed by the body still rolls back, reported as 25P02")
    func swallowedFailure() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        try connection.execute("CREATE TABLE items (n int PRIMARY KEY)")
        let error = try #require(throws: PostgresError.self) {
            try connection.transaction { transaction in
                try transaction.execute("INSERT INTO items VALUES (\(1))")
                _ = try? transaction.execute("INSERT INTO items VALUES (\(1))")
            }
        }
        #expect(error.sqlState == "25P02")
        #expect(connection.isHealthy)
        #expect(try connection.query("SELECT count(*) AS n FROM items")[0].decode("n", as: Int.self) == 0)
    }

    @Test("isHealthy is false inside an open transaction; nesting is refused")
    func healthAndNesting() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        #expect(connection.isHealthy)
        try connection.execute("BEGIN")
        #expect(!connection.isHealthy)
        let nested = try #require(throws: PostgresError.self) { try connection.transaction { _ in 1 } }
        #expect(nested.kind == .misuse)
        _ = try? connection.execute("SELECT 1/0")
        #expect(!connection.isHealthy)
        try connection.execute("ROLLBACK")
        #expect(connection.isHealthy)
    }

    @Test("when the rollback cannot be sent the connection is no longer healthy")
    func brokenAfterFailedRollback() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let admin = try PostgresConnection(configuration: database.configuration)
        let connection = try PostgresConnection(configuration: database.configuration)
        #expect(throws: Abort.self) {
            try connection.transaction { transaction in
                let pid: Int = try transaction.query("SELECT pg_backend_pid() AS pid")[0].decode("pid")
                #expect(try terminateBackends([pid], using: admin))
                throw Abort()
            }
        }
        #expect(!connection.isHealthy)
    }
}
