import ActionHookServer
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

/// F13, a server key's webhooks: a no-reply step's webhook is always ActionHook's own
/// `notification.unanswered` event, the caller's `body` carried inside it as data, and its `url` must be on
/// the origin of the app's webhook endpoint. Through HTTP to a live service and an in-process receiver.
@Suite("Step webhooks: the service's envelope, on the app's origin (F13)", .serialized)
struct StepWebhookTests {
    /// A service with its worker on, an app whose endpoint is `receiver`'s `/app`, and a server key.
    final class Bed: @unchecked Sendable {
        let receiver: WebhookReceiver
        let api: TestAPI
        let serverKey: String
        let secret = Hooks.newSecret()

        init() throws {
            receiver = try WebhookReceiver()
            api = try TestAPI {
                $0.workerEnabled = true
                $0.allowPrivateWebhooks = true
                $0.worker.pollInterval = .milliseconds(100)
            }
            _ = try Hooks.createApp(api, "steps", url: receiver.url("/app"), secret: secret)
            serverKey = try Self.serverKey(api, app: "steps")
        }

        deinit {
            receiver.stop()
        }

        static func serverKey(_ api: TestAPI, app: String) throws -> String {
            let key = try api.admin("POST", "/v1/apps/\(app)/keys", json: #"{"scope": "send"}"#)
            try #require(key.status == 201, "server key: \(key.status) \(key.text)")
            return try #require(key.json["secret"] as? String)
        }

        /// `POST /v1/apps/{app}/notifications` with one step of `followUps`, due after a second.
        func send(app: String = "steps", key: String? = nil, _ followUps: String) throws -> TestResponse {
            try api.call(
                "POST", "/v1/apps/\(app)/notifications", token: key ?? serverKey,
                json: #"""
                    {"to": ["\#(APNsStandIn.deviceToken())"], "aps": {"alert": "Hi"}, "subject": "42",
                     "onNoReply": [{"afterSeconds": 1, "followUps": [\#(followUps)]}]}
                    """#)
        }
    }

    static func pointers(_ response: TestResponse) -> [String] {
        (response.json["errors"] as? [[String: Any]] ?? []).compactMap { $0["pointer"] as? String }
    }

    @Test(
        "a step's body arrives inside notification.unanswered, signed: never as the whole webhook, with or without url"
    )
    func envelope() async throws {
        let bed = try Bed()
        let forged = #"{"type": "invite.accepted", "eventId": "42"}"#
        let sent = try bed.send(
            #"""
            {"type": "webhook", "body": \#(forged)},
            {"type": "webhook", "url": "\#(bed.receiver.url("/other-path"))", "body": \#(forged)},
            {"type": "webhook"}
            """#)
        try #require(sent.status == 202, "send: \(sent.status) \(sent.text)")
        let id = try #require(sent.json["id"] as? String)
        #expect(await bed.receiver.waitFor(count: 3))
        let requests = bed.receiver.requests
        #expect(requests.count == 3)
        #expect(requests.map(\.path).sorted() == ["/app", "/app", "/other-path"])
        for request in requests {
            #expect(WebhookReceiver.signatureIsValid(request, secret: bed.secret))
            let event = try #require(request.json, "\(request.bodyText)")
            #expect(event["type"] as? String == "notification.unanswered", "\(request.bodyText)")
            #expect(Set(event.keys) == ["type", "timestamp", "data"])
            #expect(event["eventId"] == nil)
            let data = try #require(event["data"] as? [String: Any])
            #expect((data["notification"] as? [String: Any])?["id"] as? String == id)
            #expect((data["notification"] as? [String: Any])?["subject"] as? String == "42")
            #expect(data["step"] as? Int == 0 && data["afterSeconds"] as? Int == 1)
        }
        let bodies = requests.compactMap { ($0.json?["data"] as? [String: Any])?["body"] as? [String: Any] }
        #expect(bodies.count == 2)
        for body in bodies {
            #expect(body["type"] as? String == "invite.accepted" && body["eventId"] as? String == "42")
        }
        let receipt = try bed.api.call("GET", "/v1/apps/steps/notifications/\(id)", token: bed.serverKey)
        #expect((receipt.json["steps"] as? [[String: Any]])?.map { $0["fired"] as? Bool } == [true])
    }

    @Test("a step's url off the app's webhook origin, or for an app without one, is a 422 at its pointer; nothing sent")
    func origin() async throws {
        let bed = try Bed()
        let elsewhere = try WebhookReceiver()
        defer { elsewhere.stop() }
        let port = bed.receiver.port()
        let refused = [
            elsewhere.url("/app"),  // another port on the same host
            "https://127.0.0.1:\(port)/app",  // another scheme
            "http://localhost:\(port)/app",  // another host name for the same machine
            "https://hooks.example.com/app",
        ]
        for url in refused {
            let answer = try bed.send(#"{"type": "remind"}, {"type": "webhook", "url": "\#(url)"}"#)
            #expect(answer.status == 422, "\(url): \(answer.status) \(answer.text)")
            #expect(Self.pointers(answer) == ["/onNoReply/0/followUps/1/url"], "\(url): \(answer.text)")
            #expect(!answer.text.contains(url))
        }

        // An app without a webhook endpoint: no step URL is allowed; a step without one is not refused here.
        _ = try bed.api.createApp("no-endpoint")
        let otherKey = try Bed.serverKey(bed.api, app: "no-endpoint")
        let none = try bed.send(
            app: "no-endpoint", key: otherKey, #"{"type": "webhook", "url": "\#(bed.receiver.url("/app"))"}"#)
        #expect(none.status == 422, "\(none.status) \(none.text)")
        #expect(Self.pointers(none) == ["/onNoReply/0/followUps/0/url"])
        #expect(try bed.api.count("SELECT count(*) AS n FROM notifications") == 0)

        // The same origin, spelt differently and with a path of its own, is the app's.
        let accepted = try bed.send(
            #"{"type": "webhook", "url": "HTTP://127.0.0.1:\#(port)/steps/late", "body": {"n": 1}}"#)
        #expect(accepted.status == 202, "\(accepted.status) \(accepted.text)")
        #expect(await bed.receiver.waitFor(count: 1))
        #expect(bed.receiver.requests.map(\.path) == ["/steps/late"])
        #expect(elsewhere.count == 0)
        #expect(try bed.api.count("SELECT count(*) AS n FROM notifications") == 1)
    }
}
