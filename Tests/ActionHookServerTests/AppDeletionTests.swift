import ActionHookServer
import Foundation
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

/// Deleting an app with real history: the deletion answers at once and the app is gone from the API,
/// while its rows are removed in the background without holding up anyone's ingest.
@Suite("App deletion")
struct AppDeletionTests {
    @Test(
        "an app with 10,000 rows in each history table: the deletion answers 204 and the app 404 while every row is still there; other apps' ingest goes on during the purge; then every row goes"
    )
    func deleteAppWithHistory() throws {
        let api = try TestAPI()
        let doomedKey = try api.createApp("doomed")
        let otherKey = try api.createApp("other")
        // Written without the test pool's statement timeout: they are many.
        let seeder = try PostgresConnection(configuration: api.database.configuration)
        try seeder.execute("SET statement_timeout = 0")
        _ = try seeder.query(
            "SELECT actionhook_create_partitions(now() - interval '1 day', now() + interval '1 day', interval '1 day') AS made"
        )
        try AppHistory.seed("doomed", rows: 10_000, connection: seeder)
        try AppHistory.seed("other", rows: 10, connection: seeder)
        func counts(_ app: String) throws -> [String: Int] {
            var counts: [String: Int] = [:]
            for table in AppHistory.tables {
                counts[table] = try api.count(
                    PostgresQuery(unsafeSQL: "SELECT count(*)::int AS n FROM \(table) WHERE app_id = $1", binds: [app]))
            }
            return counts
        }
        let seeded = try counts("doomed")
        #expect(seeded.values.allSatisfy { $0 == 10_000 })

        // The purge's first batch (the queue's rows, first) waits for these row locks: it is in progress.
        let held = try PostgresConnection(configuration: api.database.configuration)
        try held.execute("BEGIN")
        _ = try held.query("SELECT id FROM followups_queue WHERE app_id = 'doomed' FOR UPDATE")

        // The deletion removed nothing of the history in the request: it was all deleted there, in one
        // transaction, before (a large app's deletion outlived the database deadline and held the app's lock).
        #expect(try api.admin("DELETE", "/v1/apps/doomed").status == 204)
        #expect(try counts("doomed") == seeded)
        #expect(try api.count("SELECT count(*)::int AS n FROM app_deletions WHERE app_id = 'doomed'") == 1)
        #expect(try api.admin("GET", "/v1/apps/doomed").status == 404)
        #expect(try api.admin("GET", "/v1/apps/doomed/responses").status == 404)
        #expect(try api.ingest(key: doomedKey, json: #"{"actionIdentifier":"accept"}"#).status == 401)
        // Another app's replies are stored while the purge's transaction is open.
        for n in 0..<5 {
            let reply = try api.ingest(
                key: otherKey, json: #"{"actionIdentifier":"accept"}"#, headers: [("Idempotency-Key", "other-\(n)")])
            #expect(reply.status == 202)
        }
        try held.execute("ROLLBACK")

        let gone = try eventually(within: 120) {
            try api.count("SELECT count(*)::int AS n FROM app_deletions WHERE app_id = 'doomed'") == 0
        }
        #expect(gone, "the purge did not finish")
        #expect(try counts("doomed").values.allSatisfy { $0 == 0 })
        var other = try counts("other")
        #expect(other.removeValue(forKey: "responses") == 15)
        #expect(other.removeValue(forKey: "idempotency_keys") == 15)
        #expect(other.values.allSatisfy { $0 == 10 })
        // Once purged, the id can be used again.
        #expect(try api.admin("POST", "/v1/apps", json: #"{"id":"doomed","name":"Again"}"#).status == 201)
    }

    @Test("creating an app whose deleted namesake is still being purged is a 409; once purged, a 201")
    func recreateWhilePurging() throws {
        let api = try TestAPI()
        _ = try api.createApp("again")
        _ = try api.query("INSERT INTO devices (app_id, token, status) VALUES ('again', 'token', 'dead')")
        // A row the purge must delete, locked: the purge of the app waits for it, mid-way.
        let held = try PostgresConnection(configuration: api.database.configuration)
        try held.execute("BEGIN")
        _ = try held.query("SELECT token FROM devices WHERE app_id = 'again' FOR UPDATE")
        #expect(try api.admin("DELETE", "/v1/apps/again").status == 204)
        let refused = try api.admin("POST", "/v1/apps", json: #"{"id":"again","name":"Again"}"#)
        #expect(refused.status == 409)
        #expect(refused.headers["content-type"]?.hasPrefix("application/problem+json") == true)
        try held.execute("ROLLBACK")
        #expect(
            try eventually(within: 30) {
                try api.count("SELECT count(*)::int AS n FROM app_deletions WHERE app_id = 'again'") == 0
            })
        #expect(try api.admin("POST", "/v1/apps", json: #"{"id":"again","name":"Again"}"#).status == 201)
        #expect(try api.count("SELECT count(*)::int AS n FROM devices WHERE app_id = 'again'") == 0)
    }
}
