import ActionHookCore
import ActionHookServer
import Foundation
import Postgres
import TestSupport

/// A follow-up row as the delivery tests read it.
package struct HookFollowUpRow: Sendable {
    package let id: String
    package let status: String
    package let attempt: Int
    package let lastError: String?
    package let dueAt: Date
}

/// A delivery attempt row.
package struct HookAttemptRow: Sendable {
    package let attempt: Int
    /// When the attempt was due, as the worker recorded it.
    package let dueAt: Date?
    package let startedAt: Date
    package let finishedAt: Date
    package let result: String
    package let httpStatus: Int?
    package let errorClass: String?
}

/// Helpers shared by the webhook, worker-fault and SSRF tests.
package enum Hooks {
    /// Polls `condition` every `interval` until it holds or `timeout` passes; returns whether it held.
    /// Waits with `Task.sleep`, so the concurrency pool (which the worker's sends need) stays free.
    @discardableResult
    package static func poll(timeout: Duration, interval: Duration = .milliseconds(50), _ condition: () throws -> Bool)
        async rethrows -> Bool
    {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while true {
            if try condition() { return true }
            if clock.now >= deadline { return false }
            try? await Task.sleep(for: interval)
        }
    }

    /// `poll` for code off the concurrency pool (plain threads).
    @discardableResult
    package static func pollBlocking(timeout: Duration, _ condition: () -> Bool) -> Bool {
        let clock = ContinuousClock()
        let deadline = clock.now + timeout
        while !condition() {
            if clock.now >= deadline { return false }
            Thread.sleep(forTimeInterval: 0.01)
        }
        return true
    }

    /// Runs blocking work (a service's graceful stop) on its own thread, leaving the concurrency pool
    /// free meanwhile. `body` must not record test issues: it runs outside the test's task.
    package static func offPool<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            Thread { continuation.resume(returning: body()) }.start()
        }
    }

    /// Seconds in a duration.
    package static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18
    }

    /// A valid `whsec_` secret of 32 random bytes.
    package static func newSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return "whsec_" + Data(bytes).base64EncodedString()
    }

    /// Worker on, loopback receivers allowed, a short poll interval.
    package static func worker(_ configuration: inout Configuration) {
        configuration.workerEnabled = true
        configuration.allowPrivateWebhooks = true
        configuration.worker.pollInterval = .milliseconds(200)
    }

    /// Parses an RFC 3339 time with or without fractional seconds.
    package static func parseTime(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        if let date = formatter.date(from: text) { return date }
        formatter.formatOptions = [.withInternetDateTime]
        return formatter.date(from: text)
    }

    /// Another service over the same schema (not migrated again); the caller starts and stops it.
    package static func sibling(of api: TestAPI, configure: (inout Configuration) -> Void) -> ActionHookService {
        TestService.make(database: api.database, migrate: false, configure: configure)
    }

    /// An admin request to any service's port.
    package static func admin(port: Int, _ method: String, _ path: String, json: String? = nil) throws -> TestResponse {
        let client = try HTTPTestClient(port: port)
        let headers = [("Authorization", "Bearer \(TestService.adminToken)")]
        if let json { return try client.request(method, path, headers: headers, json: json) }
        return try client.request(method, path, headers: headers)
    }

    /// Creates an app whose webhook endpoint is `url` with `secret`; returns its ingest key.
    package static func createApp(_ api: TestAPI, _ id: String, url: String, secret: String) throws -> String {
        try api.createApp(id, extra: #""webhook": {"url": "\#(url)", "secret": "\#(secret)"}"#)
    }

    /// Saves a rule and requires a 201.
    package static func saveRule(_ api: TestAPI, app: String, _ json: String) throws {
        let response = try api.admin("POST", "/v1/apps/\(app)/rules", json: json)
        guard response.status == 201 else {
            throw TestClientError(description: "saving a rule answered \(response.status): \(response.text)")
        }
    }

    /// Ingests one response, requires a 202 and returns the follow-up ids it lists.
    package static func ingest(_ api: TestAPI, key: String, _ json: String) throws -> (
        responseID: String, followUps: [String]
    ) {
        let response = try api.ingest(key: key, json: json)
        guard response.status == 202, let id = response.json["id"] as? String else {
            throw TestClientError(description: "ingest answered \(response.status): \(response.text)")
        }
        let ids = (response.json["followUps"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
        return (id, ids)
    }

    /// One follow-up's row.
    package static func followUp(_ api: TestAPI, _ id: String) throws -> HookFollowUpRow {
        let rows = try api.query(
            "SELECT id::text AS id, status, attempt, last_error, due_at FROM followups WHERE id = \(UUID(uuidString: id)!)"
        )
        guard let row = rows.first else { throw TestClientError(description: "no follow-up \(id)") }
        return HookFollowUpRow(
            id: try row.decode("id"), status: try row.decode("status"), attempt: try row.decode("attempt"),
            lastError: try row.decode("last_error"), dueAt: try row.decode("due_at"))
    }

    /// Polls until the follow-up has `status`; returns the row last read.
    @discardableResult
    package static func waitFor(_ api: TestAPI, _ id: String, status: String, timeout: Duration = .seconds(30))
        async throws
        -> HookFollowUpRow
    {
        var last = try followUp(api, id)
        try await poll(timeout: timeout) {
            last = try followUp(api, id)
            return last.status == status
        }
        return last
    }

    /// Follow-ups by status.
    package static func statusCounts(_ api: TestAPI) throws -> [String: Int] {
        var counts: [String: Int] = [:]
        for row in try api.query("SELECT status, count(*)::bigint AS n FROM followups GROUP BY status") {
            counts[try row.decode("status")] = try row.decode("n", as: Int.self)
        }
        return counts
    }

    /// A follow-up's delivery attempts in order.
    package static func attempts(_ api: TestAPI, _ id: String) throws -> [HookAttemptRow] {
        try api.query(
            """
            SELECT attempt, due_at, started_at, finished_at, result, http_status, error_class FROM delivery_attempts
            WHERE followup_id = \(UUID(uuidString: id)!) ORDER BY attempt
            """
        ).map {
            HookAttemptRow(
                attempt: try $0.decode("attempt"), dueAt: try $0.decode("due_at"),
                startedAt: try $0.decode("started_at"),
                finishedAt: try $0.decode("finished_at"), result: try $0.decode("result"),
                httpStatus: try $0.decode("http_status"), errorClass: try $0.decode("error_class"))
        }
    }

    /// Inserts one response and `count` due webhook follow-ups for it straight into the outbox;
    /// `url(i)` is the follow-up's own URL (nil for the app's endpoint); they are due `dueInSeconds` from
    /// now (by the database clock). Returns their ids in order.
    package static func insertDueWebhooks(
        _ api: TestAPI, app: String, count: Int, dueInSeconds: Int = 0, url: (Int) -> String?
    ) throws -> [String] {
        let responseID = UUID.timeOrdered()
        let ids = (0..<count).map { _ in UUID() }
        try api.pool.transaction { connection in
            try connection.execute(
                """
                INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier, outcome, answer)
                VALUES (\(app), \(responseID), \(responseID.uuidString), '\\x00'::bytea, 'bulk', 'recorded', '{}')
                """)
            for (index, id) in ids.enumerated() {
                let target = url(index).map { "\"\($0)\"" } ?? "null"
                let payload = #"{"url": \#(target), "body": {"n": \#(index), "kind": "bulk"}}"#
                try connection.execute(
                    """
                    INSERT INTO followups (app_id, id, response_id, ordinal, channel, payload, due_at)
                    VALUES (\(app), \(id), \(responseID), \(index), 'webhook', \(payload)::jsonb,
                        now() + make_interval(secs => \(dueInSeconds)))
                    """)
            }
        }
        return ids.map { $0.uuidString.lowercased() }
    }

    /// The sum of a Prometheus metric's samples whose labels include `labels`, in a service's metrics.
    package static func metric(_ service: ActionHookService, _ name: String, _ labels: [String: String]) -> Double {
        let text = String(decoding: service.metrics.render(), as: UTF8.self)
        var sum = 0.0
        for line in text.split(separator: "\n") where line.hasPrefix(name + "{") || line.hasPrefix(name + " ") {
            let parts = line.split(separator: " ")
            guard parts.count >= 2, let value = Double(parts[parts.count - 1]) else { continue }
            if labels.allSatisfy({ line.contains("\($0.key)=\"\($0.value)\"") }) { sum += value }
        }
        return sum
    }
}
