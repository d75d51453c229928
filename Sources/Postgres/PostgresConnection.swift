internal import CLibPQ
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#elseif canImport(Darwin)
    import Darwin
#endif

/// What the notice receiver of one connection saw since it was last reset.
private final class NoticeWatch {
    /// A WARNING that a commit may not have been replicated arrived.
    var commitMayNotBeReplicated = false
}

// libpq prints notices (such as "there is no transaction in progress") to stderr unless told
// otherwise; they carry server text, so they are dropped, and only one kind is noted: the WARNING a
// server with synchronous replication sends when it stops waiting for a standby after the commit is
// already local ("canceling wait for synchronous replication …": SQLSTATE 01000 when the wait was
// cancelled, by pg_cancel_backend or a client's cancel request, since statement_timeout is off during a
// commit; 57P01 when the session is being terminated, as a fast shutdown does). The project's own
// SQL raises no warnings, so these two are told by their SQLSTATE, which is not translated. A
// non-capturing file-scope closure, because a capturing @convention(c) closure crashes the Swift 6.3.1
// compiler.
private let watchNotice: PQnoticeReceiver = { argument, result in
    guard let argument, let result else { return }
    func field(_ code: Int32) -> String? { PQresultErrorField(result, code).map { String(cString: $0) } }
    guard field(AH_PG_DIAG_SEVERITY_NONLOCALIZED) == "WARNING", ["01000", "57P01"].contains(field(AH_PG_DIAG_SQLSTATE))
    else { return }
    Unmanaged<NoticeWatch>.fromOpaque(argument).takeUnretainedValue().commitMayNotBeReplicated = true
}

/// One blocking connection to PostgreSQL, the only owner of its libpq `PGconn`.
///
/// Calls block the calling thread until the server answers, so run them on threads of your own,
/// never on Swift concurrency's cooperative pool. Use a connection from one thread at a time;
/// ``PostgresPool`` hands each connection to one caller at a time.
///
/// Every connection sets `TimeZone` to UTC, `DateStyle` to ISO, `bytea_output` to hex and the
/// configured `statement_timeout` when it opens, so the text forms that ``PostgresDecodable`` reads are fixed.
public final class PostgresConnection: @unchecked Sendable {
    // @unchecked Sendable: this is the box of one PGconn; libpq lets a PGconn move between threads as
    // long as only one thread uses it at a time, which is this type's documented contract.
    private let handle: OpaquePointer
    private let configuration: PostgresConfiguration
    // Set when a ROLLBACK after a failed transaction body could not be sent: the session state is
    // then unknown, so the connection must not be reused.
    private var isBroken = false
    /// Set when the server answered with an error that means this is no longer the node to use (a
    /// read-only transaction on a standby, a session ended by a shutdown): the pool then opens fresh ones.
    private(set) var wasOnWrongNode = false
    // What the notice receiver saw; it lives as long as the connection (the receiver gets it unretained).
    private let notices = NoticeWatch()
    /// The server session this connection talks to, read when it opened (nil if it could not be read).
    public private(set) var session: PostgresSession?
    // The statements prepared on this session by `pipeline(_:)`: SQL text → statement name.
    private var preparedStatements: [String: String] = [:]
    /// The most statements one session keeps prepared; past it, statements run unprepared.
    static let preparedStatementLimit = 64

