import Foundation
import ServiceTestSupport
import TestSupport
import Testing

@testable import ActionHookStore
@testable import Postgres

/// The worker's claim reaches the rows it locked by ctid, whatever the statistics say: joined back by
/// (app_id, id), a plan made while the outbox looked empty went through `followups_by_status` and read
/// every entry of the app for each claimed row.
@Suite("Outbox claim plan")
struct OutboxPlanTests {
    @Test("the claim takes due rows by the due index and updates them by TID, on an empty and on a full outbox")
    func claimPlan() throws {
        let api = try TestAPI()
        _ = try api.createApp("plan-app")
        func plan() throws -> String {
            try api.pool.withConnection { connection in
                try connection.transaction { connection in
                    _ = try connection.execute(OutboxStore.planSettings)
                    let claim = OutboxStore.claimBatch(limit: 128, leaseSeconds: 60, token: UUID())
                    return try connection.query(
                        PostgresQuery(unsafeSQL: "EXPLAIN " + claim.sql, parameters: claim.parameters)
                    )
                    .map { try $0.decode("QUERY PLAN", as: String.self) }.joined(separator: "\n")
                }
            }
        }
        let empty = try plan()
        _ = try api.pool.withConnection { connection in
            // 20,000 due rows of one app, never analyzed: the statistics still say the table is empty.
            try connection.execute(
                """
                INSERT INTO followups (app_id, id, response_id, ordinal, channel, payload, due_at)
                SELECT 'plan-app', gen_random_uuid(), gen_random_uuid(), 0, 'webhook', '{}', now()
                FROM generate_series(1, 20000)
                """)
        }
        let full = try plan()
        for (name, text) in [("empty", empty), ("full", full)] {
            #expect(
                text.contains("Tid Scan on followups_queue f"), "\(name): claimed rows not reached by TID:\n\(text)")
            #expect(text.contains("followups_due"), "\(name): due rows are not found by the due index:\n\(text)")
            #expect(!text.contains("followups_by_status"), "\(name): the claim reads followups_by_status:\n\(text)")
            #expect(!text.contains("Seq Scan on followups"), "\(name): the claim scans followups whole:\n\(text)")
        }
        // And it claims: the oldest due first, as many as asked.
        let claimed = try OutboxStore(pool: api.pool).claim(limit: 50, leaseSeconds: 60)
        #expect(claimed.count == 50)
        #expect(claimed.allSatisfy { !$0.row.isEmpty && !$0.deviceDead })
    }
}
