import Foundation
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

/// Signed replies from outside: devices registered with their P-256 keys, replies signed over their canonical
/// bytes, forged and replayed ones, and categories, rules and sends that require a signature. Asserts the
/// statuses answered and what was stored.
@Suite("Signed replies: every answer proven to come from its device")
struct SignedReplyTests {
    final class Bed: @unchecked Sendable {
        // @unchecked: immutable after init; its parts are thread-safe.
        let api: TestAPI
        let app = "signed"
        let ingestKey: String

        init() throws {
            api = try TestAPI {
                $0.deviceRateLimitPerSecond = 100_000
                $0.rateLimitPerSecond = 100_000
            }
            ingestKey = try api.createApp(app)
            for (category, required) in [("invite", false), ("approve", true)] {
                let put = try api.admin(
                    "PUT", "/v1/apps/\(app)/categories/\(category)",
                    json:
                        #"{"actions": [{"identifier": "OK", "title": "OK"}], "subjectKey": "eventId", "requireSignedReplies": \#(required)}"#
                )
                try #require([200, 201].contains(put.status), "\(put.text)")
            }
            // Accepting keeps a webhook for an hour: its body is written with the reply, never sent in the test.
            let rule = try api.admin(
                "POST", "/v1/apps/\(app)/rules",
                json:
                    #"{"id": "ok", "match": {"action": "OK"}, "handler": {"type": "accept"}, "followUps": [{"channel": "webhook", "url": "https://receiver.example/hook", "delaySeconds": 3600}]}"#
            )
            try #require(rule.status == 201, "\(rule.text)")
        }

        /// Registers `token` (server side, no user) with `signer`'s key; returns the device as stored.
        @discardableResult
        func register(_ token: String, _ signer: DeviceSigner?) throws -> [String: Any] {
            let key = signer.map { #", "publicKey": "\#($0.publicKey)""# } ?? ""
            let answer = try api.admin(
                "PUT", "/v1/apps/\(app)/devices/\(token)", json: #"{"environment": "sandbox"\#(key)}"#)
            try #require(answer.status == 200, "\(answer.text)")
            return answer.json
        }

        /// A reply body from `token`, answered now.
        func body(
            _ token: String, category: String = "invite", text: String? = nil, notification: (String, Int)? = nil
        ) -> [String: Any] {
            var userInfo: [String: Any] = ["aps": ["category": category], "eventId": "42"]
            if let notification { userInfo["actionhook"] = ["n": notification.0, "d": notification.1] }
            var body: [String: Any] = [
                "actionIdentifier": "OK", "deviceToken": token, "userInfo": userInfo,
                "responseId": UUID().uuidString.lowercased(), "respondedAt": Self.now(),
            ]
            if let text { body["userText"] = text }
            return body
        }

        static func now() -> String {
            let formatter = ISO8601DateFormatter()
            formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
            return formatter.string(from: Date())
        }

        func post(_ body: [String: Any], signature: String?, headers: [(String, String)] = []) throws -> TestResponse {
            let json = String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self)
            return try api.ingest(
                key: ingestKey, json: json,
                headers: headers + (signature.map { [("ActionHook-Reply-Signature", $0)] } ?? []))
        }

        /// The stored signature of the reply `id`: (status, key).
        func stored(_ id: Any?) throws -> (String?, String?) {
            let id = try #require(id as? String)
            let row = try #require(
                try api.query("SELECT signature, signature_key FROM responses WHERE id = \(id)::uuid").first)
            return (try row.decode("signature", as: String?.self), try row.decode("signature_key", as: String?.self))
        }

        func outcome(_ id: Any?) throws -> String? {
            let id = try #require(id as? String)
            return try api.query("SELECT outcome FROM responses WHERE id = \(id)::uuid").first?.decode("outcome")
        }
    }

    /// What concurrent races hand back.
    final class Collected<Item>: @unchecked Sendable {
        // @unchecked: every access holds the lock.
        private let lock = NSLock()
        private var stored: [Item] = []

        func append(_ item: Item) { lock.withLock { stored.append(item) } }
        var items: [Item] { lock.withLock { stored } }
    }

    static func device() -> String {
        (0..<32).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
    }

