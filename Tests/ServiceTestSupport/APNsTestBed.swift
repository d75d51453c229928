import Foundation
import Postgres
import Testing

/// A service with its worker on, pointed at an APNs stand-in, with one app that has the stand-in's
/// credentials, a category `PUSH_TEST` (or the one given) and helpers to look at follow-ups.
package final class APNsTestBed {
    package let standIn: APNsStandIn
    package let api: TestAPI
    package let app: String
    package let key: String

    package init(app: String = "pushes", standIn: APNsStandIn? = nil) throws {
        let standIn = try standIn ?? APNsStandIn()
        self.standIn = standIn
        api = try TestAPI { standIn.configure(&$0) }
        self.app = app
        key = try api.createApp(app, extra: standIn.appSettingsJSON)
    }

    /// `PUT /v1/apps/{app}/categories/{id}`, which must succeed.
    package func putCategory(_ id: String, _ json: String) throws {
        let answer = try api.admin("PUT", "/v1/apps/\(app)/categories/\(id)", json: json)
        try #require([200, 201].contains(answer.status), "PUT category \(id): \(answer.status) \(answer.text)")
    }

    /// `POST /v1/apps/{app}/rules`, which must succeed.
    package func createRule(_ json: String) throws {
        let answer = try api.admin("POST", "/v1/apps/\(app)/rules", json: json)
        try #require(answer.status == 201, "POST rule: \(answer.status) \(answer.text)")
    }

    /// Ingests a response (built from `body` with JSONSerialization) and returns the 202 answer.
    @discardableResult
    package func ingest(_ body: [String: Any]) throws -> [String: Any] {
        let data = try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])
        let answer = try api.ingest(key: key, json: String(decoding: data, as: UTF8.self))
        try #require(answer.status == 202, "ingest: \(answer.status) \(answer.text)")
        return answer.json
    }

    /// Sends `json` (a `POST …/notifications` body) through ActionHook with a server key of the app (made on
    /// first use) and returns the 202's answer.
    package func send(_ json: String) throws -> [String: Any] {
        if serverKey == nil {
            let made = try api.admin("POST", "/v1/apps/\(app)/keys", json: #"{"scope": "send"}"#)
            try #require(made.status == 201, "server key: \(made.status) \(made.text)")
            serverKey = made.json["secret"] as? String
        }
        let answer = try api.call("POST", "/v1/apps/\(app)/notifications", token: serverKey, json: json)
        try #require(answer.status == 202, "send: \(answer.status) \(answer.text)")
        return answer.json
    }

    private var serverKey: String?

    /// The follow-up ids of an ingest answer, in order.
    package static func followUpIDs(_ answer: [String: Any]) -> [String] {
        (answer["followUps"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
    }

    package struct FollowUpState: Equatable {
        package var status: String
        package var attempt: Int
        package var lastError: String?

        package init(status: String, attempt: Int, lastError: String?) {
            self.status = status
            self.attempt = attempt
            self.lastError = lastError
        }
    }

    /// A follow-up's status, attempt number and last error.
    package func followUp(_ id: String) throws -> FollowUpState {
        let rows = try api.query(
            "SELECT status, attempt, last_error FROM followups WHERE id = \(UUID(uuidString: id)!)")
        try #require(rows.count == 1, "follow-up \(id) not found")
        return FollowUpState(
            status: try rows[0].decode("status"), attempt: try rows[0].decode("attempt"),
            lastError: try rows[0].decode("last_error"))
    }

    /// Waits until the follow-up reaches one of `statuses`; returns every status seen on the way.
    ///
    /// It sleeps with `Task.sleep`, never blocking a thread: the worker's sends run on the Swift
    /// concurrency pool, which has as many threads as cores (two here), and tests run in parallel.
    @discardableResult
    package func waitForFollowUp(_ id: String, in statuses: Set<String>, timeoutSeconds: Double = 20) async throws
        -> [String]
    {
        var seen: [String] = []
        let deadline = Date().addingTimeInterval(timeoutSeconds)
        while true {
            let status = try followUp(id).status
            if seen.last != status { seen.append(status) }
            if statuses.contains(status) { return seen }
            if Date() > deadline {
                let message =
                    "follow-up \(id) reached none of \(statuses.sorted()) within \(timeoutSeconds) s; "
                    + "seen \(seen); stand-in stderr: \(standIn.errors)"
                Issue.record(Comment(rawValue: message))
                return seen
            }
            try await Task.sleep(for: .milliseconds(50))
        }
    }

    package struct Attempt {
        package var attempt: Int
        package var result: String
        package var httpStatus: Int?
        package var errorClass: String?
        package var startedAt: Double
        package var finishedAt: Double
    }

    /// The stored delivery attempts of a follow-up, in order.
    package func attempts(_ id: String) throws -> [Attempt] {
        try api.query(
            """
            SELECT attempt, result, http_status, error_class, extract(epoch FROM started_at)::float8 AS started,
                extract(epoch FROM finished_at)::float8 AS finished
            FROM delivery_attempts WHERE followup_id = \(UUID(uuidString: id)!) ORDER BY attempt
            """
        ).map { row in
            Attempt(
                attempt: try row.decode("attempt"), result: try row.decode("result"),
                httpStatus: try row.decode("http_status"), errorClass: try row.decode("error_class"),
                startedAt: try row.decode("started"), finishedAt: try row.decode("finished"))
        }
    }

    /// `GET /v1/apps/{app}/responses/{id}`: its follow-ups by id.
    package func responseFollowUps(_ responseID: String) throws -> [String: [String: Any]] {
        let answer = try api.admin("GET", "/v1/apps/\(app)/responses/\(responseID)")
        try #require(answer.status == 200, "GET response: \(answer.status) \(answer.text)")
        var byID: [String: [String: Any]] = [:]
        for followUp in answer.json["followUps"] as? [[String: Any]] ?? [] {
            if let id = followUp["id"] as? String { byID[id] = followUp }
        }
        return byID
    }

    /// The device row APNs' answers left, if any: its status and reason.
    package func device(_ token: String) throws -> (status: String, reason: String?)? {
        let rows = try api.query(
            "SELECT status, reason FROM devices WHERE app_id = \(app) AND token = \(token)")
        guard let row = rows.first else { return nil }
        return (try row.decode("status"), try row.decode("reason"))
    }
}