    /// Opens a connection and prepares the session.
    ///
    /// The corresponding C function is `PQconnectStartParams`, with `expand_dbname` set so the
    /// connection string may be a URI or a conninfo string. A connection string that names several
    /// hosts (`postgresql://…@h1:5432,h2:5432/db?target_session_attrs=read-write`) is tried one host
    /// at a time, each within its own deadline, so that a host that accepts and then never answers (a
    /// frozen server) cannot use up the time of the others; see ``PostgresConfiguration``.
    ///
    /// - Throws: ``PostgresError`` of kind `.connectionFailed`.
    public init(configuration: PostgresConfiguration) throws {
        let plan = try ConnectPlan(configuration)
        var failure: PostgresError?
        var connected: OpaquePointer?
        for attempt in plan.attempts() {
            let pointer = withCStringArray(attempt.keywords) { keywordArray in
                withCStringArray(attempt.values) { valueArray in
                    PQconnectStartParams(keywordArray, valueArray, attempt.expandsDatabaseName ? 1 : 0)
                }
            }
            guard let pointer else {
                throw PostgresError(kind: .connectionFailed, message: "libpq could not allocate a connection")
            }
            if let failed = Self.finishConnecting(pointer, milliseconds: plan.deadlineMilliseconds) {
                // libpq: "Note that even if the server connection attempt fails (as indicated by
                // PQstatus), the application should call PQfinish to free the memory used by the
                // PGconn object."
                PQfinish(pointer)
                failure = failed
                continue
            }
            plan.remember(attempt)
            connected = pointer
            break
        }
        guard let connected else {
            throw failure ?? PostgresError(kind: .connectionFailed, message: "no host to connect to")
        }
        self.handle = connected
        self.configuration = configuration
        // From here on deinit runs if init throws, so the handle is finished either way.
        PQsetNoticeReceiver(handle, watchNotice, Unmanaged.passUnretained(notices).toOpaque())
        do {
            try prepareSession()
        } catch let error as PostgresError {
            throw PostgresError(
                kind: .connectionFailed, sqlState: error.sqlState, constraint: error.constraint,
                message: error.message
            )
        }
    }

    deinit {
        PQfinish(handle)
    }

    /// Drives a connection started with `PQconnectStartParams` to the end, waiting on its socket at
    /// most `milliseconds`, and returns the failure, if any.
    ///
    /// The corresponding C functions are `PQconnectPoll` and `PQsocket`.
    private static func finishConnecting(_ pointer: OpaquePointer, milliseconds: Int) -> PostgresError? {
        let deadline = ContinuousClock.now + .milliseconds(milliseconds)
        // libpq: "If PQconnectStart succeeds, the next stage is to poll libpq so that it can proceed
        // with the connection sequence", starting as if PQconnectPoll had returned PGRES_POLLING_WRITING.
        var polling = PGRES_POLLING_WRITING
        while PQstatus(pointer) != CONNECTION_BAD {
            if polling == PGRES_POLLING_OK { return nil }
            if polling == PGRES_POLLING_FAILED { break }
            let events = polling == PGRES_POLLING_READING ? POLLIN : POLLOUT
            switch waitForSocket(PQsocket(pointer), events: Int16(events), until: deadline) {
            case .ready: polling = PQconnectPoll(pointer)
            case .timedOut:
                return PostgresError(
                    kind: .connectionFailed,
                    message: "PostgreSQL did not complete the connection within \(milliseconds) ms")
            case .failed: return PostgresError(kind: .connectionFailed, message: "the connection's socket failed")
            }
        }
        return PostgresError(kind: .connectionFailed, message: copyErrorMessage(PQerrorMessage(pointer)))
    }

    private enum SocketWait {
        case ready
        case timedOut
        case failed
    }

    /// Waits until `socket` is ready for `events` or `deadline` (nil: no deadline) passes.
    private static func waitForSocket(_ socket: Int32, events: Int16, until deadline: ContinuousClock.Instant?)
        -> SocketWait
    {
        guard socket >= 0 else { return .failed }
        while true {
            var timeout: Int32 = -1
            if let deadline {
                let remaining = deadline - .now
                if remaining <= .zero { return .timedOut }
                let (seconds, attoseconds) = remaining.components
                timeout = Int32(clamping: seconds * 1000 + attoseconds / 1_000_000_000_000_000 + 1)
            }
            var descriptor = pollfd(fd: socket, events: events, revents: 0)
            let ready = poll(&descriptor, 1, timeout)
            if ready > 0 { return .ready }
            if ready < 0 && errno != EINTR { return .failed }
        }
    }

