import ActionHookServer
import Logging
import MicroHTTPD
import TestSupport

/// Builds services on port 0 over a test database.
package enum TestService {
    package static func make(
        database: TestDatabase, migrate: Bool = true, adminToken: String = TestService.adminToken,
        configure: (inout Configuration) -> Void = { _ in }
    ) -> ActionHookService {
        var configuration = Configuration(
            http: HTTPServerConfiguration(host: "127.0.0.1", port: 0, threads: 4),
            database: database.configuration, adminToken: adminToken, shutdownGraceSeconds: 2)
        // API tests look at follow-ups as ingest left them; delivery tests turn the worker on.
        configuration.workerEnabled = false
        configure(&configuration)
        let service = ActionHookService(configuration: configuration, logger: Logger(label: "test"))
        if migrate {
            do { try service.migrate() } catch { preconditionFailure("test migration failed: \(error)") }
        }
        return service
    }

    package static let adminToken = "test-admin-token-0123456789abcdef"
}
