import ActionHookCLI
import ActionHookCore
import ActionHookServer
import Foundation
import Logging
import MicroHTTPD
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

/// The console's files and their headers, the stats route behind its overview, and the inbox.
@Suite("Console, stats and inbox")
struct ConsoleTests: ResponseHelpers {
    static let csp = "default-src 'self'"

    @Test("the page and every asset carry the strict policy, frame and referrer headers; no secret is in them")
    func consoleHeaders() throws {
        let api = try TestAPI()
        for path in [
            "/console", "/console/", "/console/app.js", "/console/style.css", "/console/replies.js", "/console/nope.js",
        ] {
            let response = try HTTPTestClient(port: api.port).request("GET", path)
            let csp = try #require(response.headers["content-security-policy"], "\(path) has no CSP")
            #expect(csp.hasPrefix(Self.csp), "\(path): \(csp)")
            #expect(csp.contains("frame-ancestors 'none'"))
            #expect(csp.contains("script-src 'self'") && csp.contains("style-src 'self'"))
            #expect(!csp.contains("unsafe-inline") && !csp.contains("unsafe-eval"))
            #expect(response.headers["x-frame-options"] == "DENY")
            #expect(response.headers["referrer-policy"] == "no-referrer")
            #expect(response.headers["x-content-type-options"] == "nosniff")
            #expect(!response.text.contains(TestService.adminToken))
        }
        let page = try HTTPTestClient(port: api.port).request("GET", "/console")
        #expect(page.status == 200)
        #expect(page.headers["content-type"] == "text/html; charset=utf-8")
        #expect(page.text.contains(#"<script type="module" src="/console/app.js">"#))
        // No inline script or style and nothing from another origin in the page itself.
        #expect(!page.text.contains("<script>") && !page.text.contains("style=") && !page.text.contains("<style"))
        #expect(!page.text.contains("http://") && !page.text.contains("https://"))
        let script = try HTTPTestClient(port: api.port).request("GET", "/console/app.js")
        #expect(script.status == 200)
        #expect(script.headers["content-type"] == "text/javascript; charset=utf-8")
        let missing = try HTTPTestClient(port: api.port).request("GET", "/console/nope.js")
        #expect(missing.status == 404)
        #expect(missing.headers["content-type"] == "application/problem+json")
        // The files are served without any credential: they are the same for everyone and hold no data.
        let traversal = try HTTPTestClient(port: api.port).request("GET", "/console/..%2FPackage.swift")
        #expect(traversal.status == 404)
    }

    @Test("the scripts never parse data as HTML")
    func scriptsInsertTextOnly() throws {
        let api = try TestAPI()
        for name in [
            "app.js", "api.js", "dom.js", "chart.js", "overview.js", "replies.js", "followups.js", "rules.js",
            "categories.js", "notifications.js", "users.js",
        ] {
            let script = try HTTPTestClient(port: api.port).request("GET", "/console/\(name)")
            #expect(script.status == 200, "\(name)")
            for sink in ["innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"] {
                #expect(!script.text.contains(sink), "\(name) uses \(sink)")
            }
        }
    }

