import ActionHookServer
import Foundation
import Postgres
import TestSupport

/// A running service over its own schema, with helpers to call it the way clients do.
package final class TestAPI: Sendable {
    package let database: TestDatabase
    package let service: ActionHookService
    package let pool: PostgresPool

    /// Starts a migrated service on port 0 over a fresh schema (in a database of its own with
    /// `ownDatabase`, where no other test's notifications reach it).
    package init(ownDatabase: Bool = false, configure: (inout Configuration) -> Void = { _ in }) throws {
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

    package var port: Int { service.port }

    /// A request with the bootstrap admin token.
    package func admin(_ method: String, _ path: String, json: String? = nil, headers: [(String, String)] = [])
        throws -> TestResponse
    {
        try call(method, path, token: TestService.adminToken, json: json, headers: headers)
    }

    /// A request with the given bearer token (or none).
    package func call(
        _ method: String, _ path: String, token: String?, json: String? = nil, headers: [(String, String)] = []
    ) throws -> TestResponse {
        var all = headers
        if let token { all.append(("Authorization", "Bearer \(token)")) }
        let client = try HTTPTestClient(port: port)
        if let json { return try client.request(method, path, headers: all, json: json) }
        return try client.request(method, path, headers: all)
    }

    /// `POST /v1/responses` with an ingest key.
    package func ingest(key: String, json: String, headers: [(String, String)] = []) throws -> TestResponse {
        try call("POST", "/v1/responses", token: key, json: json, headers: headers)
    }

    /// Creates an app and returns its ingest key secret. `extra` is added to the body's members,
    /// e.g. `"webhook": {"url": "https://example.com/hook"}`.
    package func createApp(_ id: String, extra: String = "") throws -> String {
        let body = extra.isEmpty ? #"{"id":"\#(id)","name":"\#(id)"}"# : #"{"id":"\#(id)","name":"\#(id)",\#(extra)}"#
        let response = try admin("POST", "/v1/apps", json: body)
        guard response.status == 201, let key = (response.json["ingestKey"] as? [String: Any])?["secret"] as? String
        else { throw TestClientError(description: "creating app \(id) answered \(response.status)") }
        return key
    }

    /// Runs a query against the service's schema (for assertions on stored rows).
    package func query(_ query: PostgresQuery) throws -> PostgresRows {
        try pool.withConnection { try $0.query(query) }
    }

    /// `SELECT count(*) AS n ...` as an integer.
    package func count(_ query: PostgresQuery) throws -> Int {
        try self.query(query)[0].decode("n", as: Int.self)
    }

    /// An app's stored rules and categories as their ids, versions and update times, to see that nothing
    /// was written.
    package func fingerprint(app: String) throws -> [String] {
        try query(
            """
            SELECT 'r:' || id || ':' || version || ':' || updated_at::text AS row FROM rules WHERE app_id = \(app)
            UNION ALL SELECT 'c:' || id || ':' || updated_at::text FROM categories WHERE app_id = \(app)
            ORDER BY 1
            """
        ).map { try $0.decode("row", as: String.self) }
    }
}
