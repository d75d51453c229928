/// How to reach a PostgreSQL server and how to set up each new session.
///
/// The connection string is handed to libpq unchanged, so every libpq URI or `key=value` form works,
/// and an empty string lets libpq read its `PG*` environment variables.
public struct PostgresConfiguration: Sendable {
    /// A libpq URI (`postgresql://…`) or `key=value` conninfo string; `""` uses libpq's `PG*` environment variables.
    ///
    /// It may hold a password: never log it.
    public var connectionString: String

    /// How long connecting to one host may take, in seconds (libpq's `connect_timeout`), at most the
    /// response deadline; a `connect_timeout` in the connection string wins. Each host of a multi-host
    /// connection string gets it anew (see ``PostgresConnection/init(configuration:)``).
    public var connectTimeoutSeconds: Int

    /// The session's `statement_timeout` in milliseconds, set after connecting; `nil` keeps the server's default.
    public var statementTimeoutMilliseconds: Int?

    /// The `application_name` the server shows in `pg_stat_activity`.
    public var applicationName: String

    /// The longest this client waits for the server: to connect, and for each statement's (or each
    /// pipeline's) answer, in milliseconds; `nil` waits as long as libpq does (for an answer, forever).
    ///
    /// The server's `statement_timeout` cannot help against a server that is stopped or unreachable
    /// while the TCP connection stays up: nothing answers, and libpq alone would block forever. Past
    /// the deadline the call throws `.timedOut` and the connection is given up.
    public var responseDeadlineMilliseconds: Int?

    /// Creates a configuration.
    ///
    /// - Parameters:
    ///   - connectionString: A libpq URI or conninfo string; `""` uses libpq's `PG*` environment variables.
    ///   - connectTimeoutSeconds: libpq's `connect_timeout`.
    ///   - statementTimeoutMilliseconds: The session's `statement_timeout`; `nil` keeps the server's default.
    ///   - applicationName: The `application_name` reported to the server.
    ///   - responseDeadlineMilliseconds: How long to wait for the server at most; `nil`: as libpq does.
    public init(
        connectionString: String = "",
        connectTimeoutSeconds: Int = 5,
        statementTimeoutMilliseconds: Int? = 5000,
        applicationName: String = "actionhook",
        responseDeadlineMilliseconds: Int? = nil
    ) {
        self.connectionString = connectionString
        self.connectTimeoutSeconds = connectTimeoutSeconds
        self.statementTimeoutMilliseconds = statementTimeoutMilliseconds
        self.applicationName = applicationName
        self.responseDeadlineMilliseconds = responseDeadlineMilliseconds
    }
}
