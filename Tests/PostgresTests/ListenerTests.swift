import Foundation
import Postgres
import Synchronization
import TestSupport
import Testing

/// What a listener's callbacks saw, shared with the test thread. (`Mutex` needs macOS 15; each test
/// checks with `#available`, which always holds on Linux.)
@available(macOS 15.0, *)
private final class Inbox: Sendable {
    let notifications = Mutex<[PostgresNotification]>([])
    let reconnects = Mutex(0)
}

/// Waits until the listener with `applicationName` has run its last LISTEN, and returns its pid.
private func listeningBackend(_ applicationName: String, lastChannel: String, using admin: PostgresConnection) throws
    -> Int?
{
    var pid: Int?
    _ = try eventually(within: 10) {
        let rows = try admin.query(
            """
            SELECT pid FROM pg_stat_activity
            WHERE application_name = \(applicationName) AND state = 'idle' AND query = \("LISTEN \"\(lastChannel)\"")
            """
        )
        pid = try rows.first?.decode("pid", as: Int.self)
        return pid != nil
    }
    return pid
}

@Suite("LISTEN/NOTIFY")
struct ListenerTests {
    @Test("notifications arrive with their non-ASCII payloads, only on the channels listened to")
    func delivery() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let admin = try PostgresConnection(configuration: database.configuration)
        let channels = ["c_\(randomHex())", "c_\(randomHex())"]
        var configuration = database.configuration
        configuration.applicationName = "listener-\(randomHex(4))"
        guard #available(macOS 15.0, *) else {
            Issue.record("needs Synchronization.Mutex")
            return
        }
        let inbox = Inbox()
        let listener = PostgresListener(
            configuration: configuration, channels: channels,
            onNotification: { notification in inbox.notifications.withLock { $0.append(notification) } }
        )
        listener.start()
        defer { listener.stop() }
        #expect(try listeningBackend(configuration.applicationName, lastChannel: channels[1], using: admin) != nil)

        let payload = "héllo 😀 漢字 e\u{301} \"quoted\" ' \\"
        try admin.notify(channel: "c_\(randomHex())", payload: "not listened to")
        try admin.notify(channel: channels[0], payload: payload)
        try admin.transaction { transaction in
            try transaction.notify(channel: channels[1], payload: "")
        }
        #expect(eventually(within: 5) { inbox.notifications.withLock { $0.count } >= 2 })
        Thread.sleep(forTimeInterval: 0.1)
        let received = inbox.notifications.withLock { $0 }
        #expect(
            received == [
                PostgresNotification(channel: channels[0], payload: payload),
                PostgresNotification(channel: channels[1], payload: ""),
            ])
        #expect(received.first.map { Array($0.payload.unicodeScalars) } == Array(payload.unicodeScalars))
    }

    @Test("after its backend is terminated the listener reconnects, calls onReconnect, and delivers again")
    func reconnect() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let admin = try PostgresConnection(configuration: database.configuration)
        let channel = "c_\(randomHex())"
        var configuration = database.configuration
        configuration.applicationName = "listener-\(randomHex(4))"
        guard #available(macOS 15.0, *) else {
            Issue.record("needs Synchronization.Mutex")
            return
        }
        let inbox = Inbox()
        let listener = PostgresListener(
            configuration: configuration, channels: [channel],
            onNotification: { notification in inbox.notifications.withLock { $0.append(notification) } },
            onReconnect: { inbox.reconnects.withLock { $0 += 1 } }
        )
        listener.start()
        defer { listener.stop() }
        let firstPid = try #require(
            try listeningBackend(configuration.applicationName, lastChannel: channel, using: admin))
        try admin.notify(channel: channel, payload: "before")
        #expect(eventually(within: 5) { inbox.notifications.withLock { $0.count } == 1 })
        #expect(inbox.reconnects.withLock { $0 } == 0)

        #expect(try terminateBackends([firstPid], using: admin))
        #expect(eventually(within: 10) { inbox.reconnects.withLock { $0 } == 1 })
        let secondPid = try #require(
            try listeningBackend(configuration.applicationName, lastChannel: channel, using: admin))
        #expect(secondPid != firstPid)

        try admin.notify(channel: channel, payload: "after ✓")
        #expect(eventually(within: 5) { inbox.notifications.withLock { $0.count } == 2 })
        #expect(inbox.notifications.withLock { $0.last } == PostgresNotification(channel: channel, payload: "after ✓"))
        #expect(inbox.reconnects.withLock { $0 } == 1)
    }

    @Test("stop is prompt, ends the listening session, and frees the listener")
    func stopIsPrompt() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let admin = try PostgresConnection(configuration: database.configuration)
        let channel = "c_\(randomHex())"
        var configuration = database.configuration
        configuration.applicationName = "listener-\(randomHex(4))"
        weak var released: PostgresListener?
        let pid: Int
        do {
            let listener = PostgresListener(
                configuration: configuration, channels: [channel], onNotification: { _ in })
            released = listener
            listener.start()
            pid = try #require(
                try listeningBackend(configuration.applicationName, lastChannel: channel, using: admin))
            let started = Date()
            listener.stop()
            #expect(Date().timeIntervalSince(started) < 0.5)
            listener.stop()
        }
        // The thread lets go of the listener as it ends, a moment after stop() returns.
        #expect(eventually(within: 2) { released == nil })
        #expect(
            try eventually(within: 5) {
                try admin.query("SELECT count(*) AS n FROM pg_stat_activity WHERE pid = \(pid)")[0].decode(
                    "n", as: Int.self) == 0
            })
    }

    @Test("a listener that cannot connect keeps retrying and stops promptly")
    func unreachable() throws {
        guard #available(macOS 15.0, *) else {
            Issue.record("needs Synchronization.Mutex")
            return
        }
        let inbox = Inbox()
        let listener = PostgresListener(
            configuration: PostgresConfiguration(connectionString: "postgresql://127.0.0.1:1/nothing"),
            channels: ["c_unreachable"], onNotification: { _ in },
            onReconnect: { inbox.reconnects.withLock { $0 += 1 } }
        )
        listener.start()
        Thread.sleep(forTimeInterval: 0.5)
        let started = Date()
        listener.stop()
        #expect(Date().timeIntervalSince(started) < 0.5)
        #expect(inbox.reconnects.withLock { $0 } == 0)
    }
}
