import ActionHookKit
import Foundation
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

/// ActionHookKit's users against the real service: an app whose identity is `required`, a "backend" that
/// signs user tokens (the provider the package calls), and what the service stored.
@Suite("Client package: users and their tokens against the real service", .serialized)
struct ClientIdentityTests {
    /// The customer's backend as the app sees it: it mints a token for the signed-in user on request.
    final class Backend: Sendable {
        let mint = UserTokenMint.es256(kid: "backend")
        let app: String
        let user: String
        private let calls = Atomic<Int>(0)

        init(app: String, user: String) {
            self.app = app
            self.user = user
        }

        var provided: Int { calls.load(ordering: .sequentiallyConsistent) }

        func token() throws -> String {
            calls.add(1, ordering: .sequentiallyConsistent)
            return try mint.token(user: user, app: app)
        }
    }

    static func storedUsers(_ api: TestAPI) throws -> [String: (user: String?, verified: Bool)] {
        var stored: [String: (String?, Bool)] = [:]
        for row in try api.query("SELECT client_response_id, user_id, user_verified FROM responses") {
            stored[try row.decode("client_response_id", as: String.self)] = (
                try row.decode("user_id", as: String?.self), try row.decode("user_verified", as: Bool.self)
            )
        }
        return stored
    }

    @Test(
        "registers under the token's user, forwards verified replies, refreshes an expiring and a refused token, signs out"
    )
    func registerReplyRefreshSignOut() async throws {
        let api = try TestAPI { $0.deviceRateLimitPerSecond = 10_000 }
        let backend = Backend(app: "kit-identity", user: "alice")
        let created = try api.admin(
            "POST", "/v1/apps",
            json: #"{"id": "kit-identity", "identity": {"mode": "required", "keys": [\#(backend.mint.keyJSON)]}}"#)
        try #require(created.status == 201, "\(created.text)")
        let key = try #require((created.json["ingestKey"] as? [String: Any])?["secret"] as? String)
        let events = Events()
        let configuration = ActionHookClient.Configuration(
            serverURL: URL(string: "http://127.0.0.1:\(api.port)")!, ingestKey: key,
            directory: FileManager.default.temporaryDirectory.appendingPathComponent("kit-identity-\(UUID())"),
            retry: ClientPackageTests.retry, requestTimeout: 5)
        let client = try ActionHookClient(
            configuration: configuration, onEvent: events.record, userTokenProvider: { try backend.token() })

        // Registration: the provider is asked for the first token; the device is Alice's, production (no
        // provisioning profile, as an App Store build).
        let deviceToken = Data((0..<32).map { _ in UInt8.random(in: 0...255) })
        let hex = deviceToken.map { String(format: "%02x", $0) }.joined()
        try await client.register(
            deviceToken: deviceToken, device: DeviceInfo(locale: "en_GB", osVersion: "18.1", model: "iPhone"),
            provisioningProfile: nil)
        #expect(backend.provided == 1)
        let device = try api.query("SELECT user_id, environment, status, model FROM devices WHERE token = \(hex)")
        #expect(try device.first?.decode("user_id", as: String?.self) == "alice")
        #expect(try device.first?.decode("environment", as: String?.self) == "production")
        #expect(try device.first?.decode("model", as: String?.self) == "iPhone")

        func forward(_ id: String) async throws {
            client.forward(
                Reply(actionIdentifier: "accept", userInfo: ["eventId": .string(id)], responseId: id))
            #expect(await ClientPackageTests.drain(client, within: 120), "reply \(id) was not delivered")
        }
        try await forward("r-1")

        // A token that expires within the minute: the client asks the backend for a new one before sending.
        client.identify(userToken: try backend.mint.token(user: "alice", app: backend.app, lifetime: 20))
        let before = backend.provided
        try await forward("r-2")
        #expect(backend.provided == before + 1)

        // A token the service refuses (signed by a key it does not know): 401, a new token, sent again.
        client.identify(userToken: try UserTokenMint.es256(kid: "backend").token(user: "alice", app: backend.app))
        try await forward("r-3")
        #expect(backend.provided == before + 2)

        let stored = try Self.storedUsers(api)
        #expect(stored.count == 3)
        for id in ["r-1", "r-2", "r-3"] {
            #expect(
                stored[id]?.user == "alice" && stored[id]?.verified == true, "\(id): \(String(describing: stored[id]))")
        }
        #expect(events.pauses == 0)

        try await client.signOut()
        let after = try api.query("SELECT status, reason FROM devices WHERE token = \(hex)")
        #expect(try after.first?.decode("status", as: String.self) == "removed")
        #expect(try after.first?.decode("reason", as: String?.self) == "signedOut")
        #expect(client.userToken == nil)
    }
}
