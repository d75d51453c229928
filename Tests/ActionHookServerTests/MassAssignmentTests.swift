import ActionHookCore
import ActionHookDelivery
import ActionHookServer
import Foundation
import Logging
import MicroHTTPD
import Postgres
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

/// F7: unknown or server-owned fields in admin bodies are 422s with the field's pointer and change
/// nothing; secrets (APNs key, webhook secret, ingest key, admin token) are never returned after creation.
/// F11: a full flow at trace level logs none of the seeded secrets, tokens or texts.
@Suite("Mass assignment and secrets (F7, F11)", .serialized)
struct MassAssignmentTests {
    /// Members a client must not set on an app, with the pointer the 422 names.
    static var appForbidden: [(String, Any, String)] {
        [
            ("createdAt", "2020-01-01T00:00:00Z", "/createdAt"),
            ("updatedAt", "2020-01-01T00:00:00Z", "/updatedAt"),
            ("ingestKey", ["id": UUID().uuidString, "secret": "ahk_forged"], "/ingestKey"),
            ("ingestKeys", [] as [Any], "/ingestKeys"),
            ("webhookSecret", "whsec_" + Data(repeating: 7, count: 32).base64EncodedString(), "/webhookSecret"),
            ("etag", "\"1\"", "/etag"),
            ("version", 3, "/version"),
            ("isAdmin", true, "/isAdmin"),
            ("webhookDisabledAt", "2020-01-01T00:00:00Z", "/webhookDisabledAt"),
            ("a/b~c", 1, "/a~1b~0c"),
        ]
    }

    @Test("POST /v1/apps: unknown and server-owned members are 422 with their pointer; no app is created")
    func createApp() throws {
        let api = try TestAPI()
        let pem = Secrets.privateKeyPEM()
        var cases: [([String: Any], String)] = Self.appForbidden.map { name, value, pointer in
            (["id": "forged", "name": "Forged", name: value], pointer)
        }
        let apns: [String: Any] = [
            "teamId": "ABCDE12345", "keyId": "KEY1234567", "privateKey": pem, "topic": "com.example.app",
            "environment": "sandbox",
        ]
        cases.append(
            (
                ["id": "forged", "apns": apns.merging(["privateKeyConfigured": true]) { $1 }],
                "/apns/privateKeyConfigured"
            ))
        cases.append((["id": "forged", "apns": apns.merging(["createdAt": "x"]) { $1 }], "/apns/createdAt"))
        let webhook: [String: Any] = ["url": "https://hooks.example.com/h"]
        for (name, pointer) in [
            ("secretConfigured", "/webhook/secretConfigured"), ("disabled", "/webhook/disabled"),
            ("signingKey", "/webhook/signingKey"),
        ] {
            cases.append((["id": "forged", "webhook": webhook.merging([name: true]) { $1 }], pointer))
        }
        for (body, pointer) in cases {
            let response = try api.admin("POST", "/v1/apps", json: Secrets.json(body))
            #expect(response.status == 422, "\(pointer): \(response.text)")
            #expect(response.headers["content-type"] == "application/problem+json")
            #expect(Secrets.pointers(response).contains(pointer), "\(pointer) not in \(response.text)")
            #expect(try api.count("SELECT count(*) AS n FROM apps") == 0, "\(pointer) created an app")
            #expect(!Secrets.leaks(response.text, pem), "a 422 echoed the APNs key")
        }
        // Positive control: the same body without the forbidden member is accepted.
        let accepted = try api.admin("POST", "/v1/apps", json: Secrets.json(["id": "forged", "apns": apns]))
        #expect(accepted.status == 201)
    }

