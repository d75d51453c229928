import ActionHookServer
import Foundation
import Postgres
import TestSupport

/// A running service over its own schema, with helpers to call it the way clients do.
final class TestAPI: Sendable {
    let database: TestDatabase
    let service: ActionHookService
    let pool: PostgresPool

    /// Starts a migrated service on port 0 over a fresh schema (in a database of its own with
    /// `ownDatabase`, where no other test's notifications reach it).
    init(ownDatabase: Bool = false, configure: (inout Configuration) -> Void = { _ in }) throws {
        database = try ownDatabase ? TestDatabase.createInOwnDatabase() : TestDatabase.create()
        service = TestService.make(database: database, configure: configure)
        try service.start()
        pool = PostgresPool(configuration: database.configuration, size: 2)
    }

    deinit {
        service.stop()
        pool.close()
        database.drop()
    }

    var port: Int { service.port }

    /// A request with the bootstrap admin token.
    func admin(_ method: String, _ path: String, json: String? = nil, headers: [(String, String)] = [])
        throws -> TestResponse
    {
        try call(method, path, token: TestService.adminToken, json: json, headers: headers)
    }

    /// A request with the given bearer token (or none).
    func call(
        _ method: String, _ path: String, token: String?, json: String? = nil, headers: [(String, String)] = []
    ) throws -> TestResponse {
        var all = headers
        if let token { all.append(("Authorization", "Bearer \(token)")) }
        let client = try HTTPTestClient(port: port)
        if let json { return try client.request(method, path, headers: all, json: json) }
        return try client.request(method, path, headers: all)
    }

    /// `POST /v1/responses` with an ingest key.
    func ingest(key: String, json: String, headers: [(String, String)] = []) throws -> TestResponse {
        try call("POST", "/v1/responses", token: key, json: json, headers: headers)
    }

    /// Creates an app and returns its ingest key secret. `extra` is added to the body's members,
    /// e.g. `"webhook": {"url": "https://example.com/hook"}`.
    func createApp(_ id: String, extra: String = "") throws -> String {
        let body = extra.isEmpty ? #"{"id":"\#(id)","name":"\#(id)"}"# : #"{"id":"\#(id)","name":"\#(id)",\#(extra)}"#
        let response = try admin("POST", "/v1/apps", json: body)
        guard response.status == 201, let key = (response.json["ingestKey"] as? [String: Any])?["secret"] as? String
        else { throw TestClientError(description: "creating app \(id) answered \(response.status)") }
        return key
    }

    /// Runs a query against the service's schema (for assertions on stored rows).
    func query(_ query: PostgresQuery) throws -> PostgresRows {
        try pool.withConnection { try $0.query(query) }
    }

    /// `SELECT count(*) AS n ...` as an integer.
    func count(_ query: PostgresQuery) throws -> Int {
        try self.query(query)[0].decode("n", as: Int.self)
    }
}

/// JSON helpers the admin, isolation and secret suites share (each keeps its own helper namespace).
protocol ResponseHelpers {}

extension ResponseHelpers {
    /// Compact JSON text with sorted keys, for request bodies written as dictionaries.
    static func json(_ value: Any) -> String {
        // Bodies here are literals in the tests: one that is not JSON is a mistake in the test itself.
        guard let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]) else {
            preconditionFailure("a test body is not serialisable as JSON: \(value)")
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// The `items` of a list answer.
    static func items(_ response: TestResponse) -> [[String: Any]] {
        response.json["items"] as? [[String: Any]] ?? []
    }

    /// The JSON pointers of a problem's field errors.
    static func pointers(_ response: TestResponse) -> [String] {
        (response.json["errors"] as? [[String: Any]] ?? []).compactMap { $0["pointer"] as? String }
    }
}
