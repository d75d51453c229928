/// How to reach a PostgreSQL server and how to set up each new session.
///
/// The connection string is handed to libpq unchanged, so every libpq URI or `key=value` form works,
/// and an empty string lets libpq read its `PG*` environment variables.
public struct PostgresConfiguration: Sendable {
    /// A libpq URI (`postgresql://…`) or `key=value` conninfo string; `""` uses libpq's `PG*` environment variables.
    ///
    /// It may hold a password: never log it.
    public var connectionString: String

    /// How long libpq may spend connecting to one host, in seconds (libpq's `connect_timeout`).
    public var connectTimeoutSeconds: Int

    /// The session's `statement_timeout` in milliseconds, set after connecting; `nil` keeps the server's default.
    public var statementTimeoutMilliseconds: Int?

    /// The `application_name` the server shows in `pg_stat_activity`.
    public var applicationName: String

    /// Creates a configuration.
    ///
    /// - Parameters:
    ///   - connectionString: A libpq URI or conninfo string; `""` uses libpq's `PG*` environment variables.
    ///   - connectTimeoutSeconds: libpq's `connect_timeout`.
    ///   - statementTimeoutMilliseconds: The session's `statement_timeout`; `nil` keeps the server's default.
    ///   - applicationName: The `application_name` reported to the server.
    public init(
        connectionString: String = "",
        connectTimeoutSeconds: Int = 5,
        statementTimeoutMilliseconds: Int? = 5000,
        applicationName: String = "actionhook"
    ) {
        self.connectionString = connectionString
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.statementTimeoutMilliseconds = statementTimeoutMilliseconds
        self.applicationName = applicationName
    }
}
