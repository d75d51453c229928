import ActionHookServer
import ActionHookStore
import Foundation
import Logging
import MicroHTTPD
import Postgres
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

@Suite("Operations: health, readiness, metrics, migrations")
struct OperationsTests {
    @Test("healthz answers without the database; readyz needs a current schema")
    func healthAndReadiness() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let service = TestService.make(database: database, migrate: false)
        try service.start()
        defer { service.stop() }
        let client = try HTTPTestClient(port: service.port)

        #expect(try client.request("GET", "/healthz").status == 200)
        let notReady = try client.request("GET", "/readyz")
        #expect(notReady.status == 503)
        #expect(notReady.headers["retry-after"] != nil)
        #expect(notReady.headers["content-type"] == "application/problem+json")

        try service.migrate()
        let ready = try client.request("GET", "/readyz")
        #expect(ready.status == 200)
        #expect(ready.json["schemaVersion"] as? Int == Migrator.latestShippedVersion)
    }

    @Test("readyz is 503 and healthz 200 when the database cannot be reached")
    func databaseDown() throws {
        let configuration = Configuration(
            http: HTTPServerConfiguration(host: "127.0.0.1", port: 0, threads: 2),
            database: PostgresConfiguration(
                connectionString: "postgresql://nobody@127.0.0.1:1/none", connectTimeoutSeconds: 1))
        let service = ActionHookService(configuration: configuration, logger: Logger(label: "test"))
        try service.start()
        defer { service.stop() }
        let client = try HTTPTestClient(port: service.port)
        #expect(try client.request("GET", "/healthz").status == 200)
        let readiness = try client.request("GET", "/readyz")
        #expect(readiness.status == 503)
        #expect(!readiness.text.contains("nobody"))
    }

    @Test("metrics expose requests by route and status, latency and the pool")
    func metrics() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let service = TestService.make(database: database)
        try service.start()
        defer { service.stop() }
        let client = try HTTPTestClient(port: service.port)
        _ = try client.request("GET", "/healthz")
        _ = try client.request("GET", "/readyz")
        _ = try client.request("GET", "/no/such/route")
        let metrics = try client.request("GET", "/metrics")
        #expect(metrics.status == 200)
        #expect(metrics.headers["content-type"]?.hasPrefix("text/plain") == true)
        let text = metrics.text
        #expect(text.contains(#"actionhook_http_requests_total{method="GET",route="/healthz",status="200"} 1"#))
        #expect(text.contains(#"actionhook_http_requests_total{method="GET",route="unmatched",status="404"} 1"#))
        #expect(text.contains("actionhook_http_request_duration_seconds_bucket"))
        #expect(text.contains(#"actionhook_db_pool_connections{state="idle"}"#))
    }

    @Test("migrations apply once, are a no-op when current, and are safe run concurrently")
    func migrations() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let pools = (0..<3).map { _ in PostgresPool(configuration: database.configuration, size: 1) }
        defer { for pool in pools { pool.close() } }
        let results = Mutex<[[Int]]>([])
        let failures = Mutex(0)
        let group = DispatchGroup()
        for pool in pools {
            DispatchQueue.global().async(group: group) {
                do {
                    let applied = try Migrator(pool: pool, logger: Logger(label: "test")).migrate()
                    results.withLock { $0.append(applied) }
                } catch {
                    failures.withLock { $0 += 1 }
                }
            }
        }
        group.wait()
        #expect(failures.withLock { $0 } == 0)
        let applied = results.withLock { $0 }
        #expect(applied.filter { !$0.isEmpty }.count == 1)
        #expect(applied.flatMap { $0 }.sorted() == Migrator.shippedVersions)

        let again = try Migrator(pool: pools[0], logger: Logger(label: "test")).migrate()
        #expect(again.isEmpty)
        let rows = try pools[0].withConnection { try $0.query("SELECT count(*) AS n FROM schema_migrations") }
        #expect(try rows[0].decode("n", as: Int.self) == Migrator.shippedVersions.count)
    }
}
