import ActionHookServer
import Foundation
import Postgres
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

/// Quality R14, the part one server can show: with synchronous replication, what the service confirms is
/// on the standby. The cluster is the suite's own, made to wait for a synchronous standby that never
/// comes (`synchronous_standby_names = 'ghost'`), which is what a primary whose standby is gone does under
/// Patroni's `synchronous_mode_strict`; the shared test cluster must not be made to wait.
///
/// A transaction waiting for its standby is not visible to others yet. Its wait ends without the standby
/// when it is cancelled or its session is terminated (a fast shutdown, a demotion, `pg_terminate_backend`):
/// the commit is then local only, visible on this server, and PostgreSQL says so with a WARNING ("has
/// already committed locally, but might not have been replicated"). A failover loses such a row.
@Suite("Synchronous replication: nothing confirmed that is not replicated (R14)", .serialized)
struct ReplicationTests {
    /// Sets `synchronous_standby_names` on the cluster and waits until new sessions see it.
    static func requireStandby(_ names: String?, url: String) throws {
        let admin = try PostgresConnection(configuration: PostgresConfiguration(connectionString: url))
        if let names {
            try admin.execute(PostgresQuery(unsafeSQL: "ALTER SYSTEM SET synchronous_standby_names = '\(names)'"))
        } else {
            try admin.execute("ALTER SYSTEM RESET synchronous_standby_names")
        }
        _ = try admin.query("SELECT pg_reload_conf()")
        #expect(
            try eventually(within: 10) {
                let fresh = try PostgresConnection(configuration: PostgresConfiguration(connectionString: url))
                return try fresh.query("SHOW synchronous_standby_names")[0].decode(
                    "synchronous_standby_names", as: String.self) == (names ?? "")
            })
    }

    @Test(
        "a commit whose wait for the standby was cancelled is answered 503, not 202; its retry is replayed only once the row is replicated"
    )
    func unreplicatedCommit() throws {
        let cluster = try OutageTests.Cluster()
        defer { cluster.destroy() }
        let database = try TestDatabase.create(baseConnectionString: cluster.url)
        defer { database.drop() }
        let service = TestService.make(database: database) {
            $0.database.responseDeadlineMilliseconds = 5000
            $0.ingestDeadlineMilliseconds = 8000
        }
        try service.start()
        defer { service.stop() }
        func call(_ method: String, _ path: String, token: String, json: String, key: String? = nil) throws
            -> TestResponse
        {
            var headers = [("Authorization", "Bearer \(token)")]
            if let key { headers.append(("Idempotency-Key", key)) }
            return try HTTPTestClient(port: service.port, timeoutSeconds: 30).request(
                method, path, headers: headers, json: json)
        }
        let created = try call("POST", "/v1/apps", token: TestService.adminToken, json: #"{"id":"sync","name":"sync"}"#)
        let key = try #require((created.json["ingestKey"] as? [String: Any])?["secret"] as? String)
        let body = #"{"actionIdentifier":"accept","userInfo":{"eventId":"1"}}"#
        #expect(try call("POST", "/v1/responses", token: key, json: body, key: "warm").status == 202)
        let admin = try PostgresConnection(configuration: database.configuration)
        func stored(_ idempotencyKey: String) throws -> Int {
            try admin.query(
                "SELECT count(*) AS n FROM responses WHERE app_id = 'sync' AND idempotency_key = \(idempotencyKey)"
            )[0].decode("n")
        }

        try Self.requireStandby("ghost", url: cluster.url)
        // Every wait for the standby is cancelled as soon as it is seen (pg_cancel_backend).
        let canceller = try PostgresConnection(configuration: PostgresConfiguration(connectionString: cluster.url))
        let cancelled = Mutex(0)
        let stop = Atomic<Bool>(false)
        let cancelling = Thread {
            while !stop.load(ordering: .sequentiallyConsistent) {
                let rows = try? canceller.query(
                    "SELECT pg_cancel_backend(pid) AS done FROM pg_stat_activity WHERE wait_event = 'SyncRep'")
                cancelled.withLock { $0 += rows?.count ?? 0 }
                Thread.sleep(forTimeInterval: 0.05)
            }
        }
        cancelling.start()
        defer { stop.store(true, ordering: .sequentiallyConsistent) }
        let during = try call("POST", "/v1/responses", token: key, json: body, key: "k1")
        // The row is committed on this server, and only here: a failover could lose it.
        #expect(try stored("k1") == 1)
        #expect(during.status == 503, "answered \(during.status): \(during.text)")
        // Its retry finds the row, but a replay that only reads would confirm it unreplicated.
        let replayed = try call("POST", "/v1/responses", token: key, json: body, key: "k1")
        #expect(replayed.status == 503, "answered \(replayed.status): \(replayed.text)")

        // The first commit's wait was cancelled (the replay's too, unless the machine was too slow to catch it
        // before the replay's own deadline answered 503: either way nothing unreplicated was confirmed).
        #expect(cancelled.withLock { $0 } >= 1)

        // The standby caught up (here: none is required any more): the retry is the replay, one row.
        stop.store(true, ordering: .sequentiallyConsistent)
        try Self.requireStandby(nil, url: cluster.url)
        let after = try call("POST", "/v1/responses", token: key, json: body, key: "k1")
        #expect(after.status == 200, "answered \(after.status): \(after.text)")
        #expect(after.headers["idempotent-replayed"] == "true")
        #expect(try stored("k1") == 1)
        let id = try admin.query("SELECT id FROM responses WHERE app_id = 'sync' AND idempotency_key = 'k1'")[0]
            .decode("id", as: UUID.self)
        #expect((after.json["id"] as? String) == id.uuidString.lowercased())
    }
}
