import ActionHookCore
import Foundation
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

@testable import ActionHookDelivery

/// F13, DNS rebinding: a webhook's host name is looked up once, for the address check, and the connection
/// goes to the address that was checked, whatever the name answers next. A test cannot listen on a public
/// address, so the sender under test counts 127.0.0.2 as the one public address; the resolver answers it first
/// and loopback (127.0.0.1, where a canary listens on the same port) the next time.
@Suite("DNS rebinding: the connection goes to the checked address (F13)", .serialized)
struct DNSRebindingTests {
    static let standInAddress = AddressPolicy.Address.v4(0x7F00_0002)
    static let loopback = AddressPolicy.Address.v4(0x7F00_0001)

    /// A resolver that answers `answers` in turn, one list per lookup, and counts the lookups.
    final class ScriptedResolver: Sendable {
        private let state = Mutex((lookups: [String](), next: 0))
        let answers: [[AddressPolicy.Address]]

        init(_ answers: [[AddressPolicy.Address]]) {
            self.answers = answers
        }

        var lookups: [String] { state.withLock { $0.lookups } }

        var resolver: HostResolver {
            HostResolver { host in
                self.state.withLock { state in
                    state.lookups.append(host)
                    defer { state.next += 1 }
                    return self.answers[state.next % self.answers.count]
                }
            }
        }
    }

    @Test("first answer public, second loopback: delivered to the checked address with its Host; 0 canary connections")
    func rebindingRefused() async throws {
        let canary = try RawTCPServer()
        let standIn = try WebhookReceiver(host: "127.0.0.2", port: canary.port)
        defer { standIn.stop() }
        let scripted = ScriptedResolver([[Self.standInAddress], [Self.loopback]])
        let sender = WebhookSender(
            timeoutSeconds: 5, allowPrivate: false, connectionsPerHost: 4, resolver: scripted.resolver,
            isPublic: { $0 == Self.standInAddress }, pinnedClients: 4)
        let secret = Hooks.newSecret()
        let url = "http://rebind.test:\(canary.port)/hook"

        // One delivery, one lookup: the public answer is checked and connected to.
        let first = await sender.send(id: "msg_1", url: url, body: Array(#"{"n":1}"#.utf8), secret: secret)
        #expect(first == .delivered(httpStatus: 200))
        #expect(scripted.lookups == ["rebind.test"])
        #expect(standIn.count == 1)
        #expect(standIn.requests.first?.headers["host"] == "rebind.test:\(canary.port)")
        #expect(standIn.requests.first.map { WebhookReceiver.signatureIsValid($0, secret: secret) } == true)

        // The next delivery's lookup answers loopback: refused before connecting.
        let second = await sender.send(id: "msg_2", url: url, body: Array(#"{"n":2}"#.utf8), secret: secret)
        #expect(second == .permanent(httpStatus: nil, errorClass: "forbidden_address"))

        // The one after is public again, over the kept client.
        let third = await sender.send(id: "msg_3", url: url, body: Array(#"{"n":3}"#.utf8), secret: secret)
        #expect(third == .delivered(httpStatus: 200))
        #expect(scripted.lookups.count == 3)
        #expect(standIn.requests.compactMap(\.webhookID) == ["msg_1", "msg_3"])
        #expect(sender.pinned.count == 1)
        #expect(canary.connections == 0, "a delivery reached the loopback canary")
        await Hooks.offPool { sender.syncShutdown() }
    }

    @Test("clients for names beyond the most kept are shut down once idle; a name comes back with a new one")
    func pinnedClientsBounded() async throws {
        let standIn = try WebhookReceiver(host: "127.0.0.2")
        defer { standIn.stop() }
        let scripted = ScriptedResolver([[Self.standInAddress]])
        let sender = WebhookSender(
            timeoutSeconds: 5, allowPrivate: false, connectionsPerHost: 4, resolver: scripted.resolver,
            isPublic: { $0 == Self.standInAddress }, pinnedClients: 1)
        let secret = Hooks.newSecret()
        let hosts = ["a.test", "b.test", "a.test", "c.test"]
        for (index, host) in hosts.enumerated() {
            let outcome = await sender.send(
                id: "msg_\(index)", url: "http://\(host):\(standIn.port())/hook", body: Array("{}".utf8),
                secret: secret)
            #expect(outcome == .delivered(httpStatus: 200), "\(host)")
            #expect(sender.pinned.count == 1)
        }
        let port = standIn.port()
        #expect(standIn.requests.compactMap { $0.headers["host"] } == hosts.map { "\($0):\(port)" })
        await Hooks.offPool { sender.syncShutdown() }
        #expect(sender.pinned.count == 0)
        // After the shutdown no client is made: the delivery fails as a connection error, to be retried.
        let late = await sender.send(
            id: "msg_late", url: "http://a.test:\(port)/hook", body: Array("{}".utf8), secret: secret)
        #expect(late == .retryable(httpStatus: nil, errorClass: "connection_error"))
    }

    @Test(
        "the target as checked: literals and allowed private targets connect as named, names to their checked address")
    func targets() async {
        func check(_ url: String, allowPrivate: Bool = false, _ answer: [AddressPolicy.Address]) async -> Result<
            WebhookTarget, WebhookTarget.Refusal
        > {
            await WebhookTarget.check(url, allowPrivate: allowPrivate, resolver: HostResolver { _ in answer })
        }
        let public4 = AddressPolicy.Address.v4(0x5DB8_D822)  // 93.184.216.34
        let public6 = AddressPolicy.Address.v6([0x26, 0x06, 0x47, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x11, 0x11])
        #expect(
            await check("https://hooks.example.com/x", [public4])
                == .success(WebhookTarget(host: "hooks.example.com", pinnedAddress: "93.184.216.34")))
        #expect(
            await check("https://hooks.example.com:8443/x", [public6, public4])
                == .success(WebhookTarget(host: "hooks.example.com", pinnedAddress: "2606:4700::1111")))
        #expect(await check("https://hooks.example.com/x", [public4, Self.loopback]) == .failure(.forbiddenAddress))
        #expect(await check("https://hooks.example.com/x", []) == .failure(.unresolvable))
        #expect(
            await check("https://93.184.216.34/x", [Self.loopback])
                == .success(WebhookTarget(host: "93.184.216.34", pinnedAddress: nil)))
        #expect(
            await check("https://[2606:4700::1111]/x", [Self.loopback])
                == .success(WebhookTarget(host: "2606:4700::1111", pinnedAddress: nil)))
        #expect(await check("http://127.0.0.1./x", [public4]) == .failure(.forbiddenAddress))
        #expect(
            await check("http://hooks.test/x", allowPrivate: true, [Self.loopback])
                == .success(WebhookTarget(host: "hooks.test", pinnedAddress: nil)))
        #expect(await check("ftp://hooks.example.com/x", [public4]) == .failure(.malformed))
    }
}
