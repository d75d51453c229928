import Foundation
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

/// F5: credentials. Ingest keys authenticate only the app routes, admin tokens only the admin API;
/// anything missing, malformed, unknown or revoked is a 401 with `WWW-Authenticate`; secrets are
/// stored only as SHA-256 digests.
@Suite("Credentials (F5)")
struct CredentialTests {
    static let app = "cred-app"
    static let webhookSecret = "whsec_c2VlZGVkLXdlYmhvb2stc2VjcmV0LTAxMjM0NTY3"

    /// Creates the app through the API and returns its first ingest key (id, secret).
    static func createApp(_ api: TestAPI, _ id: String = CredentialTests.app) throws -> (id: String, secret: String) {
        let created = try api.admin(
            "POST", "/v1/apps",
            json:
                #"{"id": "\#(id)", "name": "Cred", "webhook": {"url": "https://hooks.example/x", "secret": "\#(webhookSecret)"}}"#
        )
        try #require(created.status == 201, "\(created.text)")
        let key = try #require(created.json["ingestKey"] as? [String: Any])
        return (try #require(key["id"] as? String), try #require(key["secret"] as? String))
    }

    static let response = #"{"actionIdentifier": "open"}"#

    static func expectUnauthorized(_ answer: TestResponse, _ label: String, secrets: [String] = []) {
        #expect(answer.status == 401, "\(label): \(answer.status) \(answer.text)")
        #expect(answer.headers["www-authenticate"]?.hasPrefix("Bearer") == true, "\(label)")
        #expect(answer.headers["content-type"] == "application/problem+json", "\(label)")
        for secret in secrets { #expect(!answer.text.contains(secret), "\(label) echoes a credential") }
    }

    @Test("missing, malformed and unknown ingest keys are 401 on both ingest routes")
    func badIngestKeys() throws {
        let api = try IOSScenario.makeAPI()
        let (_, key) = try Self.createApp(api)
        let authorizations: [(String, String?)] = [
            ("missing", nil),
            ("empty", ""),
            ("scheme only", "Bearer"),
            ("scheme and space", "Bearer "),
            ("basic", "Basic " + Data("user:\(key)".utf8).base64EncodedString()),
            ("other scheme", "Token \(key)"),
            ("no scheme", key),
            ("altered", "Bearer " + String(key.dropLast()) + (key.hasSuffix("A") ? "B" : "A")),
            ("prefix only", "Bearer ahk_"),
            ("unknown", "Bearer ahk_" + String(repeating: "Q", count: 43)),
            ("too long", "Bearer " + key + String(repeating: "x", count: 600)),
            ("key twice", "Bearer \(key) \(key)"),
        ]
        for (label, authorization) in authorizations {
            let headers = authorization.map { [("Authorization", $0)] } ?? []
            let client = try HTTPTestClient(port: api.port)
            let ingest = try client.request("POST", "/v1/responses", headers: headers, json: Self.response)
            Self.expectUnauthorized(ingest, "ingest, \(label)", secrets: [key])
            let categories = try HTTPTestClient(port: api.port).request("GET", "/v1/categories", headers: headers)
            Self.expectUnauthorized(categories, "categories, \(label)", secrets: [key])
        }
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 0)

        // The scheme is case-insensitive (RFC 9110); the key itself works.
        let lower = try HTTPTestClient(port: api.port).request(
            "POST", "/v1/responses", headers: [("Authorization", "bearer \(key)")], json: Self.response)
        #expect(lower.status == 202)
        #expect(try api.ingest(key: key, json: Self.response).status == 202)
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 2)
    }

    @Test("revoking an ingest key takes effect at once; other keys keep working")
    func revocation() throws {
        let api = try IOSScenario.makeAPI()
        let (firstID, first) = try Self.createApp(api)
        let created = try api.admin("POST", "/v1/apps/\(Self.app)/keys")
        try #require(created.status == 201, "\(created.text)")
        let secondID = try #require(created.json["id"] as? String)
        let second = try #require(created.json["secret"] as? String)
        #expect(second != first)
        #expect(second.hasPrefix("ahk_"))

        // Both work, and the second is now cached as a known principal.
        #expect(try api.ingest(key: first, json: Self.response).status == 202)
        #expect(try api.ingest(key: second, json: Self.response).status == 202)
        #expect(try api.call("GET", "/v1/categories", token: second).status == 200)

        #expect(try api.admin("DELETE", "/v1/apps/\(Self.app)/keys/\(secondID)").status == 204)
        Self.expectUnauthorized(try api.ingest(key: second, json: Self.response), "revoked ingest", secrets: [second])
        Self.expectUnauthorized(try api.call("GET", "/v1/categories", token: second), "revoked categories")
        #expect(try api.ingest(key: first, json: Self.response).status == 202)
        #expect(try api.count("SELECT count(*) AS n FROM api_keys WHERE revoked_at IS NOT NULL") == 1)
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 3)

