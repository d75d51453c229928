import Foundation
import ServiceTestSupport
import TestSupport
import Testing

@testable import ActionHookStore
@testable import Postgres

/// Listing follow-ups reads a page through the (app, status, time) index whatever the filter, so a
/// page costs the same for an app with millions of follow-ups.
@Suite("Follow-up lists")
struct FollowUpListTests {
    @Test("a page of every status is read per status through the index, newest first across them")
    func unfilteredPageUsesTheIndex() throws {
        let api = try TestAPI()
        _ = try api.createApp("list-app")
        _ = try api.pool.withConnection { connection in
            // One follow-up a second back in time, mostly delivered, every 97th dead, every 89th pending.
            try connection.execute(
                """
                INSERT INTO followups (app_id, id, response_id, ordinal, channel, payload, due_at, status, created_at,
                    finished_at)
                SELECT 'list-app', gen_random_uuid(), gen_random_uuid(), 0, 'webhook', '{}', now(),
                    CASE WHEN g % 97 = 0 THEN 'dead' WHEN g % 89 = 0 THEN 'pending' ELSE 'delivered' END,
                    now() - g * interval '1 second', CASE WHEN g % 89 <> 0 OR g % 97 = 0 THEN now() END
                FROM generate_series(1, 20000) AS g
                """)
            try connection.execute("ANALYZE followups")
        }
        let store = FollowUpStore(pool: api.pool)

        let query = FollowUpStore.listQuery(
            appID: "list-app", statuses: FollowUpStatus.allCases, after: nil, limit: 51)
        let plan = try api.pool.withConnection { connection in
            try connection.query(PostgresQuery(unsafeSQL: "EXPLAIN " + query.sql, parameters: query.parameters))
                .map { try $0.decode("QUERY PLAN", as: String.self) }.joined(separator: "\n")
        }
        #expect(!plan.contains("Seq Scan"), "the page scans the table whole:\n\(plan)")
        #expect(plan.contains("_app_id_status_created_at_id_idx"), "the page is not read through the index:\n\(plan)")

        // The same rows, in the same order, as one sort of the whole table would give, page after page.
        let expected = try api.pool.withConnection { connection in
            try connection.query(
                "SELECT id FROM followups WHERE app_id = 'list-app' ORDER BY created_at DESC, id DESC LIMIT 120"
            )
            .map { try $0.decode("id", as: UUID.self).lowercasedString }
        }
        var listed: [String] = []
        var cursor: String?
        for _ in 0..<3 {
            let page = try store.list(appID: "list-app", status: nil, PageRequest(limit: 40, cursor: cursor))
            listed += page.items.compactMap { $0.value(atPath: "id")?.stringValue }
            cursor = page.nextCursor
        }
        #expect(listed == expected)
        let dead = try store.list(appID: "list-app", status: .dead, PageRequest(limit: 500))
        #expect(dead.items.count == 20000 / 97)
        #expect(dead.nextCursor == nil)
    }
}