    @Test("PATCH /v1/apps/{app}: id and server-owned members are 422; the row is unchanged")
    func patchApp() throws {
        let api = try TestAPI()
        _ = try api.createApp("patched", extra: #""webhook":{"url":"https://hooks.example.com/h"}"#)
        let before = try Secrets.appRow(api, "patched")
        var cases: [([String: Any], String)] = Self.appForbidden.map { name, value, pointer in
            (["name": "Changed", name: value], pointer)
        }
        cases.append((["id": "patched"], "/id"))
        cases.append((["id": "other", "name": "Changed"], "/id"))
        cases.append((["webhook": ["url": "https://other.example.com/h", "disabled": false]], "/webhook/disabled"))
        cases.append((["webhook": ["secretConfigured": false]], "/webhook/secretConfigured"))
        cases.append(
            (["apns": ["topic": "com.example.x", "privateKeyConfigured": true]], "/apns/privateKeyConfigured"))
        for (body, pointer) in cases {
            let response = try api.admin("PATCH", "/v1/apps/patched", json: Secrets.json(body))
            #expect(response.status == 422, "\(pointer): \(response.text)")
            #expect(Secrets.pointers(response).contains(pointer), "\(pointer) not in \(response.text)")
            #expect(try Secrets.appRow(api, "patched") == before, "\(pointer) changed the app")
        }
        #expect(try api.count("SELECT count(*) AS n FROM apps WHERE id = 'other'") == 0)
        let control = try api.admin("PATCH", "/v1/apps/patched", json: #"{"name":"Changed"}"#)
        #expect(control.status == 200)
        #expect(try Secrets.appRow(api, "patched") != before)
    }

    @Test("PUT categories: server-owned and unknown members are 422; the row is unchanged, none created")
    func putCategory() throws {
        let api = try TestAPI()
        _ = try api.createApp("cats")
        let valid: [String: Any] = ["actions": [["identifier": "accept", "title": "Accept"]], "subjectKey": "eventId"]
        #expect(try api.admin("PUT", "/v1/apps/cats/categories/invite", json: Secrets.json(valid)).status == 201)
        let before = try Secrets.categoryRow(api, app: "cats", id: "invite")
        var cases: [([String: Any], String)] = []
        for name in ["createdAt", "updatedAt", "etag", "version", "id", "app", "appId", "unknown"] {
            cases.append((valid.merging([name: "x"]) { $1 }, "/" + name))
        }
        cases.append(
            (
                ["actions": [["identifier": "accept", "title": "Accept", "createdAt": "x"]]], "/actions/0/createdAt"
            ))
        cases.append(
            (
                [
                    "actions": [
                        [
                            "identifier": "reply", "title": "Reply",
                            "textInput": ["buttonTitle": "Send", "placeholder": "", "maxLength": 10],
                        ]
                    ]
                ], "/actions/0/textInput/maxLength"
            ))
        for id in ["invite", "fresh"] {
            for (body, pointer) in cases {
                let response = try api.admin("PUT", "/v1/apps/cats/categories/\(id)", json: Secrets.json(body))
                #expect(response.status == 422, "\(id) \(pointer): \(response.text)")
                #expect(Secrets.pointers(response).contains(pointer), "\(pointer) not in \(response.text)")
            }
        }
        #expect(try Secrets.categoryRow(api, app: "cats", id: "invite") == before)
        #expect(try api.count("SELECT count(*) AS n FROM categories WHERE id = 'fresh'") == 0)
    }

    @Test("POST and PUT rules: server-owned and unknown members are 422; nothing is created or changed")
    func rules() throws {
        let api = try TestAPI()
        _ = try api.createApp("rules")
        let valid: [String: Any] = [
            "id": "r1", "match": ["category": "invite", "userInfo": [["path": "eventId", "op": "exists"]]],
            "handler": ["type": "accept"],
            "followUps": [["channel": "webhook", "url": "https://hooks.example.com/x", "delaySeconds": 0]],
        ]
        #expect(try api.admin("POST", "/v1/apps/rules/rules", json: Secrets.json(valid)).status == 201)
        let before = try Secrets.ruleRow(api, app: "rules", id: "r1")

        func with(_ path: [String], _ name: String) -> [String: Any] {
            func insert(_ value: Any, _ rest: ArraySlice<String>) -> Any {
                guard let key = rest.first else {
                    guard var object = value as? [String: Any] else { return value }
                    object[name] = "x"
                    return object
                }
                if let index = Int(key), var array = value as? [Any] {
                    array[index] = insert(array[index], rest.dropFirst())
                    return array
                }
                guard var object = value as? [String: Any], let member = object[key] else { return value }
                object[key] = insert(member, rest.dropFirst())
                return object
            }
            return insert(valid, path[...]) as? [String: Any] ?? valid
        }
        var cases: [([String: Any], String)] = []
        for name in ["etag", "version", "createdAt", "updatedAt", "app", "appId", "unknown"] {
            cases.append((with([], name), "/" + name))
        }
        cases.append((with(["match"], "createdAt"), "/match/createdAt"))
        cases.append((with(["handler"], "version"), "/handler/version"))
        cases.append((with(["followUps", "0"], "status"), "/followUps/0/status"))
        cases.append((with(["match", "userInfo", "0"], "flags"), "/match/userInfo/0/flags"))
        for (body, pointer) in cases {
            var created = body
            created["id"] = "r2"
            let post = try api.admin("POST", "/v1/apps/rules/rules", json: Secrets.json(created))
            #expect(post.status == 422, "POST \(pointer): \(post.text)")
            #expect(Secrets.pointers(post).contains(pointer), "\(pointer) not in \(post.text)")
            let put = try api.admin(
                "PUT", "/v1/apps/rules/rules/r1", json: Secrets.json(body), headers: [("If-Match", "\"1\"")])
            #expect(put.status == 422, "PUT \(pointer): \(put.text)")
            #expect(Secrets.pointers(put).contains(pointer), "\(pointer) not in \(put.text)")
        }
        #expect(try Secrets.ruleRow(api, app: "rules", id: "r1") == before)
        #expect(try api.count("SELECT count(*) AS n FROM rules WHERE id = 'r2'") == 0)
        // A PUT body's id must name the rule in the path.
        var renamed = valid
        renamed["id"] = "r9"
        let moved = try api.admin("PUT", "/v1/apps/rules/rules/r1", json: Secrets.json(renamed))
        #expect(moved.status == 422)
        #expect(Secrets.pointers(moved).contains("/id"))
        #expect(try Secrets.ruleRow(api, app: "rules", id: "r1") == before)
    }

    @Test("POST /v1/admin-tokens: only name is accepted; other members are 422 and create nothing")
    func adminTokens() throws {
        let api = try TestAPI()
        let cases: [(String, Any, String)] = [
            ("token", "aha_forged", "/token"), ("id", UUID().uuidString, "/id"), ("createdAt", "x", "/createdAt"),
            ("revokedAt", NSNull(), "/revokedAt"), ("tokenHash", "00", "/tokenHash"), ("a/b", 1, "/a~1b"),
        ]
        for (name, value, pointer) in cases {
            let response = try api.admin(
                "POST", "/v1/admin-tokens", json: Secrets.json(["name": "forged", name: value]))
            #expect(response.status == 422, "\(pointer): \(response.text)")
            #expect(Secrets.pointers(response).contains(pointer), "\(pointer) not in \(response.text)")
            #expect(!response.text.contains("aha_forged"))
        }
        #expect(try api.count("SELECT count(*) AS n FROM admin_tokens") == 0)
        let created = try api.admin("POST", "/v1/admin-tokens", json: #"{"name":"ok"}"#)
        #expect(created.status == 201)
        #expect(try api.count("SELECT count(*) AS n FROM admin_tokens") == 1)
    }

    @Test("APNs key and webhook secret are write-only: no answer after the write contains them")
    func secretsAreWriteOnly() throws {
        let api = try TestAPI()
        let pem = Secrets.privateKeyPEM()
        let secret = Secrets.webhookSecret()
        let body: [String: Any] = [
            "id": "secretive", "name": "Secretive",
            "apns": [
                "teamId": "ABCDE12345", "keyId": "KEY1234567", "privateKey": pem, "topic": "com.example.app",
                "environment": "sandbox",
            ],
            "webhook": ["url": "https://hooks.example.com/h", "secret": secret],
        ]
        let created = try api.admin("POST", "/v1/apps", json: Secrets.json(body))
        #expect(created.status == 201)
        #expect(created.json["webhookSecret"] == nil, "a secret the client chose is not echoed")
        let ingestSecret = try #require((created.json["ingestKey"] as? [String: Any])?["secret"] as? String)
        let apnsView = try #require(created.json["apns"] as? [String: Any])
        #expect(apnsView["privateKeyConfigured"] as? Bool == true)
        #expect(apnsView["privateKey"] == nil)
        #expect((created.json["webhook"] as? [String: Any])?["secretConfigured"] as? Bool == true)
        #expect((created.json["webhook"] as? [String: Any])?["secret"] == nil)
        #expect(
            try Secrets.storedSecrets(api, "secretive")
                == Secrets.Stored(privateKey: pem, webhookSecret: secret, topic: "com.example.app"))

        var answers = [("create", created)]
        answers.append(("get", try api.admin("GET", "/v1/apps/secretive")))
        answers.append(("list", try api.admin("GET", "/v1/apps")))
        answers.append(("patch name", try api.admin("PATCH", "/v1/apps/secretive", json: #"{"name":"Renamed"}"#)))

        // PATCH merges: a new topic keeps the key; a new URL keeps the secret.
        let topic = try api.admin("PATCH", "/v1/apps/secretive", json: #"{"apns":{"topic":"com.example.other"}}"#)
        #expect(topic.status == 200)
        #expect((topic.json["apns"] as? [String: Any])?["topic"] as? String == "com.example.other")
        answers.append(("patch topic", topic))
        #expect(
            try Secrets.storedSecrets(api, "secretive")
                == Secrets.Stored(privateKey: pem, webhookSecret: secret, topic: "com.example.other"))
        let url = try api.admin(
            "PATCH", "/v1/apps/secretive", json: #"{"webhook":{"url":"https://hooks.example.com/new"}}"#)
        #expect(url.status == 200)
        #expect(url.json["webhookSecret"] == nil)
        answers.append(("patch url", url))
        #expect(try Secrets.storedSecrets(api, "secretive").webhookSecret == secret)

        // Error answers about the secret fields do not echo them either.
        let badKey = try api.admin(
            "PATCH", "/v1/apps/secretive", json: Secrets.json(["apns": ["privateKey": "not-a-key-" + secret]]))
        #expect(badKey.status == 422)
        #expect(Secrets.pointers(badKey).contains("/apns/privateKey"))
        answers.append(("bad key", badKey))
        let badSecret = try api.admin(
            "PATCH", "/v1/apps/secretive", json: Secrets.json(["webhook": ["secret": String(pem.prefix(90))]]))
        #expect(badSecret.status == 422)
        #expect(Secrets.pointers(badSecret).contains("/webhook/secret"))
        answers.append(("bad secret", badSecret))
        answers.append(("get after", try api.admin("GET", "/v1/apps/secretive")))

        for (name, answer) in answers {
            #expect(!Secrets.leaks(answer.text, pem), "\(name) answer contains the APNs key")
            #expect(!Secrets.leaks(answer.text, secret), "\(name) answer contains the webhook secret")
            #expect(!answer.text.contains("BEGIN PRIVATE KEY"), "\(name)")
            if name != "create" {
                #expect(!answer.text.contains(ingestSecret), "\(name) answer contains the ingest key")
            }
        }

        // `null` removes: the webhook (and its secret) and the APNs credentials.
        let removed = try api.admin("PATCH", "/v1/apps/secretive", json: #"{"webhook":null}"#)
        #expect(removed.status == 200)
        #expect(removed.json["webhook"] is NSNull)
        #expect(
            try Secrets.storedSecrets(api, "secretive")
                == Secrets.Stored(privateKey: pem, webhookSecret: nil, topic: "com.example.other"))
        let noAPNs = try api.admin("PATCH", "/v1/apps/secretive", json: #"{"apns":null}"#)
        #expect(noAPNs.json["apns"] is NSNull)
        #expect(
            try Secrets.storedSecrets(api, "secretive")
                == Secrets.Stored(privateKey: nil, webhookSecret: nil, topic: nil))
    }

    @Test("a generated webhook secret and an ingest key secret appear in the create answer only")
    func generatedSecretsShownOnce() throws {
        let api = try TestAPI()
        let created = try api.admin(
            "POST", "/v1/apps", json: #"{"id":"gen","name":"Gen","webhook":{"url":"https://hooks.example.com/h"}}"#)
        #expect(created.status == 201)
        #expect(created.headers["location"] == "/v1/apps/gen")
        let generated = try #require(created.json["webhookSecret"] as? String)
        #expect(generated.hasPrefix("whsec_"))
        #expect(try Secrets.storedSecrets(api, "gen").webhookSecret == generated)
        let ingestSecret = try #require((created.json["ingestKey"] as? [String: Any])?["secret"] as? String)

        let key = try api.admin("POST", "/v1/apps/gen/keys")
        #expect(key.status == 201)
        let keySecret = try #require(key.json["secret"] as? String)
        #expect(try api.call("GET", "/v1/categories", token: keySecret).status == 200)

        let later = [
            try api.admin("GET", "/v1/apps/gen"), try api.admin("GET", "/v1/apps"),
            try api.admin("PATCH", "/v1/apps/gen", json: #"{"name":"Renamed"}"#),
            try api.admin("PATCH", "/v1/apps/gen", json: #"{"webhook":{"url":"https://hooks.example.com/other"}}"#),
            try api.admin("GET", "/v1/apps/gen/categories"),
        ]
        for answer in later {
            #expect(answer.status == 200)
            #expect(!Secrets.leaks(answer.text, generated), "\(answer.text)")
            #expect(!answer.text.contains(ingestSecret))
            #expect(!answer.text.contains(keySecret))
            #expect(answer.json["webhookSecret"] == nil)
        }
        // Keys are stored hashed: no column holds the secret.
        let plain = try api.count(
            """
            SELECT count(*) AS n FROM api_keys k
            WHERE position(\(ingestSecret) IN k::text) > 0 OR position(\(keySecret) IN k::text) > 0
            """)
        #expect(plain == 0)
    }

    @Test("a full flow at trace level logs no seeded secret, token, user text or device token (F11)")
    func logsCarryNoSecrets() async throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let capture = Secrets.LogCapture()
        let logger = Logger(label: "f11") { label in Secrets.CapturingHandler(label: label, capture: capture) }
        // The worker runs too: it delivers to a closed local port and to an APNs URL nobody answers, so every
        // send fails, is retried once and goes dead, logging whatever it logs on the way.
        let configuration = Configuration(
            http: HTTPServerConfiguration(host: "127.0.0.1", port: 0, threads: 4), database: database.configuration,
            adminToken: TestService.adminToken, logLevel: .trace, shutdownGraceSeconds: 2, workerEnabled: true,
            worker: WorkerConfiguration(
                concurrency: 4, pollInterval: .milliseconds(100), retryPolicy: RetryPolicy(schedule: [0], jitter: 0)),
            webhookTimeoutSeconds: 2, allowPrivateWebhooks: true, apnsURL: "https://127.0.0.1:1")
        let service = ActionHookService(configuration: configuration, logger: logger)
        try service.migrate()
        try service.start()
        var stopped = false
        defer { if !stopped { service.stop() } }

        let pem = Secrets.privateKeyPEM()
        let webhookSecret = Secrets.webhookSecret()
        let userText = "seeded-user-text-" + UUID().uuidString
        let deviceToken = (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let strangerToken = "ahk_seeded-" + UUID().uuidString
        var errorAnswers: [(String, TestResponse)] = []

        func call(
            _ method: String, _ path: String, token: String?, json: String? = nil, headers: [(String, String)] = []
        )
            throws -> TestResponse
        {
            var all = headers
            if let token { all.append(("Authorization", "Bearer \(token)")) }
            let client = try HTTPTestClient(port: service.port)
            let response =
                try json.map { try client.request(method, path, headers: all, json: $0) }
                ?? client.request(method, path, headers: all)
            if response.status >= 400 { errorAnswers.append(("\(method) \(path)", response)) }
            return response
        }
        func admin(_ method: String, _ path: String, json: String? = nil) throws -> TestResponse {
            try call(method, path, token: TestService.adminToken, json: json)
        }

        let created = try admin(
            "POST", "/v1/apps",
            json: Secrets.json([
                "id": "f11", "name": "F11",
                "apns": [
                    "teamId": "ABCDE12345", "keyId": "KEY1234567", "privateKey": pem, "topic": "com.example.app",
                    "environment": "sandbox",
                ],
                "webhook": ["url": "https://hooks.example.com/h", "secret": webhookSecret],
            ]))
        #expect(created.status == 201)
        let ingestKey = try #require((created.json["ingestKey"] as? [String: Any])?["secret"] as? String)
        let token = try admin("POST", "/v1/admin-tokens", json: #"{"name":"f11"}"#)
        let adminToken = try #require(token.json["token"] as? String)
        #expect(try call("GET", "/v1/apps/f11", token: adminToken).status == 200)

        #expect(
            try admin(
                "PUT", "/v1/apps/f11/categories/invite",
                json: Secrets.json([
                    "actions": [
                        [
                            "identifier": "reply", "title": "Reply",
                            "textInput": ["buttonTitle": "Send", "placeholder": "Say something"],
                        ]
                    ], "subjectKey": "eventId",
                ])
            ).status == 201)
        #expect(
            try admin(
                "POST", "/v1/apps/f11/rules",
                json: Secrets.json([
                    "id": "reply", "match": ["category": "invite", "action": "reply"],
                    "handler": ["type": "comment", "maxLength": 100],
                    "followUps": [
                        ["channel": "webhook", "url": "http://127.0.0.1:1/hook", "body": ["text": "{{userText}}"]],
                        [
                            "channel": "apns",
                            "payload": ["aps": ["alert": ["body": "You said {{userText}}"]]],
                        ],
                    ],
                ])
            ).status == 201)

        func response(_ text: Any, token: String? = nil, id: String, extra: [String: Any] = [:]) -> String {
            var body: [String: Any] = [
                "actionIdentifier": "reply", "userText": text, "categoryIdentifier": "invite",
                "notificationIdentifier": "n-1", "userInfo": ["eventId": "42", "aps": ["category": "invite"]],
                "deviceToken": token ?? deviceToken, "responseId": id,
            ]
            body.merge(extra) { $1 }
            return Secrets.json(body)
        }
        let stored = try call("POST", "/v1/responses", token: ingestKey, json: response(userText, id: "ok-1"))
        #expect(stored.status == 202)
        #expect((stored.json["followUps"] as? [Any])?.count == 2)
        #expect(try admin("POST", "/v1/apps/f11/rules/test", json: response(userText, id: "dry")).status == 200)
        #expect(try admin("GET", "/v1/apps/f11/responses").status == 200)
        #expect(try admin("GET", "/v1/apps/f11/followups").status == 200)

        // Error paths that carry the seeds in their requests.
        let failures: [(Int, String, String?, String?)] = [
            (422, "/v1/responses", ingestKey, response(String(repeating: userText, count: 4), id: "long")),
            (422, "/v1/responses", ingestKey, response(userText + String(repeating: "x", count: 4000), id: "huge")),
            (422, "/v1/responses", ingestKey, response(userText, id: "ok-1", extra: ["notificationIdentifier": "n-2"])),
            (422, "/v1/responses", ingestKey, response(userText, id: "unknown", extra: ["comment": userText])),
            (422, "/v1/responses", ingestKey, response(userText, token: "zz" + deviceToken, id: "bad-token")),
            (400, "/v1/responses", ingestKey, response([userText], id: "wrong-type")),
            (400, "/v1/responses", ingestKey, #"{"actionIdentifier":"reply","userText":"\#(userText)"#),
            (401, "/v1/responses", strangerToken, response(userText, id: "stranger")),
            (401, "/v1/responses", webhookSecret, response(userText, id: "webhook-secret-as-key")),
        ]
        for (status, path, credential, body) in failures {
            let answer = try call("POST", path, token: credential, json: body)
            #expect(answer.status == status, "\(path) \(answer.text.prefix(200))")
        }
        let nul = try call("POST", "/v1/responses", token: ingestKey, json: response(userText + "\u{0}", id: "nul"))
        #expect(nul.status < 500, "a NUL in userText answered \(nul.status)")
        #expect(try admin("GET", "/v1/apps/f11/responses?cursor=\(userText)").status == 400)
        #expect(try call("GET", "/v1/apps", token: "seeded-" + userText).status == 401)
        #expect(try call("GET", "/v1/apps", token: webhookSecret).status == 401)
        #expect(
            try admin("PATCH", "/v1/apps/f11", json: Secrets.json(["apns": ["privateKey": "x" + pem]])).status == 422)
        #expect(
            try admin("PATCH", "/v1/apps/f11", json: Secrets.json(["webhook": ["secret": webhookSecret + "!"]]))
                .status == 422)
        #expect(
            try admin(
                "POST", "/v1/apps",
                json: Secrets.json(["id": "f11-copy", "webhook": ["url": "https://h.example.com", "secret": userText]])
            ).status == 422)
        #expect(try admin("PUT", "/v1/apps/f11/categories/x", json: "{\"subjectKey\": \"\(userText)").status == 400)
        #expect(
            try call("DELETE", "/v1/admin-tokens/\(token.json["id"] as? String ?? "")", token: adminToken).status == 204
        )
        #expect(try call("GET", "/v1/apps", token: adminToken).status == 401)

        // Wait until the worker has tried both follow-ups and given up on them.
        let pool = PostgresPool(configuration: database.configuration, size: 1)
        defer { pool.close() }
        let deadline = Date().addingTimeInterval(30)
        var finished = 0
        while Date() < deadline {
            finished = try pool.withConnection {
                try $0.query(
                    "SELECT count(*) AS n FROM followups WHERE status IN ('dead', 'skipped', 'delivered')"
                )[0].decode("n", as: Int.self)
            }
            if finished == 2 { break }
            // Waiting must not hold a thread of the concurrency pool: the worker sends on it.
            try await Task.sleep(for: .milliseconds(200))
        }
        #expect(finished == 2, "the worker did not finish both follow-ups")
        let attempts = try pool.withConnection {
            try $0.query("SELECT count(*) AS n FROM delivery_attempts")[0].decode("n", as: Int.self)
        }
        #expect(attempts >= 2)

        // Malformed HTTP carrying the seeds, for whatever the HTTP layer logs about it.
        let malformed = [
            "GET /v1/apps HTTP/1.1\r\nHost: x\r\nX-Seed \(userText)\r\n\r\n",
            "GET /\(userText) HTTP/9.9\r\nHost: x\r\n\r\n",
            "POST /v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(ingestKey)\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(deviceToken)\r\n\r\n",
            "POST /v1/responses HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(ingestKey)\r\n"
                + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\(userText)\r\n\r\n",
            "GET /v1/apps HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(webhookSecret)\r\n"
                + "X-Long: \(String(repeating: userText, count: 2000))\r\n\r\n",
        ]
        for raw in malformed {
            let client = try HTTPTestClient(port: service.port, timeoutSeconds: 3)
            try? client.send(raw)
            if let answer = try? client.readResponse(), answer.status >= 400 {
                errorAnswers.append(("malformed \(raw.prefix(20))", answer))
            }
        }
        service.stop()
        stopped = true

        let seeds: [(String, String)] =
            [
                ("user text", userText), ("device token", deviceToken), ("webhook secret", webhookSecret),
                ("ingest key", ingestKey), ("admin token", adminToken), ("stranger key", strangerToken),
            ] + Secrets.pemLines(pem).map { ("APNs key line", $0) }
        let logs = capture.text
        // The capture works: it saw the start and the stop of the server and the worker.
        #expect(logs.contains("HTTP server listening"), "the capture saw no log lines")
        #expect(logs.contains("outbox worker stopped"), "\(logs)")
        #expect(capture.count >= 4, "\(logs)")
        for (name, seed) in seeds {
            #expect(!Secrets.leaks(logs, seed), "the logs contain the \(name)")
            for (request, answer) in errorAnswers {
                #expect(!Secrets.leaks(answer.text, seed), "the error answer to \(request) contains the \(name)")
            }
        }
        #expect(errorAnswers.count >= 15)
    }
}

/// Secrets, snapshots and log capture for the tests above.
private enum Secrets: ResponseHelpers {
    /// A fresh P-256 key in PKCS#8 PEM, made with openssl; a fixed test-only key if openssl is missing.
    static func privateKeyPEM() -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/bin/sh")
        process.arguments = ["-c", "openssl ecparam -name prime256v1 -genkey -noout | openssl pkcs8 -topk8 -nocrypt"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        if (try? process.run()) != nil {
            let data = output.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            let text = String(decoding: data, as: UTF8.self)
            if process.terminationStatus == 0, text.hasPrefix("-----BEGIN PRIVATE KEY-----") { return text }
        }
        return """
            -----BEGIN PRIVATE KEY-----
            MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgEnPb0N3q1OKjVvHs
            0yOpEoP372k+t0RipGX63kfrUAuhRANCAAS6v4Zlxa2D8TqZXxcjzQI7agRJ5waJ
            P5Wu8r5A8j64ZYLu0Og5SDpQxgEzgn1TM7HSva4pifKeiaYkLexzYTom
            -----END PRIVATE KEY-----

            """
    }

    /// The base64 lines of a PEM, each specific to the key.
    static func pemLines(_ pem: String) -> [String] {
        pem.split(separator: "\n").map(String.init).filter { !$0.hasPrefix("-----") && $0.count > 20 }
    }

    /// A random `whsec_` secret.
    static func webhookSecret() -> String {
        "whsec_" + Data((0..<32).map { _ in UInt8.random(in: 0...255) }).base64EncodedString()
    }

    /// Whether `text` contains `secret` (or, for a PEM, any of its lines), raw or JSON-escaped.
    static func leaks(_ text: String, _ secret: String) -> Bool {
        let needles = secret.contains("-----BEGIN") ? pemLines(secret) : [secret]
        return needles.contains { needle in
            text.contains(needle) || text.contains(needle.replacingOccurrences(of: "/", with: "\\/"))
        }
    }

    struct Stored: Equatable {
        var privateKey: String?
        var webhookSecret: String?
        var topic: String?
    }

    static func storedSecrets(_ api: TestAPI, _ app: String) throws -> Stored {
        let row = try api.query("SELECT apns_private_key, webhook_secret, apns_topic FROM apps WHERE id = \(app)")[0]
        return Stored(
            privateKey: try row.decode("apns_private_key", as: String?.self),
            webhookSecret: try row.decode("webhook_secret", as: String?.self),
            topic: try row.decode("apns_topic", as: String?.self))
    }

    /// The app's row and its keys, as one digest.
    static func appRow(_ api: TestAPI, _ app: String) throws -> String {
        try api.query(
            """
            SELECT md5((SELECT t::text FROM apps t WHERE t.id = \(app))
                || coalesce((SELECT string_agg(k::text, ',' ORDER BY k.id) FROM api_keys k WHERE k.app_id = \(app)), ''))
                AS h
            """)[0].decode("h", as: String.self)
    }

    static func categoryRow(_ api: TestAPI, app: String, id: String) throws -> String? {
        try api.query("SELECT md5(t::text) AS h FROM categories t WHERE t.app_id = \(app) AND t.id = \(id)")
            .first?.decode("h", as: String.self)
    }

    static func ruleRow(_ api: TestAPI, app: String, id: String) throws -> String? {
        try api.query("SELECT md5(t::text) AS h FROM rules t WHERE t.app_id = \(app) AND t.id = \(id)")
            .first?.decode("h", as: String.self)
    }

    /// Every log line, in a thread-safe buffer.
    final class LogCapture: Sendable {
        private let lines = Mutex<[String]>([])

        func append(_ line: String) {
            lines.withLock { $0.append(line) }
        }

        var text: String { lines.withLock { $0.joined(separator: "\n") } }
        var count: Int { lines.withLock { $0.count } }
    }

    /// A log handler at trace level that writes level, message, metadata and error into a capture.
    struct CapturingHandler: LogHandler {
        let label: String
        let capture: LogCapture
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(event: LogEvent) {
            let merged = metadata.merging(event.metadata ?? [:]) { $1 }
            var line = "\(event.level) \(label) \(event.message)"
            for key in merged.keys.sorted() { line += " \(key)=\(merged[key]!)" }
            if let error = event.error { line += " error=\(error) \(String(reflecting: error))" }
            capture.append(line)
        }
    }
}
