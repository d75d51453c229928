import Foundation
import Postgres
import TestSupport
import Testing

@Suite("SQLSTATE mapping and what error descriptions may show")
struct ErrorTests {
    @Test("a unique violation carries 23505 and the constraint, never the value")
    func uniqueViolation() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        try connection.execute("CREATE TABLE users (email text CONSTRAINT users_email_key UNIQUE)")
        let secret = "seeded-\(randomHex())@example.com"
        try connection.execute("INSERT INTO users VALUES (\(secret))")
        let error = try #require(throws: PostgresError.self) {
            try connection.execute("INSERT INTO users VALUES (\(secret))")
        }
        #expect(error.kind == .server)
        #expect(error.sqlState == "23505")
        #expect(error.constraint == "users_email_key")
        #expect(error.isUniqueViolation)
        #expect(!error.isConnectionError)
        #expect(error.description == "PostgresError.server sqlstate=23505 constraint=users_email_key")
        // The DETAIL line ("Key (email)=(…) already exists") carries the value; it is never kept.
        #expect(!error.description.contains(secret))
        #expect(!error.debugDescription.contains(secret))
        #expect(error.debugDescription.contains("duplicate key"))
        #expect(connection.isHealthy)
    }

    @Test("a syntax error carries 42601; a bad value stays out of the description")
    func syntaxAndBadValue() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        let syntax = try #require(throws: PostgresError.self) { try connection.query("SELEC 1") }
        #expect(syntax.sqlState == "42601")
        #expect(syntax.kind == .server)
        #expect(!syntax.isUniqueViolation)

        let secret = "seeded\(randomHex())"
        let invalid = try #require(throws: PostgresError.self) { try connection.query("SELECT \(secret)::int") }
        #expect(invalid.sqlState == "22P02")
        #expect(!invalid.description.contains(secret))
        #expect(connection.isHealthy)
    }

    @Test("the statement timeout cancels with 57014 and leaves the connection usable")
    func statementTimeout() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        var configuration = database.configuration
        configuration.statementTimeoutMilliseconds = 100
        let connection = try PostgresConnection(configuration: configuration)
        let started = Date()
        let error = try #require(throws: PostgresError.self) { try connection.query("SELECT pg_sleep(5)") }
        #expect(error.sqlState == "57014")
        #expect(error.kind == .server)
        #expect(Date().timeIntervalSince(started) < 2)
        #expect(connection.isHealthy)
        #expect(try connection.query("SHOW statement_timeout")[0].decode(0, as: String.self) == "100ms")
    }

    @Test("the default configuration sets a 5 s statement timeout, nil leaves the server's")
    func statementTimeoutSettings() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let standard = try PostgresConnection(configuration: database.configuration)
        #expect(try standard.query("SHOW statement_timeout")[0].decode(0, as: String.self) == "5s")
        var configuration = database.configuration
        configuration.statementTimeoutMilliseconds = nil
        configuration.applicationName = "app-\(randomHex(4))"
        let unlimited = try PostgresConnection(configuration: configuration)
        #expect(try unlimited.query("SHOW statement_timeout")[0].decode(0, as: String.self) == "0")
        #expect(
            try unlimited.query("SELECT current_setting('application_name') AS a")[0].decode("a", as: String.self)
                == configuration.applicationName
        )
    }

    @Test("connecting to a closed port throws connectionFailed and frees the handle")
    func connectFailure() throws {
        for connectionString in [
            "postgresql://127.0.0.1:1/nothing", "host=127.0.0.1 port=1 dbname=nothing", "not a = valid = conninfo",
        ] {
            let error = try #require(throws: PostgresError.self) {
                _ = try PostgresConnection(configuration: PostgresConfiguration(connectionString: connectionString))
            }
            #expect(error.kind == .connectionFailed)
            #expect(error.isConnectionError)
            #expect(!error.description.contains("127.0.0.1"))
        }
    }

    @Test("a wrong password or database never shows in the description")
    func passwordNotShown() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let admin = try PostgresConnection(configuration: database.configuration)
        let role = "r_\(randomHex())"
        let password = "pw-\(randomHex())"
        let wrongPassword = "wrong-\(randomHex())"
        let missingDatabase = "db_\(randomHex())"
        // Role names and passwords cannot be parameters; these are generated hex, so they are safe to splice.
        try admin.execute(PostgresQuery(unsafeSQL: "CREATE ROLE \(role) LOGIN PASSWORD '\(password)'"))
        defer { _ = try? admin.execute(PostgresQuery(unsafeSQL: "DROP ROLE IF EXISTS \(role)")) }

        let (host, port) = try serverAddress(admin)
        // Whether pg_hba checks passwords (the password is wrong) or trusts (the database is missing),
        // this fails, with the password in the connection string.
        let uri = "postgresql://\(role):\(wrongPassword)@\(uriComponent(host)):\(port)/\(missingDatabase)"
        let error = try #require(throws: PostgresError.self) {
            _ = try PostgresConnection(configuration: PostgresConfiguration(connectionString: uri))
        }
        #expect(error.kind == .connectionFailed)
        for secret in [wrongPassword, password, missingDatabase, role] {
            #expect(!error.description.contains(secret))
        }
        #expect(!error.debugDescription.contains(wrongPassword))
        #expect(!"\(error)".contains(wrongPassword))
        #expect(!String(reflecting: error).contains(wrongPassword))
    }

    @Test(
        "error classification",
        arguments: [
            ("08006", true), ("57P01", true), ("57P02", true), ("57P03", true), ("57014", false), ("23505", false),
        ])
    func classification(sqlState: String, isConnectionError: Bool) throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        // RAISE lets the server report any SQLSTATE without staging the real failure.
        let error = try #require(throws: PostgresError.self) {
            try connection.execute(
                PostgresQuery(unsafeSQL: "DO $$ BEGIN RAISE EXCEPTION 'x' USING ERRCODE = '\(sqlState)'; END $$")
            )
        }
        #expect(error.sqlState == sqlState)
        #expect(error.isConnectionError == isConnectionError)
        #expect(error.isUniqueViolation == (sqlState == "23505"))
    }

    @Test("a backend terminated under a connection is connectionLost; reset recovers it")
    func lostAndReset() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let admin = try PostgresConnection(configuration: database.configuration)
        let connection = try PostgresConnection(configuration: database.configuration)
        let pid: Int = try connection.query("SELECT pg_backend_pid() AS pid")[0].decode("pid")
        #expect(try terminateBackends([pid], using: admin))
        let error = try #require(throws: PostgresError.self) { try connection.query("SELECT 1") }
        #expect(error.isConnectionError)
        #expect(error.kind == .connectionLost)
        #expect(!connection.isHealthy)
        #expect(connection.reset())
        #expect(connection.isHealthy)
        #expect(try connection.query("SELECT pg_backend_pid() AS pid")[0].decode("pid", as: Int.self) != pid)
        #expect(try connection.query("SHOW TimeZone")[0].decode(0, as: String.self) == "UTC")
        #expect(try connection.query("SELECT current_schema() AS s")[0].decode("s", as: String.self) == database.schema)
    }
}
