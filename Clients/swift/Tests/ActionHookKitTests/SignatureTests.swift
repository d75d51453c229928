import Foundation
import Testing

@testable import ActionHookKit

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

#if canImport(CryptoKit)
    import CryptoKit
#else
    import Crypto
#endif

/// The vectors the server's tests and these share (`Tests/Fixtures/reply-signatures/vectors.json` in the
/// ActionHook repository, made with Python's `cryptography`).
struct SignatureVectors: Decodable {
    struct Vector: Decodable {
        var name: String
        var reply: JSONValue
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

    /// The reply of `vector` as the package reads a queued body (which always has `userInfo`; the server reads
    /// an absent one as empty).
    static func reply(_ vector: Vector) throws -> Reply {
        guard case .object(var members) = vector.reply else {
            throw DecodingError.typeMismatch(Reply.self, .init(codingPath: [], debugDescription: "not an object"))
        }
        if members["userInfo"] == nil { members["userInfo"] = .object([:]) }
        return try Reply(ingestBody: JSONEncoder().encode(JSONValue.object(members)))
    }

    static func load() throws -> SignatureVectors {
        // This file is Clients/swift/Tests/ActionHookKitTests/SignatureTests.swift in the repository.
        var root = URL(fileURLWithPath: #filePath)
        for _ in 0..<5 { root.deleteLastPathComponent() }
        let file = root.appendingPathComponent("Tests/Fixtures/reply-signatures/vectors.json")
        return try JSONDecoder().decode(SignatureVectors.self, from: Data(contentsOf: file))
    }
}

/// The `key=` and `sig=` of a signature header.
func signatureParts(_ header: String) -> (key: String, signature: Data)? {
    var key: String?
    var signature: Data?
    for part in header.split(separator: ",") {
        let trimmed = part.trimmingCharacters(in: .whitespaces)
        if trimmed.hasPrefix("key=") { key = String(trimmed.dropFirst(4)) }
        if trimmed.hasPrefix("sig=") { signature = Data(base64Encoded: String(trimmed.dropFirst(4))) }
    }
    guard let key, let signature else { return nil }
    return (key, signature)
}

/// Whether `signature` (raw r‖s) verifies over `message` with the public key `x963`.
func verifies(_ signature: Data, _ message: Data, x963: Data) -> Bool {
    guard let key = try? P256.Signing.PublicKey(x963Representation: x963),
        let parsed = try? P256.Signing.ECDSASignature(rawRepresentation: signature)
    else { return false }
    return key.isValidSignature(parsed, for: message)
}

@Suite("Reply signatures: the encoding, the shared vectors")
struct SignatureEncodingTests {
    @Test("each vector's reply encodes to the vector's bytes, and its signature verifies with the vector key")
    func vectors() throws {
        let vectors = try SignatureVectors.load()
        #expect(vectors.vectors.count >= 3)
        let publicKey = try #require(Data(base64Encoded: vectors.publicKey))
        for vector in vectors.vectors {
            let reply = try SignatureVectors.reply(vector)
            let message = try #require(ReplySignature.message(appID: vectors.app, reply: reply), "\(vector.name)")
            #expect(String(decoding: message, as: UTF8.self) == vector.message, "\(vector.name)")
            let signature = try #require(Data(base64Encoded: vector.signature))
            #expect(verifies(signature, message, x963: publicKey), "\(vector.name)")
            #expect(vector.header == ReplySignature.headerValue(fingerprint: vectors.fingerprint, signature: signature))
            // Any change to the signed bytes breaks it.
            var changed = message
            changed[changed.count - 1] ^= 0x01
            #expect(!verifies(signature, changed, x963: publicKey), "\(vector.name)")
        }
    }