    /// Reads from the server until libpq holds a whole result (or, in a pipeline, the next one),
    /// waiting at most until `deadline`. Past it the connection is given up: its session is in an
    /// unknown state.
    ///
    /// The corresponding C functions are `PQisBusy` and `PQconsumeInput`.
    private func awaitResult(until deadline: ContinuousClock.Instant?) throws {
        while PQisBusy(handle) == 1 {
            switch Self.waitForSocket(PQsocket(handle), events: Int16(POLLIN), until: deadline) {
            case .ready:
                guard PQconsumeInput(handle) == 1 else {
                    isBroken = true
                    throw PostgresError(kind: .connectionLost, message: copyErrorMessage(PQerrorMessage(handle)))
                }
            case .timedOut:
                isBroken = true
                throw PostgresError(
                    kind: .timedOut,
                    message: "PostgreSQL did not answer within \(configuration.responseDeadlineMilliseconds ?? 0) ms")
            case .failed:
                isBroken = true
                throw PostgresError(kind: .connectionLost, message: "the connection's socket failed")
            }
        }
    }

    /// When an answer sent now must have arrived, or nil for no deadline.
    private var responseDeadline: ContinuousClock.Instant? {
        configuration.responseDeadlineMilliseconds.map { ContinuousClock.now + .milliseconds($0) }
    }

    private func prepareSession() throws {
        // The session's identity too: a commit whose answer never came is settled by ending this session.
        var sql =
            "SELECT set_config('TimeZone', 'UTC', false), set_config('DateStyle', 'ISO', false),"
            + " set_config('bytea_output', 'hex', false), pg_backend_pid() AS pid,"
            + " (SELECT (extract(epoch FROM backend_start) * 1000000)::bigint FROM pg_stat_activity"
            + " WHERE pid = pg_backend_pid()) AS started"
        var binds: [(any PostgresEncodable)?] = []
        if let timeout = configuration.statementTimeoutMilliseconds {
            sql += ", set_config('statement_timeout', $1, false)"
            binds.append(String(timeout))
        }
        let row = try run(PostgresQuery(unsafeSQL: sql, binds: binds)).rows().first
        session = nil
        if let row, let pid = try row.decode("pid", as: Int32?.self),
            let started = try row.decode("started", as: Int64?.self)
        {
            session = PostgresSession(processID: pid, startMicroseconds: started)
        }
    }

    /// Runs a statement and returns its rows, copied out of libpq.
    ///
    /// The corresponding C function is `PQexecParams`, with text parameters and text results.
    ///
    /// - Throws: ``PostgresError`` of kind `.server` (with `sqlState`), `.connectionLost` or `.misuse`.
    public func query(_ query: PostgresQuery) throws -> PostgresRows {
        let result = try run(query)
        return result.rows()
    }

    /// Runs a statement and returns how many rows it affected.
    ///
    /// The corresponding C functions are `PQexecParams` and `PQcmdTuples`.
    ///
    /// - Returns: The affected row count, or 0 when the command reports none.
    /// - Throws: ``PostgresError`` of kind `.server` (with `sqlState`), `.connectionLost` or `.misuse`.
    @discardableResult
    public func execute(_ query: PostgresQuery) throws -> Int {
        try run(query).affectedRows
    }

    /// Runs SQL text that may hold several statements separated by semicolons, such as a migration
    /// file; it takes no parameters.
    ///
    /// Outside a transaction the server runs the statements as one implicit transaction; the first
    /// failing statement stops the rest. The corresponding C function is `PQexec`.
    ///
    /// - Throws: ``PostgresError`` of kind `.server` (with `sqlState`), `.connectionLost` or `.misuse`.
    public func executeScript(unsafeSQL sql: String) throws {
        guard !sql.utf8.contains(0) else {
            throw PostgresError(kind: .misuse, message: "SQL text cannot contain NUL characters")
        }
        notices.commitMayNotBeReplicated = false
        _ = try check(PQexec(handle, sql))
        try confirmReplicated()
    }

