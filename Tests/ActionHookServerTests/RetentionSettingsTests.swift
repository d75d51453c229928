import ActionHookServer
import ActionHookStore
import Foundation
import Postgres
import ServiceTestSupport
import Testing

/// The service's side of partitioning and retention: the settings read from the environment, an app's
/// retention checked against the idempotency window, and maintenance runs reported in /metrics (the runs
/// themselves are ActionHookStoreTests' PartitionTests).
@Suite("Partitions and retention: settings and metrics")
struct RetentionSettingsTests: ResponseHelpers {
    static func partitions(_ api: TestAPI, _ parent: String) throws -> [Date] {
        try api.query("SELECT lower FROM actionhook_partitions WHERE parent = \(parent) ORDER BY lower").map {
            try $0.decode("lower", as: Date.self)
        }
    }

    @Test("the service's own run at start is in /metrics: partitions per table, the oldest kept, when it ran")
    func metrics() throws {
        let api = try TestAPI()
        var ran = false
        for _ in 0..<300 where !ran {
            ran = Hooks.metric(api.service, "actionhook_partition_maintenance_last_run_timestamp_seconds", [:]) > 0
            if !ran { Thread.sleep(forTimeInterval: 0.1) }
        }
        #expect(ran)
        for table in PartitionMaintainer.tables {
            let kept = try Self.partitions(api, table)
            #expect(Hooks.metric(api.service, "actionhook_partitions", ["table": table]) == Double(kept.count))
            #expect(
                Hooks.metric(api.service, "actionhook_partition_oldest_timestamp_seconds", ["table": table])
                    == kept.first?.timeIntervalSince1970)
        }
    }

    @Test("partition width and retention are read from the environment; a bad value names its variable")
    func settings() throws {
        let base = ["DATABASE_URL": "postgresql://localhost/x"]
        let defaults = try Configuration.fromEnvironment(base)
        #expect(defaults.retention == RetentionPolicy(partitionSeconds: 86_400, retentionDays: 30))
        let set = try Configuration.fromEnvironment(
            base.merging(["ACTIONHOOK_PARTITION_INTERVAL": "6h", "ACTIONHOOK_RETENTION_DAYS": "7"]) { $1 })
        #expect(set.retention == RetentionPolicy(partitionSeconds: 21_600, retentionDays: 7))
        #expect(set.retention.aheadSeconds == 2 * 86_400)
        #expect(set.retention.runInterval == .seconds(3600))
        for bad in ["0d", "32d", "2w", "h", "1.5d", "-1h"] {
            #expect(throws: ConfigurationError.self, "\(bad)") {
                try Configuration.fromEnvironment(base.merging(["ACTIONHOOK_PARTITION_INTERVAL": bad]) { $1 })
            }
        }
        #expect(throws: ConfigurationError.self) {
            try Configuration.fromEnvironment(base.merging(["ACTIONHOOK_RETENTION_DAYS": "0"]) { $1 })
        }
        // Keys kept longer than their replies: refused, naming the window's variable.
        do {
            _ = try Configuration.fromEnvironment(
                base.merging(["ACTIONHOOK_RETENTION_DAYS": "2", "ACTIONHOOK_IDEMPOTENCY_TTL_HOURS": "49"]) { $1 })
            Issue.record("a 49-hour window over 2 days of retention was accepted")
        } catch {
            #expect(error.variable == "ACTIONHOOK_IDEMPOTENCY_TTL_HOURS")
        }
        let equal = try Configuration.fromEnvironment(
            base.merging(["ACTIONHOOK_RETENTION_DAYS": "2", "ACTIONHOOK_IDEMPOTENCY_TTL_HOURS": "48"]) { $1 })
        #expect(equal.idempotencyTTLHours == 48)
    }

    @Test("an app's retentionDays shorter than the idempotency window is a 422 at /retentionDays, on create and patch")
    func retentionShorterThanWindow() throws {
        let api = try TestAPI { $0.idempotencyTTLHours = 36 }
        let refused = try api.admin("POST", "/v1/apps", json: #"{"id":"brief","name":"Brief","retentionDays":1}"#)
        #expect(refused.status == 422)
        #expect(Self.pointers(refused) == ["/retentionDays"])
        #expect(try api.count("SELECT count(*)::int AS n FROM apps WHERE id = 'brief'") == 0)
        let created = try api.admin("POST", "/v1/apps", json: #"{"id":"brief","name":"Brief","retentionDays":2}"#)
        #expect(created.status == 201)
        let patched = try api.admin("PATCH", "/v1/apps/brief", json: #"{"retentionDays":1}"#)
        #expect(patched.status == 422)
        #expect(Self.pointers(patched) == ["/retentionDays"])
        #expect(try api.admin("GET", "/v1/apps/brief").json["retentionDays"] as? Int == 2)
        #expect(try api.admin("PATCH", "/v1/apps/brief", json: #"{"retentionDays":null}"#).status == 200)
    }
}
