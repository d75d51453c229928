import ActionHookStore
import Logging
import MicroHTTPD
import Postgres

/// `/healthz`, `/readyz` and `/metrics`.
struct OperationsRoutes {
    let pool: PostgresPool
    let metrics: ServiceMetrics
    let logger: Logger

    func register(in router: inout Router) {
        router.add(.get, "/healthz") { _ in
            .json(200, Array(#"{"status":"ok"}"#.utf8))
        }
        router.add(.get, "/readyz") { _ in readiness() }
        router.add(.get, "/metrics") { _ in
            recordPoolStatistics()
            return .text(
                200, String(decoding: metrics.render(), as: UTF8.self), contentType: "text/plain; version=0.0.4")
        }
    }

    /// Ready when the database answers and its schema is the one this build expects.
    func readiness() -> HTTPResponse {
        let migrator = Migrator(pool: pool, logger: logger)
        do {
            let current = try migrator.currentVersion()
            guard current == migrator.latestVersion else {
                return .problem(
                    .unavailable("The database schema is not current; run `actionhook migrate`."),
                    headers: ["Retry-After": "5"])
            }
            return .json(200, Array(#"{"status":"ready","schemaVersion":\#(migrator.latestVersion)}"#.utf8))
        } catch {
            logger.warning("readiness check failed", metadata: ["error": "\(error)"])
            return .problem(.unavailable("The database is unreachable."), headers: ["Retry-After": "5"])
        }
    }

    func recordPoolStatistics() {
        let statistics = pool.statistics
        metrics.gauge("actionhook_db_pool_connections", dimensions: [("state", "in_use")]).record(statistics.inUse)
        metrics.gauge("actionhook_db_pool_connections", dimensions: [("state", "idle")]).record(statistics.idle)
        metrics.gauge("actionhook_db_pool_waits_total").record(statistics.waits)
        metrics.gauge("actionhook_db_pool_timeouts_total").record(statistics.timeouts)
    }
}
