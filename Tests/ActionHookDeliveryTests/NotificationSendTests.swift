import ActionHookServer
import Foundation
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

/// The send side end to end: a live service with its worker on, pushing to the APNs stand-in and
/// delivering webhooks to an in-process receiver. Replies are forwarded with the `userInfo` the stand-in
/// received, as an app forwards what iOS handed it.
@Suite("Sending notifications: replies bound, first answer wins, silence acts", .serialized)
struct NotificationSendTests {
    /// Immutable after init (its parts are thread-safe), so it is shared by the concurrent replies.
    /// A service, an app with APNs credentials and a webhook at `receiver`, the `INVITE` category with
    /// accept/decline rules (accept's rule sends a webhook), and a server key.
    final class Bed: @unchecked Sendable {
        let standIn: APNsStandIn
        let receiver: WebhookReceiver
        let api: TestAPI
        let app: String
        let ingestKey: String
        let serverKey: String
        let secret = Hooks.newSecret()

        init(app: String = "invites", worker: Bool = true) throws {
            let standIn = try APNsStandIn()
            self.standIn = standIn
            receiver = try WebhookReceiver()
            api = try TestAPI {
                standIn.configure(&$0)
                $0.workerEnabled = worker
                $0.allowPrivateWebhooks = true
                $0.worker.pollInterval = .milliseconds(100)
                // Tests answer from two devices many times a second.
                $0.deviceRateLimitPerSecond = 10_000
            }
            self.app = app
            ingestKey = try api.createApp(
                app,
                extra: standIn.appSettingsJSON
                    + #", "webhook": {"url": "\#(receiver.url("/app"))", "secret": "\#(secret)"}"#)
            let category = try api.admin(
                "PUT", "/v1/apps/\(app)/categories/INVITE",
                json: #"""
                    {"actions": [{"identifier": "ACCEPT", "title": "Accept", "options": []},
                                 {"identifier": "DECLINE", "title": "Decline", "options": ["destructive"]}],
                     "options": [], "intentIdentifiers": [], "subjectKey": "eventId"}
                    """#)
            try #require([200, 201].contains(category.status), "category: \(category.status) \(category.text)")
            try Hooks.saveRule(
                api, app: app,
                #"""
                {"id": "accept", "match": {"category": "INVITE", "action": "ACCEPT"}, "handler": {"type": "accept"},
                 "followUps": [{"channel": "webhook", "url": "\#(receiver.url("/rule"))",
                                "body": {"notification": "{{notification.id}}", "recipient": "{{recipient}}"}}]}
                """#)
            try Hooks.saveRule(
                api, app: app,
                #"{"id": "decline", "match": {"category": "INVITE", "action": "DECLINE"}, "handler": {"type": "decline"}}"#
            )
            let key = try api.admin("POST", "/v1/apps/\(app)/keys", json: #"{"scope": "send"}"#)
            try #require(key.status == 201, "server key: \(key.status) \(key.text)")
            serverKey = try #require(key.json["secret"] as? String)
            #expect(serverKey.hasPrefix("ahs_"))
            #expect(key.json["scope"] as? String == "send")
        }

        deinit {
            receiver.stop()
            standIn.stop()
        }

        /// `POST /v1/apps/{app}/notifications` with the server key; requires `status`.
        func send(_ json: String, key: String? = nil, headers: [(String, String)] = [], status: Int = 202) throws
            -> [String: Any]
        {
            let answer = try api.call(
                "POST", "/v1/apps/\(app)/notifications", token: key ?? serverKey, json: json, headers: headers)
            try #require(answer.status == status, "send: \(answer.status) \(answer.text)")
            return answer.json
        }

        /// The receipt, with the server key.
        func receipt(_ id: String) throws -> [String: Any] {
            let answer = try api.call("GET", "/v1/apps/\(app)/notifications/\(id)", token: serverKey)
            try #require(answer.status == 200, "receipt: \(answer.status) \(answer.text)")
            return answer.json
        }

        /// Forwards a reply to the push the stand-in delivered to `token`, with its `userInfo` as received.
        func reply(_ action: String, token: String, userInfo: [String: Any]) throws -> TestResponse {
            let body: [String: Any] = [
                "actionIdentifier": action, "deviceToken": token, "userInfo": userInfo,
                "responseId": UUID().uuidString.lowercased(),
            ]
            let data = try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])
            return try api.ingest(key: ingestKey, json: String(decoding: data, as: UTF8.self))
        }

        /// Waits until every follow-up of the notification of these kinds has one of `statuses`.
        func waitForKinds(_ notification: String, _ kinds: [String], in statuses: [String], count: Int) async throws {
            let deadline = Date().addingTimeInterval(30)
            while true {
                let done = try api.count(
                    """
                    SELECT count(*) AS n FROM followups WHERE notification_id = \(UUID(uuidString: notification)!)
                        AND kind = ANY(\(kinds)::text[]) AND status = ANY(\(statuses)::text[])
                    """)
                if done >= count { return }
                try #require(
                    Date() < deadline, "follow-ups \(kinds) of \(notification): \(done) of \(count) in \(statuses)")
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    static func devices(_ tokens: [(String, String?)]) -> String {
        tokens.map { token, recipient in
            recipient.map { #"{"deviceToken": "\#(token)", "recipient": "\#($0)"}"# } ?? #""\#(token)""#
        }.joined(separator: ", ")
    }

    @Test(
        "send to 3 devices of 2 recipients; one accepts: the rule acts once, the others are replaced, the receipt says who and how fast, no step fires"
    )
    func firstAnswerEndToEnd() async throws {
        let bed = try Bed()
        let (a1, a2, b1) = (APNsStandIn.deviceToken(), APNsStandIn.deviceToken(), APNsStandIn.deviceToken())
        let sent = try bed.send(
            #"""
            {"to": [\#(Self.devices([(a1, "alice"), (a2, "alice"), (b1, "bob")]))], "category": "INVITE",
             "aps": {"alert": {"title": "Dinner?", "body": "Friday 8pm"}, "sound": "default", "interruption-level": "time-sensitive"},
             "userInfo": {"eventId": 42}, "subject": "event-42", "ttlSeconds": 3600, "priority": 10,
             "replaceOnAnswer": {"aps": {"alert": {"title": "Dinner?", "body": "Answered by {{recipient}}"}}},
             "webhookEvents": ["answered"],
             "onNoReply": [{"afterSeconds": 3600, "followUps": [{"type": "remind"}, {"type": "webhook"}]}]}
            """#)
        let id = try #require(sent["id"] as? String)
        let collapse = try #require(sent["collapseId"] as? String)
        #expect(collapse == id)
        let expiresAt = try #require((sent["expiresAt"] as? String).flatMap(Self.date))
        let devices = try #require(sent["devices"] as? [[String: Any]])
        #expect(devices.map { $0["recipient"] as? String } == ["alice", "alice", "bob"])
        try await bed.waitForKinds(id, ["push"], in: ["delivered"], count: 3)

        // Each push: apns-expiration is expiresAt in epoch seconds, the collapse id, the key.
        var userInfos: [String: [String: Any]] = [:]
        for (position, token) in [a1, a2, b1].enumerated() {
            // Delivery is at least once: a push retried on a busy machine comes again with the same apns-id.
            let requests = try bed.standIn.requests(token: token)
            try #require(!requests.isEmpty)
            #expect(Set(requests.compactMap { $0.apnsID?.lowercased() }).count == 1)
            let push = try #require(requests.last)
            #expect(push.headers["apns-expiration"] == String(Int(expiresAt.timeIntervalSince1970.rounded(.up))))
            #expect(push.headers["apns-collapse-id"] == collapse)
            #expect(push.headers["apns-push-type"] == "alert")
            #expect(push.headers["apns-priority"] == "10")
            #expect(push.apnsID?.lowercased() == devices[position]["followUpId"] as? String)
            #expect(push.aps?["category"] as? String == "INVITE")
            #expect(push.aps?["interruption-level"] as? String == "time-sensitive")
            #expect(push.payloadObject?["eventId"] as? Int == 42)
            let key = try #require(push.payloadObject?["actionhook"] as? [String: Any])
            #expect(key["n"] as? String == id)
            #expect(key["d"] as? Int == position)
            #expect(key["r"] as? String == (position < 2 ? "alice" : "bob"))
            userInfos[token] = push.payloadObject
        }

        let accepted = try bed.reply("ACCEPT", token: a2, userInfo: userInfos[a2]!)
        #expect(accepted.status == 202)
        #expect(accepted.json["outcome"] as? String == "accepted")
        #expect(accepted.json["notificationId"] as? String == id)
        #expect(accepted.json["recipient"] as? String == "alice")
        // Another device answers later: stored, superseded, nothing acts.
        let late = try bed.reply("DECLINE", token: b1, userInfo: userInfos[b1]!)
        #expect(late.status == 202)
        #expect(late.json["outcome"] as? String == "superseded")
        #expect((late.json["followUps"] as? [Any])?.isEmpty == true)

        try await bed.waitForKinds(id, ["replace"], in: ["delivered"], count: 2)
        try await bed.waitForKinds(id, ["answered"], in: ["delivered"], count: 1)
        let ruleFollowUp = try #require((accepted.json["followUps"] as? [[String: Any]])?.first?["id"] as? String)
        #expect(try await Hooks.waitFor(bed.api, ruleFollowUp, status: "delivered").status == "delivered")

        // The replacing pushes: to the two other devices, same collapse id, no buttons.
        for token in [a1, b1] {
            let requests = try bed.standIn.requests(token: token)
            try #require(requests.count == 2, "\(requests.count) pushes to a device that did not answer")
            #expect(requests[1].headers["apns-collapse-id"] == collapse)
            #expect(requests[1].aps?["category"] == nil)
            #expect((requests[1].aps?["alert"] as? [String: Any])?["body"] as? String == "Answered by alice")
        }
        #expect(try bed.standIn.requests(token: a2).count == 1)
        // The rule's webhook, templated with the binding, once; notification.answered once.
        let ruleCalls = bed.receiver.requests.filter { $0.path == "/rule" }
        try #require(ruleCalls.count == 1)
        let ruleBody = try JSONSerialization.jsonObject(with: Data(ruleCalls[0].body)) as? [String: Any]
        #expect(ruleBody?["notification"] as? String == id)
        #expect(ruleBody?["recipient"] as? String == "alice")
        let events = bed.receiver.requests.filter { $0.path == "/app" }.compactMap {
            try? JSONSerialization.jsonObject(with: Data($0.body)) as? [String: Any]
        }
        #expect(events.map { $0["type"] as? String } == ["notification.answered"])
        #expect(
            WebhookReceiver.signatureIsValid(bed.receiver.requests.first { $0.path == "/app" }!, secret: bed.secret))

        // The no-reply step was cancelled by the answer and never fires.
        #expect(
            try bed.api.count(
                """
                SELECT count(*) AS n FROM followups WHERE notification_id = \(UUID(uuidString: id)!)
                    AND kind = 'step' AND status <> 'cancelled'
                """) == 0)

        let receipt = try bed.receipt(id)
        #expect(receipt["status"] as? String == "answered")
        let answer = try #require(receipt["answer"] as? [String: Any])
        #expect(answer["responseId"] as? String == accepted.json["id"] as? String)
        #expect(answer["recipient"] as? String == "alice")
        #expect(answer["deviceToken"] as? String == a2)
        #expect((answer["latencyMs"] as? Int ?? -1) >= 0)
        // The latency is the one the database recorded: reply received minus sent.
        #expect(
            try bed.api.count(
                """
                SELECT count(*) AS n FROM responses r JOIN notifications n ON n.id = r.notification_id
                WHERE r.id = \(UUID(uuidString: answer["responseId"] as! String)!)
                    AND (extract(epoch FROM r.received_at - n.created_at) * 1000)::bigint = \(answer["latencyMs"] as! Int)
                """) == 1)
        let superseded = try #require(receipt["superseded"] as? [[String: Any]])
        #expect(superseded.map { $0["recipient"] as? String } == ["bob"])
        let receiptDevices = try #require(receipt["devices"] as? [[String: Any]])
        #expect(receiptDevices.count == 3)
        for device in receiptDevices {
            let push = try #require(device["push"] as? [String: Any])
            #expect(push["status"] as? String == "delivered")
            #expect(push["httpStatus"] as? Int == 200)
        }
        let steps = try #require(receipt["steps"] as? [[String: Any]])
        #expect(steps.count == 1)
        #expect(steps[0]["fired"] as? Bool == false)
        // Metrics: one send of 3 pushes, one first answer with its time to answer, by category.
        let metrics = try bed.api.call("GET", "/metrics", token: nil).text
        #expect(metrics.contains(#"actionhook_notifications_sent_total{app="invites"} 1"#), "\(metrics)")
        #expect(metrics.contains(#"actionhook_notification_pushes_total{app="invites"} 3"#))
        #expect(metrics.contains(#"actionhook_notifications_answered_total{app="invites",category="INVITE"} 1"#))
        #expect(metrics.contains(#"actionhook_notification_answer_seconds_count{category="INVITE"} 1"#))
        let list = try bed.api.call(
            "GET", "/v1/apps/\(bed.app)/notifications?status=answered&subject=event-42", token: bed.serverKey)
        #expect((list.json["items"] as? [[String: Any]])?.map { $0["id"] as? String } == [id])
    }

    @Test("two devices answer one notification at once, 200 times: exactly one acts, the other is superseded")
    func concurrentAnswers() async throws {
        let bed = try Bed(app: "races", worker: false)
        let tokens = (0..<2).map { _ in APNsStandIn.deviceToken() }
        var outcomes: [String: Int] = [:]
        for _ in 0..<200 {
            let sent = try bed.send(
                #"{"to": [\#(Self.devices(tokens.map { ($0, nil) }))], "category": "INVITE", "aps": {"alert": "?"}}"#)
            let id = try #require(sent["id"] as? String)
            let lock = NSLock()
            nonisolated(unsafe) var results: [String] = []
            DispatchQueue.concurrentPerform(iterations: 2) { position in
                let userInfo: [String: Any] = [
                    "aps": ["category": "INVITE"], "actionhook": ["n": id, "d": position],
                ]
                // Any failure becomes its own "outcome", which the expectation below then shows.
                let outcome: String
                do {
                    let answer = try bed.reply("ACCEPT", token: tokens[position], userInfo: userInfo)
                    outcome = (answer.json["outcome"] as? String) ?? "status \(answer.status)"
                } catch {
                    outcome = "error \(error)"
                }
                lock.withLock { results.append(outcome) }
            }
            let pair = lock.withLock { results }.sorted()
            outcomes[pair.joined(separator: "+"), default: 0] += 1
        }
        #expect(outcomes == ["accepted+superseded": 200], "\(outcomes)")
        // The database agrees: every notification has one answer, and exactly one accepted reply.
        #expect(
            try bed.api.count(
                """
                SELECT count(*) AS n FROM notifications n WHERE answered_response_id IS NOT NULL
                    AND (SELECT count(*) FROM responses r WHERE r.notification_id = n.id AND r.outcome = 'accepted') = 1
                    AND (SELECT count(*) FROM responses r WHERE r.notification_id = n.id AND r.outcome = 'superseded') = 1
                    AND (SELECT outcome FROM responses r WHERE r.id = n.answered_response_id) = 'accepted'
                """) == 200)
    }

    @Test(
        "nobody answers: the reminder and notification.unanswered fire once, not early; an answer between steps cancels the escalation"
    )
    func silenceActs() async throws {
        let bed = try Bed(app: "silence")
        let (device, manager) = (APNsStandIn.deviceToken(), APNsStandIn.deviceToken())
        let sent = try bed.send(
            #"""
            {"to": [\#(Self.devices([(device, "ann")]))], "category": "INVITE", "aps": {"alert": "Stop the timer?"},
             "collapseId": "timer-7",
             "onNoReply": [{"afterSeconds": 1, "followUps": [{"type": "remind"}, {"type": "webhook"}]},
                           {"afterSeconds": 6, "followUps": [{"type": "escalate", "to": [{"deviceToken": "\#(manager)", "recipient": "boss"}],
                                                               "aps": {"alert": "Ann did not stop the timer"}}]}]}
            """#)
        let id = try #require(sent["id"] as? String)
        try await bed.waitForKinds(id, ["step"], in: ["delivered"], count: 2)
        // Both of the first step's follow-ups were due exactly 1 s after the send, and started no earlier.
        #expect(
            try bed.api.count(
                """
                SELECT count(*) AS n FROM followups f JOIN notifications n ON n.id = f.notification_id
                JOIN delivery_attempts a ON a.followup_id = f.id
                WHERE n.id = \(UUID(uuidString: id)!) AND f.step = 0
                    AND abs(extract(epoch FROM f.due_at - n.created_at) - 1) < 0.001 AND a.started_at >= f.due_at
                """) == 2)
        let reminders = try bed.standIn.requests(token: device)
        try #require(reminders.count == 2, "pushes to the device: \(reminders.count)")
        #expect(reminders.allSatisfy { $0.headers["apns-collapse-id"] == "timer-7" })
        let unanswered = bed.receiver.requests.filter { $0.path == "/app" }
        try #require(unanswered.count == 1)
        let event = try JSONSerialization.jsonObject(with: Data(unanswered[0].body)) as? [String: Any]
        #expect(event?["type"] as? String == "notification.unanswered")
        #expect((event?["data"] as? [String: Any])?["afterSeconds"] as? Int == 1)
        #expect(try bed.receipt(id)["status"] as? String == "unanswered")

        // An answer between the steps: the escalation is cancelled and never sent.
        let answered = try bed.reply("DECLINE", token: device, userInfo: reminders[1].payloadObject ?? [:])
        #expect(answered.json["outcome"] as? String == "declined")
        #expect(
            try bed.api.count(
                """
                SELECT count(*) AS n FROM followups WHERE notification_id = \(UUID(uuidString: id)!) AND step = 1
                    AND status = 'cancelled'
                """) == 1)
        // Past the second step's due time by the database clock, with room for a claim.
        let wait = try bed.api.query(
            "SELECT extract(epoch FROM created_at + interval '7.5 seconds' - now())::float8 AS s FROM notifications")
        try await Task.sleep(for: .seconds(max(0, try wait[0].decode("s", as: Double.self))))
        #expect(try bed.standIn.requests(token: manager).isEmpty)
        #expect(bed.receiver.requests.filter { $0.path == "/app" }.count == 1)
        let receipt = try bed.receipt(id)
        let steps = try #require(receipt["steps"] as? [[String: Any]])
        #expect(steps.map { $0["fired"] as? Bool } == [true, false])
    }

    @Test("nobody answers at all: the reminder, then the escalation to another device with its own key, each once")
    func escalationFires() async throws {
        let bed = try Bed(app: "escalation")
        let (device, manager) = (APNsStandIn.deviceToken(), APNsStandIn.deviceToken())
        let sent = try bed.send(
            #"""
            {"to": [{"deviceToken": "\#(device)", "recipient": "ann"}], "category": "INVITE", "aps": {"alert": "Timer done"},
             "onNoReply": [{"afterSeconds": 1, "followUps": [{"type": "remind"}]},
                           {"afterSeconds": 2, "followUps": [{"type": "escalate", "to": [{"deviceToken": "\#(manager)", "recipient": "boss"}],
                                                               "aps": {"alert": "Ann did not stop the timer"}}]}]}
            """#)
        let id = try #require(sent["id"] as? String)
        try await bed.waitForKinds(id, ["step"], in: ["delivered"], count: 2)
        // Each step's rows were due at the send's time plus afterSeconds, and none started early.
        #expect(
            try bed.api.count(
                """
                SELECT count(*) AS n FROM followups f JOIN notifications n ON n.id = f.notification_id
                JOIN delivery_attempts a ON a.followup_id = f.id
                WHERE n.id = \(UUID(uuidString: id)!) AND f.kind = 'step'
                    AND abs(extract(epoch FROM f.due_at - n.created_at) - (f.step + 1)) < 0.001
                    AND a.started_at >= f.due_at
                """) == 2)
        #expect(try bed.standIn.requests(token: device).count == 2)
        let escalations = try bed.standIn.requests(token: manager)
        try #require(escalations.count == 1)
        #expect((escalations[0].aps?["alert"] as? String) == "Ann did not stop the timer")
        #expect(escalations[0].aps?["category"] as? String == "INVITE")
        let key = try #require(escalations[0].payloadObject?["actionhook"] as? [String: Any])
        #expect(key["n"] as? String == id && key["d"] as? Int == 1 && key["r"] as? String == "boss")
        // The manager's answer is bound to the same notification and wins.
        let answer = try bed.reply("ACCEPT", token: manager, userInfo: escalations[0].payloadObject ?? [:])
        #expect(answer.json["outcome"] as? String == "accepted")
        #expect(answer.json["recipient"] as? String == "boss")
        let receipt = try bed.receipt(id)
        #expect((receipt["steps"] as? [[String: Any]])?.map { $0["fired"] as? Bool } == [true, true])
        #expect((receipt["answer"] as? [String: Any])?["recipient"] as? String == "boss")
    }

    @Test("a reply after expiresAt is 410 and acts on nothing; notification.expired fires once when asked")
    func expiry() async throws {
        let bed = try Bed(app: "expiry")
        let device = APNsStandIn.deviceToken()
        let sent = try bed.send(
            #"""
            {"to": ["\#(device)"], "category": "INVITE", "aps": {"alert": "Quick!"}, "ttlSeconds": 1,
             "webhookEvents": ["expired"],
             "onNoReply": [{"afterSeconds": 2, "followUps": [{"type": "webhook", "url": "\#(bed.receiver.url("/step"))"}]}]}
            """#)
        let id = try #require(sent["id"] as? String)
        try await bed.waitForKinds(id, ["expiry"], in: ["delivered"], count: 1)
        let push = try #require(try bed.standIn.requests(token: device).first)
        let late = try bed.reply("ACCEPT", token: device, userInfo: push.payloadObject ?? [:])
        #expect(late.status == 410)
        #expect(late.json["expiresAt"] as? String == sent["expiresAt"] as? String)
        #expect(
            try bed.api.count(
                """
                SELECT count(*) AS n FROM responses WHERE notification_id = \(UUID(uuidString: id)!) AND outcome = 'expired'
                """) == 1)
        #expect(try bed.api.count("SELECT count(*) AS n FROM followups WHERE response_id IS NOT NULL") == 0)
        let events = bed.receiver.requests.filter { $0.path == "/app" }
        try #require(events.count == 1)
        let event = try JSONSerialization.jsonObject(with: Data(events[0].body)) as? [String: Any]
        #expect(event?["type"] as? String == "notification.expired")
        #expect(try bed.receipt(id)["status"] as? String == "expired")
        // A step due after the expiry is cancelled when claimed, never sent.
        try await bed.waitForKinds(id, ["step"], in: ["cancelled"], count: 1)
        #expect(bed.receiver.requests.filter { $0.path == "/step" }.isEmpty)
        // Cancelled by the claim that found it expired: no attempt counted, no lease held.
        #expect(
            try bed.api.count(
                """
                SELECT count(*) AS n FROM followups WHERE notification_id = \(UUID(uuidString: id)!) AND kind = 'step'
                    AND attempt = 0 AND lease_until IS NULL AND lease_token IS NULL
                """) == 1)
    }

    @Test("a send is idempotent by Idempotency-Key: the same body replays, another body is 422; one push per device")
    func idempotentSend() throws {
        let bed = try Bed(app: "idem", worker: false)
        let body =
            #"{"to": ["\#(APNsStandIn.deviceToken())", "\#(APNsStandIn.deviceToken())"], "category": "INVITE", "aps": {"alert": "Hi"}}"#
        let first = try bed.send(body, headers: [("Idempotency-Key", "send-1")])
        let again = try bed.api.call(
            "POST", "/v1/apps/\(bed.app)/notifications", token: bed.serverKey, json: body,
            headers: [("Idempotency-Key", "send-1")])
        #expect(again.status == 200)
        #expect(again.headers["idempotent-replayed"] ?? again.headers["Idempotent-Replayed"] == "true")
        #expect(again.json["id"] as? String == first["id"] as? String)
        _ = try bed.send(
            #"{"to": ["\#(APNsStandIn.deviceToken())"], "category": "INVITE", "aps": {"alert": "Hi"}}"#,
            headers: [("Idempotency-Key", "send-1")], status: 422)
        #expect(try bed.api.count("SELECT count(*) AS n FROM notifications") == 1)
        #expect(try bed.api.count("SELECT count(*) AS n FROM followups WHERE kind = 'push'") == 2)
    }

    @Test(
        "keys: a server key sends for its app only (404 elsewhere), an ingest key cannot send (403), a server key cannot reply (403)"
    )
    func isolation() throws {
        let bed = try Bed(app: "app-a", worker: false)
        _ = try bed.api.createApp("app-b")
        let other = try bed.api.admin("POST", "/v1/apps/app-b/keys", json: #"{"scope": "send"}"#)
        let otherKey = try #require(other.json["secret"] as? String)
        let body = #"{"to": ["\#(APNsStandIn.deviceToken())"], "aps": {"alert": "Hi"}}"#
        let sent = try bed.send(body)
        let id = try #require(sent["id"] as? String)

        #expect(
            try bed.api.call("POST", "/v1/apps/app-b/notifications", token: bed.serverKey, json: body).status == 404)
        #expect(try bed.api.call("GET", "/v1/apps/app-b/notifications", token: bed.serverKey).status == 404)
        #expect(try bed.api.call("GET", "/v1/apps/app-a/notifications/\(id)", token: otherKey).status == 404)
        #expect(try bed.api.call("GET", "/v1/apps/app-b/notifications/\(id)", token: otherKey).status == 404)
        #expect(
            try bed.api.call("POST", "/v1/apps/app-a/notifications", token: bed.ingestKey, json: body).status == 403)
        #expect(try bed.api.call("POST", "/v1/apps/app-a/notifications", token: nil, json: body).status == 401)
        #expect(
            try bed.api.call("POST", "/v1/apps/app-a/notifications", token: "ahs_unknown", json: body).status == 401)
        #expect(try bed.api.call("GET", "/v1/apps/app-a", token: bed.serverKey).status == 401)
        #expect(try bed.api.ingest(key: bed.serverKey, json: #"{"actionIdentifier": "ACCEPT"}"#).status == 403)
        #expect(try bed.api.admin("GET", "/v1/apps/app-a/notifications/\(id)").status == 200)
        // A reply carrying app A's notification key, sent with app B's ingest key, stays unbound in B.
        let keyB = try bed.api.admin("POST", "/v1/apps/app-b/keys")
        let ingestB = try #require(keyB.json["secret"] as? String)
        let reply = try bed.api.ingest(
            key: ingestB, json: #"{"actionIdentifier": "ACCEPT", "userInfo": {"actionhook": {"n": "\#(id)", "d": 0}}}"#)
        #expect(reply.status == 202)
        #expect(reply.json["notificationId"] == nil)
        #expect(try bed.receipt(id)["status"] as? String == "pending")
    }

    @Test("a send to a subject goes to the devices that answered for it; an unknown category or a bad token is 422")
    func subjectDevicesAndValidation() throws {
        let bed = try Bed(app: "subjects", worker: false)
        let (one, two) = (APNsStandIn.deviceToken(), APNsStandIn.deviceToken())
        // Each device answers a notification about task-9 (the category's subject key is eventId).
        for token in [one, two] {
            let first = try bed.send(
                #"{"to": [{"deviceToken": "\#(token)", "recipient": "r-\#(token.prefix(4))"}], "category": "INVITE", "aps": {"alert": "?"}, "userInfo": {"eventId": "task-9"}, "subject": "task-9"}"#
            )
            let id = try #require(first["id"] as? String)
            let reply = try bed.reply(
                "DECLINE", token: token,
                userInfo: ["aps": ["category": "INVITE"], "eventId": "task-9", "actionhook": ["n": id, "d": 0]])
            #expect(reply.json["recipient"] as? String == "r-\(token.prefix(4))")
            #expect(reply.json["subject"] as? String == "task-9")
        }
        let sent = try bed.send(#"{"subject": "task-9", "aps": {"alert": "Still open"}}"#)
        let devices = try #require(sent["devices"] as? [[String: Any]])
        #expect(Set(devices.compactMap { $0["deviceToken"] as? String }) == [one, two])
        // A reply naming another device's position is bound, but gets neither that device nor its label.
        let sentID = try #require(sent["id"] as? String)
        let position = try #require(devices.firstIndex { $0["deviceToken"] as? String == one })
        let impostor = try bed.reply(
            "DECLINE", token: two,
            userInfo: ["aps": ["category": "INVITE"], "actionhook": ["n": sentID, "d": position]])
        #expect(impostor.json["notificationId"] as? String == sentID)
        #expect(impostor.json["recipient"] is NSNull)
        _ = try bed.send(#"{"subject": "nobody", "aps": {"alert": "?"}}"#, status: 422)
        let unknown = try bed.send(#"{"to": ["\#(one)"], "category": "NOPE", "aps": {"alert": "?"}}"#, status: 422)
        #expect((unknown["errors"] as? [[String: Any]])?.first?["pointer"] as? String == "/category")
        let bad = try bed.send(#"{"to": ["xyz"], "aps": {"alert": "?"}, "answers": "all"}"#, status: 422)
        #expect(
            Set((bad["errors"] as? [[String: Any]] ?? []).compactMap { $0["pointer"] as? String }) == [
                "/to/0", "/answers",
            ])
        let big = String(repeating: "x", count: 4000)
        _ = try bed.send(
            #"{"to": ["\#(one)"], "aps": {"alert": "\#(big)"}, "userInfo": {"pad": "\#(big)"}}"#, status: 422)
    }

    @Test(
        "apns-priority: 10 without a priority, 5 for a background push; a background push at 10 is a 422 in a send and in a rule"
    )
    func priorities() async throws {
        let bed = try Bed(app: "priority")
        let (alert, background) = (APNsStandIn.deviceToken(), APNsStandIn.deviceToken())
        let alertSend = try bed.send(#"{"to": ["\#(alert)"], "aps": {"alert": "Hi"}}"#)
        let backgroundSend = try bed.send(
            #"{"to": ["\#(background)"], "aps": {"content-available": 1}, "pushType": "background"}"#)
        for sent in [alertSend, backgroundSend] {
            try await bed.waitForKinds(try #require(sent["id"] as? String), ["push"], in: ["delivered"], count: 1)
        }
        let alertPush = try bed.standIn.requests(token: alert)
        let backgroundPush = try bed.standIn.requests(token: background)
        try #require(alertPush.count == 1 && backgroundPush.count == 1)
        #expect(alertPush[0].headers["apns-priority"] == "10")
        #expect(backgroundPush[0].headers["apns-push-type"] == "background")
        #expect(backgroundPush[0].headers["apns-priority"] == "5")

        let refused = try bed.send(
            #"{"to": ["\#(background)"], "aps": {"content-available": 1}, "pushType": "background", "priority": 10}"#,
            status: 422)
        #expect((refused["errors"] as? [[String: Any]])?.compactMap { $0["pointer"] as? String } == ["/priority"])
        _ = try bed.send(
            #"{"to": ["\#(background)"], "aps": {"content-available": 1}, "pushType": "background", "priority": 5}"#)
        let rule = try bed.api.admin(
            "POST", "/v1/apps/\(bed.app)/rules",
            json: #"""
                {"id": "refresh", "match": {"action": "REFRESH"}, "handler": {"type": "record"},
                 "followUps": [{"channel": "apns", "pushType": "background", "priority": 10,
                                "payload": {"aps": {"content-available": 1}}}]}
                """#)
        #expect(rule.status == 422, "\(rule.text)")
        #expect(
            (rule.json["errors"] as? [[String: Any]])?.compactMap { $0["pointer"] as? String } == [
                "/followUps/0/priority"
            ])
    }

    @Test(
        "since a reported createdAt lists every notification reported at it or later, and the responses' since and until agree with their receivedAt"
    )
    func timeFiltersAgreeWithReportedTimes() throws {
        let bed = try Bed(app: "since", worker: false)
        // Made as fast as one client makes them: several in a millisecond, stored to the microsecond.
        for _ in 0..<40 {
            _ = try bed.send(#"{"to": ["\#(APNsStandIn.deviceToken())"], "aps": {"alert": "Hi"}}"#)
            #expect(
                try bed.reply("DECLINE", token: APNsStandIn.deviceToken(), userInfo: ["eventId": "1"]).status == 202)
        }
        func encoded(_ time: String) -> String { time.addingPercentEncoding(withAllowedCharacters: .alphanumerics)! }
        func listed(_ path: String, _ time: String) throws -> [(id: String, time: String)] {
            let answer = try bed.api.admin("GET", path)
            try #require(answer.status == 200, "\(path): \(answer.status) \(answer.text)")
            let items = try #require(answer.json["items"] as? [[String: Any]])
            return try items.map { (try #require($0["id"] as? String), try #require($0[time] as? String)) }
        }

        // A client paging by "since the last createdAt" sees every notification made at or after it.
        let notifications = try listed("/v1/apps/\(bed.app)/notifications?limit=500", "createdAt")
        try #require(notifications.count == 40)
        for createdAt in Set(notifications.map(\.time)) {
            let page = try listed(
                "/v1/apps/\(bed.app)/notifications?limit=500&since=\(encoded(createdAt))", "createdAt")
            #expect(
                Set(page.map(\.id)) == Set(notifications.filter { $0.time >= createdAt }.map(\.id)),
                "since=\(createdAt)")
        }
        // Responses: since includes what was received at the time shown, until leaves it out.
        let responses = try listed("/v1/apps/\(bed.app)/responses?limit=500", "receivedAt")
        try #require(responses.count == 40)
        for receivedAt in Set(responses.map(\.time)) {
            let since = try listed("/v1/apps/\(bed.app)/responses?limit=500&since=\(encoded(receivedAt))", "receivedAt")
            #expect(
                Set(since.map(\.id)) == Set(responses.filter { $0.time >= receivedAt }.map(\.id)),
                "since=\(receivedAt)")
            let until = try listed("/v1/apps/\(bed.app)/responses?limit=500&until=\(encoded(receivedAt))", "receivedAt")
            #expect(
                Set(until.map(\.id)) == Set(responses.filter { $0.time < receivedAt }.map(\.id)),
                "until=\(receivedAt)")
        }
    }

    static func date(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: text) ?? ISO8601DateFormatter().date(from: text)
    }
}
