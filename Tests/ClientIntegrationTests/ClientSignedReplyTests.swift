import ActionHookKit
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

/// ActionHookKit's signed replies against the real service: a client with a software device key registers it,
/// its replies are stored `valid` under the key's fingerprint and act where signed replies are required, and a
/// client without a key is refused there with 403, once.
@Suite("Client package: signed replies against the real service", .serialized)
struct ClientSignedReplyTests {
    static func client(port: Int, key: String, appID: String?, events: Events) throws -> ActionHookClient {
        let configuration = ActionHookClient.Configuration(
            serverURL: URL(string: "http://127.0.0.1:\(port)")!, ingestKey: key, appID: appID,
            directory: FileManager.default.temporaryDirectory.appendingPathComponent("kit-signed-\(UUID())"),
            retry: ClientPackageTests.retry, requestTimeout: 5)
        return try ActionHookClient(
            configuration: configuration, onEvent: events.record, deviceKeys: SoftwareDeviceKeyStore())
    }

    /// The stored reply `id`: its outcome, signature and signature key; nil when there is none.
    static func stored(_ api: TestAPI, _ id: String) throws -> (outcome: String, signature: String?, key: String?)? {
        let rows = try api.query(
            "SELECT outcome, signature, signature_key FROM responses WHERE client_response_id = \(id)")
        guard let row = rows.first else { return nil }
        return (
            try row.decode("outcome", as: String.self), try row.decode("signature", as: String?.self),
            try row.decode("signature_key", as: String?.self)
        )
    }