    @Test("stats count one app's replies by outcome and follow-ups by status, in buckets, for 1h and 24h")
    func statsCounts() throws {
        let api = try TestAPI()
        let key = try api.createApp("stats-app")
        let otherKey = try api.createApp("stats-other")
        let rules = [
            #"{"id":"acc","priority":1,"match":{"action":"accept"},"handler":{"type":"accept"},"followUps":[{"channel":"webhook","url":"https://hooks.example.com/a","body":{}}]}"#,
            #"{"id":"dec","priority":2,"match":{"action":"decline"},"handler":{"type":"decline"}}"#,
        ]
        for rule in rules {
            #expect(try api.admin("POST", "/v1/apps/stats-app/rules", json: rule).status == 201)
        }
        for (index, action) in ["accept", "accept", "decline", "other"].enumerated() {
            let response = try api.ingest(
                key: key, json: #"{"actionIdentifier":"\#(action)","responseId":"s\#(index)"}"#)
            #expect(response.status == 202)
        }
        // Another app's replies never count here.
        #expect(try api.ingest(key: otherKey, json: #"{"actionIdentifier":"accept","responseId":"o1"}"#).status == 202)
        // One old reply, outside the hour but inside the day.
        _ = try api.query(
            """
            UPDATE responses SET received_at = now() - interval '3 hours'
            WHERE app_id = 'stats-app' AND client_response_id = 's3'
            """)

        let hour = try api.admin("GET", "/v1/apps/stats-app/stats?window=1h")
        #expect(hour.status == 200)
        let replies = try #require(hour.json["replies"] as? [String: Int])
        #expect(replies["accepted"] == 2 && replies["declined"] == 1 && replies["unmatched"] == 0)
        #expect(replies.count == Outcome.allCases.count)
        let followUps = try #require(hour.json["followUps"] as? [String: Int])
        #expect(followUps["pending"] == 2)
        #expect(followUps.values.reduce(0, +) == 2)
        #expect(hour.json["deadLetters"] as? Int == 0)
        #expect(hour.json["bucketSeconds"] as? Int == 60)
        #expect(hour.json["window"] as? String == "1h")
        let series = try #require(hour.json["series"] as? [[String: Any]])
        #expect(series.count == 60)
        let bucketed = series.compactMap { $0["replies"] as? [String: Int] }.flatMap(\.values).reduce(0, +)
        #expect(bucketed == 3)
        // The newest bucket holds now, so the replies just made are in the last one.
        #expect((series.last?["replies"] as? [String: Int])?["accepted"] == 2)

        let day = try api.admin("GET", "/v1/apps/stats-app/stats?window=24h")
        #expect(day.status == 200)
        #expect((day.json["replies"] as? [String: Int])?["unmatched"] == 1)
        #expect((day.json["series"] as? [[String: Any]])?.count == 96)
        #expect(day.json["bucketSeconds"] as? Int == 900)

        // A dead follow-up is a dead letter.
        _ = try api.query(
            "UPDATE followups SET status = 'dead', finished_at = now() WHERE app_id = 'stats-app' AND ordinal = 0")
        let after = try api.admin("GET", "/v1/apps/stats-app/stats")
        #expect(after.json["deadLetters"] as? Int == 2)
        #expect((after.json["followUps"] as? [String: Int])?["dead"] == 2)
        #expect(after.json["window"] as? String == "1h")
    }

    @Test("delivery latency is reported per bucket from the delivered attempts")
    func statsLatency() throws {
        let api = try TestAPI()
        let key = try api.createApp("latency-app")
        #expect(
            try api.admin(
                "POST", "/v1/apps/latency-app/rules",
                json:
                    #"{"id":"acc","priority":1,"handler":{"type":"accept"},"followUps":[{"channel":"webhook","url":"https://hooks.example.com/a","body":{}}]}"#
            ).status == 201)
        #expect(try api.ingest(key: key, json: #"{"actionIdentifier":"accept","responseId":"l1"}"#).status == 202)
        _ = try api.query(
            """
            WITH f AS (
                UPDATE followups SET status = 'delivered', attempt = 1, finished_at = now() WHERE app_id = 'latency-app'
                RETURNING app_id, id, due_at
            )
            INSERT INTO delivery_attempts (app_id, followup_id, attempt, started_at, finished_at, result, http_status, duration_ms)
            SELECT app_id, id, 1, due_at + interval '1 second', due_at + interval '1.5 seconds', 'delivered', 204, 500 FROM f
            """)
        let stats = try api.admin("GET", "/v1/apps/latency-app/stats?window=1h")
        let series = try #require(stats.json["series"] as? [[String: Any]])
        let delivered = series.filter { ($0["delivered"] as? Int ?? 0) > 0 }
        #expect(delivered.count == 1)
        #expect(delivered.first?["latencyMsAverage"] as? Int == 1500)
        #expect(delivered.first?["latencyMsMax"] as? Int == 1500)
        #expect(series.filter { $0["latencyMsAverage"] is NSNull }.count == 59)
    }

    @Test("stats: unknown app 404, bad window 400, no token 401")
    func statsRefusals() throws {
        let api = try TestAPI()
        _ = try api.createApp("stats-a")
        #expect(try api.admin("GET", "/v1/apps/nobody/stats").status == 404)
        let bad = try api.admin("GET", "/v1/apps/stats-a/stats?window=7d")
        #expect(bad.status == 400)
        #expect(bad.headers["content-type"] == "application/problem+json")
        #expect(try api.call("GET", "/v1/apps/stats-a/stats", token: nil).status == 401)
        let key = try api.createApp("stats-b")
        #expect(try api.call("GET", "/v1/apps/stats-b/stats", token: key).status == 401)
    }