    @Test("the vector key's fingerprint, public key and DER are the vector's; a reply it signs here verifies")
    func signWithVectorKey() throws {
        let vectors = try SignatureVectors.load()
        let key = SoftwareDeviceKey(try P256.Signing.PrivateKey(pemRepresentation: vectors.privateKeyPEM))
        #expect(key.publicKeyX963.base64EncodedString() == vectors.publicKey)
        #expect(ReplySignature.fingerprint(x963: key.publicKeyX963) == vectors.fingerprint)
        let der = try #require(Data(base64Encoded: vectors.publicKeyDER))
        #expect(try P256.Signing.PublicKey(derRepresentation: der).x963Representation == key.publicKeyX963)
        for vector in vectors.vectors {
            let reply = try SignatureVectors.reply(vector)
            let header = try #require(
                ReplySignature.header(appID: vectors.app, reply: reply, key: key, fingerprint: vectors.fingerprint))
            let parts = try #require(signatureParts(header))
            #expect(parts.key == vectors.fingerprint)
            #expect(parts.signature.count == 64)
            #expect(verifies(parts.signature, Data(vector.message.utf8), x963: key.publicKeyX963), "\(vector.name)")
        }
    }

    @Test("an RFC 3339 time past the millisecond is cut, not rounded, as the server does")
    func truncatedTime() throws {
        let body =
            #"{"actionIdentifier":"a","respondedAt":"2026-11-28T11:40:46.123999+01:00","responseId":"r","userInfo":{}}"#
        let reply = try Reply(ingestBody: Data(body.utf8))
        #expect(Timestamp.string(from: reply.respondedAt) == "2026-11-28T10:40:46.123Z")
        #expect(Timestamp.truncatingFraction("2026-11-28T10:40:46.5Z") == "2026-11-28T10:40:46.5Z")
        #expect(Timestamp.truncatingFraction("2026-11-28T10:40:46Z") == "2026-11-28T10:40:46Z")
    }

    @Test("a reply without a device token, or with a line feed in a signed value, is not signed")
    func unsignable() {
        let device = String(repeating: "ab", count: 32)
        #expect(ReplySignature.message(appID: "app", reply: Reply(actionIdentifier: "a")) == nil)
        #expect(
            ReplySignature.message(
                appID: "app", reply: Reply(actionIdentifier: "a", deviceToken: device, responseId: "r\nx")) == nil)
        #expect(ReplySignature.message(appID: "a\npp", reply: Reply(actionIdentifier: "a", deviceToken: device)) == nil)
        #expect(ReplySignature.message(appID: "app", reply: Reply(actionIdentifier: "a", deviceToken: device)) != nil)
    }

    @Test("the notification key is signed only as the server reads it: n a UUID, d a whole position")
    func notificationKey() throws {
        let device = String(repeating: "ab", count: 32)
        func lines(_ key: [String: JSONValue]) throws -> [Substring] {
            let reply = Reply(actionIdentifier: "a", userInfo: ["actionhook": .object(key)], deviceToken: device)
            let message = try #require(ReplySignature.message(appID: "app", reply: reply))
            return String(decoding: message, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: false)
                .suffix(2)
        }
        let id = "0193A1E8-2B7C-7A4E-9F10-0123456789AB"
        #expect(
            try lines(["n": .string(id), "d": .number(2)]) == [
                "notification=0193a1e8-2b7c-7a4e-9f10-0123456789ab", "position=2",
            ])
        #expect(try lines(["n": .string("not-a-uuid"), "d": .number(2)]) == ["notification=", "position="])
        #expect(try lines(["n": .string(id), "d": .number(2.5)]) == ["notification=", "position="])
        #expect(try lines(["n": .string(id), "d": .number(-1)]) == ["notification=", "position="])
        #expect(try lines(["n": .string(id)]) == ["notification=", "position="])
    }

    @Test("403 reply-signature-required is a refusal for good; another 403 is tried again")
    func classify403() {
        let required = Data(
            #"{"type":"https://actionhook.dev/problems/reply-signature-required","title":"Reply signature required","status":403}"#
                .utf8)
        guard
            case .refused(403, let problem) = DeliveryOutcome.classify(
                status: 403, body: required, retryAfterHeader: nil)
        else {
            Issue.record("not refused")
            return
        }
        #expect(problem.requiresSignedReply)
        let forbidden = Data(#"{"title":"Forbidden","status":403}"#.utf8)
        #expect(
            DeliveryOutcome.classify(status: 403, body: forbidden, retryAfterHeader: nil)
                == .retry(status: 403, retryAfter: nil))
    }
}