    @Test(
        "a registered software key signs each reply: stored valid under its fingerprint; where signed replies are required the signed reply acts and an unsigned one gets 403, stored unverified once, not retried"
    )
    func signedReplies() async throws {
        let api = try TestAPI { $0.deviceRateLimitPerSecond = 10_000 }
        let key = try api.createApp("kit-signed")
        #expect(
            try api.admin(
                "PUT", "/v1/apps/kit-signed/categories/approval",
                json: #"{"actions":[{"identifier":"approve","title":"Approve"}],"requireSignedReplies":true}"#
            ).status == 201)
        #expect(
            try api.admin(
                "POST", "/v1/apps/kit-signed/rules",
                json: #"{"id":"approve","match":{"action":"approve"},"handler":{"type":"accept"}}"#
            ).status == 201)

        // Identity is off: the device registers anonymously with the ingest key, and its key with it.
        let events = Events()
        let signer = try Self.client(port: api.port, key: key, appID: "kit-signed", events: events)
        let deviceToken = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
        let hex = deviceToken.map { String(format: "%02x", $0) }.joined()
        try await signer.register(deviceToken: deviceToken, device: DeviceInfo(), provisioningProfile: nil)
        let fingerprint = try #require(signer.deviceKeyFingerprint)
        let device = try api.query("SELECT key_fingerprint FROM devices WHERE token = \(hex)")
        #expect(try device.first?.decode("key_fingerprint", as: String?.self) == fingerprint)

        // A reply where signatures are not required: stored with its signature verified.
        signer.forward(Reply(actionIdentifier: "note", userText: "on my way", responseId: "signed-note"))
        #expect(await ClientPackageTests.drain(signer, within: 120), "the signed note was not delivered")
        let note = try #require(try Self.stored(api, "signed-note"))
        #expect(note.signature == "valid" && note.key == fingerprint, "\(note)")

        // Where the category requires signed replies, the signed one acts.
        let approval: [String: JSONValue] = ["aps": .object(["category": .string("approval")])]
        signer.forward(
            Reply(
                actionIdentifier: "approve", categoryIdentifier: "approval", userInfo: approval,
                responseId: "signed-approval"))
        #expect(await ClientPackageTests.drain(signer, within: 120), "the signed approval was not delivered")
        let accepted = try #require(try Self.stored(api, "signed-approval"))
        #expect(accepted.outcome == "accepted", "\(accepted)")
        #expect(accepted.signature == "valid" && accepted.key == fingerprint, "\(accepted)")
        #expect(events.delivered(status: 202) == 2)
        #expect(events.refusals == 0)

        // A client without a key (signing off) answers for the same device: 403, dropped, never sent again.
        let unsignedEvents = Events()
        let unsigned = try Self.client(port: api.port, key: key, appID: nil, events: unsignedEvents)
        unsigned.setDeviceToken(deviceToken)
        #expect(unsigned.deviceKeyFingerprint == nil)
        unsigned.forward(
            Reply(
                actionIdentifier: "approve", categoryIdentifier: "approval", userInfo: approval,
                responseId: "unsigned-approval"))
        #expect(await ClientPackageTests.drain(unsigned, within: 120), "the unsigned approval stayed queued")
        #expect(unsigned.queue.count == 0)
        let refused = unsignedEvents.all.compactMap { event -> Problem? in
            if case .refused("unsigned-approval", 403, let problem) = event { problem } else { nil }
        }
        #expect(refused.count == 1)
        #expect(refused.first?.requiresSignedReply == true)
        #expect(refused.first?.type == "https://actionhook.dev/problems/reply-signature-required")
        #expect(unsignedEvents.retries == 0)

        // Time for a retry that must not come: still one stored row, unverified and unsigned.
        try await Task.sleep(nanoseconds: 500_000_000)
        #expect(
            try api.count("SELECT count(*) AS n FROM responses WHERE client_response_id = 'unsigned-approval'") == 1)
        let unverified = try #require(try Self.stored(api, "unsigned-approval"))
        #expect(unverified.outcome == "unverified" && unverified.signature == nil, "\(unverified)")
        #expect(unsignedEvents.retries == 0)
    }

    @Test(
        "a reply queued under the old key and sent after the key was rotated is stored valid under the old key; one queued after, under the new"
    )
    func rotation() async throws {
        let api = try TestAPI { $0.deviceRateLimitPerSecond = 10_000 }
        let key = try api.createApp("kit-rotate")
        let keys = SoftwareDeviceKeyStore()
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("kit-rotate-\(UUID())")
        func client(_ server: String, events: Events) throws -> ActionHookClient {
            let configuration = ActionHookClient.Configuration(
                serverURL: URL(string: server)!, ingestKey: key, appID: "kit-rotate", directory: folder,
                retry: ClientPackageTests.retry, requestTimeout: 5)
            return try ActionHookClient(configuration: configuration, onEvent: events.record, deviceKeys: keys)
        }
        let events = Events()
        let online = try client("http://127.0.0.1:\(api.port)", events: events)
        let deviceToken = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
        try await online.register(deviceToken: deviceToken, device: DeviceInfo(), provisioningProfile: nil)
        let oldKey = try #require(online.deviceKeyFingerprint)

        // Answered while the server cannot be reached (the same folder and key, a server that is not there).
        let offline = try client("http://127.0.0.1:1", events: Events())
        let queued = try offline.enqueue(Reply(actionIdentifier: "note", responseId: "before-rotation"))
        #expect(queued.signature?.hasPrefix("key=\(oldKey), sig=") == true)

        try await online.register(
            deviceToken: deviceToken, device: DeviceInfo(), provisioningProfile: nil, rotatingKey: true)
        let newKey = try #require(online.deviceKeyFingerprint)
        #expect(newKey != oldKey)
        online.forward(Reply(actionIdentifier: "note", responseId: "after-rotation"))
        online.resume()
        #expect(await ClientPackageTests.drain(online, within: 120), "the queue was not sent")
        #expect(online.queue.count == 0)

        let before = try #require(try Self.stored(api, "before-rotation"))
        #expect(before.signature == "valid" && before.key == oldKey, "\(before)")
        let after = try #require(try Self.stored(api, "after-rotation"))
        #expect(after.signature == "valid" && after.key == newKey, "\(after)")
        #expect(events.refusals == 0)
    }
}