    @Test(
        "a signed reply is valid; changed text, another device's key or signature, another notification or another key are invalid"
    )
    func statuses() throws {
        let bed = try Bed()
        let (phone, other) = (Self.device(), Self.device())
        let (phoneKey, otherKey) = (DeviceSigner(), DeviceSigner())
        let registered = try bed.register(phone, phoneKey)
        #expect((registered["publicKey"] as? [String: Any])?["fingerprint"] as? String == phoneKey.fingerprint)
        try bed.register(other, otherKey)

        let body = bed.body(phone, text: "Bin gleich da")
        let valid = try bed.post(body, signature: try phoneKey.header(app: bed.app, body: body))
        #expect(valid.status == 202, "\(valid.text)")
        #expect((valid.json["signature"] as? [String: Any])?["status"] as? String == "valid")
        #expect((valid.json["signature"] as? [String: Any])?["key"] as? String == phoneKey.fingerprint)
        #expect(try bed.stored(valid.json["id"]) == ("valid", phoneKey.fingerprint))
        // The webhook the reply made carries the verification in its body.
        let payload = try #require(
            try bed.api.query(
                "SELECT payload::text AS p FROM followups WHERE app_id = 'signed' AND response_id = \(valid.json["id"] as? String ?? "")::uuid"
            ).first?.decode("p", as: String.self))
        let response = try #require(
            (try JSONSerialization.jsonObject(with: Data(payload.utf8)) as? [String: Any]).flatMap {
                (($0["body"] as? [String: Any])?["data"] as? [String: Any])?["response"] as? [String: Any]
            })
        #expect((response["signature"] as? [String: Any])?["key"] as? String == phoneKey.fingerprint)

        // Changed on the way: the text.
        var changed = bed.body(phone, text: "Bin gleich da")
        let header = try phoneKey.header(app: bed.app, body: changed)
        changed["userText"] = "Komme nicht"
        let tampered = try bed.post(changed, signature: header)
        #expect(tampered.status == 202)
        #expect((tampered.json["signature"] as? [String: Any])?["status"] as? String == "invalid")
        #expect(try bed.stored(tampered.json["id"]) == ("invalid", nil))

        // The phone's reply signed with the other device's key, named as that key and as the phone's.
        let forgedBody = bed.body(phone)
        let asOther = try bed.post(forgedBody, signature: try otherKey.header(app: bed.app, body: forgedBody))
        #expect(try bed.stored(asOther.json["id"]) == ("invalid", nil))
        let forgedBody2 = bed.body(phone)
        let claiming = try bed.post(
            forgedBody2,
            signature: try otherKey.header(app: bed.app, body: forgedBody2, claiming: phoneKey.fingerprint))
        #expect(try bed.stored(claiming.json["id"]) == ("invalid", nil))

        // A signed reply to one notification, replayed for another under a new Idempotency-Key.
        let first = bed.body(phone, notification: (UUID().uuidString.lowercased(), 0))
        let firstHeader = try phoneKey.header(app: bed.app, body: first)
        var replayed = first
        replayed["userInfo"] = bed.body(phone, notification: (UUID().uuidString.lowercased(), 0))["userInfo"]
        let replay = try bed.post(replayed, signature: firstHeader, headers: [("Idempotency-Key", "replay-1")])
        #expect(try bed.stored(replay.json["id"]) == ("invalid", nil))
        // The same reply exactly, under another Idempotency-Key than its responseId: a copy, not a new reply.
        let copy = try bed.post(first, signature: firstHeader, headers: [("Idempotency-Key", "copy-1")])
        #expect(try bed.stored(copy.json["id"]) == ("invalid", nil))
        // Sent as it was signed: valid; sent again: the same reply, replayed.
        let original = try bed.post(first, signature: firstHeader)
        #expect(try bed.stored(original.json["id"]) == ("valid", phoneKey.fingerprint))
        let again = try bed.post(first, signature: firstHeader)
        #expect(again.status == 200)
        #expect(again.json["id"] as? String == original.json["id"] as? String)

        // Unsigned replies record nothing; a malformed header is invalid.
        let unsigned = try bed.post(bed.body(phone), signature: nil)
        #expect(unsigned.json["signature"] == nil)
        #expect(try bed.stored(unsigned.json["id"]) == (nil, nil))
        let malformed = try bed.post(bed.body(phone), signature: "sig=abc")
        #expect(try bed.stored(malformed.json["id"]) == ("invalid", nil))
        // The history shows the same.
        let listed = try bed.api.admin("GET", "/v1/apps/signed/responses?limit=100")
        let statuses = (listed.json["items"] as? [[String: Any]] ?? []).map {
            ($0["signature"] as? [String: Any])?["status"] as? String ?? "absent"
        }
        #expect(statuses.filter { $0 == "valid" }.count == 2)
        #expect(statuses.filter { $0 == "invalid" }.count == 6)
        #expect(statuses.filter { $0 == "absent" }.count == 1)
    }

    @Test(
        "with signatures required (category or rule), an unsigned or invalid reply is 403, stored unverified, and acts on nothing"
    )
    func required() throws {
        let bed = try Bed()
        let phone = Self.device()
        let key = DeviceSigner()
        try bed.register(phone, key)

        let unsigned = bed.body(phone, category: "approve")
        let refused = try bed.post(unsigned, signature: nil)
        #expect(refused.status == 403)
        #expect(refused.headers["content-type"]?.hasPrefix("application/problem+json") == true)
        #expect(refused.json["type"] as? String == "https://actionhook.dev/problems/reply-signature-required")
        #expect(try bed.outcome(refused.json["id"]) == "unverified")
        // Replayed as it was answered.
        let replay = try bed.post(unsigned, signature: nil)
        #expect(replay.status == 403)
        #expect(replay.headers["idempotent-replayed"] == "true")

        let forged = bed.body(phone, category: "approve")
        let invalid = try bed.post(forged, signature: try DeviceSigner().header(app: bed.app, body: forged))
        #expect(invalid.status == 403)
        #expect((invalid.json["signature"] as? [String: Any])?["status"] as? String == "invalid")
        #expect(try bed.outcome(invalid.json["id"]) == "unverified")

        let genuine = bed.body(phone, category: "approve")
        let accepted = try bed.post(genuine, signature: try key.header(app: bed.app, body: genuine))
        #expect(accepted.status == 202, "\(accepted.text)")
        #expect(accepted.json["outcome"] as? String == "accepted")
        // Only the accepted reply made its webhook.
        #expect(
            try bed.api.count("SELECT count(*) AS n FROM followups WHERE app_id = 'signed' AND kind = 'rule'") == 1)

        // A rule can require it where its category does not.
        let rule = try bed.api.admin(
            "PUT", "/v1/apps/signed/rules/ok",
            json:
                #"{"id": "ok", "match": {"action": "OK"}, "handler": {"type": "accept"}, "requireSignedReplies": true}"#
        )
        #expect(rule.status == 200, "\(rule.text)")
        #expect(try bed.post(bed.body(phone), signature: nil).status == 403)
        let signed = bed.body(phone)
        #expect(try bed.post(signed, signature: try key.header(app: bed.app, body: signed)).status == 202)
        #expect(
            try bed.api.count("SELECT count(*) AS n FROM responses WHERE app_id = 'signed' AND outcome = 'unverified'")
                == 3)
    }

    @Test(
        "a send that requires signed replies: in 200 races a forger who answers first never wins, and the receipt names the key"
    )
    func races() throws {
        let bed = try Bed()
        let (phone, tablet) = (Self.device(), Self.device())
        let (phoneKey, tabletKey) = (DeviceSigner(), DeviceSigner())
        try bed.register(phone, phoneKey)
        try bed.register(tablet, tabletKey)
        let forgerKey = DeviceSigner()
        @Sendable func send(_ category: String) throws -> String {
            let answer = try bed.api.admin(
                "POST", "/v1/apps/signed/notifications",
                json:
                    #"{"to": [{"deviceToken": "\#(phone)", "recipient": "alice"}, {"deviceToken": "\#(tablet)", "recipient": "alice"}], "category": "\#(category)", "aps": {"alert": "Pay 40 EUR?"}}"#
            )
            try #require(answer.status == 202, "\(answer.text)")
            return try #require(answer.json["id"] as? String)
        }
        // Where signatures are not required, the forger's reply (first) wins: the race it would otherwise win.
        let open = try send("invite")
        let forgedFirst = try bed.post(bed.body(tablet, notification: (open, 1)), signature: nil)
        #expect(forgedFirst.json["outcome"] as? String == "accepted")

        let ids = Collected<(notification: String, forger: TestResponse, genuine: TestResponse)>()
        let failures = Collected<String>()
        DispatchQueue.concurrentPerform(iterations: 200) { index in
            do {
                let id = try send("approve")
                // The forger holds the ingest key: unsigned as the tablet, or signed with its own key, claiming
                // the tablet's key or its own.
                let forged = bed.body(tablet, notification: (id, 1))
                let signature: String? =
                    switch index % 3 {
                    case 0: nil
                    case 1: try forgerKey.header(app: bed.app, body: forged, claiming: tabletKey.fingerprint)
                    default: try forgerKey.header(app: bed.app, body: forged)
                    }
                let forger = try bed.post(forged, signature: signature)
                let genuineBody = bed.body(phone, category: "approve", notification: (id, 0))
                let genuine = try bed.post(genuineBody, signature: try phoneKey.header(app: bed.app, body: genuineBody))
                ids.append((id, forger, genuine))
            } catch {
                failures.append("\(error)")
            }
        }
        #expect(failures.items == [])
        let races = ids.items
        #expect(races.count == 200)
        #expect(races.filter { $0.forger.status == 403 }.count == 200)
        #expect(
            races.filter { $0.genuine.status == 202 && $0.genuine.json["outcome"] as? String == "accepted" }.count
                == 200)
        // Every one answered by the genuine reply, as stored.
        let answeredByGenuine = try bed.api.count(
            """
            SELECT count(*) AS n FROM notifications n JOIN responses r ON r.app_id = n.app_id
                AND r.id = n.answered_response_id
            WHERE n.app_id = 'signed' AND n.signed_replies AND r.device_token = \(phone) AND r.signature = 'valid'
            """)
        #expect(answeredByGenuine == 200)
        #expect(
            try bed.api.count(
                "SELECT count(*) AS n FROM responses WHERE app_id = 'signed' AND outcome = 'unverified' AND device_token = \(tablet)"
            ) == 200)

        let receipt = try bed.api.admin("GET", "/v1/apps/signed/notifications/\(races[0].notification)")
        let answer = try #require(receipt.json["answer"] as? [String: Any])
        #expect((answer["signature"] as? [String: Any])?["key"] as? String == phoneKey.fingerprint)
        #expect(receipt.json["requireSignedReplies"] as? Bool == true)
    }

    @Test(
        "after a key change the old key still verifies queued replies for the window, not past it; removing the device revokes both"
    )
    func keyChange() async throws {
        let bed = try Bed()
        let phone = Self.device()
        let (old, new) = (DeviceSigner(), DeviceSigner())
        try bed.register(phone, old)
        // Queued on the phone, signed with the old key, before the key changed.
        let queued = bed.body(phone)
        let queuedHeader = try old.header(app: bed.app, body: queued)
        let changed = try bed.register(phone, new)
        #expect((changed["publicKey"] as? [String: Any])?["fingerprint"] as? String == new.fingerprint)
        // Registering again without a key keeps it.
        let kept = try bed.register(phone, nil)
        #expect((kept["publicKey"] as? [String: Any])?["fingerprint"] as? String == new.fingerprint)

        #expect(try bed.stored(try bed.post(queued, signature: queuedHeader).json["id"]) == ("valid", old.fingerprint))
        let fresh = bed.body(phone)
        #expect(
            try bed.stored(try bed.post(fresh, signature: try new.header(app: bed.app, body: fresh)).json["id"]) == (
                "valid", new.fingerprint
            ))

        // Past the window (24 hours) the replaced key verifies nothing: another instance's announcement (or the
        // cache's age) makes every instance read the keys again.
        _ = try bed.api.query(
            """
            WITH moved AS (UPDATE devices SET previous_key_retired_at = now() - interval '25 hours'
                WHERE app_id = 'signed' AND token = \(phone) RETURNING token)
            SELECT pg_notify('actionhook_device_keys', 'signed' || chr(31) || token) FROM moved
            """)
        let late = try await Hooks.poll(timeout: .seconds(30)) {
            let body = bed.body(phone)
            return try bed.stored(try bed.post(body, signature: try old.header(app: bed.app, body: body)).json["id"])
                == ("invalid", nil)
        }
        #expect(late)

        // The app signs the device out: neither key verifies, and the row keeps no key.
        let signedOut = try bed.api.call("DELETE", "/v1/devices/\(phone)", token: bed.ingestKey)
        #expect(signedOut.status == 204)
        let afterRemoval = bed.body(phone)
        #expect(
            try bed.stored(
                try bed.post(afterRemoval, signature: try new.header(app: bed.app, body: afterRemoval)).json["id"])
                == ("invalid", nil))
        #expect(
            try bed.api.count(
                "SELECT count(*) AS n FROM devices WHERE app_id = 'signed' AND (public_key IS NOT NULL OR previous_public_key IS NOT NULL)"
            ) == 0)
        // Registered again (signed in again) without a key, it has none.
        let back = try bed.register(phone, nil)
        #expect(back["publicKey"] is NSNull)
    }

    @Test("a registration with a key that is not a P-256 public key is a 422 naming publicKey")
    func badKey() throws {
        let bed = try Bed()
        for key in ["not base64!", Data(repeating: 4, count: 65).base64EncodedString(), "AAAA"] {
            let answer = try bed.api.admin(
                "PUT", "/v1/apps/signed/devices/\(Self.device())",
                json: #"{"environment": "sandbox", "publicKey": "\#(key)"}"#)
            #expect(answer.status == 422)
            #expect((answer.json["errors"] as? [[String: Any]])?.first?["pointer"] as? String == "/publicKey")
        }
        #expect(try bed.api.count("SELECT count(*) AS n FROM devices WHERE app_id = 'signed'") == 0)
    }
}