/// The server for signing tests: registers devices (answering the device view with the fingerprint of the
/// `publicKey` it was sent, unless told to answer as a server without keys), and answers replies with `ingest`.
final class KeyServer: HTTPTransport, @unchecked Sendable {
    // @unchecked: every member is only touched under `lock`.
    private let lock = NSLock()
    private var requests: [URLRequest] = []
    private var ingestAnswers: [ScriptedServer.Answer]
    private var showsKeys = true
    /// The public keys registered, in order (X9.63).
    private var keys: [Data] = []

    init(ingest: [ScriptedServer.Answer]) {
        ingestAnswers = ingest
    }

    func script(_ answers: [ScriptedServer.Answer]) { lock.withLock { ingestAnswers = answers } }
    func answerWithoutKeys() { lock.withLock { showsKeys = false } }
    var registered: [Data] { lock.withLock { keys } }
    var replies: [URLRequest] { lock.withLock { requests.filter { $0.url?.path == "/v1/responses" } } }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let url = request.url!
        if url.path.hasPrefix("/v1/devices/") {
            let body = lock.withLock { () -> String in
                requests.append(request)
                guard request.httpMethod == "PUT" else { return "" }
                let object = request.httpBody.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
                guard let text = object?["publicKey"] as? String, let x963 = Data(base64Encoded: text) else {
                    return #"{"publicKey":null}"#
                }
                keys.append(x963)
                guard showsKeys else { return #"{"token":"t"}"# }
                return
                    #"{"publicKey":{"fingerprint":"\#(ReplySignature.fingerprint(x963: x963))","registeredAt":"2026-11-28T10:00:00.000Z"}}"#
            }
            let status = request.httpMethod == "PUT" ? 200 : 204
            return (
                Data(body.utf8), HTTPURLResponse(url: url, statusCode: status, httpVersion: nil, headerFields: [:])!
            )
        }
        let answer = lock.withLock { () -> ScriptedServer.Answer in
            requests.append(request)
            return ingestAnswers.count > 1 ? ingestAnswers.removeFirst() : ingestAnswers[0]
        }
        switch answer {
        case .networkError, .hang:
            throw URLError(.notConnectedToInternet)
        case .status(let status, let body, let headers):
            return (
                Data(body.utf8), HTTPURLResponse(url: url, statusCode: status, httpVersion: nil, headerFields: headers)!
            )
        }
    }
}

let signatureRequired =
    #"{"type":"https://actionhook.dev/problems/reply-signature-required","title":"Reply signature required","status":403,"signature":null}"#

@Suite("Signed replies: the device key, signing in forward, the queue, the 403")
struct SigningClientTests {
    static let token = Data((0..<32).map { UInt8($0) })

    static func client(
        _ server: KeyServer, folder: URL, appID: String? = "calendar", keys: (any DeviceKeyStore)? = nil,
        events: EventLog = EventLog(), uploads: (any BackgroundUploading)? = nil,
        transport: (any HTTPTransport)? = nil
    ) throws -> ActionHookClient {
        let configuration = ActionHookClient.Configuration(
            serverURL: URL(string: "https://actionhook.example.com")!, ingestKey: "ahk_test_key", appID: appID,
            directory: folder, retry: fastRetry, pushEnvironment: .sandbox)
        return try ActionHookClient(
            configuration: configuration, transport: transport ?? server, backgroundUploads: uploads,
            onEvent: events.record, deviceKeys: keys)
    }

    static func register(_ client: ActionHookClient, rotatingKey: Bool = false) async throws {
        try await client.register(
            deviceToken: token, device: DeviceInfo(), provisioningProfile: nil, rotatingKey: rotatingKey)
    }

