import ActionHookCore
import Foundation
import Testing

/// The send side's pure parts: a send body decoded and validated, and the rows it plans (what a reply
/// bound to a sent notification decides is in IngestPlanTests).
@Suite("Send: request and plan")
struct SendPlanTests {
    static let now = Date(timeIntervalSince1970: 1_800_000_000)
    static let token1 = String(repeating: "ab", count: 32)
    static let token2 = String(repeating: "cd", count: 32)

    static func failure(_ text: String) -> [String] {
        do {
            _ = try SendRequest.decode(json(text), now: now)
            return []
        } catch {
            return error.errors.map(\.pointer).sorted()
        }
    }

    @Test(
        "bad bodies: each problem at its pointer",
        arguments: [
            (#"{"aps": {"alert": "x"}}"#, ["/to"]),
            (#"{"to": [], "aps": {}}"#, ["/to"]),
            (#"{"to": ["zz"], "aps": {}}"#, ["/to/0"]),
            (#"{"to": [{"recipient": "a"}]}"#, ["/to/0/deviceToken"]),
            (#"{"to": ["\#(token1)", "\#(token1.uppercased())"]}"#, ["/to/1"]),
            (#"{"to": ["\#(token1)"], "aps": {"category": "c"}}"#, ["/aps/category"]),
            (#"{"to": ["\#(token1)"], "userInfo": {"actionhook": {}}}"#, ["/userInfo/actionhook"]),
            (#"{"to": ["\#(token1)"], "ttlSeconds": 0}"#, ["/ttlSeconds"]),
            (
                #"{"to": ["\#(token1)"], "ttlSeconds": 60, "expiresAt": "2099-01-01T00:00:00Z"}"#,
                ["/expiresAt", "/ttlSeconds"]
            ),
            (#"{"to": ["\#(token1)"], "expiresAt": "2020-01-01T00:00:00Z"}"#, ["/expiresAt"]),
            (#"{"to": ["\#(token1)"], "priority": 7}"#, ["/priority"]),
            (#"{"to": ["\#(token1)"], "answers": "each", "replaceOnAnswer": true}"#, ["/replaceOnAnswer"]),
            (
                #"{"to": ["\#(token1)"], "onNoReply": [{"afterSeconds": 5, "followUps": []}]}"#,
                ["/onNoReply/0/followUps"]
            ),
            (
                #"{"to": ["\#(token1)"], "onNoReply": [{"afterSeconds": 5, "followUps": [{"type": "remind"}]}, {"afterSeconds": 5, "followUps": [{"type": "remind"}]}]}"#,
                ["/onNoReply/1/afterSeconds"]
            ),
            (
                #"{"to": ["\#(token1)"], "onNoReply": [{"afterSeconds": 5, "followUps": [{"type": "call"}]}]}"#,
                ["/onNoReply/0/followUps/0/type"]
            ),
            (#"{"to": ["\#(token1)"], "webhookEvents": ["answered", "opened"]}"#, ["/webhookEvents/1"]),
            (#"{"to": ["\#(token1)"], "surprise": 1}"#, ["/surprise"]),
            (
                #"{"to": ["\#(token1)"], "onNoReply": [{"afterSeconds": 5, "followUps": [{"type": "escalate", "to": []}]}]}"#,
                ["/onNoReply/0/followUps/0/to"]
            ),
            (
                #"{"to": ["\#(token1)"], "onNoReply": [{"afterSeconds": 5, "followUps": [{"type": "escalate", "to": ["\#(token1)"]}]}]}"#,
                ["/onNoReply/0/followUps/0/to/0"]
            ),
            (
                #"{"to": ["\#(token1)"], "onNoReply": [{"afterSeconds": 5, "followUps": [{"type": "escalate", "to": ["\#(token2)"], "aps": {"category": "x"}}]}]}"#,
                ["/onNoReply/0/followUps/0/aps/category"]
            ),
            (
                #"{"to": ["\#(token1)"], "replaceOnAnswer": {"aps": {"category": "x"}}}"#,
                ["/replaceOnAnswer/aps/category"]
            ),
            (
                #"{"to": ["\#(token1)"], "replaceOnAnswer": {"aps": {"alert": "By {{nobody}}"}}}"#,
                ["/replaceOnAnswer/aps/alert"]
            ),
        ])
    func refused(_ body: String, pointers: [String]) {
        #expect(Self.failure(body) == pointers)
    }

    @Test("a payload over 4096 bytes once ActionHook's key is added is refused at /aps")
    func payloadLimit() {
        let fits = String(repeating: "x", count: 3800)
        #expect(Self.failure(#"{"to": ["\#(Self.token1)"], "aps": {"alert": "\#(fits)"}}"#).isEmpty)
        let over = String(repeating: "x", count: 4000)
        #expect(Self.failure(#"{"to": ["\#(Self.token1)"], "aps": {"alert": "\#(over)"}}"#) == ["/aps"])
    }

    @Test("the plan: one push per device with the key, expiration in epoch seconds, the collapse id; steps and expiry")
    func plan() throws {
        let request = try SendRequest.decode(
            json(
                #"""
                {"to": ["\#(Self.token1)", {"deviceToken": "\#(Self.token2)", "recipient": "bob"}], "category": "c",
                 "aps": {"alert": "Hi"}, "userInfo": {"k": 1}, "ttlSeconds": 600, "webhookEvents": ["expired"],
                 "onNoReply": [{"afterSeconds": 60, "followUps": [{"type": "remind"}, {"type": "webhook"}]},
                               {"afterSeconds": 120, "followUps": [{"type": "escalate", "to": [{"deviceToken": "\#(String(repeating: "ef", count: 32))", "recipient": "boss"}]}]}]}
                """#), now: Self.now)
        let id = UUID()
        let plan = SendPlan(request, devices: request.to ?? [], id: id, now: Self.now)
        #expect(plan.expiresAt == Self.now.addingTimeInterval(600))
        #expect(plan.collapseId == id.lowercasedString)
        #expect(plan.rows.map(\.kind) == [.push, .push, .step, .step, .step, .step, .expiry])
        #expect(
            plan.rows.map(\.dueAt) == [Self.now, Self.now] + Array(repeating: Self.now.addingTimeInterval(60), count: 3)
                + [Self.now.addingTimeInterval(120), plan.expiresAt])
        #expect(plan.devices.map(\.recipient) == [nil, "bob", "boss"])
        let push = plan.rows[1].payload
        #expect(push.value(atPath: "expiration")?.intValue == 1_800_000_600)
        #expect(push.value(atPath: "collapseId")?.stringValue == id.lowercasedString)
        #expect(push.value(atPath: "payload.aps.category")?.stringValue == "c")
        #expect(push.value(atPath: "payload.k")?.intValue == 1)
        #expect(push.value(atPath: "payload.actionhook.n")?.stringValue == id.lowercasedString)
        #expect(push.value(atPath: "payload.actionhook.d")?.intValue == 1)
        #expect(push.value(atPath: "payload.actionhook.r")?.stringValue == "bob")
        #expect(push.value(atPath: "payload.actionhook.exp")?.intValue == 1_800_000_600)
        #expect(plan.rows[4].payload.value(atPath: "body.type")?.stringValue == "notification.unanswered")
        #expect(plan.rows[5].payload.value(atPath: "payload.actionhook.d")?.intValue == 2)
        #expect(plan.rows[6].payload.value(atPath: "body.type")?.stringValue == "notification.expired")
        #expect(plan.silenceAt == Self.now.addingTimeInterval(60))
        // The key read back from a reply's userInfo.
        let userInfo = try #require(push.value(atPath: "payload")?.objectValue)
        let key = try #require(NotificationKey.read(from: userInfo))
        #expect(key.notificationID == id && key.device == 1)
        #expect(
            NotificationKey.read(from: ["actionhook": .object(["n": .string("not-a-uuid"), "d": .integer(0)])]) == nil)
        #expect(
            NotificationKey.read(from: ["actionhook": .object(["n": .string(id.uuidString), "d": .integer(1 << 31)])])
                == nil)
    }

    @Test("a step webhook's body is the caller's data inside notification.unanswered, never the envelope itself")
    func stepWebhookEnvelope() throws {
        let request = try SendRequest.decode(
            json(
                #"""
                {"to": ["\#(Self.token1)"], "subject": "42",
                 "onNoReply": [{"afterSeconds": 60, "followUps": [
                    {"type": "webhook", "body": {"type": "invite.accepted", "eventId": "42"}},
                    {"type": "webhook", "url": "https://hooks.example.com/steps", "body": "plain text"},
                    {"type": "webhook"}]}]}
                """#), now: Self.now)
        let id = UUID()
        let plan = SendPlan(request, devices: request.to ?? [], id: id, now: Self.now)
        let steps = plan.rows.filter { $0.kind == .step }.map(\.payload)
        try #require(steps.count == 3)
        for (index, payload) in steps.enumerated() {
            #expect(payload.value(atPath: "body.type")?.stringValue == "notification.unanswered", "step \(index)")
            #expect(payload.value(atPath: "body.timestamp")?.stringValue == "2027-01-15T08:01:00.000Z")
            #expect(payload.value(atPath: "body.data.notification.id")?.stringValue == id.lowercasedString)
            #expect(payload.value(atPath: "body.data.notification.subject")?.stringValue == "42")
            #expect(payload.value(atPath: "body.data.step")?.intValue == 0)
            #expect(payload.value(atPath: "body.data.afterSeconds")?.intValue == 60)
            #expect(payload.value(atPath: "body.eventId") == nil)
            #expect(payload.value(atPath: "body")?.objectValue?.keys.sorted() == ["data", "timestamp", "type"])
        }
        #expect(
            steps[0].value(atPath: "body.data.body")
                == .object(["type": .string("invite.accepted"), "eventId": .string("42")]))
        #expect(steps[0].value(atPath: "url") == .null)
        #expect(steps[1].value(atPath: "body.data.body") == .string("plain text"))
        #expect(steps[1].value(atPath: "url")?.stringValue == "https://hooks.example.com/steps")
        #expect(steps[2].value(atPath: "body.data.body") == nil)
    }

    @Test(
        "a step's URL: on the app's webhook origin, and not private on a strict instance",
        arguments: [
            // (step url, app endpoint, private allowed, refused)
            ("https://hooks.example.com/other", "https://hooks.example.com/app", false, false),
            ("https://HOOKS.example.com./x?y=1", "https://hooks.example.com/app", false, false),
            ("https://hooks.example.com:443/x", "https://hooks.example.com/app", false, false),
            ("HTTPS://hooks.example.com/x", "https://hooks.example.com/app", false, false),
            ("http://hooks.example.com/app", "https://hooks.example.com/app", false, true),
            ("https://hooks.example.com:8443/app", "https://hooks.example.com/app", false, true),
            ("https://evil.example.com/app", "https://hooks.example.com/app", false, true),
            ("https://hooks.example.com.evil.example/app", "https://hooks.example.com/app", false, true),
            ("https://hooks.example.com/app", nil, false, true),
            ("http://127.0.0.1:8080/step", "http://127.0.0.1:8080/app", false, true),
            ("http://127.0.0.1:8080/step", "http://127.0.0.1:8080/app", true, false),
            ("http://[::1]:8080/step", "http://127.0.0.1:8080/app", true, true),
            ("http://10.0.0.1/", "https://hooks.example.com/app", false, true),
            ("http://169.254.169.254/latest/meta-data/", "https://hooks.example.com/app", true, true),
        ] as [(String, String?, Bool, Bool)])
    func stepWebhookTargets(_ url: String, _ endpoint: String?, _ allowPrivate: Bool, _ refused: Bool) throws {
        let request = try SendRequest.decode(
            json(
                #"""
                {"to": ["\#(Self.token1)"], "onNoReply": [{"afterSeconds": 60, "followUps": [
                    {"type": "remind"}, {"type": "webhook"}, {"type": "webhook", "url": "\#(url)"}]}]}
                """#), now: Self.now)
        #expect(request.stepWebhookURLs.map(\.pointer) == ["/onNoReply/0/followUps/2/url"])
        do {
            try request.checkWebhookTargets(appEndpoint: endpoint, allowPrivate: allowPrivate)
            #expect(!refused, "\(url) was allowed")
        } catch {
            #expect(refused, "\(url) was refused")
            #expect(error.errors.map(\.pointer) == ["/onNoReply/0/followUps/2/url"])
            #expect(error.errors.allSatisfy { !$0.detail.contains(url) })
        }
    }

    @Test("a send that would queue more than 20,000 rows (reminders are a push per device) is refused")
    func rowLimit() throws {
        let devices = (0..<1000).map { #""\#(String(format: "%064x", $0 + 1))""# }.joined(separator: ",")
        let steps = (1...10).map {
            #"{"afterSeconds": \#($0 * 60), "followUps": [{"type": "remind"}, {"type": "remind"}, {"type": "remind"}]}"#
        }
        .joined(separator: ",")
        #expect(Self.failure(#"{"to": [\#(devices)], "onNoReply": [\#(steps)]}"#) == ["/onNoReply"])
        // A send to a subject's devices is checked once the store knows them.
        let bySubject = try SendRequest.decode(json(#"{"subject": "s", "onNoReply": [\#(steps)]}"#), now: Self.now)
        let many = (0..<1000).map { SendDevice(deviceToken: String(format: "%064x", $0 + 1)) }
        #expect(throws: ValidationFailure.self) { try bySubject.check(devices: many) }
        #expect(throws: ValidationFailure.self) { try bySubject.check(devices: []) }
        #expect(throws: Never.self) { try bySubject.check(devices: Array(many.prefix(10))) }
        let fewer = (1...10).map { #"{"afterSeconds": \#($0 * 60), "followUps": [{"type": "remind"}]}"# }.joined(
            separator: ",")
        #expect(Self.failure(#"{"to": [\#(devices)], "onNoReply": [\#(fewer)]}"#).isEmpty)
    }
}
