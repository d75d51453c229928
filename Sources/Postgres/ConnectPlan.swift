internal import CLibPQ
import Synchronization

/// How one ``PostgresConnection`` connects: the parameters of each attempt, in order, and how long each
/// attempt may take.
///
/// libpq tries the hosts of a multi-host connection string (`host=h1,h2,h3`, or
/// `postgresql://…@h1:5432,h2:5432/db`) one after the other, but a non-blocking connect
/// (`PQconnectStartParams` and `PQconnectPoll`) has no per-host deadline: `connect_timeout` applies to
/// blocking connects only. One frozen host (one that completes TCP and then never answers, as a stopped
/// server does) would use up the caller's whole deadline, and the hosts after it would never be tried.
/// So a string with several hosts is split here into one attempt per host, each with the deadline of
/// one host, everything else (`target_session_attrs`, the user, `sslmode`) unchanged. A string with one
/// host (or none, for libpq's `PG*` variables) is one attempt, as libpq reads it.
///
/// Every attempt also gets, unless the connection string sets them itself: TCP keepalives (a connection
/// whose peer vanished is noticed while idle) and `tcp_user_timeout` (one whose sent data stays
/// unacknowledged is given up), so that a server lost without a reset is not waited on until the
/// kernel's defaults (two hours) pass.
struct ConnectPlan {
    struct Attempt {
        let keywords: [String?]
        let values: [String?]
        let expandsDatabaseName: Bool
        /// The host's position in the connection string.
        let host: Int
    }

    /// The settings added when the connection string has none of its own.
    static let defaults: [(String, String)] = [
        ("keepalives", "1"), ("keepalives_idle", "10"), ("keepalives_interval", "5"), ("keepalives_count", "3"),
        ("tcp_user_timeout", "10000"),
    ]

    private let attemptsInOrder: [Attempt]
    private let connectionString: String
    /// How long one attempt may take, in milliseconds.
    let deadlineMilliseconds: Int

    init(_ configuration: PostgresConfiguration) throws {
        connectionString = configuration.connectionString
        let parsed = try Self.parse(configuration.connectionString)
        let given = Set(parsed.map(\.0))
        var seconds = configuration.connectTimeoutSeconds
        if let text = parsed.first(where: { $0.0 == "connect_timeout" })?.1, let value = Int(text), value > 0 {
            // libpq's own rule: a timeout below 2 s is taken as 2 s.
            seconds = max(value, 2)
        }
        deadlineMilliseconds = min(seconds * 1000, configuration.responseDeadlineMilliseconds ?? Int.max)
        var extra: [(String, String)] = Self.defaults.filter { !given.contains($0.0) }
        if !given.contains("connect_timeout") { extra.append(("connect_timeout", String(seconds))) }
        // client_encoding UTF8 so the server converts text for us whatever the database encoding.
        extra += [("application_name", configuration.applicationName), ("client_encoding", "UTF8")]

        func list(_ keyword: String) -> [String] {
            parsed.first(where: { $0.0 == keyword }).map {
                $0.1.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
            } ?? []
        }
        let hosts = list("host")
        let addresses = list("hostaddr")
        let ports = list("port")
        let count = max(hosts.count, addresses.count)
        if count <= 1 {
            // With expand_dbname, the first dbname is expanded as a URI or conninfo string; the keywords
            // after it override what it says.
            var keywords: [String?] = []
            var values: [String?] = []
            if !configuration.connectionString.isEmpty {
                keywords.append("dbname")
                values.append(configuration.connectionString)
            }
            keywords += extra.map(\.0) + [nil]
            values += extra.map(\.1) + [nil]
            attemptsInOrder = [Attempt(keywords: keywords, values: values, expandsDatabaseName: true, host: 0)]
            return
        }
        let common = parsed.filter { !["host", "hostaddr", "port"].contains($0.0) }
        attemptsInOrder = (0..<count).map { index in
            var pairs = common
            if index < hosts.count { pairs.append(("host", hosts[index])) }
            if index < addresses.count { pairs.append(("hostaddr", addresses[index])) }
            // One port for every host, or one per host (libpq's rule).
            if let port = ports.count == 1 ? ports[0] : (index < ports.count ? ports[index] : nil) {
                pairs.append(("port", port))
            }
            pairs += extra
            return Attempt(
                keywords: pairs.map(\.0) + [nil], values: pairs.map(\.1) + [nil], expandsDatabaseName: false,
                host: index)
        }
    }

    /// The attempts, starting from the host that last took a connection made with this connection string:
    /// after a failover, new connections go straight to the new primary rather than waiting on a frozen
    /// host before it each time. A host that fails is tried again, after the others, on the next connect.
    func attempts() -> [Attempt] {
        guard attemptsInOrder.count > 1 else { return attemptsInOrder }
        let start = lastHost.withLock { $0[connectionString] } ?? 0
        let index = attemptsInOrder.firstIndex { $0.host == start } ?? 0
        return Array(attemptsInOrder[index...] + attemptsInOrder[..<index])
    }

    /// Records the host that took the connection.
    func remember(_ attempt: Attempt) {
        guard attemptsInOrder.count > 1 else { return }
        lastHost.withLock { $0[connectionString] = attempt.host }
    }

    /// The options a connection string sets, in its order (`PQconninfoParse`: only what it says, no defaults).
    private static func parse(_ connectionString: String) throws -> [(String, String)] {
        guard !connectionString.isEmpty else { return [] }
        var errorMessage: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(connectionString, &errorMessage) else {
            // The message may quote the string, which may hold a password: it is not kept.
            if let errorMessage { PQfreemem(errorMessage) }
            throw PostgresError(kind: .connectionFailed, message: "the connection string cannot be parsed")
        }
        defer { PQconninfoFree(options) }
        var parsed: [(String, String)] = []
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { parsed.append((String(cString: keyword), String(cString: value))) }
            option += 1
        }
        return parsed
    }
}

/// Per connection string, the position of the host that took the last connection (see
/// ``ConnectPlan/attempts()``). Connection strings are keys in memory only, never logged.
private let lastHost = Mutex<[String: Int]>([:])
