import ActionHookKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The server as the phone sees it: answers 200 and records the requests.
final class RecordingServer: HTTPTransport, @unchecked Sendable {
    // @unchecked: `requests` is only touched under `lock`.
    private let lock = NSLock()
    private var requests: [URLRequest] = []

    var sent: [URLRequest] { lock.withLock { requests } }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        lock.withLock { requests.append(request) }
        return (
            Data(), HTTPURLResponse(url: request.url!, statusCode: 200, httpVersion: "HTTP/1.1", headerFields: [:])!
        )
    }
}

@Suite("The device registration glue, compiled against Apple's signatures")
struct DeviceRegistrationGlueTests {
    static func client(_ server: RecordingServer, pushEnvironment: PushEnvironment? = nil) throws -> ActionHookClient {
        let configuration = ActionHookClient.Configuration(
            serverURL: URL(string: "https://actionhook.example.com")!, ingestKey: "ahk_k",
            directory: FileManager.default.temporaryDirectory.appendingPathComponent("glue-\(UUID().uuidString)"),
            pushEnvironment: pushEnvironment)
        return try ActionHookClient(configuration: configuration, transport: server)
    }

    @Test("register(deviceToken:) sends UIDevice's model and version, the locale and time zone, and the user token")
    func registersThisDevice() async throws {
        let server = RecordingServer()
        let client = try Self.client(server)
        client.identify(userToken: "header.payload.signature")
        try await client.register(deviceToken: Data([0x0F, 0xA0]))
        let request = try #require(server.sent.first)
        #expect(request.httpMethod == "PUT")
        #expect(request.url?.path == "/v1/devices/0fa0")
        #expect(request.value(forHTTPHeaderField: "ActionHook-User-Token") == "header.payload.signature")
        let body = try #require(
            request.httpBody.flatMap { try JSONSerialization.jsonObject(with: $0) as? [String: String] })
        #expect(body["model"] == "iPhone")
        #expect(body["osVersion"] == "18.1")
        #expect(body["platform"] == "ios")
        // Empty values are left out.
        #expect(body["locale"] == Optional(Locale.current.identifier).flatMap { $0.isEmpty ? nil : $0 })
        #expect(body["timeZone"] == Optional(TimeZone.current.identifier).flatMap { $0.isEmpty ? nil : $0 })
        // The test runner has no embedded.mobileprovision: an App Store build's production.
        #expect(PushEnvironment.embeddedProvisioningProfile() == nil)
        #expect(body["environment"] == "production")
    }

    @Test("the configuration's environment overrides the profile's")
    func override() async throws {
        let server = RecordingServer()
        try await Self.client(server, pushEnvironment: .sandbox).register(deviceToken: Data([0x01]))
        let body = server.sent.first?.httpBody.flatMap {
            try? JSONSerialization.jsonObject(with: $0) as? [String: String]
        }
        #expect(body?["environment"] == "sandbox")
    }
}