    /// Runs `body` in a transaction: `BEGIN`, then `COMMIT` if it returns or `ROLLBACK` if it throws.
    ///
    /// If the rollback itself fails the connection is considered broken (``isHealthy`` is `false`) and
    /// the body's error is thrown. If a statement failed inside a body that still returned, the
    /// server turns `COMMIT` into a rollback; that is thrown as SQLSTATE `25P02`.
    ///
    /// - Throws: The body's error, or ``PostgresError``; `.misuse` when a transaction is already open.
    public func transaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        try begin()
        return try finishTransaction(body)
    }

    /// Whether the connection can be reused: libpq reports it open, no transaction is open or
    /// failed, and no rollback has failed.
    ///
    /// A backend terminated while the connection was idle is only noticed on the next use.
    /// The corresponding C functions are `PQstatus` and `PQtransactionStatus`.
    public var isHealthy: Bool {
        !isBroken && PQstatus(handle) == CONNECTION_OK && PQtransactionStatus(handle) == PQTRANS_IDLE
    }

    /// Closes and reopens the connection with the same parameters, then prepares the session again.
    ///
    /// The corresponding C function is `PQreset`.
    ///
    /// - Returns: Whether the connection is open and prepared again.
    public func reset() -> Bool {
        PQreset(handle)
        preparedStatements.removeAll()
        guard PQstatus(handle) == CONNECTION_OK else { return false }
        isBroken = false
        do {
            try prepareSession()
        } catch {
            isBroken = true
            return false
        }
        return true
    }

    /// Sends a notification on `channel` with `payload`, through `SELECT pg_notify($1, $2)`.
    ///
    /// Inside a transaction the notification is delivered when it commits.
    ///
    /// - Throws: ``PostgresError``.
    public func notify(channel: String, payload: String) throws {
        try execute("SELECT pg_notify(\(channel), \(payload))")
    }

    // MARK: - Transactions, for the pool

    func begin() throws {
        guard PQtransactionStatus(handle) == PQTRANS_IDLE else {
            throw PostgresError(kind: .misuse, message: "a transaction is already open on this connection")
        }
        try execute("BEGIN")
    }

    func finishTransaction<T>(_ body: (PostgresConnection) throws -> T) throws -> T {
        let value: T
        do {
            value = try body(self)
        } catch {
            rollbackAfterFailure()
            throw error
        }
        let commit = try run("COMMIT")
        if commit.commandStatus == "ROLLBACK" {
            throw PostgresError(
                kind: .server, sqlState: "25P02",
                message: "a statement failed inside the transaction, so COMMIT rolled it back"
            )
        }
        return value
    }

    /// After a failure: rolls back the transaction if one is open (or failed); if that cannot be
    /// done, the connection is marked unusable.
    func rollbackIfOpen() {
        guard !isBroken, PQtransactionStatus(handle) != PQTRANS_IDLE else { return }
        rollbackAfterFailure()
    }

    /// Whether a statement failed inside the open transaction, so that `COMMIT` would roll it back.
    var transactionFailed: Bool { PQtransactionStatus(handle) == PQTRANS_INERROR }

    private func rollbackAfterFailure() {
        // A connection given up (a deadline passed) is discarded; the server rolls back when it goes.
        guard !isBroken else { return }
        do {
            try execute("ROLLBACK")
        } catch {
            // The body's error is the one worth reporting; this one only means the session can't be trusted.
            isBroken = true
        }
    }

    // MARK: - Liveness and notifications, for the pool and the listener

    /// The connection's socket (libpq's `PQsocket`), for reading its options.
    var socketDescriptor: Int32 { PQsocket(handle) }

    /// Whether the server closed the connection while it sat idle, found without blocking: a
    /// terminated backend leaves its socket readable (an error message, then end of file).
    func isAliveWithoutWaiting() -> Bool {
        guard PQstatus(handle) == CONNECTION_OK else { return false }
        let socket = PQsocket(handle)
        guard socket >= 0 else { return false }
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, 0)
        if ready > 0 {
            guard PQconsumeInput(handle) == 1 else { return false }
        }
        return PQstatus(handle) == CONNECTION_OK
    }

    /// Waits up to `timeoutMilliseconds` for input and returns the notifications received.
    ///
    /// - Returns: The notifications, or `nil` when the connection is lost.
    func waitForNotifications(timeoutMilliseconds: Int32, wake: WakeSignal? = nil) -> [PostgresNotification]? {
        var notifications = takeNotifications()
        guard notifications.isEmpty else { return notifications }
        let socket = PQsocket(handle)
        guard socket >= 0, PQstatus(handle) == CONNECTION_OK else { return nil }
        var descriptors = [pollfd(fd: socket, events: Int16(POLLIN), revents: 0)]
        if let wake { descriptors.append(pollfd(fd: wake.readDescriptor, events: Int16(POLLIN), revents: 0)) }
        let ready = poll(&descriptors, nfds_t(descriptors.count), timeoutMilliseconds)
        if ready < 0 && errno != EINTR { return nil }
        if descriptors.count > 1 && descriptors[1].revents != 0 { wake?.drain() }
        if ready > 0 && descriptors[0].revents != 0 {
            guard PQconsumeInput(handle) == 1 else { return nil }
        }
        notifications = takeNotifications()
        guard PQstatus(handle) == CONNECTION_OK else { return nil }
        return notifications
    }

    private func takeNotifications() -> [PostgresNotification] {
        var notifications: [PostgresNotification] = []
        while let notify = PQnotifies(handle) {
            notifications.append(
                PostgresNotification(
                    channel: String(cString: notify.pointee.relname),
                    payload: String(cString: notify.pointee.extra)
                )
            )
            // libpq: "After processing a PGnotify object returned by PQnotifies, be sure to free it
            // with PQfreemem."
            PQfreemem(notify)
        }
        return notifications
    }

    // MARK: - Pipelines

    /// Sends `queries` together and then reads all their results: one round trip to the server
    /// instead of one per statement (libpq's pipeline mode).
    ///
    /// The server runs them in order, inside the open transaction if there is one (otherwise the
    /// pipeline is one implicit transaction). Once a statement fails the rest are skipped, and the
    /// first failure is thrown; inside an open transaction, that transaction has then failed.
    ///
    /// A statement marked ``PostgresQuery/prepared`` is parsed and planned once per connection and
    /// kept as a named prepared statement (up to a limit), so later pipelines send only its
    /// parameters. The corresponding C functions are
    /// `PQenterPipelineMode`, `PQsendPrepare`, `PQsendQueryPrepared`, `PQsendQueryParams`,
    /// `PQpipelineSync`, `PQgetResult` and `PQexitPipelineMode`.
    ///
    /// - Returns: Each statement's rows, in order.
    /// - Throws: ``PostgresError`` of kind `.server` (with `sqlState`), `.connectionLost` or `.misuse`.
    public func pipeline(_ queries: [PostgresQuery]) throws -> [PostgresRows] {
        guard !queries.isEmpty else { return [] }
        for query in queries { try Self.checkForNUL(query) }
        notices.commitMayNotBeReplicated = false
        guard PQenterPipelineMode(handle) == 1 else {
            throw PostgresError(kind: .misuse, message: "the connection cannot enter pipeline mode now")
        }

        // Send everything: a Parse for each new prepared statement, then each statement, then Sync.
        enum Step {
            case prepare(sql: String, name: String)
            case statement
        }
        var steps: [Step] = []
        var newNames: [String: String] = [:]
        var sent = true
        for query in queries where sent {
            var name: String?
            if query.isPrepared {
                name = preparedStatements[query.sql] ?? newNames[query.sql]
                if name == nil && preparedStatements.count + newNames.count < Self.preparedStatementLimit {
                    let newName = "actionhook_\(preparedStatements.count + newNames.count + 1)"
                    newNames[query.sql] = newName
                    sent = withParameters(query.parameters) { types, _, _, _ in
                        PQsendPrepare(handle, newName, query.sql, Int32(query.parameters.count), types) == 1
                    }
                    steps.append(.prepare(sql: query.sql, name: newName))
                    name = newName
                }
            }
            guard sent else { break }
            sent = withParameters(query.parameters) { types, values, lengths, formats in
                let count = Int32(query.parameters.count)
                if let name {
                    return PQsendQueryPrepared(handle, name, count, values, lengths, formats, 0) == 1
                } else {
                    return PQsendQueryParams(handle, query.sql, count, types, values, lengths, formats, 0) == 1
                }
            }
            steps.append(.statement)
        }
        guard sent, PQpipelineSync(handle) == 1 else {
            // Nothing can be read back reliably from a half-sent pipeline.
            isBroken = true
            throw PostgresError(kind: .connectionLost, message: copyErrorMessage(PQerrorMessage(handle)))
        }

        // Read one result per step (each followed by NULL), then the Sync's.
        let deadline = responseDeadline
        var rows: [PostgresRows] = []
        rows.reserveCapacity(queries.count)
        var failure: PostgresError?
        for step in steps {
            try awaitResult(until: deadline)
            guard let pointer = PQgetResult(handle) else {
                isBroken = true
                throw PostgresError(kind: .connectionLost, message: copyErrorMessage(PQerrorMessage(handle)))
            }
            let result = OwnedResult(pointer)
            try awaitResult(until: deadline)
            while let extra = PQgetResult(handle) {
                PQclear(extra)
                try awaitResult(until: deadline)
            }
            switch PQresultStatus(pointer) {
            case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
                switch step {
                case .prepare(let sql, let name): preparedStatements[sql] = name
                case .statement: rows.append(result.rows())
                }
            case PGRES_PIPELINE_ABORTED:
                break
            default:
                failure = failure ?? error(from: result)
            }
        }
        try awaitResult(until: deadline)
        guard let sync = PQgetResult(handle), PQresultStatus(sync) == PGRES_PIPELINE_SYNC else {
            isBroken = true
            throw failure ?? PostgresError(kind: .connectionLost, message: copyErrorMessage(PQerrorMessage(handle)))
        }
        PQclear(sync)
        guard PQexitPipelineMode(handle) == 1 else {
            isBroken = true
            throw failure ?? PostgresError(kind: .misuse, message: "the connection could not leave pipeline mode")
        }
        if let failure {
            // A prepared statement whose result type changed under it (an online schema change) would
            // fail on this session for good: let the pool open a fresh one.
            if failure.sqlState == "0A000" && !preparedStatements.isEmpty { isBroken = true }
            throw failure
        }
        try confirmReplicated()
        return rows
    }

    // MARK: - Running statements

    /// libpq takes NUL-terminated strings, so an embedded NUL would silently cut the text short.
    private static func checkForNUL(_ query: PostgresQuery) throws {
        func hasNUL(_ text: String) -> Bool {
            var text = text
            return text.withUTF8 { bytes in bytes.count > 0 && memchr(bytes.baseAddress!, 0, bytes.count) != nil }
        }
        guard !hasNUL(query.sql), !query.parameters.contains(where: { $0.text.map(hasNUL) ?? false }) else {
            throw PostgresError(kind: .misuse, message: "SQL text and parameters cannot contain NUL characters")
        }
    }

    /// Sends a statement and waits for its result within the response deadline. Like `PQexecParams`
    /// (whose result it returns), but without blocking past the deadline.
    ///
    /// The corresponding C functions are `PQsendQueryParams` and `PQgetResult`.
    private func run(_ query: PostgresQuery) throws -> OwnedResult {
        try Self.checkForNUL(query)
        if isBroken {
            throw PostgresError(kind: .connectionLost, message: "the connection was given up after a failure")
        }
        let deadline = responseDeadline
        notices.commitMayNotBeReplicated = false
        let sent = withParameters(query.parameters) { types, values, lengths, formats in
            PQsendQueryParams(handle, query.sql, Int32(query.parameters.count), types, values, lengths, formats, 0) == 1
        }
        guard sent else { return try check(nil) }
        // Like PQexec, the last result is the one returned; a single statement has only one.
        var last: OpaquePointer?
        while true {
            try awaitResult(until: deadline)
            guard let pointer = PQgetResult(handle) else { break }
            if let last { PQclear(last) }
            last = pointer
            // A COPY result is followed by COPY data, never by the NULL that ends the results: stop
            // here and let `check` refuse it.
            switch PQresultStatus(pointer) {
            case PGRES_COPY_IN, PGRES_COPY_OUT, PGRES_COPY_BOTH: return try check(last)
            default: continue
            }
        }
        let result = try check(last)
        try confirmReplicated()
        return result
    }

    /// Throws `.notReplicated` when the statement just run ended a transaction (an explicit `COMMIT`, or
    /// one statement or pipeline as a transaction of its own) and the server warned meanwhile that the
    /// commit might not have been replicated: it is local only, and a failover may still lose it. The
    /// connection is given up, since its server is likely on its way out.
    private func confirmReplicated() throws {
        guard notices.commitMayNotBeReplicated else { return }
        notices.commitMayNotBeReplicated = false
        guard PQtransactionStatus(handle) == PQTRANS_IDLE else { return }
        isBroken = true
        throw PostgresError(
            kind: .notReplicated,
            message: "the commit is local only: the server stopped waiting for its synchronous standby")
    }

    /// Takes ownership of a result and turns a failed one into an error.
    private func check(_ pointer: OpaquePointer?) throws -> OwnedResult {
        guard let pointer else {
            // libpq returns NULL only when it is out of memory or cannot send the command at all.
            throw PostgresError(kind: .connectionLost, message: copyErrorMessage(PQerrorMessage(handle)))
        }
        let result = OwnedResult(pointer)
        switch PQresultStatus(pointer) {
        case PGRES_COMMAND_OK, PGRES_TUPLES_OK, PGRES_EMPTY_QUERY:
            return result
        case PGRES_COPY_IN, PGRES_COPY_OUT, PGRES_COPY_BOTH:
            // COPY needs a protocol this type does not speak; the session is stuck in it.
            isBroken = true
            throw PostgresError(kind: .misuse, message: "COPY is not supported")
        default:
            throw error(from: result)
        }
    }

    private func error(from result: OwnedResult) -> PostgresError {
        let sqlState = result.errorField(AH_PG_DIAG_SQLSTATE)
        if let sqlState, PostgresError.wrongNodeStates.contains(sqlState) {
            // A standby (or a primary demoted under it) or a server going down: a session that stays would
            // fail the same way again, so the pool replaces it, and its idle siblings, with fresh ones.
            isBroken = true
            wasOnWrongNode = true
        }
        let lost = PQstatus(handle) != CONNECTION_OK
        return PostgresError(
            kind: lost ? .connectionLost : .server,
            sqlState: sqlState,
            constraint: result.errorField(AH_PG_DIAG_CONSTRAINT_NAME),
            message: result.errorField(AH_PG_DIAG_MESSAGE_PRIMARY) ?? copyErrorMessage(PQerrorMessage(handle))
        )
    }
}

