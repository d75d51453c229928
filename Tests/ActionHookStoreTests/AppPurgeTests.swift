import ActionHookCore
import Foundation
import Logging
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

@testable import ActionHookStore

/// Deleting an app removes its settings at once and its history in the background, a batch per
/// transaction (sql/migrations/013, `AppPurger`).
@Suite("App purge")
struct AppPurgeTests {
    static let tables = AppHistory.tables

    static func counts(_ app: String, _ pool: PostgresPool) throws -> [String: Int] {
        try pool.withConnection { connection in
            var counts: [String: Int] = [:]
            for table in tables {
                // Table names from the list above, never from input.
                counts[table] = try connection.query(
                    PostgresQuery(unsafeSQL: "SELECT count(*)::int AS n FROM \(table) WHERE app_id = $1", binds: [app])
                )[0].decode("n", as: Int.self)
            }
            return counts
        }
    }

    @Test("a deleted app's 2,500 rows per table go in transactions of at most 1,000 rows; another app's stay")
    func purgeInBatches() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let pool = PostgresPool(configuration: database.configuration, size: 2)
        defer { pool.close() }
        var logger = Logger(label: "purge-test")
        logger.logLevel = .warning
        try Migrator(pool: pool, logger: logger).migrate()
        let apps = AppStore(pool: pool)
        _ = try apps.create(AppDefinition(id: "doomed", name: "Doomed"))
        _ = try apps.create(AppDefinition(id: "staying", name: "Staying"))
        try pool.withConnection { connection in
            _ = try connection.query(
                "SELECT actionhook_create_partitions(now() - interval '1 day', now() + interval '1 day', interval '1 day') AS made"
            )
            try AppHistory.seed("doomed", rows: 2500, connection: connection)
            try AppHistory.seed("staying", rows: 10, connection: connection)
        }
        let full = Dictionary(uniqueKeysWithValues: Self.tables.map { ($0, 2500) })
        #expect(try Self.counts("doomed", pool) == full)

        // The deletion itself removes only the app's settings and keys, and records it.
        #expect(try apps.delete("doomed"))
        #expect(try apps.app("doomed") == nil)
        #expect(try Self.counts("doomed", pool) == full)
        // The id is taken until the purge is done.
        #expect(throws: StoreError.self) { try apps.create(AppDefinition(id: "doomed", name: "Again")) }

        let steps = try AppPurger(pool: pool, batchSize: 1000, logger: logger).purge()
        var deleted: [String: Int] = [:]
        for step in steps.dropLast() {
            guard case .deleted(let app, let table, let rows) = step else {
                Issue.record("a step before the last is not a batch: \(step)")
                continue
            }
            #expect(app == "doomed")
            #expect(rows <= 1000)
            deleted[table, default: 0] += rows
        }
        #expect(steps.last == .finished(appID: "doomed"))
        #expect(deleted == full)
        // Three batches a table (1,000, 1,000, 500).
        #expect(steps.count == 3 * Self.tables.count + 1)
        #expect(try Self.counts("doomed", pool) == Dictionary(uniqueKeysWithValues: Self.tables.map { ($0, 0) }))
        #expect(
            try Self.counts("staying", pool) == Dictionary(uniqueKeysWithValues: Self.tables.map { ($0, 10) }))
        #expect(
            try pool.withConnection { try $0.query("SELECT count(*)::int AS n FROM app_deletions")[0].decode("n") }
                == 0)

        // A push in flight at the deletion that ends with a dead token after the purge leaves no row behind.
        let outbox = OutboxStore(pool: pool)
        try outbox.markDeviceDead(appID: "doomed", token: "late", reason: "Unregistered")
        try outbox.markDeviceDead(appID: "staying", token: "late", reason: "Unregistered")
        #expect(try Self.counts("doomed", pool)["devices"] == 0)
        #expect(try Self.counts("staying", pool)["devices"] == 11)

        // Nothing left to do; the id is free again.
        #expect(try AppPurger(pool: pool, logger: logger).purgeBatch() == nil)
        _ = try apps.create(AppDefinition(id: "doomed", name: "Again"))
        #expect(try apps.app("doomed")?.definition.name == "Again")
    }
}