    @Test("the inbox answers 204 to every delivery and reports a signed one valid, a forged, stale or unsigned one not")
    func inboxVerifies() throws {
        let secret = Hooks.newSecret()
        let seen = DeliveryLog()
        let inbox = WebhookInbox(
            port: 0, secret: secret, logger: Logger(label: "inbox-test"),
            onDelivery: { delivery in seen.deliveries.withLock { $0.append(delivery) } })
        try inbox.start()
        defer { inbox.stop() }

        let body = #"{"type":"response.accepted","data":{"n":1}}"#
        let now = Int(Date().timeIntervalSince1970)
        func send(id: String, timestamp: Int, signature: String?) throws -> TestResponse {
            var headers = [("webhook-id", id), ("webhook-timestamp", String(timestamp))]
            if let signature { headers.append(("webhook-signature", signature)) }
            return try HTTPTestClient(port: inbox.port).request("POST", "/hook", headers: headers, json: body)
        }
        let good = try #require(
            WebhookSignature.sign(id: "msg_1", timestamp: now, body: Array(body.utf8), secret: secret))
        #expect(try send(id: "msg_1", timestamp: now, signature: "v1,bm90LWl0 " + good).status == 204)
        let forged = try #require(
            WebhookSignature.sign(id: "msg_2", timestamp: now, body: Array(body.utf8), secret: Hooks.newSecret()))
        #expect(try send(id: "msg_2", timestamp: now, signature: forged).status == 204)
        let stale = try #require(
            WebhookSignature.sign(id: "msg_3", timestamp: now - 3600, body: Array(body.utf8), secret: secret))
        #expect(try send(id: "msg_3", timestamp: now - 3600, signature: stale).status == 204)
        #expect(try send(id: "msg_4", timestamp: now, signature: nil).status == 204)

        let deliveries = seen.deliveries.withLock { $0 }
        #expect(deliveries.map(\.id) == ["msg_1", "msg_2", "msg_3", "msg_4"])
        #expect(deliveries.map(\.isValid) == [true, false, false, false])
        #expect(deliveries[1].failure == .mismatch)
        #expect(deliveries[2].failure == .timestampOutOfTolerance)
        #expect(deliveries[3].failure == .missingHeader("webhook-signature"))
        #expect(deliveries[0].report.contains("msg_1") && deliveries[0].report.contains("valid signature"))
        #expect(deliveries[0].report.contains("\"response.accepted\""))
        #expect(deliveries[1].report.contains("INVALID signature"))
    }

    @Test("the inbox accepts a delivery the service signed", .timeLimit(.minutes(1)))
    func inboxAcceptsTheService() async throws {
        let secret = Hooks.newSecret()
        let seen = DeliveryLog()
        let inbox = WebhookInbox(
            port: 0, secret: secret, logger: Logger(label: "inbox-test"),
            onDelivery: { delivery in seen.deliveries.withLock { $0.append(delivery) } })
        try inbox.start()
        defer { inbox.stop() }
        let api = try TestAPI(configure: Hooks.worker)
        let key = try Hooks.createApp(api, "inbox-app", url: "http://127.0.0.1:\(inbox.port)/", secret: secret)
        try Hooks.saveRule(
            api, app: "inbox-app",
            #"{"id":"all","priority":1,"handler":{"type":"record"},"followUps":[{"channel":"webhook"}]}"#)
        let (_, followUps) = try Hooks.ingest(api, key: key, #"{"actionIdentifier":"open","responseId":"i1"}"#)
        let id = try #require(followUps.first)
        try await Hooks.waitFor(api, id, status: "delivered")
        let deliveries = seen.deliveries.withLock { $0 }
        #expect(deliveries.count == 1)
        #expect(deliveries.first?.isValid == true)
        #expect(deliveries.first?.id == id)
    }
}

/// What an inbox under test reported, shared with its server threads.
private final class DeliveryLog: Sendable {
    let deliveries = Mutex<[WebhookInbox.Delivery]>([])
}