/// The owner of one `PGresult`, cleared when it goes away; it never leaves the call that made it.
private final class OwnedResult {
    let pointer: OpaquePointer

    init(_ pointer: OpaquePointer) {
        self.pointer = pointer
    }

    deinit {
        PQclear(pointer)
    }

    var affectedRows: Int {
        // PQcmdTuples returns "" for commands that report no count.
        Int(String(cString: PQcmdTuples(pointer))) ?? 0
    }

    var commandStatus: String {
        String(cString: PQcmdStatus(pointer))
    }

    func errorField(_ code: Int32) -> String? {
        guard let field = PQresultErrorField(pointer, code) else { return nil }
        return String(cString: field)
    }

    func rows() -> PostgresRows {
        let rowCount = Int(PQntuples(pointer))
        let columnCount = Int(PQnfields(pointer))
        let columns = (0..<columnCount).map { String(cString: PQfname(pointer, Int32($0))) }
        var values: [String?] = []
        values.reserveCapacity(rowCount * columnCount)
        for row in 0..<Int32(rowCount) {
            for column in 0..<Int32(columnCount) {
                if PQgetisnull(pointer, row, column) == 1 {
                    values.append(nil)
                } else {
                    let length = Int(PQgetlength(pointer, row, column))
                    let bytes = UnsafeRawBufferPointer(start: PQgetvalue(pointer, row, column), count: length)
                    values.append(String(decoding: bytes, as: UTF8.self))
                }
            }
        }
        return PostgresRows(columns: columns, values: values, rowCount: rowCount, affectedRows: affectedRows)
    }
}

