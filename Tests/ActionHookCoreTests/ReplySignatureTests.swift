import ActionHookCore
import Crypto
import Foundation
import Testing

/// The reply signature's bytes, header and checks, against the vectors Python's `cryptography` made
/// (`Tests/Fixtures/reply-signatures/vectors.json`), which ActionHookKit's tests read too.
@Suite("Reply signatures: the signed bytes, the header, the checks")
struct ReplySignatureTests {
    struct Vectors: Decodable {
        struct Vector: Decodable {
            var name: String
            var message: String
            var signature: String
            var header: String
        }
        var privateKeyPEM: String
        var publicKey: String
        var publicKeyDER: String
        var fingerprint: String
        var app: String
        var vectors: [Vector]
    }

    static let fixture = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .appendingPathComponent("Fixtures/reply-signatures/vectors.json")

    static func load() throws -> (Vectors, [JSONValue]) {
        let data = try Data(contentsOf: fixture)
        let vectors = try JSONDecoder().decode(Vectors.self, from: data)
        let replies = try JSONParser.parse(Array(data)).value(atPath: "vectors")?.arrayValue ?? []
        return (vectors, replies.compactMap { $0.value(atPath: "reply") })
    }

    static func check(
        _ header: String?, _ response: NotificationResponse, app: String = "calendar",
        keys: [String: DevicePublicKey], now: Date? = nil
    ) -> SignatureCheck {
        ReplySignature.check(
            header: header, appID: app, response: response, now: now ?? response.respondedAt ?? Date(),
            windowSeconds: 86_400
        ) { _ in keys }
    }

    @Test(
        "each vector's reply, decoded as the server decodes it, encodes to the vector's bytes, and its signature verifies"
    )
    func vectors() throws {
        let (vectors, replies) = try Self.load()
        try #require(vectors.vectors.count == replies.count && replies.count >= 3)
        let key = try #require(DevicePublicKey(base64: vectors.publicKey))
        #expect(key.fingerprint == vectors.fingerprint)
        // The DER form is the same key.
        #expect(DevicePublicKey(base64: vectors.publicKeyDER) == key)
        for (vector, reply) in zip(vectors.vectors, replies) {
            let response = try NotificationResponse.decode(reply)
            let message = try ReplySignature.message(appID: vectors.app, response: response).get()
            #expect(String(decoding: message, as: UTF8.self) == vector.message, "\(vector.name)")
            let check = Self.check(vector.header, response, keys: [key.fingerprint: key])
            #expect(check == .valid(key: vectors.fingerprint), "\(vector.name)")
        }
    }

    @Test(
        "a signature made here with swift-crypto verifies, and one over changed fields, another app or another key does not"
    )
    func tampering() throws {
        let (vectors, replies) = try Self.load()
        let privateKey = try P256.Signing.PrivateKey(pemRepresentation: vectors.privateKeyPEM)
        let key = try #require(DevicePublicKey(bytes: Array(privateKey.publicKey.x963Representation)))
        let other = P256.Signing.PrivateKey()
        let otherKey = try #require(DevicePublicKey(bytes: Array(other.publicKey.x963Representation)))
        let keys = [key.fingerprint: key, otherKey.fingerprint: otherKey]
        let response = try NotificationResponse.decode(replies[1])
        func header(_ signer: P256.Signing.PrivateKey, _ response: NotificationResponse) throws -> String {
            let bytes = try ReplySignature.message(appID: "calendar", response: response).get()
            let fingerprint = DevicePublicKey.fingerprint(x963: Array(signer.publicKey.x963Representation))
            return ReplySignature.Header.text(
                key: fingerprint, signature: Array(try signer.signature(for: bytes).rawRepresentation))
        }
        let signed = try header(privateKey, response)
        #expect(Self.check(signed, response, keys: keys) == .valid(key: key.fingerprint))

        var changed = response
        changed.userText = "typed on the way"
        #expect(Self.check(signed, changed, keys: keys) == .invalid(.badSignature))
        changed = response
        changed.actionIdentifier = "decline"
        #expect(Self.check(signed, changed, keys: keys) == .invalid(.badSignature))
        changed = response
        changed.userInfo["actionhook"] = .object([
            "n": .string("0193a1e8-2b7c-7a4e-9f10-0123456789ac"), "d": .integer(3), "exp": .integer(1_796_000_000),
        ])
        #expect(Self.check(signed, changed, keys: keys) == .invalid(.badSignature), "another notification")
        changed = response
        changed.userInfo["actionhook"] = .object([
            "n": .string("0193a1e8-2b7c-7a4e-9f10-0123456789ab"), "d": .integer(4), "exp": .integer(1_796_000_000),
        ])
        #expect(Self.check(signed, changed, keys: keys) == .invalid(.badSignature), "another device position")
        #expect(Self.check(signed, response, app: "other", keys: keys) == .invalid(.badSignature))
        // Signed by another key under this key's fingerprint; and a key the device does not have.
        let forged = try header(other, response).replacingOccurrences(
            of: otherKey.fingerprint, with: key.fingerprint)
        #expect(Self.check(forged, response, keys: keys) == .invalid(.badSignature))
        #expect(Self.check(signed, response, keys: [otherKey.fingerprint: otherKey]) == .invalid(.unknownKey))
        // Answered longer ago than the window: a replay could no longer be told by its responseId.
        #expect(
            Self.check(signed, response, keys: keys, now: response.respondedAt!.addingTimeInterval(86_401))
                == .invalid(.stale))
    }

    @Test("absent, malformed headers and replies the encoding cannot carry")
    func refusals() throws {
        let (vectors, replies) = try Self.load()
        let key = try #require(DevicePublicKey(base64: vectors.publicKey))
        let keys = [key.fingerprint: key]
        let response = try NotificationResponse.decode(replies[0])
        #expect(Self.check(nil, response, keys: keys) == .absent)
        let signature = vectors.vectors[0].signature
        for header in [
            "", "key=\(key.fingerprint)", "sig=\(signature)", "key=\(key.fingerprint.uppercased()), sig=\(signature)",
            "key=\(key.fingerprint), sig=AAAA", "key=\(key.fingerprint), sig=\(signature), sig=\(signature)",
            "key=\(key.fingerprint); sig=\(signature)", "v1 key=\(key.fingerprint), sig=\(signature)",
        ] {
            #expect(Self.check(header, response, keys: keys) == .invalid(.malformedHeader), "\(header)")
        }
        for member in [\NotificationResponse.responseId, \.deviceToken] {
            var missing = response
            missing[keyPath: member] = nil
            #expect(Self.check(vectors.vectors[0].header, missing, keys: keys) == .invalid(.missingField))
        }
        var undated = response
        undated.respondedAt = nil
        #expect(Self.check(vectors.vectors[0].header, undated, keys: keys) == .invalid(.missingField))
        var twoLines = response
        twoLines.actionIdentifier = "accept\nresponseId=x"
        #expect(Self.check(vectors.vectors[0].header, twoLines, keys: keys) == .invalid(.unencodable))
        // Kept under its responseId: another Idempotency-Key would store a copy of it as a new reply.
        #expect(
            ReplySignature.check(
                header: vectors.vectors[0].header, appID: "calendar", response: response, idempotencyKey: "other",
                now: response.respondedAt!, windowSeconds: 86_400, keys: { _ in keys }) == .invalid(.keyMismatch))
        #expect(DevicePublicKey(base64: "not base64") == nil)
        #expect(DevicePublicKey(base64: Data(repeating: 4, count: 65).base64EncodedString()) == nil)
    }
}
