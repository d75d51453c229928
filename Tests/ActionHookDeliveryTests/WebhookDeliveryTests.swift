import ActionHookCore
import ActionHookServer
import Foundation
import Postgres
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

/// Webhook delivery end to end: a live service with its worker on, delivering to an in-process
/// receiver that checks every signature on its own.
@Suite("Webhook delivery (Standard Webhooks, R7)", .serialized)
struct WebhookDeliveryTests {
    @Test("delivers signed webhooks: stable webhook-id, default and templated bodies, attempts recorded")
    func signedDelivery() async throws {
        let receiver = try WebhookReceiver()
        let api = try TestAPI(configure: Hooks.worker)
        let secret = Hooks.newSecret()
        let key = try Hooks.createApp(api, "hooks", url: receiver.url("/app"), secret: secret)
        try Hooks.saveRule(
            api, app: "hooks",
            #"""
            {"id": "accept", "match": {"action": ["accept"]}, "handler": {"type": "accept"},
             "followUps": [
               {"channel": "webhook"},
               {"channel": "webhook", "url": "\#(receiver.url("/templated"))",
                "body": {"event": "invite.accepted", "eventId": "{{userInfo.eventId}}", "text": "{{userText}}",
                         "responseId": "{{response.id}}", "fixed": [1, true, null]}}
             ]}
            """#)
        let userText = #"He said "hi" \ {"x": 1}"#
        let before = Int(Date().timeIntervalSince1970)
        let (responseID, ids) = try Hooks.ingest(
            api, key: key,
            #"{"actionIdentifier": "accept", "userText": "He said \"hi\" \\ {\"x\": 1}", "userInfo": {"eventId": 42}, "responseId": "r-1"}"#
        )
        try #require(ids.count == 2)
        for id in ids { #expect(try await Hooks.waitFor(api, id, status: "delivered").status == "delivered") }
        let after = Int(Date().timeIntervalSince1970)

        try #require(receiver.count == 2, "requests: \(receiver.requests.map(\.path))")
        let defaultRequest = try #require(receiver.requests.first { $0.path == "/app" })
        let templatedRequest = try #require(receiver.requests.first { $0.path == "/templated" })
        #expect(defaultRequest.webhookID == ids[0])
        #expect(templatedRequest.webhookID == ids[1])
        for request in [defaultRequest, templatedRequest] {
            #expect(request.method == "POST")
            #expect(request.headers["content-type"] == "application/json")
            let timestamp = try #require(request.timestamp)
            #expect((before - 5)...(after + 5) ~= timestamp)
            #expect(WebhookReceiver.signatureIsValid(request, secret: secret))
            // Negative controls: another secret, a changed body, a changed id or timestamp all fail.
            #expect(!WebhookReceiver.signatureIsValid(request, secret: Hooks.newSecret()))
            let header = try #require(request.headers["webhook-signature"])
            #expect(header.hasPrefix("v1,"))
            #expect(
                !WebhookReceiver.signatureMatches(
                    header: header, id: request.webhookID!, timestamp: String(timestamp), body: request.body + [32],
                    secret: secret))
            #expect(
                !WebhookReceiver.signatureMatches(
                    header: header, id: request.webhookID! + "x", timestamp: String(timestamp), body: request.body,
                    secret: secret))
            #expect(
                !WebhookReceiver.signatureMatches(
                    header: header, id: request.webhookID!, timestamp: String(timestamp + 1), body: request.body,
                    secret: secret))
        }

        // The default body: the stored response.
        let body = try #require(defaultRequest.json)
        #expect(body["type"] as? String == "response.accepted")
        #expect((body["timestamp"] as? String).flatMap(Hooks.parseTime) != nil)
        let response = try #require((body["data"] as? [String: Any])?["response"] as? [String: Any])
        #expect(response["id"] as? String == responseID)
        #expect(response["actionIdentifier"] as? String == "accept")
        #expect(response["userText"] as? String == userText)
        #expect(response["outcome"] as? String == "accepted")
        #expect(((response["userInfo"] as? [String: Any])?["eventId"] as? NSNumber)?.intValue == 42)

        // The templated body: values inserted as data, types kept.
        let templated = try #require(templatedRequest.json)
        #expect(templated["event"] as? String == "invite.accepted")
        #expect((templated["eventId"] as? NSNumber)?.intValue == 42)
        #expect(!(templated["eventId"] is String))
        #expect(templated["text"] as? String == userText)
        #expect(templated["responseId"] as? String == responseID)
        #expect(templated.count == 5)

        // One attempt each, recorded in delivery_attempts and shown by the history route.
        for id in ids {
            let attempts = try Hooks.attempts(api, id)
            #expect(attempts.count == 1)
            #expect(attempts.first?.attempt == 1)
            #expect(attempts.first?.result == "delivered")
            #expect(attempts.first?.httpStatus == 200)
            #expect(attempts.first?.errorClass == nil)
            let row = try Hooks.followUp(api, id)
            #expect(row.attempt == 1 && row.lastError == nil)
            #expect(
                try api.count(
                    "SELECT count(*) AS n FROM followups WHERE id = \(UUID(uuidString: id)!) AND lease_until IS NULL")
                    == 1)
        }
        let history = try api.admin("GET", "/v1/apps/hooks/responses/\(responseID)")
        try #require(history.status == 200, "\(history.text)")
        let followUps = try #require(history.json["followUps"] as? [[String: Any]])
        #expect(followUps.compactMap { $0["id"] as? String } == ids)
        for followUp in followUps {
            #expect(followUp["status"] as? String == "delivered")
            let attempts = try #require(followUp["attempts"] as? [[String: Any]])
            #expect(attempts.count == 1)
            #expect(attempts.first?["attempt"] as? Int == 1)
            #expect(attempts.first?["result"] as? String == "delivered")
            #expect(attempts.first?["httpStatus"] as? Int == 200)
            #expect(attempts.first?["errorClass"] is NSNull)
            #expect(attempts.first?["startedAt"] is String && attempts.first?["finishedAt"] is String)
        }
        // Nothing else was sent.
        #expect(await !receiver.waitFor(count: 3, timeout: .milliseconds(600)))
    }

    @Test("R7: a receiver failing twice is retried on schedule (within jitter) with the same webhook-id")
    func retryScheduleWithinJitter() async throws {
        let receiver = try WebhookReceiver()
        receiver.script(statuses: [500, 500])
        let schedule = [1, 2]
        let jitter = 0.1
        let api = try TestAPI {
            Hooks.worker(&$0)
            $0.worker.retryPolicy = RetryPolicy(schedule: schedule, jitter: jitter)
        }
        let secret = Hooks.newSecret()
        let key = try Hooks.createApp(api, "retry", url: receiver.url("/flaky"), secret: secret)
        try Hooks.saveRule(
            api, app: "retry", #"{"id": "all", "handler": {"type": "record"}, "followUps": [{"channel": "webhook"}]}"#)
        let id = try #require(try Hooks.ingest(api, key: key, #"{"actionIdentifier": "x"}"#).followUps.first)

        // Between the failures it waited as `retrying` with its error class: the attempts below say so (a poll
        // of its status may miss the moment on a loaded machine).
        #expect(await receiver.waitFor(count: 1))
        let row = try await Hooks.waitFor(api, id, status: "delivered", timeout: .seconds(30))
        #expect(row.status == "delivered")
        #expect(row.attempt == 3)
        let requests = receiver.requests(for: id)
        #expect(requests.count == 3)
        #expect(receiver.count == 3)
        #expect(requests.allSatisfy { WebhookReceiver.signatureIsValid($0, secret: secret) })
        #expect(Set(requests.compactMap(\.webhookID)) == [id])
        // Each retry is signed afresh: timestamps never go back.
        let timestamps = requests.compactMap(\.timestamp)
        #expect(timestamps == timestamps.sorted())

        let attempts = try Hooks.attempts(api, id)
        try #require(attempts.count == 3)
        #expect(attempts.map(\.attempt) == [1, 2, 3])
        #expect(attempts.map(\.result) == ["failed", "failed", "delivered"])
        #expect(attempts.map(\.httpStatus) == [500, 500, 200])
        #expect(attempts.map(\.errorClass) == ["http_500", "http_500", nil])
        // The schedule is read from what the worker recorded, not from wall-clock gaps a busy machine
        // stretches: each retry was made due its schedule's wait (within the jitter) after the failed
        // attempt was recorded, and no attempt started before it was due. How late a due attempt starts
        // is a figure of the delivery benchmark (P7), not of this test.
        for index in 0..<schedule.count {
            let failed = attempts[index]
            let retry = attempts[index + 1]
            let due = try #require(retry.dueAt, "attempt \(retry.attempt) has no due time")
            let wait = due.timeIntervalSince(failed.finishedAt)
            let scheduled = Double(schedule[index])
            // Times are stored to the microsecond; the due time travels in milliseconds.
            #expect(
                wait >= scheduled * (1 - jitter) - 0.002,
                "retry \(index + 1) due \(wait) s after, schedule \(scheduled) s")
            #expect(
                wait <= scheduled * (1 + jitter) + 0.002,
                "retry \(index + 1) due \(wait) s after, schedule \(scheduled) s")
            #expect(
                retry.startedAt >= due.addingTimeInterval(-0.002), "attempt \(retry.attempt) started before it was due")
            // The receiver never saw a retry sooner than the shortest wait the jitter allows.
            let seen = requests[index + 1].receivedAt.timeIntervalSince(requests[index].receivedAt)
            #expect(seen >= scheduled * (1 - jitter) - 0.05, "receiver gap \(index + 1) was \(seen) s")
        }
        #expect(attempts.first?.dueAt != nil)
    }

    @Test("R7: always failing ends dead after the last attempt; retry puts it back and it delivers")
    func deadAfterLastAttemptThenRetry() async throws {
        let receiver = try WebhookReceiver()
        let failing = Atomic<Bool>(true)
        receiver.respond { _ in failing.load(ordering: .sequentiallyConsistent) ? .status(503) : .ok }
        let api = try TestAPI {
            Hooks.worker(&$0)
            $0.worker.retryPolicy = RetryPolicy(schedule: [1, 1], jitter: 0.1)
        }
        let secret = Hooks.newSecret()
        let key = try Hooks.createApp(api, "dead", url: receiver.url("/down"), secret: secret)
        try Hooks.saveRule(
            api, app: "dead", #"{"id": "all", "handler": {"type": "record"}, "followUps": [{"channel": "webhook"}]}"#)
        let id = try #require(try Hooks.ingest(api, key: key, #"{"actionIdentifier": "x"}"#).followUps.first)

        let dead = try await Hooks.waitFor(api, id, status: "dead", timeout: .seconds(30))
        #expect(dead.status == "dead")
        #expect(dead.attempt == 3)
        #expect(dead.lastError == "http_503")
        #expect(receiver.requests(for: id).count == 3)
        #expect(try Hooks.attempts(api, id).map(\.result) == ["failed", "failed", "failed"])
        // Dead means no further attempt.
        #expect(await !receiver.waitFor(count: 4, timeout: .seconds(2)))
        #expect(try Hooks.followUp(api, id).status == "dead")

        let listed = try api.admin("GET", "/v1/apps/dead/followups?status=dead")
        #expect((listed.json["items"] as? [[String: Any]])?.compactMap { $0["id"] as? String } == [id])

        failing.store(false, ordering: .sequentiallyConsistent)
        let retried = try api.admin("POST", "/v1/apps/dead/followups/\(id)/retry")
        #expect(retried.status == 200, "\(retried.text)")
        #expect(retried.json["status"] as? String == "pending")
        let delivered = try await Hooks.waitFor(api, id, status: "delivered", timeout: .seconds(15))
        #expect(delivered.status == "delivered")
        #expect(delivered.attempt == 4)
        let requests = receiver.requests(for: id)
        #expect(requests.count == 4)
        #expect(requests.allSatisfy { WebhookReceiver.signatureIsValid($0, secret: secret) })
        #expect(try Hooks.attempts(api, id).map(\.result) == ["failed", "failed", "failed", "delivered"])
        // Only a dead follow-up can be retried.
        #expect(try api.admin("POST", "/v1/apps/dead/followups/\(id)/retry").status == 409)
    }

    @Test("R7: 3xx is a failure and the redirect is never followed")
    func redirectsAreFailures() async throws {
        let canary = try WebhookReceiver()
        let receiver = try WebhookReceiver()
        let location = canary.url("/stolen")
        receiver.respond { request in
            let status = [302, 307, 301, 308][min(request.index, 3)]
            return ReceiverReply(status: status, headers: [("Location", location)])
        }
        let api = try TestAPI {
            Hooks.worker(&$0)
            $0.worker.retryPolicy = RetryPolicy(schedule: [1, 1], jitter: 0.1)
        }
        let key = try Hooks.createApp(api, "redirect", url: receiver.url("/moved"), secret: Hooks.newSecret())
        try Hooks.saveRule(
            api, app: "redirect",
            #"{"id": "all", "handler": {"type": "record"}, "followUps": [{"channel": "webhook"}]}"#)
        let id = try #require(try Hooks.ingest(api, key: key, #"{"actionIdentifier": "x"}"#).followUps.first)

        let row = try await Hooks.waitFor(api, id, status: "dead", timeout: .seconds(30))
        #expect(row.status == "dead")
        #expect(row.lastError == "redirect")
        let attempts = try Hooks.attempts(api, id)
        #expect(attempts.map(\.httpStatus) == [302, 307, 301])
        #expect(attempts.map(\.errorClass) == ["redirect", "redirect", "redirect"])
        #expect(attempts.map(\.result) == ["failed", "failed", "failed"])
        #expect(receiver.count == 3)
        #expect(canary.count == 0)
        #expect(await !canary.waitFor(count: 1, timeout: .milliseconds(500)))
    }

    @Test("410 Gone disables the app endpoint; later follow-ups end dead unsent; PATCHing the webhook re-enables it")
    func goneDisablesEndpoint() async throws {
        let receiver = try WebhookReceiver()
        let gone = Atomic<Bool>(true)
        receiver.respond { _ in gone.load(ordering: .sequentiallyConsistent) ? .status(410) : .ok }
        let api = try TestAPI(configure: Hooks.worker)
        let secret = Hooks.newSecret()
        let url = receiver.url("/endpoint")
        let key = try Hooks.createApp(api, "gone", url: url, secret: secret)
        try Hooks.saveRule(
            api, app: "gone", #"{"id": "all", "handler": {"type": "record"}, "followUps": [{"channel": "webhook"}]}"#)

        #expect(
            (try api.admin("GET", "/v1/apps/gone").json["webhook"] as? [String: Any])?["disabled"] as? Bool == false)
        let first = try #require(try Hooks.ingest(api, key: key, #"{"actionIdentifier": "a"}"#).followUps.first)
        let firstRow = try await Hooks.waitFor(api, first, status: "dead")
        #expect(firstRow.status == "dead")
        #expect(firstRow.lastError == "endpoint_gone")
        #expect(try Hooks.attempts(api, first).map(\.httpStatus) == [410])
        #expect(receiver.count == 1)
        let app = try api.admin("GET", "/v1/apps/gone")
        #expect((app.json["webhook"] as? [String: Any])?["disabled"] as? Bool == true)

        // While disabled: dead without a request.
        var skipped: [String] = []
        for n in 0..<3 {
            let id = try #require(
                try Hooks.ingest(api, key: key, #"{"actionIdentifier": "b\#(n)"}"#).followUps.first)
            skipped.append(id)
        }
        for id in skipped {
            let row = try await Hooks.waitFor(api, id, status: "dead")
            #expect(row.status == "dead")
            #expect(row.lastError == "endpoint_disabled")
        }
        #expect(receiver.count == 1)

        // A PATCH that leaves the webhook alone keeps it disabled.
        let renamed = try api.admin("PATCH", "/v1/apps/gone", json: #"{"name": "Gone but renamed"}"#)
        #expect(renamed.status == 200, "\(renamed.text)")
        #expect((renamed.json["webhook"] as? [String: Any])?["disabled"] as? Bool == true)

        // PATCHing the webhook (the receiver moved) re-enables the endpoint at once.
        gone.store(false, ordering: .sequentiallyConsistent)
        let movedURL = receiver.url("/endpoint-v2")
        let patched = try api.admin("PATCH", "/v1/apps/gone", json: #"{"webhook": {"url": "\#(movedURL)"}}"#)
        #expect(patched.status == 200, "\(patched.text)")
        #expect((patched.json["webhook"] as? [String: Any])?["disabled"] as? Bool == false)
        #expect(
            (try api.admin("GET", "/v1/apps/gone").json["webhook"] as? [String: Any])?["disabled"] as? Bool == false)
        let next = try #require(try Hooks.ingest(api, key: key, #"{"actionIdentifier": "c"}"#).followUps.first)
        let nextRow = try await Hooks.waitFor(api, next, status: "delivered")
        #expect(nextRow.status == "delivered")
        let request = try #require(receiver.requests(for: next).first)
        #expect(request.path == "/endpoint-v2")
        #expect(WebhookReceiver.signatureIsValid(request, secret: secret))
        // And a follow-up that died while disabled can be retried now.
        #expect(try api.admin("POST", "/v1/apps/gone/followups/\(skipped[0])/retry").status == 200)
        #expect(try await Hooks.waitFor(api, skipped[0], status: "delivered").status == "delivered")
        #expect(receiver.count == 3)
    }

    @Test("410 from a rule's own URL kills that follow-up only, never the app's endpoint")
    func goneOnOwnURL() async throws {
        let endpoint = try WebhookReceiver()
        let other = try WebhookReceiver()
        other.respond { _ in .status(410) }
        let api = try TestAPI(configure: Hooks.worker)
        let key = try Hooks.createApp(api, "own", url: endpoint.url("/endpoint"), secret: Hooks.newSecret())
        try Hooks.saveRule(
            api, app: "own",
            #"{"id": "own", "handler": {"type": "record"}, "followUps": [{"channel": "webhook", "url": "\#(other.url("/elsewhere"))"}, {"channel": "webhook"}]}"#
        )
        let ids = try Hooks.ingest(api, key: key, #"{"actionIdentifier": "a"}"#).followUps
        try #require(ids.count == 2)
        #expect(try await Hooks.waitFor(api, ids[0], status: "dead").lastError == "endpoint_gone")
        #expect(try await Hooks.waitFor(api, ids[1], status: "delivered").status == "delivered")
        #expect((try api.admin("GET", "/v1/apps/own").json["webhook"] as? [String: Any])?["disabled"] as? Bool == false)
        let later = try Hooks.ingest(api, key: key, #"{"actionIdentifier": "b"}"#).followUps
        try #require(later.count == 2)
        #expect(try await Hooks.waitFor(api, later[1], status: "delivered").status == "delivered")
        #expect(endpoint.count == 2)
    }

    @Test("large answers are read only up to the bound; the status decides")
    func largeResponses() async throws {
        let receiver = try WebhookReceiver()
        let big = [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20)
        receiver.respond { request in
            ReceiverReply(status: request.path == "/big-ok" ? 200 : 500, body: big)
        }
        let streamer = try RawTCPServer(handler: RawTCPServer.endlessChunkedOK)
        let api = try TestAPI {
            Hooks.worker(&$0)
            $0.worker.retryPolicy = RetryPolicy(schedule: [60], jitter: 0.1)
        }
        let key = try Hooks.createApp(api, "big", url: receiver.url("/big-ok"), secret: Hooks.newSecret())
        try Hooks.saveRule(
            api, app: "big",
            #"""
            {"id": "all", "handler": {"type": "record"}, "followUps": [
              {"channel": "webhook"},
              {"channel": "webhook", "url": "\#(receiver.url("/big-fail"))"},
              {"channel": "webhook", "url": "http://127.0.0.1:\#(streamer.port)/endless"}]}
            """#)
        let ids = try Hooks.ingest(api, key: key, #"{"actionIdentifier": "a"}"#).followUps
        try #require(ids.count == 3)

        let ok = try await Hooks.waitFor(api, ids[0], status: "delivered")
        #expect(ok.status == "delivered")
        let failed = try await Hooks.waitFor(api, ids[1], status: "retrying")
        #expect(failed.status == "retrying")
        #expect(failed.lastError == "http_500")
        #expect(try Hooks.attempts(api, ids[1]).first?.httpStatus == 500)
        // An endless body does not hold the delivery: the sender stops reading and hangs up.
        let endless = try await Hooks.waitFor(api, ids[2], status: "delivered", timeout: .seconds(20))
        #expect(endless.status == "delivered")
        #expect(try Hooks.attempts(api, ids[2]).first?.httpStatus == 200)
        #expect(await Hooks.poll(timeout: .seconds(10)) { streamer.finishedConnections >= 1 })
        #expect(streamer.connections == 1)
        #expect(streamer.bytesSent < 32 << 20, "the sender read \(streamer.bytesSent) bytes of an endless answer")
    }

    @Test("a slow receiver times out: retrying with error class timeout, then delivered")
    func slowReceiverTimesOut() async throws {
        let receiver = try WebhookReceiver()
        receiver.script([.held])
        let api = try TestAPI {
            Hooks.worker(&$0)
            $0.webhookTimeoutSeconds = 1
            $0.worker.retryPolicy = RetryPolicy(schedule: [1], jitter: 0.1)
        }
        let key = try Hooks.createApp(api, "slow", url: receiver.url("/slow"), secret: Hooks.newSecret())
        try Hooks.saveRule(
            api, app: "slow", #"{"id": "all", "handler": {"type": "record"}, "followUps": [{"channel": "webhook"}]}"#)
        let id = try #require(try Hooks.ingest(api, key: key, #"{"actionIdentifier": "a"}"#).followUps.first)

        let row = try await Hooks.waitFor(api, id, status: "delivered", timeout: .seconds(20))
        #expect(row.status == "delivered")
        let attempts = try Hooks.attempts(api, id)
        try #require(attempts.count == 2)
        #expect(attempts[0].result == "failed")
        #expect(attempts[0].errorClass == "timeout")
        #expect(attempts[0].httpStatus == nil)
        let duration = try api.query(
            "SELECT duration_ms FROM delivery_attempts WHERE followup_id = \(UUID(uuidString: id)!) AND attempt = 1")[0]
            .decode("duration_ms", as: Int.self)
        #expect(duration >= 900 && duration < 3000, "the timed-out attempt took \(duration) ms")
        #expect(attempts[1].result == "delivered")
        #expect(receiver.requests(for: id).count == 2)
        #expect(receiver.heldCount == 1)
        receiver.release(nil)
    }
}