        // Revoking again, or a key of no app, is a 404.
        #expect(try api.admin("DELETE", "/v1/apps/\(Self.app)/keys/\(secondID)").status == 404)
        #expect(try api.admin("DELETE", "/v1/apps/\(Self.app)/keys/\(UUID().uuidString.lowercased())").status == 404)

        // The app's last key can be revoked too: then nothing authenticates as the app.
        #expect(try api.admin("DELETE", "/v1/apps/\(Self.app)/keys/\(firstID)").status == 204)
        Self.expectUnauthorized(try api.ingest(key: first, json: Self.response), "first revoked")
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 3)

        // Deleting the app revokes every key with it.
        let third = try #require(try api.admin("POST", "/v1/apps/\(Self.app)/keys").json["secret"] as? String)
        #expect(try api.ingest(key: third, json: Self.response).status == 202)
        #expect(try api.admin("DELETE", "/v1/apps/\(Self.app)").status == 204)
        Self.expectUnauthorized(try api.ingest(key: third, json: Self.response), "app deleted")
        #expect(
            try eventually(within: 30) {
                try api.count("SELECT count(*) AS n FROM responses WHERE app_id = \(Self.app)") == 0
            })
    }

    @Test("ingest keys never open admin routes; admin tokens never open ingest routes")
    func separationOfCredentials() throws {
        let api = try IOSScenario.makeAPI()
        let (keyID, key) = try Self.createApp(api)
        let token = try api.admin("POST", "/v1/admin-tokens", json: #"{"name": "ci"}"#)
        try #require(token.status == 201, "\(token.text)")
        let adminToken = try #require(token.json["token"] as? String)

        let adminCalls: [(String, String, String?)] = [
            ("GET", "/v1/apps", nil),
            ("POST", "/v1/apps", #"{"id": "by-ingest-key", "name": "x"}"#),
            ("GET", "/v1/apps/\(Self.app)", nil),
            ("PATCH", "/v1/apps/\(Self.app)", #"{"name": "renamed"}"#),
            ("POST", "/v1/apps/\(Self.app)/keys", nil),
            ("DELETE", "/v1/apps/\(Self.app)/keys/\(keyID)", nil),
            ("PUT", "/v1/apps/\(Self.app)/categories/GENERAL", #"{"actions": []}"#),
            ("GET", "/v1/apps/\(Self.app)/categories", nil),
            ("POST", "/v1/apps/\(Self.app)/rules", #"{"id": "r", "handler": {"type": "record"}}"#),
            ("POST", "/v1/apps/\(Self.app)/rules/test", Self.response),
            ("GET", "/v1/apps/\(Self.app)/responses", nil),
            ("GET", "/v1/apps/\(Self.app)/followups", nil),
            ("POST", "/v1/admin-tokens", #"{"name": "escalate"}"#),
            ("GET", "/v1/admin-tokens", nil),
            ("DELETE", "/v1/apps/\(Self.app)", nil),
        ]
        for (method, path, body) in adminCalls {
            Self.expectUnauthorized(
                try api.call(method, path, token: key, json: body), "ingest key on \(method) \(path)", secrets: [key])
        }
        // Nothing was read into a change: the app, its key and its name are as they were.
        #expect(try api.count("SELECT count(*) AS n FROM apps") == 1)
        #expect(try api.count("SELECT count(*) AS n FROM apps WHERE name = 'Cred'") == 1)
        #expect(try api.count("SELECT count(*) AS n FROM api_keys WHERE revoked_at IS NULL") == 1)
        #expect(try api.count("SELECT count(*) AS n FROM categories") == 0)
        #expect(try api.count("SELECT count(*) AS n FROM rules") == 0)
        #expect(try api.count("SELECT count(*) AS n FROM admin_tokens") == 1)
        #expect(try api.ingest(key: key, json: Self.response).status == 202)

        for (label, credential) in [("bootstrap token", TestService.adminToken), ("created token", adminToken)] {
            Self.expectUnauthorized(
                try api.ingest(key: credential, json: Self.response), "\(label) on ingest", secrets: [credential])
            Self.expectUnauthorized(try api.call("GET", "/v1/categories", token: credential), "\(label) on categories")
        }
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 1)

        // Without any credential, admin routes are 401 as well.
        Self.expectUnauthorized(try api.call("GET", "/v1/apps", token: nil), "no credential")
        Self.expectUnauthorized(try api.call("GET", "/v1/apps", token: "not-the-admin-token-000000"), "wrong token")
    }

    @Test("admin tokens made through the API work until revoked; the bootstrap token is unaffected")
    func adminTokens() throws {
        let api = try IOSScenario.makeAPI()
        let created = try api.admin("POST", "/v1/admin-tokens", json: #"{"name": "deploy bot"}"#)
        try #require(created.status == 201, "\(created.text)")
        let token = try #require(created.json["token"] as? String)
        let id = try #require(created.json["id"] as? String)
        #expect(created.json["name"] as? String == "deploy bot")
        #expect(token != TestService.adminToken)

        #expect(try api.call("GET", "/v1/apps", token: token).status == 200)
        let app = try api.call("POST", "/v1/apps", token: token, json: #"{"id": "made-by-bot", "name": "Bot"}"#)
        #expect(app.status == 201)
        let listed = try api.call("GET", "/v1/admin-tokens", token: token)
        #expect(listed.status == 200)
        let items = listed.json["items"] as? [[String: Any]] ?? []
        #expect(items.map { $0["id"] as? String } == [id])
        #expect(items.first?["revokedAt"] is NSNull)
        #expect(!listed.text.contains(token))
        #expect(items.first?["token"] == nil)

        #expect(try api.admin("DELETE", "/v1/admin-tokens/\(id)").status == 204)
        Self.expectUnauthorized(try api.call("GET", "/v1/apps", token: token), "revoked admin token", secrets: [token])
        Self.expectUnauthorized(
            try api.call("POST", "/v1/apps", token: token, json: #"{"id": "after-revoke", "name": "x"}"#),
            "revoked admin token creating")
        #expect(try api.count("SELECT count(*) AS n FROM apps WHERE id = 'after-revoke'") == 0)
        #expect(try api.admin("DELETE", "/v1/admin-tokens/\(id)").status == 404)
        let after = try api.admin("GET", "/v1/admin-tokens")
        #expect((after.json["items"] as? [[String: Any]])?.first?["revokedAt"] is String)
        #expect(try api.admin("GET", "/v1/apps").status == 200)

        // Revocation is per token: one made afterwards works.
        let other = try #require(
            try api.admin("POST", "/v1/admin-tokens", json: #"{"name": "other"}"#).json["token"] as? String)
        #expect(try api.call("GET", "/v1/apps/made-by-bot", token: other).status == 200)
    }

    @Test("keys and tokens are stored only as SHA-256 digests; no row holds a secret")
    func storedHashed() throws {
        let api = try IOSScenario.makeAPI()
        let (_, first) = try Self.createApp(api)
        let second = try #require(try api.admin("POST", "/v1/apps/\(Self.app)/keys").json["secret"] as? String)
        let token = try #require(
            try api.admin("POST", "/v1/admin-tokens", json: #"{"name": "hashed"}"#).json["token"] as? String)
        #expect(try api.ingest(key: first, json: Self.response).status == 202)

        for secret in [first, second] {
            #expect(
                try api.count(
                    "SELECT count(*) AS n FROM api_keys WHERE secret_hash = sha256(convert_to(\(secret), 'UTF8'))") == 1
            )
            #expect(
                try api.count(
                    "SELECT count(*) AS n FROM api_keys WHERE encode(secret_hash, 'hex') = \(secret) OR encode(secret_hash, 'escape') = \(secret)"
                )
                    == 0)
        }
        #expect(try api.count("SELECT count(*) AS n FROM api_keys WHERE length(secret_hash) = 32") == 2)
        #expect(
            try api.count(
                "SELECT count(*) AS n FROM admin_tokens WHERE token_hash = sha256(convert_to(\(token), 'UTF8'))") == 1)
        #expect(try api.count("SELECT count(*) AS n FROM admin_tokens WHERE length(token_hash) = 32") == 1)
        #expect(try api.count("SELECT count(*) AS n FROM admin_tokens WHERE encode(token_hash, 'hex') = \(token)") == 0)

        // No column of any row of these tables, read as text, contains a secret.
        for secret in [first, second, token, TestService.adminToken] {
            let holders = try api.count(
                """
                SELECT (SELECT count(*) FROM api_keys t WHERE strpos(row_to_json(t)::text, \(secret)) > 0)
                    + (SELECT count(*) FROM admin_tokens t WHERE strpos(row_to_json(t)::text, \(secret)) > 0)
                    + (SELECT count(*) FROM apps t WHERE strpos(row_to_json(t)::text, \(secret)) > 0)
                    + (SELECT count(*) FROM responses t WHERE strpos(row_to_json(t)::text, \(secret)) > 0)
                    + (SELECT count(*) FROM followups t WHERE strpos(row_to_json(t)::text, \(secret)) > 0) AS n
                """)
            #expect(holders == 0, "a row holds a secret")
        }
        // The app as the API shows it never carries a secret, nor does the key listing on creation.
        let shown = try api.admin("GET", "/v1/apps/\(Self.app)")
        #expect(shown.status == 200)
        for secret in [first, second, Self.webhookSecret] { #expect(!shown.text.contains(secret)) }
        #expect((shown.json["webhook"] as? [String: Any])?["secretConfigured"] as? Bool == true)
    }
}