    /// The bytes the reply a request carries is signed over (its body read back).
    static func message(of request: URLRequest, appID: String = "calendar") throws -> Data {
        let reply = try Reply(ingestBody: try #require(request.httpBody))
        return try #require(ReplySignature.message(appID: appID, reply: reply))
    }

    @Test(
        "registration sends a new key's public half and keeps it once the server shows it; replies are then signed by it"
    )
    func registerAndSign() async throws {
        let server = KeyServer(ingest: [.status(202)])
        let folder = temporaryFolder()
        let client = try Self.client(server, folder: folder)
        #expect(client.deviceKeyFingerprint == nil)

        // Before any registration: no key, the reply goes unsigned.
        client.forward(Reply(actionIdentifier: "early"))
        await client.drain()
        #expect(server.replies.last?.value(forHTTPHeaderField: ReplySignature.header) == nil)

        try await Self.register(client)
        let registered = try #require(server.registered.first)
        #expect(registered.count == 65 && registered.first == 0x04)
        #expect(client.deviceKeyFingerprint == ReplySignature.fingerprint(x963: registered))
        // Kept in the default store on Linux: the file `device-key` in the folder.
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("device-key").path))

        client.forward(Reply(actionIdentifier: "accept", userText: "on my way"))
        await client.drain()
        let request = try #require(server.replies.last)
        let sent = try Reply(ingestBody: try #require(request.httpBody))
        #expect(request.value(forHTTPHeaderField: "Idempotency-Key") == sent.responseId)
        let header = try #require(request.value(forHTTPHeaderField: ReplySignature.header))
        let parts = try #require(signatureParts(header))
        #expect(parts.key == client.deviceKeyFingerprint)
        #expect(verifies(parts.signature, try Self.message(of: request), x963: registered))

        // Registering again sends the same key; a new launch reads it back.
        try await Self.register(client)
        #expect(server.registered.count == 2 && server.registered[1] == registered)
        let relaunched = try Self.client(server, folder: folder)
        #expect(relaunched.deviceKeyFingerprint == client.deviceKeyFingerprint)
    }

    @Test("a key the server's answer does not show is not kept: replies stay unsigned")
    func unconfirmedKey() async throws {
        let server = KeyServer(ingest: [.status(202)])
        server.answerWithoutKeys()
        let keys = SoftwareDeviceKeyStore()
        let client = try Self.client(server, folder: temporaryFolder(), keys: keys)
        try await Self.register(client)
        #expect(server.registered.count == 1)
        #expect(client.deviceKeyFingerprint == nil)
        #expect(try keys.load() == nil)
        client.forward(Reply(actionIdentifier: "accept"))
        await client.drain()
        #expect(server.replies.count == 1)
        #expect(server.replies[0].value(forHTTPHeaderField: ReplySignature.header) == nil)
    }

    @Test("a rotation the server does not confirm keeps the old key signing; a failed registration keeps none")
    func unconfirmedRotation() async throws {
        let server = KeyServer(ingest: [.status(202)])
        let keys = SoftwareDeviceKeyStore()
        let client = try Self.client(server, folder: temporaryFolder(), keys: keys)
        try await Self.register(client)
        let old = try #require(server.registered.first)
        server.answerWithoutKeys()
        try await Self.register(client, rotatingKey: true)
        #expect(server.registered.count == 2 && server.registered[1] != old)
        #expect(client.deviceKeyFingerprint == ReplySignature.fingerprint(x963: old))
        #expect(try keys.load()?.publicKeyX963 == old)
        client.forward(Reply(actionIdentifier: "accept"))
        await client.drain()
        let request = try #require(server.replies.last)
        let parts = try #require(signatureParts(request.value(forHTTPHeaderField: ReplySignature.header) ?? ""))
        #expect(verifies(parts.signature, try Self.message(of: request), x963: old))

        // A registration that fails keeps no key.
        let fresh = SoftwareDeviceKeyStore()
        let offline = try Self.client(
            KeyServer(ingest: [.status(202)]), folder: temporaryFolder(), keys: fresh,
            transport: ScriptedServer([.status(503)]))
        await #expect(throws: ActionHookClientError.unavailable) { try await Self.register(offline) }
        #expect(offline.deviceKeyFingerprint == nil)
        #expect(try fresh.load() == nil)
    }