/// Copies libpq's error message out at once, without the trailing newline.
private func copyErrorMessage(_ message: UnsafePointer<CChar>?) -> String? {
    guard let message else { return nil }
    let text = String(cString: message).trimmingCharacters(in: .whitespacesAndNewlines)
    return text.isEmpty ? nil : text
}

/// Calls `body` with a C array of NUL-terminated copies of `strings` (`nil` stays a null pointer);
/// the array and its strings live only during the call.
private func withCStringArray<R>(
    _ strings: [String?], _ body: (UnsafePointer<UnsafePointer<CChar>?>?) -> R
) -> R {
    var storage: [UInt8] = []
    storage.reserveCapacity(strings.reduce(0) { $0 + ($1?.utf8.count ?? 0) + 1 })
    var offsets: [Int?] = []
    offsets.reserveCapacity(strings.count)
    for string in strings {
        guard let string else {
            offsets.append(nil)
            continue
        }
        offsets.append(storage.count)
        storage.append(contentsOf: string.utf8)
        storage.append(0)
    }
    return storage.withUnsafeBufferPointer { bytes in
        bytes.withMemoryRebound(to: CChar.self) { buffer in
            let pointers: [UnsafePointer<CChar>?] = offsets.map { offset in offset.map { buffer.baseAddress! + $0 } }
            return pointers.withUnsafeBufferPointer { body($0.baseAddress) }
        }
    }
}

