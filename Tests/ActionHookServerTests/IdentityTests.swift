import Foundation
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

/// Identity verification from outside: an app whose backend signs user tokens, phones that send them with
/// their replies and registrations, and the tokens a verifier must refuse. Asserts what was stored.
@Suite("Identity: user tokens signed by the app's backend")
struct IdentityTests {
    final class Bed: @unchecked Sendable {
        // @unchecked: immutable after init; its parts are thread-safe.
        let api: TestAPI
        let app: String
        let ingestKey: String
        let es256 = UserTokenMint.es256(kid: "backend-es")
        let rs256: UserTokenMint
        let created: [String: Any]

        init(mode: String, app: String = "id-app") throws {
            api = try TestAPI { $0.deviceRateLimitPerSecond = 10_000 }
            self.app = app
            rs256 = try UserTokenMint.rs256(kid: "backend-rs")
            let answer = try api.admin(
                "POST", "/v1/apps",
                json: #"""
                    {"id": "\#(app)", "identity": {"mode": "\#(mode)", "keys": [\#(es256.keyJSON), \#(rs256.keyJSON),
                        {"kid": "shared", "algorithm": "HS256"}]}}
                    """#)
            try #require(answer.status == 201, "create: \(answer.status) \(answer.text)")
            created = answer.json
            ingestKey = try #require((answer.json["ingestKey"] as? [String: Any])?["secret"] as? String)
        }

        /// The HS256 secret the creation answer showed.
        var sharedSecret: String? { (created["identitySecrets"] as? [String: Any])?["shared"] as? String }

        func reply(token: String?, action: String = "OK", device: String? = nil) throws -> TestResponse {
            var body: [String: Any] = ["actionIdentifier": action, "responseId": UUID().uuidString.lowercased()]
            if let device { body["deviceToken"] = device }
            let json = String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self)
            return try api.ingest(
                key: ingestKey, json: json, headers: token.map { [("ActionHook-User-Token", $0)] } ?? [])
        }

        func register(_ device: String, token: String?, json: String = #"{"environment": "sandbox"}"#) throws
            -> TestResponse
        {
            try api.call(
                "PUT", "/v1/devices/\(device)", token: ingestKey, json: json,
                headers: token.map { [("ActionHook-User-Token", $0)] } ?? [])
        }

        func stored() throws -> [(user: String?, verified: Bool)] {
            try api.query("SELECT user_id, user_verified FROM responses ORDER BY received_at, id").map {
                (try $0.decode("user_id", as: String?.self), try $0.decode("user_verified", as: Bool.self))
            }
        }
    }

    static func device() -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    @Test("required: a reply with a valid token records its verified user; without one it is 401 and nothing is stored")
    func requiredMode() throws {
        let bed = try Bed(mode: "required")
        let accepted = try bed.reply(token: try bed.es256.token(user: "alice", app: bed.app))
        #expect(accepted.status == 202, "\(accepted.text)")
        #expect((accepted.json["user"] as? [String: Any])?["id"] as? String == "alice")
        #expect((accepted.json["user"] as? [String: Any])?["verified"] as? Bool == true)

        let missing = try bed.reply(token: nil)
        #expect(missing.status == 401)
        #expect(missing.json["type"] as? String == "https://actionhook.dev/problems/user-token-required")
        #expect(missing.headers["content-type"]?.hasPrefix("application/problem+json") == true)
        let stored = try bed.stored()
        #expect(stored.count == 1)
        #expect(stored.first?.user == "alice" && stored.first?.verified == true)

        // What the API shows of the stored reply.
        let listed = try bed.api.admin("GET", "/v1/apps/\(bed.app)/responses")
        let first = try #require((listed.json["items"] as? [[String: Any]])?.first)
        #expect((first["user"] as? [String: Any])?["id"] as? String == "alice")
        #expect((first["user"] as? [String: Any])?["verified"] as? Bool == true)
    }

    @Test(
        "forged, expired, not yet valid, wrong-audience, alg none, HS/RS-confused and unknown-kid tokens are refused with 401, nothing stored"
    )
    func refusedTokens() throws {
        let bed = try Bed(mode: "required")
        let other = UserTokenMint.es256(kid: "backend-es")
        var tampered = try bed.es256.token(user: "alice", app: bed.app).split(separator: ".").map(String.init)
        tampered[1] = try UserTokenMint.es256(kid: "x").token(user: "mallory", app: bed.app).split(separator: ".")[1]
            .description
        let cases: [(String, String, String)] = [
            ("signed by another key under a known kid", try other.token(user: "alice", app: bed.app), "signature"),
            ("payload swapped", tampered.joined(separator: "."), "signature"),
            ("expired", try bed.es256.token(user: "alice", app: bed.app, lifetime: -120), "expired"),
            (
                "not yet valid",
                try bed.es256.token(
                    user: "alice", app: bed.app, claims: ["nbf": Int(Date().timeIntervalSince1970) + 600]),
                "nbf"
            ),
            ("another app's audience", try bed.es256.token(user: "alice", app: "other-app"), "aud"),
            ("no exp", try bed.es256.token(user: "alice", app: bed.app, claims: ["exp": NSNull()]), "exp"),
            ("alg none", try UserTokenMint.unsigned(user: "alice", app: bed.app, kid: "backend-es"), "alg"),
            (
                "HS256 over the RSA public key",
                try UserTokenMint.confused(user: "alice", app: bed.app, rsa: bed.rs256), "alg"
            ),
            (
                "unknown kid", try UserTokenMint.es256(kid: "nobody").token(user: "alice", app: bed.app), "kid"
            ),
            ("not a JWT", "not.a.jwt", "well-formed"),
            ("sub too long", try bed.es256.token(user: String(repeating: "u", count: 65), app: bed.app), "sub"),
        ]
        for (name, token, word) in cases {
            let answer = try bed.reply(token: token)
            #expect(answer.status == 401, "\(name): \(answer.status) \(answer.text)")
            #expect(answer.json["type"] as? String == "https://actionhook.dev/problems/invalid-user-token", "\(name)")
            let detail = answer.json["detail"] as? String ?? ""
            #expect(detail.contains(word), "\(name): \(detail)")
            #expect(!answer.text.contains(token), "\(name): the answer repeats the token")
        }
        #expect(try bed.stored().isEmpty)
        // The same keys verify honest tokens of each algorithm, the HS256 secret included.
        let secret = try #require(bed.sharedSecret)
        for mint in [bed.es256, bed.rs256, UserTokenMint(kid: "shared", key: .hs256(secret))] {
            let answer = try bed.reply(token: try mint.token(user: "bob", app: bed.app))
            #expect(answer.status == 202, "\(mint.algorithm): \(answer.text)")
        }
        #expect(try bed.stored().map(\.user) == ["bob", "bob", "bob"])
    }

    @Test("optional: no token is anonymous, a valid one is recorded, an invalid one is still refused")
    func optionalMode() throws {
        let bed = try Bed(mode: "optional")
        #expect(try bed.reply(token: nil).status == 202)
        #expect(try bed.reply(token: try bed.rs256.token(user: "carol", app: bed.app)).status == 202)
        #expect(try bed.reply(token: try bed.rs256.token(user: "carol", app: bed.app, lifetime: -300)).status == 401)
        // A device registers anonymously only where identity is off.
        let anonymous = try bed.register(Self.device(), token: nil)
        #expect(anonymous.status == 401)
        #expect(anonymous.json["type"] as? String == "https://actionhook.dev/problems/user-token-required")
        #expect(try bed.api.count("SELECT count(*) AS n FROM devices") == 0)
        let stored = try bed.stored()
        #expect(stored.count == 2)
        #expect(stored[0].user == nil && stored[0].verified == false)
        #expect(stored[1].user == "carol" && stored[1].verified == true)
    }

    @Test("the HS256 secret is shown once; the app shows only that it is set; a removed key stops verifying at once")
    func keysAndRotation() throws {
        let bed = try Bed(mode: "required")
        let secret = try #require(bed.sharedSecret)
        #expect(secret.hasPrefix("ahu_"))
        let shown = try bed.api.admin("GET", "/v1/apps/\(bed.app)")
        #expect(!shown.text.contains(secret))
        let keys = try #require((shown.json["identity"] as? [String: Any])?["keys"] as? [[String: Any]])
        #expect(keys.map { $0["kid"] as? String } == ["backend-es", "backend-rs", "shared"])
        #expect(keys.last?["secretConfigured"] as? Bool == true)

        let token = try bed.es256.token(user: "dave", app: bed.app)
        #expect(try bed.reply(token: token).status == 202)
        // The backend rolls to the RSA key: the ES256 token, verified (and remembered) a moment ago, is refused.
        let patched = try bed.api.admin(
            "PATCH", "/v1/apps/\(bed.app)",
            json: #"{"identity": {"keys": [\#(bed.rs256.keyJSON), {"kid": "shared", "algorithm": "HS256"}]}}"#)
        #expect(patched.status == 200, "\(patched.text)")
        #expect(patched.json["identitySecrets"] == nil, "an HS256 key kept by kid keeps its secret")
        #expect(try bed.reply(token: token).status == 401)
        let shared = UserTokenMint(kid: "shared", key: .hs256(secret))
        #expect(try bed.reply(token: try shared.token(user: "dave", app: bed.app)).status == 202)
    }

    @Test("identity settings are validated with pointers")
    func invalidSettings() throws {
        let api = try TestAPI()
        let cases: [(String, String)] = [
            (#"{"mode": "sometimes"}"#, "/identity/mode"),
            (#"{"mode": "required", "keys": []}"#, "/identity/keys"),
            (
                #"{"mode": "optional", "keys": [{"kid": "k", "algorithm": "ES256", "publicKey": "nope"}]}"#,
                "/identity/keys/0/publicKey"
            ),
            (
                #"{"mode": "optional", "keys": [{"kid": "k", "algorithm": "PS512", "publicKey": "x"}]}"#,
                "/identity/keys/0/algorithm"
            ),
            (
                #"{"mode": "optional", "keys": [{"kid": "k", "algorithm": "HS256", "secret": "mine"}]}"#,
                "/identity/keys/0/secret"
            ),
            (
                #"{"mode": "optional", "keys": [{"kid": "k", "algorithm": "HS256"}, {"kid": "k", "algorithm": "HS256"}]}"#,
                "/identity/keys/1/kid"
            ),
        ]
        for (index, (identity, pointer)) in cases.enumerated() {
            let answer = try api.admin("POST", "/v1/apps", json: #"{"id": "bad\#(index)", "identity": \#(identity)}"#)
            #expect([400, 422].contains(answer.status), "\(identity): \(answer.status)")
            let pointers = (answer.json["errors"] as? [[String: Any]] ?? []).compactMap { $0["pointer"] as? String }
            #expect(pointers.contains(pointer), "\(identity): \(pointers)")
        }
        #expect(try api.count("SELECT count(*) AS n FROM apps") == 0)
    }

    @Test(
        "the app registers its device under the token's user; the ingest key alone cannot, nor name a user, nor take a user's device"
    )
    func deviceRegistration() throws {
        let bed = try Bed(mode: "required")
        let phone = Self.device()
        let alice = try bed.es256.token(user: "alice", app: bed.app)
        #expect(try bed.register(phone, token: nil).status == 401)
        let named = try bed.register(phone, token: alice, json: #"{"environment": "sandbox", "user": "mallory"}"#)
        #expect(named.status == 422)
        let registered = try bed.register(
            phone, token: alice,
            json:
                #"{"environment": "sandbox", "locale": "de_DE", "timeZone": "Europe/Berlin", "appVersion": "3.0", "osVersion": "18.2", "model": "iPhone16,2"}"#
        )
        #expect(registered.status == 200, "\(registered.text)")
        #expect(registered.json["user"] as? String == "alice")
        #expect(registered.json["environment"] as? String == "sandbox")
        #expect(registered.json["timeZone"] as? String == "Europe/Berlin")
        // The newest registration wins: Bob signs in on the same phone.
        let bob = try bed.es256.token(user: "bob", app: bed.app)
        #expect(
            try bed.register(phone, token: bob, json: #"{"environment": "production"}"#).json["user"] as? String
                == "bob")
        // Alice's token cannot sign Bob's device out; Bob's can.
        let signOut = { (token: String) in
            try bed.api.call(
                "DELETE", "/v1/devices/\(phone)", token: bed.ingestKey, headers: [("ActionHook-User-Token", token)])
        }
        #expect(try signOut(alice).status == 404)
        #expect(try signOut(bob).status == 204)
        #expect(try signOut(bob).status == 204, "a retried sign-out succeeds")
        let rows = try bed.api.query("SELECT user_id, status, reason FROM devices WHERE token = \(phone)")
        #expect(try rows.first?.decode("status", as: String.self) == "removed")
        #expect(try rows.first?.decode("reason", as: String?.self) == "signedOut")
        #expect(try rows.first?.decode("user_id", as: String?.self) == "bob")
    }

    @Test("identity off: anonymous registration, which never takes a device its backend registered to a user")
    func anonymousRegistration() throws {
        let bed = try Bed(mode: "off")
        let serverKey = try #require(
            try bed.api.admin("POST", "/v1/apps/\(bed.app)/keys", json: #"{"scope": "send"}"#).json["secret"] as? String
        )
        let phone = Self.device()
        let anonymous = try bed.register(Self.device(), token: nil)
        #expect(anonymous.status == 200)
        #expect(anonymous.json["user"] is NSNull)
        let byBackend = try bed.api.call(
            "PUT", "/v1/apps/\(bed.app)/devices/\(phone)", token: serverKey,
            json: #"{"user": "erin", "environment": "production"}"#)
        #expect(byBackend.status == 200)
        let taken = try bed.register(phone, token: nil)
        #expect(taken.status == 409, "\(taken.text)")
        let rows = try bed.api.query("SELECT user_id, environment FROM devices WHERE token = \(phone)")
        #expect(try rows.first?.decode("user_id", as: String?.self) == "erin")
        #expect(try rows.first?.decode("environment", as: String?.self) == "production")
        // A token sent to an app with identity off is ignored: the reply is anonymous.
        #expect(try bed.reply(token: try bed.es256.token(user: "erin", app: bed.app)).status == 202)
        #expect(try bed.stored().first?.user == nil)
    }

    @Test("a rule can require a verified user")
    func ruleOnVerifiedUser() throws {
        let bed = try Bed(mode: "optional")
        try Hooks.saveRule(
            bed.api, app: bed.app,
            #"{"id": "verified-only", "match": {"action": "OK", "user": {"verified": true}}, "handler": {"type": "accept"}}"#
        )
        let anonymous = try bed.reply(token: nil)
        #expect(anonymous.json["ruleId"] is NSNull, "\(anonymous.text)")
        let verified = try bed.reply(token: try bed.es256.token(user: "frank", app: bed.app))
        #expect(verified.json["ruleId"] as? String == "verified-only", "\(verified.text)")
        let rule = try bed.api.admin("GET", "/v1/apps/\(bed.app)/rules/verified-only")
        #expect(((rule.json["match"] as? [String: Any])?["user"] as? [String: Any])?["verified"] as? Bool == true)
    }

    @Test("the history filters replies by user: verified ones and those bound to a user's device, no one else's")
    func historyByUser() throws {
        let bed = try Bed(mode: "optional")
        let alice = try bed.reply(token: try bed.es256.token(user: "alice", app: bed.app))
        #expect(alice.status == 202, "\(alice.text)")
        #expect(try bed.reply(token: try bed.es256.token(user: "bob", app: bed.app)).status == 202)
        #expect(try bed.reply(token: nil).status == 202)
        // Without a token, but from the device a send reached as alice's: alice, unverified.
        let phone = Self.device()
        let registered = try bed.api.admin(
            "PUT", "/v1/apps/\(bed.app)/devices/\(phone)", json: #"{"user": "alice", "environment": "sandbox"}"#)
        #expect(registered.status == 200, "\(registered.text)")
        let sent = try bed.api.admin(
            "POST", "/v1/apps/\(bed.app)/notifications", json: #"{"to": [{"user": "alice"}], "aps": {"alert": "Hi"}}"#)
        let sentID = try #require(sent.json["id"] as? String, "\(sent.text)")
        let bound = try bed.api.ingest(
            key: bed.ingestKey,
            json:
                #"{"actionIdentifier": "OK", "deviceToken": "\#(phone)", "userInfo": {"actionhook": {"n": "\#(sentID)", "d": 0}}}"#
        )
        #expect(bound.status == 202, "\(bound.text)")

        func listed(_ query: String) throws -> [(id: String?, user: String?, verified: Bool?)] {
            let answer = try bed.api.admin("GET", "/v1/apps/\(bed.app)/responses\(query)")
            #expect(answer.status == 200, "\(query): \(answer.status) \(answer.text)")
            return (answer.json["items"] as? [[String: Any]] ?? []).map {
                let user = $0["user"] as? [String: Any]
                return ($0["id"] as? String, user?["id"] as? String, user?["verified"] as? Bool)
            }
        }
        let byAlice = try listed("?user=alice")
        #expect(byAlice.map(\.id) == [bound.json["id"] as? String, alice.json["id"] as? String])
        #expect(byAlice.map(\.user) == ["alice", "alice"])
        #expect(byAlice.map(\.verified) == [false, true])
        #expect(try listed("?user=bob").map(\.user) == ["bob"])
        #expect(try listed("?user=nobody").isEmpty)
        #expect(try listed("?user=alice&limit=1").count == 1)
        #expect(try listed("?user=").count == 4, "an empty user filters nothing")
        #expect(try listed("").count == 4)
    }

    @Test("the README's Python example mints a token the service verifies (ES256 and the generated HS256 secret)")
    func pythonExample() throws {
        let bed = try Bed(mode: "required")
        guard case .es256(let privateKey) = bed.es256.key else {
            Issue.record("an ES256 mint")
            return
        }
        let keyFile = FileManager.default.temporaryDirectory.appendingPathComponent("identity-\(UUID()).pem")
        try privateKey.pemRepresentation.write(to: keyFile, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(at: keyFile) }
        let secret = try #require(bed.sharedSecret)
        let runs: [(user: String, arguments: [String])] = [
            ("grace", ["--kid", "backend-es", "--key", keyFile.path]),
            ("heidi", ["--kid", "shared", "--algorithm", "HS256", "--key-text", secret]),
        ]
        for run in runs {
            let token = try Self.runExample(["--app", bed.app, "--user", run.user] + run.arguments)
            let answer = try bed.reply(token: token)
            #expect(answer.status == 202, "\(run.user): \(answer.text)")
        }
        #expect(try bed.stored().map(\.user) == ["grace", "heidi"])
        #expect(try bed.stored().allSatisfy(\.verified))
    }

    /// Runs examples/identity/mint_user_token.py with the test venv's Python (scripts/install-deps.sh puts
    /// PyJWT there) and returns what it printed.
    static func runExample(_ arguments: [String]) throws -> String {
        let root = Repository.root
        let process = Process()
        process.executableURL = root.appendingPathComponent(".build-tools/venv/bin/python3")
        process.arguments = [root.appendingPathComponent("examples/identity/mint_user_token.py").path] + arguments
        let output = Pipe()
        process.standardOutput = output
        try process.run()
        let printed = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        try #require(process.terminationStatus == 0, "mint_user_token.py exited \(process.terminationStatus)")
        return String(decoding: printed, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
