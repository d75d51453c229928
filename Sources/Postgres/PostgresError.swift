/// An error from PostgreSQL, from libpq, or from decoding a result.
///
/// `description` is safe to log: it names the kind, the SQLSTATE, the constraint and, for decoding
/// errors, the column, never a message text, a bound value or the connection string.
/// `debugDescription` adds the primary message, which may quote a value; keep it out of production logs.
public struct PostgresError: Error, Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    /// What went wrong, broadly.
    public enum Kind: Sendable {
        /// A connection could not be opened.
        case connectionFailed
        /// An open connection broke while it was being used.
        case connectionLost
        /// The server refused the statement; see `sqlState`.
        case server
        /// A pool had no connection to lend within its acquire timeout.
        case poolTimeout
        /// The server did not answer within the configured response deadline (a stopped or hung
        /// server); the connection was given up. Whether a statement already sent took effect is unknown.
        case timedOut
        /// The transaction committed on the server, but the server warned that it stopped waiting for its
        /// synchronous standby ("has already committed locally, but might not have been replicated"): a
        /// failover can still lose it, so it must not be confirmed to anyone. The connection was given up.
        case notReplicated
        /// A value could not be decoded into the requested Swift type, or a column was missing.
        case decoding
        /// The API was used in a way it does not support (a nested transaction, a closed pool, a NUL byte in text).
        case misuse
    }

    /// What went wrong, broadly.
    public let kind: Kind

    /// The five-character SQLSTATE the server reported, such as `"23505"`, if any.
    public let sqlState: String?

    /// The name of the violated constraint (`PG_DIAG_CONSTRAINT_NAME`), if any.
    public let constraint: String?

    /// The column a decoding error is about, if any. A column name is not a value, so it is shown.
    let column: String?

    /// The server's primary message, or libpq's or this library's explanation; only in `debugDescription`.
    let message: String?

    /// The session whose transaction may have committed or not: set when a transaction's commit was sent
    /// and then the connection timed out or was lost before its answer came. Until that session has
    /// ended, the transaction can still commit; ``PostgresPool/awaitEnd(of:)`` ends it, and afterwards
    /// a read on another connection tells which it was.
    public let unresolved: PostgresSession?

    init(
        kind: Kind, sqlState: String? = nil, constraint: String? = nil, column: String? = nil, message: String? = nil,
        unresolved: PostgresSession? = nil
    ) {
        self.kind = kind
        self.sqlState = sqlState
        self.constraint = constraint
        self.column = column
        self.message = message
        self.unresolved = unresolved
    }

    /// This error, with the commit it interrupted in doubt on `session`.
    func unresolved(on session: PostgresSession?) -> PostgresError {
        guard kind == .timedOut || kind == .connectionLost || kind == .notReplicated, let session else { return self }
        return PostgresError(
            kind: kind, sqlState: sqlState, constraint: constraint, column: column, message: message,
            unresolved: session)
    }

    /// Whether this is a unique violation (SQLSTATE `23505`).
    public var isUniqueViolation: Bool { sqlState == "23505" }

    /// Whether the connection is unusable: a failed or lost connection, SQLSTATE class `08`, or
    /// the wrong node (see ``wrongNodeStates``).
    public var isConnectionError: Bool {
        switch kind {
        case .connectionFailed, .connectionLost:
            return true
        case .server, .poolTimeout, .timedOut, .notReplicated, .decoding, .misuse:
            guard let sqlState else { return false }
            return sqlState.hasPrefix("08") || Self.wrongNodeStates.contains(sqlState)
        }
    }

    /// The SQLSTATEs that mean the session is on a node that can no longer take this work: an
    /// administrator shutdown or termination (`57P01`, `57P02`), a server starting up or in recovery
    /// (`57P03`), and a read-only transaction (`25006`), which is also what `LISTEN` or any write on a
    /// standby, or on a primary demoted under the session, fails with. The connection is dropped and a
    /// new one goes to the primary (with `target_session_attrs=read-write` in the connection string).
    public static let wrongNodeStates: Set<String> = ["57P01", "57P02", "57P03", "25006"]

    /// A generic description: the kind, SQLSTATE, constraint and column; never a message, a value or conninfo.
    public var description: String {
        var text = "PostgresError.\(kind)"
        if let sqlState { text += " sqlstate=\(sqlState)" }
        if let constraint { text += " constraint=\(constraint)" }
        if let column { text += " column=\(column)" }
        return text
    }

    /// The description plus the primary message, which may quote a value (never the DETAIL line).
    public var debugDescription: String {
        guard let message else { return description }
        return description + ": " + message
    }
}

/// One server session (backend process), named by its process id and start time: a process id alone can
/// be reused by a later session.
public struct PostgresSession: Sendable, Hashable {
    /// The backend's process id (`pg_backend_pid()`).
    public let processID: Int32
    /// The backend's start (`pg_stat_activity.backend_start`), in microseconds since 1970.
    public let startMicroseconds: Int64
}