    @Test("without an app id nothing is signed and no key is registered")
    func signingOff() async throws {
        let server = KeyServer(ingest: [.status(202)])
        let folder = temporaryFolder()
        let client = try Self.client(server, folder: folder, appID: nil)
        try await Self.register(client)
        #expect(server.registered.isEmpty)
        client.forward(Reply(actionIdentifier: "accept"))
        await client.drain()
        #expect(server.replies.count == 1)
        #expect(server.replies[0].value(forHTTPHeaderField: ReplySignature.header) == nil)
        #expect(!FileManager.default.fileExists(atPath: folder.appendingPathComponent("device-key").path))
    }

    @Test(
        "a reply queued before a key change is sent, after a relaunch, with the signature of the key it was queued under"
    )
    func signatureSurvivesKeyChange() async throws {
        let offline = KeyServer(ingest: [.networkError])
        let folder = temporaryFolder()
        let keys = SoftwareDeviceKeyStore(file: folder.appendingPathComponent("key"))
        let uploads = RecordingUploads()
        let first = try Self.client(offline, folder: folder, keys: keys, uploads: uploads)
        try await Self.register(first)
        let oldKey = try #require(offline.registered.last)
        let before = try first.enqueue(Reply(actionIdentifier: "accept", responseId: "before-rotation"))
        #expect(before.signature != nil)

        try await Self.register(first, rotatingKey: true)
        let newKey = try #require(offline.registered.last)
        #expect(newKey != oldKey)
        #expect(first.deviceKeyFingerprint == ReplySignature.fingerprint(x963: newKey))
        let after = try first.enqueue(Reply(actionIdentifier: "accept", responseId: "after-rotation"))

        // The system-run uploads were scheduled with each reply's own signature.
        #expect(uploads.scheduled.map { $0.headers[ReplySignature.header] } == [before.signature, after.signature])

        // The next launch reads each signature back from the queue and sends it.
        let online = KeyServer(ingest: [.status(202)])
        let events = EventLog()
        let second = try Self.client(online, folder: folder, keys: keys, events: events)
        #expect(second.queue.entries().map(\.signature) == [before.signature, after.signature])
        second.resume()
        await second.drain()
        #expect(Set(events.delivered) == ["before-rotation", "after-rotation"])
        for (responseId, key) in [("before-rotation", oldKey), ("after-rotation", newKey)] {
            let request = try #require(
                online.replies.last { $0.value(forHTTPHeaderField: "Idempotency-Key") == responseId })
            let parts = try #require(signatureParts(request.value(forHTTPHeaderField: ReplySignature.header) ?? ""))
            #expect(parts.key == ReplySignature.fingerprint(x963: key), "\(responseId)")
            #expect(verifies(parts.signature, try Self.message(of: request), x963: key), "\(responseId)")
        }
        #expect(
            (try FileManager.default.contentsOfDirectory(
                atPath: folder.appendingPathComponent("queue/signatures").path)).isEmpty)
    }

    @Test("sign-out forgets the key; the next registration makes a new one")
    func signOutForgetsKey() async throws {
        let server = KeyServer(ingest: [.status(202)])
        let keys = SoftwareDeviceKeyStore()
        let client = try Self.client(server, folder: temporaryFolder(), keys: keys)
        try await Self.register(client)
        let first = try #require(client.deviceKeyFingerprint)
        try await client.signOut()
        #expect(client.deviceKeyFingerprint == nil)
        #expect(try keys.load() == nil)
        client.forward(Reply(actionIdentifier: "after sign-out"))
        await client.drain()
        #expect(server.replies.last?.value(forHTTPHeaderField: ReplySignature.header) == nil)
        try await Self.register(client)
        let second = try #require(client.deviceKeyFingerprint)
        #expect(second != first)
    }

    @Test("403 reply-signature-required leaves the queue at once, reported as refused, never sent again")
    func signatureRequiredNotRetried() async throws {
        let server = KeyServer(ingest: [.status(403, body: signatureRequired)])
        let events = EventLog()
        let client = try Self.client(server, folder: temporaryFolder(), appID: nil, events: events)
        client.forward(Reply(actionIdentifier: "accept", responseId: "unsigned"))
        // Retried, it would never leave the queue: drain() would not return.
        #expect(await finishes(within: 10) { await client.drain() })
        try await Task.sleep(nanoseconds: 50_000_000)
        #expect(server.replies.count == 1)
        #expect(client.queue.count == 0)
        #expect(events.retries.isEmpty)
        guard case .refused("unsigned", 403, let problem)? = events.all.last else {
            Issue.record("not refused: \(events.all)")
            return
        }
        #expect(problem.requiresSignedReply)
    }
}

