import ActionHookServer
import Foundation
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

/// Quality R15: a reply or a send without an idempotency key that is answered 5xx is not stored, since
/// its retry cannot find it. The fault: a session holds a lock the write needs for longer than the
/// database deadline (1 s here), as a long migration or an operator's `LOCK TABLE` would.
@Suite("A commit in doubt: keyless requests answered 503 are not stored (R15)", .serialized)
struct InDoubtCommitTests {
    /// Holds `LOCK TABLE … IN SHARE ROW EXCLUSIVE MODE` on `tables` (which blocks every insert into them,
    /// not reads) from a connection of its own until `release()`.
    final class TableLock: @unchecked Sendable {
        // @unchecked: its connection is used by one thread at a time (the test's, then the releasing one).
        let connection: PostgresConnection

        init(_ api: TestAPI, tables: String) throws {
            // The service's own maintenance run at its start makes partitions under locks on these tables:
            // locked while it runs, the two sessions would deadlock.
            _ = eventually(within: 30) {
                Hooks.metric(api.service, "actionhook_partition_maintenance_last_run_timestamp_seconds", [:]) > 0
            }
            connection = try PostgresConnection(configuration: api.database.configuration)
            _ = try connection.execute("BEGIN")
            _ = try connection.execute(PostgresQuery(unsafeSQL: "LOCK TABLE \(tables) IN SHARE ROW EXCLUSIVE MODE"))
        }

        func release() throws {
            _ = try connection.execute("ROLLBACK")
        }
    }

    static func configure(_ configuration: inout Configuration) {
        configuration.database.responseDeadlineMilliseconds = 1000
        configuration.ingestDeadlineMilliseconds = 1500
    }

    @Test(
        "a reply without a key, blocked past the deadline: answered 503 only once nothing of it can commit; its retry stores it once"
    )
    func keylessReply() throws {
        let api = try TestAPI(configure: Self.configure)
        let key = try api.createApp("doubt")
        let body = #"{"actionIdentifier": "accept", "userInfo": {"eventId": "7"}}"#
        // The service's connections are open and its clock read before the fault.
        #expect(try api.ingest(key: key, json: body).status == 202)

        let lock = try TableLock(api, tables: "idempotency_keys, responses")
        let during = try api.ingest(key: key, json: body)
        // Released only after the answer: a 503 must mean that nothing of the reply was stored or can be.
        try lock.release()
        #expect(during.status == 503, "answered \(during.status): \(during.text)")
        #expect(during.headers["retry-after"] != nil)
        // Give a transaction that was still waiting the moment to commit, were it alive.
        Thread.sleep(forTimeInterval: 0.5)
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE app_id = 'doubt'") == 1)

        // The client's retry stores it: once.
        #expect(try api.ingest(key: key, json: body).status == 202)
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE app_id = 'doubt'") == 2)
    }

    @Test("a reply without a key whose commit went through late is answered 202, not 503")
    func keylessReplyCommittedLate() throws {
        let api = try TestAPI(configure: Self.configure)
        let key = try api.createApp("late")
        let body = #"{"actionIdentifier": "accept", "userInfo": {"eventId": "8"}}"#
        #expect(try api.ingest(key: key, json: body).status == 202)
        // The lock goes away while the commit waits, before the deadline: the reply is stored and says so.
        let lock = try TableLock(api, tables: "responses")
        let releaser = Thread {
            Thread.sleep(forTimeInterval: 0.3)
            try? lock.release()
        }
        releaser.start()
        let during = try api.ingest(key: key, json: body)
        #expect(during.status == 202, "answered \(during.status): \(during.text)")
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE app_id = 'late'") == 2)
    }

    @Test(
        "a send without a key, blocked past the deadline: answered 503 only once nothing of it can commit; its retry sends once"
    )
    func keylessSend() throws {
        let api = try TestAPI(configure: Self.configure)
        _ = try api.createApp("sends")
        let serverKey = try #require(
            try api.admin("POST", "/v1/apps/sends/keys", json: #"{"scope": "send"}"#).json["secret"] as? String)
        let tokens = (0..<20).map { _ in APNsStandIn.deviceToken() }
        let body = #"{"to": [\#(tokens.map { "\"\($0)\"" }.joined(separator: ","))], "aps": {"alert": "Hi"}}"#
        let first = try api.call("POST", "/v1/apps/sends/notifications", token: serverKey, json: body)
        #expect(first.status == 202, "\(first.status) \(first.text)")

        let lock = try TableLock(api, tables: "notifications")
        let during = try api.call("POST", "/v1/apps/sends/notifications", token: serverKey, json: body)
        try lock.release()
        #expect(during.status == 503, "answered \(during.status): \(during.text)")
        Thread.sleep(forTimeInterval: 0.5)
        #expect(try api.count("SELECT count(*) AS n FROM notifications WHERE app_id = 'sends'") == 1)
        #expect(try api.count("SELECT count(*) AS n FROM followups WHERE app_id = 'sends' AND kind = 'push'") == 20)

        let retry = try api.call("POST", "/v1/apps/sends/notifications", token: serverKey, json: body)
        #expect(retry.status == 202)
        #expect(try api.count("SELECT count(*) AS n FROM notifications WHERE app_id = 'sends'") == 2)
        #expect(try api.count("SELECT count(*) AS n FROM followups WHERE app_id = 'sends' AND kind = 'push'") == 40)
    }
}
