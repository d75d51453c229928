import ActionHookCore
import ActionHookStore
import Foundation
import Postgres
import ServiceTestSupport
import Testing

extension PartitionTests {
    /// A failover (or any end of the session) between the two transactions of `DETACH PARTITION …
    /// CONCURRENTLY` leaves the partition "detach pending"; no advisory lock or session state survives it,
    /// so the next run, on whichever server is primary then, must find that in the catalog and finish it.
    @Test(
        "a detach interrupted between its two transactions is finished (FINALIZE) and the partition dropped by the next run"
    )
    func halfwayDetachIsFinished() throws {
        let api = try TestAPI()
        _ = try Self.app(api, "halfway")
        let now = Date()
        let earlier = PartitionMaintainer(
            pool: api.pool, policy: RetentionPolicy(partitionSeconds: 86_400, retentionDays: 30), logger: Self.logger)
        #expect(try Self.run(earlier, now: now.addingTimeInterval(-2 * Self.day)).ran)
        let name = try api.query(
            "SELECT name FROM actionhook_partitions WHERE parent = 'responses' ORDER BY lower LIMIT 1"
        )[0].decode("name", as: String.self)

        // A reader holds the parent, so the detach's second transaction waits for it; the detaching session
        // is then ended (here by its statement timeout), as a failover ends it.
        let reader = try PostgresConnection(configuration: api.database.configuration)
        try reader.execute("BEGIN")
        _ = try reader.query("SELECT count(*) AS n FROM responses")
        let detacher = try PostgresConnection(configuration: api.database.configuration)
        try detacher.execute("SET statement_timeout = '1s'")
        let statement = try detacher.query(
            "SELECT format('ALTER TABLE responses DETACH PARTITION %I CONCURRENTLY', \(name)::text) AS sql"
        )[0].decode("sql", as: String.self)
        var interrupted: PostgresError?
        do {
            try detacher.execute(PostgresQuery(unsafeSQL: statement))
        } catch let error as PostgresError {
            interrupted = error
        }
        #expect(interrupted?.sqlState == "57014")
        try reader.execute("ROLLBACK")
        let pendingBefore = try api.query(
            "SELECT inhdetachpending AS pending FROM pg_inherits WHERE inhrelid = to_regclass(quote_ident(\(name)))")
        #expect(try pendingBefore.first?.decode("pending", as: Bool.self) == true)

        let maintainer = PartitionMaintainer(
            pool: api.pool, policy: RetentionPolicy(partitionSeconds: 86_400, retentionDays: 1), logger: Self.logger)
        let report = try Self.run(maintainer, now: now)
        #expect(report.dropped["responses"] == 1)
        #expect(try api.count("SELECT count(*) AS n FROM actionhook_partitions WHERE name = \(name)") == 0)
        #expect(try api.count("SELECT count(*) AS n FROM pg_class WHERE oid = to_regclass(quote_ident(\(name)))") == 0)
    }
}