@Suite("The queue keeps each reply's signature beside it")
struct SignatureQueueTests {
    @Test("a signature is read back with its reply, removed with it, and ignored when it names another reply")
    func sidecar() throws {
        let folder = temporaryFolder()
        let queue = try ReplyQueue(directory: folder)
        let signed = try queue.append(Reply(actionIdentifier: "a", responseId: "one"), signature: "key=k1, sig=s1")
        let unsigned = try queue.append(Reply(actionIdentifier: "b", responseId: "two"))
        #expect(queue.entries().map(\.signature) == ["key=k1, sig=s1", nil])
        // The reply file is the request body alone.
        let body =
            try JSONSerialization.jsonObject(with: Data(contentsOf: queue.url(of: signed.sequence))) as? [String: Any]
        #expect(body?.keys.sorted() == ["actionIdentifier", "respondedAt", "responseId", "userInfo"])

        // A signature left under the other reply's sequence (another reply's) is not sent with it.
        let signatures = folder.appendingPathComponent("signatures")
        let stray = ReplyQueue.Sidecar(responseId: "one", header: "key=k1, sig=s1").encoded()
        try stray.write(to: signatures.appendingPathComponent(String(unsigned.fileName.prefix(20)) + ".sig"))
        #expect(queue.entries().map(\.signature) == ["key=k1, sig=s1", nil])

        queue.remove(signed)
        queue.remove(unsigned)
        #expect(try FileManager.default.contentsOfDirectory(atPath: signatures.path).isEmpty)
    }

    @Test("a signature whose reply is gone is removed when the queue opens, once it is an hour old")
    func leftoverSignature() throws {
        let folder = temporaryFolder()
        _ = try ReplyQueue(directory: folder)
        let signatures = folder.appendingPathComponent("signatures")
        let old = signatures.appendingPathComponent(String(format: "%020llu", UInt64(1)) + ".sig")
        let fresh = signatures.appendingPathComponent(String(format: "%020llu", UInt64(2)) + ".sig")
        try Data("{}".utf8).write(to: old)
        try Data("{}".utf8).write(to: fresh)
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: -7_200)], ofItemAtPath: old.path)
        let queue = try ReplyQueue(directory: folder)
        let kept = try queue.append(Reply(actionIdentifier: "a"), signature: "key=k, sig=s")
        try FileManager.default.setAttributes(
            [.modificationDate: Date(timeIntervalSinceNow: -7_200)],
            ofItemAtPath: signatures.appendingPathComponent(String(kept.fileName.prefix(20)) + ".sig").path)
        _ = try ReplyQueue(directory: folder)
        #expect(!FileManager.default.fileExists(atPath: old.path))
        #expect(FileManager.default.fileExists(atPath: fresh.path))
        #expect(try ReplyQueue(directory: folder).entries().map(\.signature) == ["key=k, sig=s"])
    }
}
