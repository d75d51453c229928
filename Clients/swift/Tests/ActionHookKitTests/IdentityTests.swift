import ActionHookKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// A JWT whose payload holds `exp` (and a `sub`); the signature is not one: the client never verifies it.
func userJWT(_ subject: String, expiresIn seconds: TimeInterval) -> String {
    func base64URL(_ text: String) -> String {
        Data(text.utf8).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
    let exp = Int(Date().timeIntervalSince1970 + seconds)
    return base64URL(#"{"alg":"ES256","kid":"k1"}"#) + "."
        + base64URL(#"{"sub":"\#(subject)","aud":"app","exp":\#(exp)}"#) + ".c2lnbmF0dXJl"
}

/// The app's backend, played by the test: answers the scripted tokens in turn (the last one repeats) and
/// counts the calls.
final class TokenSource: @unchecked Sendable {
    // @unchecked: `tokens` and `count` are only touched under `lock`.
    private let lock = NSLock()
    private var tokens: [String?]
    private var count = 0

    init(_ tokens: [String?]) {
        self.tokens = tokens
    }

    var calls: Int { lock.withLock { count } }

    func next() -> String? {
        lock.withLock {
            count += 1
            return tokens.count > 1 ? tokens.removeFirst() : tokens[0]
        }
    }
}

func identityClient(
    _ server: ScriptedServer, tokens: TokenSource? = nil, events: EventLog = EventLog(),
    pushEnvironment: PushEnvironment? = nil
) throws -> ActionHookClient {
    let configuration = ActionHookClient.Configuration(
        serverURL: URL(string: "https://actionhook.example.com")!, ingestKey: "ahk_test_key",
        directory: temporaryFolder(), retry: fastRetry, pushEnvironment: pushEnvironment)
    return try ActionHookClient(
        configuration: configuration, transport: server, onEvent: events.record,
        userTokenProvider: tokens.map { source -> UserTokenProvider in { @Sendable in source.next() } })
}

/// A provisioning profile as the app bundle holds it: a CMS envelope (binary, not UTF-8) around the plist.
func provisioningProfile(aps: String?) -> Data {
    let entitlement = aps.map { "<key>aps-environment</key><string>\($0)</string>" } ?? ""
    let plist = """
        <?xml version="1.0" encoding="UTF-8"?>
        <!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN" "http://www.apple.com/DTDs/PropertyList-1.0.dtd">
        <plist version="1.0">
        <dict>
        \t<key>AppIDName</key><string>Acme</string>
        \t<key>Entitlements</key>
        \t<dict>
        \t\t<key>application-identifier</key><string>ABCDE12345.com.acme.app</string>
        \t\t\(entitlement)
        \t\t<key>get-task-allow</key><true/>
        \t</dict>
        \t<key>Name</key><string>Acme Development</string>
        </dict>
        </plist>
        """
    let envelope: [UInt8] = [
        0x30, 0x80, 0x06, 0x09, 0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x07, 0x02, 0xA0, 0x80, 0xFF, 0xFE,
    ]
    return Data(envelope) + Data(plist.utf8) + Data([0x00, 0xA0, 0x82, 0x0B, 0xFF, 0x31, 0x82])
}

let invalidUserToken =
    #"{"type":"https://actionhook.dev/problems/invalid-user-token","title":"Invalid User Token","status":401}"#
let deviceTokenBytes = Data([0xAB, 0xCD, 0x01, 0x23])

extension URLRequest {
    var userToken: String? { value(forHTTPHeaderField: UserToken.headerName) }
    var jsonBody: [String: String]? {
        httpBody.flatMap { try? JSONSerialization.jsonObject(with: $0) as? [String: String] }
    }
}

@Suite("Users and identity")
struct IdentityTests {
    @Test("the user token's exp is read from the JWT's base64url payload, without verifying it")
    func expiry() {
        let token = userJWT("user-?>~", expiresIn: 600)
        let expiry = UserToken.expiry(of: token)
        #expect(expiry.map { abs($0.timeIntervalSinceNow - 600) < 5 } == true)
        #expect(UserToken.expiry(of: "not-a-jwt") == nil)
        #expect(UserToken.expiry(of: "a.e30.c") == nil)  // {} : no exp
    }

    @Test("the user token is sent with every reply and with the device registration")
    func headerOnRepliesAndRegistration() async throws {
        let server = ScriptedServer([.status(202)])
        let client = try identityClient(server)
        let token = userJWT("u1", expiresIn: 3_600)
        client.identify(userToken: token)
        try client.enqueue(reply("r1"))
        try client.enqueue(reply("r2"))
        #expect(await finishes(within: 20) { await client.drain() })

        server.script([.status(200, body: #"{"deviceToken":"abcd0123","user":"u1","status":"active"}"#)])
        let device = DeviceInfo(
            locale: "de_CH", timeZone: "Europe/Zurich", appVersion: "2.1", osVersion: "18.1", model: "iPhone")
        try await client.register(deviceToken: deviceTokenBytes, device: device, provisioningProfile: nil)

        let sent = server.sent
        #expect(sent.map(\.httpMethod) == ["POST", "POST", "PUT"])
        #expect(sent.allSatisfy { $0.userToken == token })
        #expect(sent.allSatisfy { $0.value(forHTTPHeaderField: "Authorization") == "Bearer ahk_test_key" })
        let put = sent[2]
        #expect(put.url?.path == "/v1/devices/abcd0123")
        #expect(
            put.jsonBody == [
                "environment": "production", "platform": "ios", "locale": "de_CH", "timeZone": "Europe/Zurich",
                "appVersion": "2.1", "osVersion": "18.1", "model": "iPhone",
            ])
        #expect(client.deviceToken == "abcd0123")
    }

    @Test("without a user, no header is sent and nothing asks for one")
    func anonymous() async throws {
        let server = ScriptedServer([.status(202)])
        let client = try identityClient(server)
        try client.enqueue(reply("r"))
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(server.sent.count == 1)
        #expect(server.sent[0].userToken == nil)
    }

    @Test(
        "the APNs environment comes from the profile's aps-environment; no profile is production",
        arguments: [("development", PushEnvironment.sandbox), ("production", .production), (String?.none, .production)]
            as [(String?, PushEnvironment)])
    func profileParsing(aps: String?, expected: PushEnvironment) {
        let profile = provisioningProfile(aps: aps)
        #expect(PushEnvironment.apsEnvironment(inProvisioningProfile: profile) == aps)
        #expect(PushEnvironment(provisioningProfile: profile) == expected)
    }

    @Test("a missing or unreadable profile is production")
    func missingProfile() {
        #expect(PushEnvironment(provisioningProfile: nil) == .production)
        #expect(PushEnvironment(provisioningProfile: Data([0x30, 0x80, 0xFF])) == .production)
        #expect(PushEnvironment(provisioningProfile: Data("<?xml version=\"1.0\"?><plist>".utf8)) == .production)
    }

    @Test("the registration sends the profile's environment, or the configuration's override")
    func registrationEnvironment() async throws {
        let development = provisioningProfile(aps: "development")
        let server = ScriptedServer([.status(200)])
        let client = try identityClient(server)
        try await client.register(deviceToken: deviceTokenBytes, device: DeviceInfo(), provisioningProfile: development)
        try await client.register(deviceToken: deviceTokenBytes, device: DeviceInfo(), provisioningProfile: nil)
        let overridden = try identityClient(server, pushEnvironment: .production)
        try await overridden.register(
            deviceToken: deviceTokenBytes, device: DeviceInfo(), provisioningProfile: development)
        #expect(server.sent.map { $0.jsonBody?["environment"] } == ["sandbox", "production", "production"])
        #expect(server.sent.map { $0.jsonBody?["platform"] } == ["ios", "ios", "ios"])
        #expect(server.sent.allSatisfy { $0.jsonBody?["model"] == nil && $0.userToken == nil })
    }

    @Test("with no token held, the provider is asked at the start and its token is sent")
    func providerAtStart() async throws {
        let server = ScriptedServer([.status(202)])
        let fresh = userJWT("u1", expiresIn: 3_600)
        let tokens = TokenSource([fresh])
        let client = try identityClient(server, tokens: tokens)
        try client.enqueue(reply("r1"))
        try client.enqueue(reply("r2"))
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(server.sent.map(\.userToken) == [fresh, fresh])
        #expect(tokens.calls == 1)
        #expect(client.userToken == fresh)
    }

    @Test("a held token expiring within 60 s is replaced by the provider's before it is sent; a later one is kept")
    func expiryDrivenRefresh() async throws {
        let server = ScriptedServer([.status(202)])
        let expiring = userJWT("u1", expiresIn: 30)
        let fresh = userJWT("u1", expiresIn: 3_600)
        let tokens = TokenSource([fresh])
        let client = try identityClient(server, tokens: tokens)
        client.identify(userToken: expiring)
        try client.enqueue(reply("r1"))
        #expect(await finishes(within: 20) { await client.drain() })
        try client.enqueue(reply("r2"))
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(server.sent.map(\.userToken) == [fresh, fresh])
        #expect(tokens.calls == 1)

        // A token with more than a minute left is sent as it is.
        let lasting = userJWT("u1", expiresIn: 120)
        client.identify(userToken: lasting)
        try client.enqueue(reply("r3"))
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(server.sent.last?.userToken == lasting)
        #expect(tokens.calls == 1)
    }

    @Test("a reply answered with a user-token 401 asks the provider once and is sent again with the new token")
    func refreshAfter401() async throws {
        let server = ScriptedServer([.status(401, body: invalidUserToken), .status(202)])
        let events = EventLog()
        let old = userJWT("u1", expiresIn: 3_600)
        let fresh = userJWT("u1", expiresIn: 7_200)
        let tokens = TokenSource([fresh])
        let client = try identityClient(server, tokens: tokens, events: events)
        client.identify(userToken: old)
        let r = reply("r1")
        try client.enqueue(r)
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(server.sent.map(\.userToken) == [old, fresh])
        #expect(server.sent.map { $0.value(forHTTPHeaderField: "Idempotency-Key") } == [r.responseId, r.responseId])
        #expect(tokens.calls == 1)
        #expect(events.delivered == [r.responseId])
        #expect(events.pauses == 0)
        #expect(client.queue.count == 0)
    }

    @Test("user-token-required asks the provider too: a signed-in user's token goes with the retry")
    func requiredThenToken() async throws {
        let required =
            #"{"type":"https://actionhook.dev/problems/user-token-required","title":"User Token Required","status":401}"#
        let server = ScriptedServer([.status(401, body: required), .status(202)])
        let fresh = userJWT("u1", expiresIn: 3_600)
        let tokens = TokenSource([nil, fresh])
        let client = try identityClient(server, tokens: tokens)
        try client.enqueue(reply("r1"))
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(server.sent.map(\.userToken) == [nil, fresh])
        #expect(tokens.calls == 2)
        #expect(client.queue.count == 0)
    }

    @Test("a second user-token 401 pauses the queue, reported once, with the reply still queued; identify resumes it")
    func refusedTwicePauses() async throws {
        let server = ScriptedServer([.status(401, body: invalidUserToken)])
        let events = EventLog()
        let first = userJWT("u1", expiresIn: 3_600)
        let second = userJWT("u1", expiresIn: 7_200)
        let tokens = TokenSource([second])
        let client = try identityClient(server, tokens: tokens, events: events)
        client.identify(userToken: first)
        let r = reply("r1")
        try client.enqueue(r)
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(server.sent.map(\.userToken) == [first, second])
        #expect(tokens.calls == 1)
        #expect(events.pauses == 1)
        #expect(events.all.contains { if case .paused(401, let p) = $0 { p.refusesUserToken } else { false } })
        #expect(client.queue.count == 1)
        #expect(events.all.allSatisfy { !$0.endsReply })

        // Paused: a new reply is queued, nothing is sent.
        try client.enqueue(reply("r2"))
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(server.sent.count == 2)
        #expect(client.queue.count == 2)

        // A token the app sets ends the pause; both go, oldest first, with it.
        let third = userJWT("u1", expiresIn: 9_000)
        server.script([.status(202)])
        client.identify(userToken: third)
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(server.sent.dropFirst(2).map(\.userToken) == [third, third])
        #expect(events.delivered.first == r.responseId)
        #expect(client.queue.count == 0)
        #expect(events.pauses == 1)
    }

    @Test("a 401 of the ingest key pauses as before, without asking the provider; identify does not end it")
    func keyRefusalUnchanged() async throws {
        let unauthorized =
            #"{"type":"https://actionhook.dev/problems/unauthorized","title":"Unauthorized","status":401}"#
        let server = ScriptedServer([.status(401, body: unauthorized)])
        let events = EventLog()
        let token = userJWT("u1", expiresIn: 3_600)
        let tokens = TokenSource([userJWT("u1", expiresIn: 7_200)])
        let client = try identityClient(server, tokens: tokens, events: events)
        client.identify(userToken: token)
        try client.enqueue(reply("r1"))
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(server.sent.count == 1)
        #expect(tokens.calls == 0)
        #expect(events.pauses == 1)

        client.identify(userToken: userJWT("u1", expiresIn: 9_000))
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(server.sent.count == 1)
        #expect(client.queue.count == 1)

        server.script([.status(202)])
        client.updateIngestKey("ahk_new")
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(client.queue.count == 0)
    }

    @Test("a registration answered with a user-token 401 is sent again with the provider's token")
    func registrationRefresh() async throws {
        let server = ScriptedServer([.status(401, body: invalidUserToken), .status(200)])
        let old = userJWT("u1", expiresIn: 3_600)
        let fresh = userJWT("u1", expiresIn: 7_200)
        let tokens = TokenSource([fresh])
        let client = try identityClient(server, tokens: tokens)
        client.identify(userToken: old)
        try await client.register(deviceToken: deviceTokenBytes, device: DeviceInfo(), provisioningProfile: nil)
        #expect(server.sent.map(\.userToken) == [old, fresh])
        #expect(server.sent.map(\.httpMethod) == ["PUT", "PUT"])

        // Refused twice: the error reaches the caller.
        server.script([.status(401, body: invalidUserToken)])
        await #expect(throws: ActionHookClientError.self) {
            try await client.register(deviceToken: deviceTokenBytes, device: DeviceInfo(), provisioningProfile: nil)
        }
    }

    @Test("signOut sends DELETE with the user token, then replies go without one and the provider is not asked")
    func signOut() async throws {
        let server = ScriptedServer([.status(200)])
        let token = userJWT("u1", expiresIn: 3_600)
        let tokens = TokenSource([userJWT("u1", expiresIn: 7_200)])
        let client = try identityClient(server, tokens: tokens)
        client.identify(userToken: token)
        try await client.register(deviceToken: deviceTokenBytes, device: DeviceInfo(), provisioningProfile: nil)

        server.script([.status(204)])
        try await client.signOut()
        #expect(client.userToken == nil)

        server.script([.status(202)])
        try client.enqueue(reply("after"))
        #expect(await finishes(within: 20) { await client.drain() })

        let sent = server.sent
        #expect(sent.map(\.httpMethod) == ["PUT", "DELETE", "POST"])
        #expect(sent[1].url?.path == "/v1/devices/abcd0123")
        #expect(sent[1].userToken == token)
        #expect(sent[2].userToken == nil)
        #expect(tokens.calls == 0)
        #expect(client.deviceToken == "abcd0123")

        // The next sign-in sends its token again.
        let next = userJWT("u2", expiresIn: 3_600)
        client.identify(userToken: next)
        try client.enqueue(reply("signed-in"))
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(server.sent.last?.userToken == next)
    }

    @Test("signOut forgets the token even when the DELETE fails, and says so")
    func signOutOffline() async throws {
        let server = ScriptedServer([.status(200)])
        let client = try identityClient(server)
        client.identify(userToken: userJWT("u1", expiresIn: 3_600))
        try await client.register(deviceToken: deviceTokenBytes, device: DeviceInfo(), provisioningProfile: nil)
        server.script([.networkError])
        await #expect(throws: ActionHookClientError.unavailable) { try await client.signOut() }
        #expect(client.userToken == nil)
    }
}