/// Calls `body` with libpq's parameter arrays for `parameters`: type OIDs (0, the server infers it, for
/// text), values, lengths and formats (0 text, 1 binary). The pointers live only during the call.
private func withParameters<R>(
    _ parameters: [PostgresParameter],
    _ body: (
        _ types: UnsafePointer<Oid>?, _ values: UnsafePointer<UnsafePointer<CChar>?>?, _ lengths: UnsafePointer<Int32>?,
        _ formats: UnsafePointer<Int32>?
    ) -> R
) -> R {
    var storage: [UInt8] = []
    var offsets: [Int?] = []
    var lengths: [Int32] = []
    var formats: [Int32] = []
    var types: [Oid] = []
    offsets.reserveCapacity(parameters.count)
    lengths.reserveCapacity(parameters.count)
    formats.reserveCapacity(parameters.count)
    types.reserveCapacity(parameters.count)
    for parameter in parameters {
        switch parameter.value {
        case .text(nil):
            offsets.append(nil)
            lengths.append(0)
            formats.append(0)
            types.append(0)
        case .text(let text?):
            offsets.append(storage.count)
            storage.append(contentsOf: text.utf8)
            storage.append(0)
            lengths.append(0)
            formats.append(0)
            types.append(0)
        case .binary(let bytes, let typeOID):
            offsets.append(storage.count)
            storage.append(contentsOf: bytes)
            lengths.append(Int32(bytes.count))
            formats.append(1)
            types.append(Oid(typeOID))
        }
    }
    // Text parameters need no lengths or formats: libpq reads them to their NUL.
    let allText = !formats.contains(1)
    return storage.withUnsafeBufferPointer { bytes in
        bytes.withMemoryRebound(to: CChar.self) { buffer in
            let pointers: [UnsafePointer<CChar>?] = offsets.map { offset in offset.map { buffer.baseAddress! + $0 } }
            return pointers.withUnsafeBufferPointer { values in
                if allText { return body(nil, values.baseAddress, nil, nil) }
                return types.withUnsafeBufferPointer { types in
                    lengths.withUnsafeBufferPointer { lengths in
                        formats.withUnsafeBufferPointer { formats in
                            body(types.baseAddress, values.baseAddress, lengths.baseAddress, formats.baseAddress)
                        }
                    }
                }
            }
        }
    }
}
