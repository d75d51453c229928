import ActionHookSchema
import Logging
import Postgres

/// Applies the migrations in `sql/migrations` that a database has not seen yet.
///
/// Each migration runs in its own transaction and is recorded in `schema_migrations`. A
/// session-level advisory lock (per schema) serialises instances that migrate at once: the second
/// waits, then finds nothing left to do.
public struct Migrator: Sendable {
    let pool: PostgresPool
    let migrations: [Migration]
    let logger: Logger

    /// Creates a migrator for the migrations shipped with this build.
    public init(pool: PostgresPool, migrations: [Migration] = Migrations.all, logger: Logger) {
        self.pool = pool
        self.migrations = migrations
        self.logger = logger
    }

    /// The version this build expects.
    public var latestVersion: Int { migrations.last?.version ?? 0 }

    /// The highest version shipped with this build.
    public static var latestShippedVersion: Int { Migrations.latestVersion }

    /// Every version shipped with this build, in order.
    public static var shippedVersions: [Int] { Migrations.all.map(\.version) }

    /// Applies pending migrations in order and returns the versions applied (empty when current).
    @discardableResult
    public func migrate() throws -> [Int] {
        try pool.withConnection { connection in
            try connection.execute("SELECT pg_advisory_lock(hashtext('actionhook.migrate.' || current_schema()))")
            defer {
                _ = try? connection.execute(
                    "SELECT pg_advisory_unlock(hashtext('actionhook.migrate.' || current_schema()))")
            }
            try connection.execute(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    version integer PRIMARY KEY,
                    name text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """)
            let applied = Set(
                try connection.query("SELECT version FROM schema_migrations").map {
                    try $0.decode("version", as: Int.self)
                })
            var newlyApplied: [Int] = []
            for migration in migrations where !applied.contains(migration.version) {
                try connection.transaction { transaction in
                    // A migration may rightly run for minutes (copying a table, building an index): the
                    // configured statement timeout is for requests, not for it.
                    try transaction.execute("SET LOCAL statement_timeout = 0")
                    try transaction.executeScript(unsafeSQL: migration.sql)
                    try transaction.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (\(migration.version), \(migration.name))"
                    )
                }
                logger.info("applied migration", metadata: ["migration": "\(migration.name)"])
                newlyApplied.append(migration.version)
            }
            return newlyApplied
        }
    }

    /// The highest applied version, or `nil` when the database has never been migrated.
    public func currentVersion() throws -> Int? {
        try pool.withConnection { connection in
            let exists = try connection.query("SELECT to_regclass('schema_migrations') IS NOT NULL AS present")
            guard try exists[0].decode("present", as: Bool.self) else { return nil }
            let rows = try connection.query("SELECT max(version) AS version FROM schema_migrations")
            return try rows[0].decode("version", as: Int?.self)
        }
    }
}
