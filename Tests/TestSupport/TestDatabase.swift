import Foundation
import Postgres

/// A fresh, empty schema for one test, on the server named by `ACTIONHOOK_TEST_DATABASE_URL`.
///
/// Connections made with ``connectionString`` or ``configuration`` have `search_path` set to the
/// schema, so unqualified table names land in it. Call ``drop()`` when the test ends (`defer`).
package final class TestDatabase: Sendable {
    /// The environment variable that names the test server.
    package static let environmentVariable = "ACTIONHOOK_TEST_DATABASE_URL"

    /// The error thrown when the test server is not configured.
    package struct NotConfigured: Error, CustomStringConvertible {
        /// Explains how to run the tests.
        package var description: String {
            "\(TestDatabase.environmentVariable) is not set. The integration tests need a PostgreSQL server: "
                + "run them with `make test`, which starts a throwaway cluster and sets it, or set it yourself "
                + "to a libpq URI or conninfo for a role that may CREATE SCHEMA."
        }
    }

    /// The schema's name, `t_` followed by 16 random hex digits.
    package let schema: String

    /// A connection string for the test server with `search_path` set to ``schema``.
    package let connectionString: String

    private let baseConnectionString: String
    /// The database made for this test alone (see ``createInOwnDatabase()``), dropped with it.
    private let ownDatabase: (name: String, server: String)?

    /// A configuration using ``connectionString``.
    package var configuration: PostgresConfiguration {
        PostgresConfiguration(connectionString: connectionString)
    }

    /// Creates a fresh schema on the server named by `ACTIONHOOK_TEST_DATABASE_URL`.
    ///
    /// - Throws: ``NotConfigured`` when the variable is missing or empty, so a run without a server
    ///   fails instead of skipping; ``PostgresError`` when the server cannot be reached.
    package static func create() throws -> TestDatabase {
        guard let base = ProcessInfo.processInfo.environment[environmentVariable], !base.isEmpty else {
            throw NotConfigured()
        }
        return try create(baseConnectionString: base)
    }

    /// Creates a fresh schema on the server named by `baseConnectionString` (a libpq URI or conninfo).
    ///
    /// - Throws: ``PostgresError`` when the server cannot be reached or the schema cannot be created.
    package static func create(baseConnectionString base: String) throws -> TestDatabase {
        var generator = SystemRandomNumberGenerator()
        let schema = "t_" + String(format: "%016llx", generator.next() as UInt64)
        let connection = try PostgresConnection(configuration: PostgresConfiguration(connectionString: base))
        try connection.execute(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"))
        return TestDatabase(schema: schema, base: base)
    }

    /// Creates a fresh schema in a database of its own on the server named by
    /// `ACTIONHOOK_TEST_DATABASE_URL`: for tests that count what reaches the database or the listener
    /// (notifications are per database, so other tests' would reach it in the shared one).
    package static func createInOwnDatabase() throws -> TestDatabase {
        guard let server = ProcessInfo.processInfo.environment[environmentVariable], !server.isEmpty else {
            throw NotConfigured()
        }
        var generator = SystemRandomNumberGenerator()
        let name = "d_" + String(format: "%016llx", generator.next() as UInt64)
        let connection = try PostgresConnection(configuration: PostgresConfiguration(connectionString: server))
        try connection.execute(PostgresQuery(unsafeSQL: "CREATE DATABASE \(name)"))
        // A later keyword wins in both forms: a URI's query parameter, a conninfo's keyword.
        let base =
            server.hasPrefix("postgresql://") || server.hasPrefix("postgres://")
            ? server + (server.contains("?") ? "&" : "?") + "dbname=" + name
            : server + " dbname=" + name
        let schema = "t_" + String(format: "%016llx", generator.next() as UInt64)
        let inDatabase = try PostgresConnection(configuration: PostgresConfiguration(connectionString: base))
        try inDatabase.execute(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"))
        return TestDatabase(schema: schema, base: base, ownDatabase: (name, server))
    }

    private init(schema: String, base: String, ownDatabase: (name: String, server: String)? = nil) {
        self.schema = schema
        self.baseConnectionString = base
        self.connectionString = Self.connectionString(base, searchPath: schema)
        self.ownDatabase = ownDatabase
    }

    /// Drops the schema and everything in it; calling it again does nothing.
    package func drop() {
        // A failed drop leaves a schema behind on a throwaway server; it must not hide the test's own result.
        guard
            let connection = try? PostgresConnection(
                configuration: PostgresConfiguration(connectionString: baseConnectionString)
            )
        else { return }
        _ = try? connection.execute(PostgresQuery(unsafeSQL: "DROP SCHEMA IF EXISTS \(schema) CASCADE"))
        if let ownDatabase,
            let server = try? PostgresConnection(
                configuration: PostgresConfiguration(connectionString: ownDatabase.server))
        {
            _ = try? server.execute(
                PostgresQuery(unsafeSQL: "DROP DATABASE IF EXISTS \(ownDatabase.name) WITH (FORCE)"))
        }
    }

    /// Adds `options=-csearch_path=<schema>` to a URI or to a conninfo string.
    static func connectionString(_ base: String, searchPath schema: String) -> String {
        if base.hasPrefix("postgresql://") || base.hasPrefix("postgres://") {
            // In a URI the option is percent-encoded: "=" is %3D.
            let separator = base.contains("?") ? "&" : "?"
            return base + separator + "options=-csearch_path%3D" + schema
        }
        // In conninfo a later keyword overrides an earlier one; "" means libpq's PG* variables.
        let prefix = base.trimmingCharacters(in: .whitespaces)
        return (prefix.isEmpty ? "" : prefix + " ") + "options='-csearch_path=\(schema)'"
    }
}
