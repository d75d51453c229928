import Foundation
import ServiceTestSupport
import TestSupport
import Testing

@testable import ActionHookStore
@testable import Postgres

/// The stats route reads one app's window through the indexes that lead with the app, so an app's
/// overview costs what its own recent traffic costs, however many rows other apps and older days hold.
@Suite("Stats query plans")
struct StatsPlanTests {
    @Test("every stats statement reads through an app-leading index, never a whole table")
    func statementsUseTheIndexes() throws {
        let api = try TestAPI()
        _ = try api.createApp("busy-app")
        _ = try api.createApp("quiet-app")
        _ = try api.pool.withConnection { connection in
            // A busy app with three days of replies and follow-ups, and a quiet one with a few.
            try connection.execute(
                "SELECT actionhook_create_partitions(now() - interval '4 days', now(), interval '1 day')")
            try connection.execute(
                """
                INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier, outcome, answer, received_at)
                SELECT CASE WHEN g % 500 = 0 THEN 'quiet-app' ELSE 'busy-app' END,
                    actionhook_uuid_v7(now() - g * interval '10 seconds'), 'k' || g,
                    '\\x00'::bytea, 'accept', 'accepted', '{}', now() - g * interval '10 seconds'
                FROM generate_series(1, 25000) AS g
                """)
            try connection.execute(
                """
                INSERT INTO followups (app_id, id, response_id, ordinal, channel, payload, due_at, status, created_at,
                    finished_at)
                SELECT CASE WHEN g % 500 = 0 THEN 'quiet-app' ELSE 'busy-app' END, gen_random_uuid(), gen_random_uuid(),
                    0, 'webhook', '{}', now(), CASE WHEN g % 7 = 0 THEN 'dead' ELSE 'delivered' END,
                    now() - g * interval '10 seconds', now() - g * interval '10 seconds'
                FROM generate_series(1, 25000) AS g
                """)
            try connection.execute(
                """
                INSERT INTO delivery_attempts (app_id, followup_id, attempt, started_at, finished_at, result, http_status,
                    duration_ms)
                SELECT app_id, id, 1, created_at, created_at + interval '50 milliseconds', 'delivered', 204, 50
                FROM followups WHERE status = 'delivered'
                """)
            try connection.execute("ANALYZE responses")
            try connection.execute("ANALYZE followups")
            try connection.execute("ANALYZE delivery_attempts")
        }
        let until = Date()
        let queries = StatsStore.queries(
            appID: "quiet-app", since: until.addingTimeInterval(-86400), until: until, bucketSeconds: 900)
        for (name, query) in [
            ("replies", queries.replies), ("followUps", queries.followUps), ("latency", queries.latency),
            ("deadLetters", queries.deadLetters),
        ] {
            let plan = try api.pool.withConnection { connection in
                try connection.query(PostgresQuery(unsafeSQL: "EXPLAIN " + query.sql, parameters: query.parameters))
                    .map { try $0.decode("QUERY PLAN", as: String.self) }.joined(separator: "\n")
            }
            // A partition with no rows or a few (the days at the edges of the rows, how few depends on the time
            // of day the test runs) is rightly read by a sequential scan of a page or two: only a scan that
            // costs more than that reads a table whole.
            let scans = plan.split(separator: "\n").filter { line in
                guard line.contains("Seq Scan on"), let cost = Self.totalCost(line) else { return false }
                return cost > 25
            }
            #expect(!scans.contains { $0.contains("Seq Scan on responses") }, "\(name) scans responses whole:\n\(plan)")
            #expect(!scans.contains { $0.contains("Seq Scan on followups") }, "\(name) scans followups whole:\n\(plan)")
            #expect(
                plan.contains("_app_id_received_at_id_idx") || plan.contains("_app_id_status_created_at_id_idx"),
                "\(name) is not read through an app-leading index:\n\(plan)")
        }
        // The figures themselves, through the store: 25000 / 500 quiet rows, a day of them (8640 s / 10 s).
        let stats = try StatsStore(pool: api.pool).stats(appID: "quiet-app", window: .day)
        #expect(stats.replies["accepted"] == 17)
        #expect(stats.deadLetters == 7)
        #expect(stats.series.map(\.delivered).reduce(0, +) == 17 - 2)
    }

    /// The planner's total cost of a plan line's node: `cost=0.00..6.34` is 6.34.
    static func totalCost(_ line: Substring) -> Double? {
        guard let range = line.range(of: "cost=") else { return nil }
        let costs = line[range.upperBound...].prefix { $0 != " " }
        guard let dots = costs.range(of: "..") else { return nil }
        return Double(costs[dots.upperBound...])
    }

    @Test("a plan line's total cost is read from its cost range")
    func planCost() {
        #expect(Self.totalCost("  ->  Seq Scan on responses_p1 r  (cost=0.00..6.34 rows=1 width=20)") == 6.34)
        #expect(Self.totalCost("  ->  Seq Scan on followups_done f  (cost=0.00..215.00 rows=8640 width=0)") == 215)
        #expect(Self.totalCost("  Filter: (app_id = 'x'::text)") == nil)
    }
}
