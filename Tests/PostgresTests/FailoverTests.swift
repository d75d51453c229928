import Foundation
import Synchronization
import TestSupport
import Testing

@testable import Postgres

#if canImport(Glibc)
    import Glibc
#endif

/// What a client of a highly available PostgreSQL (several hosts, one primary) needs from the connection
/// layer: a frozen host costs one host's deadline, dead connections are noticed, a session on the wrong
/// node is replaced, and a listener follows the primary.
@Suite("Failover: several hosts, frozen hosts, the wrong node")
struct FailoverTests {
    /// A conninfo string for the test server's database and schema, over TCP to `hosts` (address, port).
    static func conninfo(_ database: TestDatabase, hosts: [(String, Int)]) throws -> String {
        let admin = try PostgresConnection(configuration: database.configuration)
        let row = try admin.query("SELECT current_user AS name, current_database() AS database")[0]
        return "host=\(hosts.map(\.0).joined(separator: ",")) port=\(hosts.map { String($0.1) }.joined(separator: ","))"
            + " user=\(try row.decode("name", as: String.self)) dbname=\(try row.decode("database", as: String.self))"
            + " options='-csearch_path=\(database.schema)'"
    }

    static func socketOption(_ connection: PostgresConnection, _ level: Int32, _ name: Int32) -> Int32 {
        var value: Int32 = -1
        var length = socklen_t(MemoryLayout<Int32>.size)
        guard getsockopt(connection.socketDescriptor, level, name, &value, &length) == 0 else { return -1 }
        return value
    }

    @Test(
        "a first host that accepts and never answers (frozen) costs one host's deadline: the next host takes the connection"
    )
    func frozenFirstHost() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let address = try serverAddress(try PostgresConnection(configuration: database.configuration))
        // Listens and never accepts: the kernel completes the handshake, and nothing ever answers.
        let frozen = try LoopbackListener(backlog: 64)
        defer { frozen.close() }
        let configuration = PostgresConfiguration(
            connectionString: try Self.conninfo(database, hosts: [("127.0.0.1", frozen.port), address]),
            connectTimeoutSeconds: 5, responseDeadlineMilliseconds: 1000)
        // The connection's whole deadline used to go to the first host, so it failed without trying the second.
        let connection = try PostgresConnection(configuration: configuration)
        #expect(try connection.query("SELECT current_setting('port')::int AS port")[0].decode("port") == address.1)
        // A pool's connections all reach the server past the frozen host.
        let pool = PostgresPool(configuration: configuration, size: 3)
        defer { pool.close() }
        let answered = Mutex(0)
        DispatchQueue.concurrentPerform(iterations: 3) { _ in
            if (try? pool.withConnection { try $0.query("SELECT 1 AS one") }) != nil { answered.withLock { $0 += 1 } }
        }
        #expect(answered.withLock { $0 } == 3)
    }

    @Test("TCP keepalives and tcp_user_timeout are on by default; the connection string's own values win")
    func keepalivesByDefault() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let address = try serverAddress(try PostgresConnection(configuration: database.configuration))
        let plain = try PostgresConnection(
            configuration: PostgresConfiguration(connectionString: try Self.conninfo(database, hosts: [address])))
        // TCP_KEEPIDLE is 4 and TCP_USER_TIMEOUT 18 on Linux.
        #expect(Self.socketOption(plain, SOL_SOCKET, SO_KEEPALIVE) == 1)
        #expect(Self.socketOption(plain, Int32(IPPROTO_TCP), 4) == 10)
        #expect(Self.socketOption(plain, Int32(IPPROTO_TCP), 18) == 10_000)
        let own = try PostgresConnection(
            configuration: PostgresConfiguration(
                connectionString: try Self.conninfo(database, hosts: [address])
                    + " keepalives_idle=30 tcp_user_timeout=4000"))
        #expect(Self.socketOption(own, Int32(IPPROTO_TCP), 4) == 30)
        #expect(Self.socketOption(own, Int32(IPPROTO_TCP), 18) == 4000)
    }

    @Test(
        "a read-only transaction error (25006, a standby's answer) drops the session: the pool's next call has a new one"
    )
    func wrongNodeIsDropped() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let pool = PostgresPool(configuration: database.configuration, size: 1)
        defer { pool.close() }
        let backend = {
            try pool.withConnection { try $0.query("SELECT pg_backend_pid() AS pid")[0].decode("pid", as: Int.self) }
        }
        let first = try backend()
        var caught: PostgresError?
        do {
            try pool.transaction { connection in
                try connection.execute("SET TRANSACTION READ ONLY")
                try connection.execute("CREATE TABLE wrong_node_probe (a int)")
            }
        } catch let error as PostgresError {
            caught = error
        }
        #expect(caught?.sqlState == "25006")
        #expect(caught?.isConnectionError == true)
        // The session that answered as a standby does is not lent again.
        #expect(try backend() != first)
    }

    @Test(
        "a listener whose server freezes notices it by its heartbeat, listens again on the next host, calls onReconnect and delivers again"
    )
    func listenerLeavesFrozenServer() throws {
        guard #available(macOS 15.0, *) else { return }
        let database = try TestDatabase.create()
        defer { database.drop() }
        let admin = try PostgresConnection(configuration: database.configuration)
        let address = try serverAddress(admin)
        let relay = try FreezableRelay(upstreamPort: address.1)
        defer { relay.stop() }
        var configuration = PostgresConfiguration(
            connectionString: try Self.conninfo(database, hosts: [("127.0.0.1", relay.port), address]),
            responseDeadlineMilliseconds: 1000)
        configuration.applicationName = "heartbeat-\(randomHex(4))"
        let channel = "c_\(randomHex())"
        let received = Mutex<[String]>([])
        let reconnects = Mutex(0)
        let listener = PostgresListener(
            configuration: configuration, channels: [channel], heartbeatInterval: .milliseconds(300),
            onNotification: { notification in received.withLock { $0.append(notification.payload) } },
            onReconnect: { reconnects.withLock { $0 += 1 } })
        listener.start()
        defer { listener.stop() }
        // Through the relay (the first host) first.
        #expect(
            try eventually(within: 20) {
                try admin.notify(channel: channel, payload: "before")
                return received.withLock { $0.contains("before") }
            })

        relay.freeze()
        // Without a heartbeat the listener would wait on the frozen connection for good.
        #expect(eventually(within: 30) { reconnects.withLock { $0 } >= 1 })
        #expect(
            try eventually(within: 20) {
                try admin.notify(channel: channel, payload: "after")
                return received.withLock { $0.contains("after") }
            })
    }
}
