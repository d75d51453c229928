import Foundation
import Logging
import TestSupport
import Testing

@testable import ActionHookStore
@testable import Postgres

/// A receipt reads a notification's history from the partitions of its send onwards: a large send's
/// receipt looks each follow-up's attempt up once per follow-up, and without a bound on the partition
/// key each look probed every kept partition of `delivery_attempts`.
@Suite("Receipt plan")
struct ReceiptPlanTests {
    @Test(
        "a receipt of a send 5 days ago reads no partition of followups_done, delivery_attempts or responses before it")
    func receiptPrunesOlderPartitions() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let pool = PostgresPool(configuration: database.configuration, size: 2)
        defer { pool.close() }
        var logger = Logger(label: "receipt-plan-test")
        logger.logLevel = .warning
        try Migrator(pool: pool, logger: logger).migrate()

        let (createdAt, old, sendDay) = try pool.withConnection { connection in
            _ = try connection.query(
                "SELECT actionhook_create_partitions(now() - interval '20 days', now(), interval '1 day') AS made")
            let createdAt: Date = try connection.query("SELECT now() - interval '5 days' AS t")[0].decode("t")
            let since = NotificationStore.historySince(createdAt)
            // Partitions wholly before the bound, and those holding the send's own time.
            let old = try connection.query(
                "SELECT name FROM actionhook_partitions WHERE parent <> 'idempotency_keys' AND upper <= \(since)"
            ).map {
                try $0.decode("name", as: String.self)
            }
            let sendDay = try connection.query(
                """
                SELECT name FROM actionhook_partitions
                WHERE parent <> 'idempotency_keys' AND lower <= \(createdAt) AND upper > \(createdAt)
                """
            ).map { try $0.decode("name", as: String.self) }
            return (createdAt, old, sendDay)
        }
        #expect(old.count >= 3 * 14, "too few old partitions to see the pruning: \(old.count)")
        #expect(sendDay.count == 3)

        let since = NotificationStore.historySince(createdAt)
        let queries = [
            ("follow-ups", NotificationStore.receiptFollowUps(appID: "a", id: UUID(), since: since)),
            ("replies", NotificationStore.receiptReplies(appID: "a", id: UUID(), createdAt: createdAt, since: since)),
        ]
        var plans = ""
        for (name, query) in queries {
            let plan = try pool.withConnection { connection in
                try connection.query(PostgresQuery(unsafeSQL: "EXPLAIN " + query.sql, parameters: query.parameters))
                    .map { try $0.decode("QUERY PLAN", as: String.self) }.joined(separator: "\n")
            }
            let read = old.filter { plan.contains($0) }
            #expect(read.isEmpty, "the \(name) read partitions before the send: \(read)\n\(plan)")
            plans += plan
        }
        for partition in sendDay {
            #expect(plans.contains(partition), "the send's own partition \(partition) is not read:\n\(plans)")
        }
    }
}
