import ActionHookCore
import ActionHookDelivery
import ActionHookServer
import Crypto
import Foundation
import Postgres
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

/// R8: APNs delivery against a local HTTP/2 stand-in (`Tests/Fixtures/apns_standin.py`) that checks
/// the provider JWT and the headers the way APNs does and answers like APNs.
@Suite("APNs delivery against an HTTP/2 stand-in", .serialized)
struct APNsDeliveryTests {
    /// A test bed with category `PUSH_TEST` and rule `push`: action `go` sends one alert to the
    /// response's device.
    static func bed(standIn: APNsStandIn? = nil) throws -> APNsTestBed {
        let bed = try APNsTestBed(standIn: standIn)
        try bed.putCategory(
            "PUSH_TEST",
            #"{"actions": [{"identifier": "go", "title": "Go", "options": []}], "options": [], "intentIdentifiers": []}"#
        )
        try bed.createRule(
            #"""
            {"id": "push", "match": {"category": "PUSH_TEST", "action": "go"}, "handler": {"type": "record"},
             "followUps": [{"channel": "apns", "payload": {"aps": {"alert": {"title": "Done", "body": "Item {{userInfo.itemId}}"}}}}]}
            """#)
        return bed
    }

    static func response(action: String, device: String, itemId: Int = 7, userText: String? = nil) -> [String: Any] {
        var body: [String: Any] = [
            "actionIdentifier": action, "deviceToken": device, "responseId": UUID().uuidString.lowercased(),
            "notificationIdentifier": "item-\(itemId)",
            "userInfo": [
                "aps": ["alert": ["title": "Item", "body": "Item \(itemId)"], "category": "PUSH_TEST"],
                "itemId": itemId,
            ] as [String: Any],
        ]
        if let userText { body["userText"] = userText }
        return body
    }

    /// Pushes one alert through the service to `device` and waits for one of `statuses`.
    static func push(_ bed: APNsTestBed, device: String, until statuses: Set<String>) async throws -> (
        responseID: String, followUpID: String, seen: [String]
    ) {
        let answer = try bed.ingest(response(action: "go", device: device))
        let ids = APNsTestBed.followUpIDs(answer)
        try #require(ids.count == 1)
        let seen = try await bed.waitForFollowUp(ids[0], in: statuses)
        return (try #require(answer["id"] as? String), ids[0], seen)
    }

    @Test("200: alert and background pushes carry the follow-up id, topic, push type, priority and a valid JWT")
    func delivered() async throws {
        let bed = try Self.bed()
        try bed.createRule(
            #"""
            {"id": "both", "match": {"category": "PUSH_TEST", "action": "both"}, "handler": {"type": "record"},
             "followUps": [
               {"channel": "apns", "pushType": "alert", "expiration": 2000000000, "collapseId": "item-7-updates",
                "payload": {"aps": {"alert": {"title": "Done", "body": "Item {{userInfo.itemId}}"}, "category": "PUSH_TEST"},
                            "itemId": "{{userInfo.itemId}}"}},
               {"channel": "apns", "pushType": "background", "payload": {"aps": {"content-available": 1}, "kind": "refresh"}}]}
            """#)
        let device = APNsStandIn.deviceToken()
        let before = Int(Date().timeIntervalSince1970)
        let answer = try bed.ingest(Self.response(action: "both", device: device))
        let responseID = try #require(answer["id"] as? String)
        let ids = APNsTestBed.followUpIDs(answer)
        try #require(ids.count == 2)
        let (alertID, backgroundID) = (ids[0], ids[1])
        try await bed.waitForFollowUp(alertID, in: ["delivered", "dead"])
        try await bed.waitForFollowUp(backgroundID, in: ["delivered", "dead"])
        let after = Int(Date().timeIntervalSince1970)
        #expect(try bed.followUp(alertID) == .init(status: "delivered", attempt: 1, lastError: nil))
        #expect(try bed.followUp(backgroundID) == .init(status: "delivered", attempt: 1, lastError: nil))

        let requests = try bed.standIn.requests(token: device)
        try #require(requests.count == 2, "stand-in saw \(requests.count) requests: \(requests.map(\.reason))")
        let alert = try #require(requests.first { $0.apnsID == alertID })
        let background = try #require(requests.first { $0.apnsID == backgroundID })
        for request in requests {
            #expect(request.status == 200)
            #expect(request.reason == nil)
            #expect(request.method == "POST")
            #expect(request.path == "/3/device/\(device)")
            #expect(request.headers["apns-topic"] == APNsStandIn.topic)
            #expect(request.alg == "ES256")
            #expect(request.kid == APNsStandIn.keyID)
            #expect(request.iss == APNsStandIn.teamID)
            let iat = try #require(request.iat)
            #expect(iat >= before - 1 && iat <= after + 1)
        }
        #expect(alert.headers["apns-push-type"] == "alert")
        #expect(alert.headers["apns-priority"] == "10")
        #expect(alert.headers["apns-expiration"] == "2000000000")
        #expect(alert.headers["apns-collapse-id"] == "item-7-updates")
        #expect((alert.aps?["alert"] as? [String: Any])?["body"] as? String == "Item 7")
        #expect(alert.aps?["category"] as? String == "PUSH_TEST")
        #expect((alert.payloadObject?["itemId"] as? NSNumber)?.intValue == 7)
        #expect(background.headers["apns-push-type"] == "background")
        #expect(background.headers["apns-priority"] == "5")
        #expect(background.headers["apns-expiration"] == nil)
        #expect(background.headers["apns-collapse-id"] == nil)
        #expect((background.aps?["content-available"] as? NSNumber)?.intValue == 1)
        #expect(background.payloadObject?["kind"] as? String == "refresh")
        // One provider token, reused, over HTTP/2 connections (a few, used in turn: APNsSender.connections).
        #expect(alert.jwt != nil && alert.jwt == background.jwt)
        let connections = try bed.standIn.connections()
        #expect(connections.allSatisfy { $0.alpn == "h2" })
        #expect(connections.count == min(2, APNsSender.defaultConnections))

        // The attempts are stored and shown with the response.
        for id in ids {
            let attempts = try bed.attempts(id)
            #expect(attempts.count == 1)
            #expect(attempts.first?.result == "delivered")
            #expect(attempts.first?.httpStatus == 200)
            #expect(attempts.first?.errorClass == nil)
        }
        let shown = try bed.responseFollowUps(responseID)
        #expect(Set(shown.keys) == Set(ids))
        for id in ids {
            #expect(shown[id]?["status"] as? String == "delivered")
            let attempts = shown[id]?["attempts"] as? [[String: Any]] ?? []
            #expect(attempts.count == 1)
            #expect(attempts.first?["result"] as? String == "delivered")
            #expect((attempts.first?["httpStatus"] as? NSNumber)?.intValue == 200)
        }
    }

    @Test("410 Unregistered: follow-up dead, device dead, a later push to it is skipped and never sent")
    func unregistered() async throws {
        let bed = try Self.bed()
        let device = APNsStandIn.deviceToken("dead")
        let first = try await Self.push(bed, device: device, until: ["dead", "delivered"])
        #expect(try bed.followUp(first.followUpID) == .init(status: "dead", attempt: 1, lastError: "Unregistered"))
        let device410 = try #require(try bed.device(device))
        #expect(device410.status == "dead")
        #expect(device410.reason == "Unregistered")
        let attempts = try bed.attempts(first.followUpID)
        #expect(attempts.map(\.result) == ["failed"])
        #expect(attempts.first?.httpStatus == 410)
        #expect(attempts.first?.errorClass == "Unregistered")
        let sent = try bed.standIn.requests(token: device)
        #expect(sent.map(\.status) == [410])
        #expect(sent.first?.reason == "Unregistered")

        let second = try await Self.push(bed, device: device, until: ["skipped", "delivered", "dead"])
        #expect(try bed.followUp(second.followUpID).status == "skipped")
        let skipped = try bed.attempts(second.followUpID)
        #expect(skipped.map(\.result) == ["skipped"])
        #expect(skipped.first?.httpStatus == nil)
        #expect(skipped.first?.errorClass == "device_dead")
        #expect(try bed.responseFollowUps(second.responseID)[second.followUpID]?["status"] as? String == "skipped")

        // Another device still gets its push; the dead one got nothing more, even after a retry period.
        let other = APNsStandIn.deviceToken()
        let control = try await Self.push(bed, device: other, until: ["delivered", "dead"])
        #expect(try bed.followUp(control.followUpID).status == "delivered")
        try await Task.sleep(for: .seconds(1.5))
        #expect(try bed.standIn.requests(token: device).count == 1)
        #expect(try bed.followUp(second.followUpID).status == "skipped")
        #expect(try bed.device(other) == nil)
    }

    @Test("400 BadDeviceToken: no retry, follow-up dead, device dead")
    func badDeviceToken() async throws {
        let bed = try Self.bed()
        let device = APNsStandIn.deviceToken("bad0")
        let push = try await Self.push(bed, device: device, until: ["dead", "delivered"])
        // Longer than the retry schedule's first delay: a retry would have happened by now.
        try await Task.sleep(for: .seconds(2))
        #expect(try bed.followUp(push.followUpID) == .init(status: "dead", attempt: 1, lastError: "BadDeviceToken"))
        #expect(!push.seen.contains("retrying"))
        let attempts = try bed.attempts(push.followUpID)
        #expect(attempts.count == 1)
        #expect(attempts.first?.httpStatus == 400)
        #expect(attempts.first?.errorClass == "BadDeviceToken")
        let row = try #require(try bed.device(device))
        #expect(row.status == "dead")
        #expect(row.reason == "BadDeviceToken")
        #expect(try bed.standIn.requests(token: device).map(\.status) == [400])
    }

    struct RetryCase: Sendable, CustomTestStringConvertible {
        var marker: String
        var status: Int
        var reason: String
        var testDescription: String { "\(status) \(reason)" }
    }

    @Test(
        "429 and 503: retrying on the schedule, then delivered",
        arguments: [
            RetryCase(marker: "a4292", status: 429, reason: "TooManyRequests"),
            RetryCase(marker: "a5032", status: 503, reason: "ServiceUnavailable"),
        ])
    func retriedThenDelivered(_ retry: RetryCase) async throws {
        let bed = try Self.bed()
        let device = APNsStandIn.deviceToken(retry.marker)
        let push = try await Self.push(bed, device: device, until: ["delivered", "dead"])
        // Between its failures it was retrying: the attempts below say so (a poll of its status may miss the
        // moment on a loaded machine).
        #expect(try bed.followUp(push.followUpID) == .init(status: "delivered", attempt: 3, lastError: nil))

        let attempts = try bed.attempts(push.followUpID)
        #expect(attempts.map(\.attempt) == [1, 2, 3])
        #expect(attempts.map(\.result) == ["failed", "failed", "delivered"])
        #expect(attempts.map(\.httpStatus) == [retry.status, retry.status, 200])
        #expect(attempts.map(\.errorClass) == [retry.reason, retry.reason, nil])
        let requests = try bed.standIn.requests(token: device)
        #expect(requests.map(\.status) == [retry.status, retry.status, 200])
        #expect(Set(requests.compactMap(\.apnsID)) == [push.followUpID])
        // The schedule says 1 s (±10 %) between attempts; the worker polls every 200 ms.
        for index in 1..<min(requests.count, 3) {
            let gap = requests[index].time - requests[index - 1].time
            #expect(gap >= 0.85 && gap <= 4, "gap \(gap) s before attempt \(index + 1)")
        }
        let shown = try bed.responseFollowUps(push.responseID)[push.followUpID]
        #expect(shown?["status"] as? String == "delivered")
        let shownAttempts = shown?["attempts"] as? [[String: Any]] ?? []
        #expect(
            shownAttempts.compactMap { ($0["httpStatus"] as? NSNumber)?.intValue } == [retry.status, retry.status, 200])
        #expect(shownAttempts.compactMap { $0["result"] as? String } == ["failed", "failed", "delivered"])
    }

    @Test("403 ExpiredProviderToken: one refresh and one retry within the attempt, then delivered")
    func expiredProviderToken() async throws {
        let bed = try Self.bed()
        let device = APNsStandIn.deviceToken("e403")
        let push = try await Self.push(bed, device: device, until: ["delivered", "dead"])
        #expect(try bed.followUp(push.followUpID) == .init(status: "delivered", attempt: 1, lastError: nil))
        let attempts = try bed.attempts(push.followUpID)
        #expect(attempts.map(\.result) == ["delivered"])

        let requests = try bed.standIn.requests(token: device)
        try #require(requests.count == 2, "\(requests.map(\.reason))")
        #expect(requests[0].status == 403)
        #expect(requests[0].reason == "ExpiredProviderToken")
        #expect(requests[1].status == 200)
        #expect(requests[0].apnsID == push.followUpID && requests[1].apnsID == push.followUpID)
        let (expired, fresh) = (try #require(requests[0].jwt), try #require(requests[1].jwt))
        #expect(expired != fresh)
        #expect((requests[1].iat ?? 0) >= (requests[0].iat ?? .max))

        // The refreshed token is the one reused afterwards.
        let next = try await Self.push(bed, device: APNsStandIn.deviceToken(), until: ["delivered", "dead"])
        #expect(try bed.followUp(next.followUpID).status == "delivered")
        let all = try bed.standIn.requests()
        #expect(all.last?.jwt == fresh)
        #expect(Set(all.compactMap(\.jwt)) == [expired, fresh])
        #expect(all.filter { $0.reason == "TooManyProviderTokenUpdates" }.count == 0)
    }

    @Test("403 ExpiredProviderToken again after the refresh: exactly two requests, then dead")
    func expiredProviderTokenTwice() async throws {
        let bed = try Self.bed()
        let device = APNsStandIn.deviceToken("eeee")
        let push = try await Self.push(bed, device: device, until: ["delivered", "dead"])
        try await Task.sleep(for: .seconds(1.5))
        #expect(
            try bed.followUp(push.followUpID) == .init(status: "dead", attempt: 1, lastError: "ExpiredProviderToken"))
        let requests = try bed.standIn.requests(token: device)
        #expect(requests.map(\.reason) == ["ExpiredProviderToken", "ExpiredProviderToken"])
        #expect(Set(requests.compactMap(\.jwt)).count == 2)
    }

    @Test("a payload over 4096 bytes is dead with PayloadTooLarge and never sent")
    func payloadTooLarge() async throws {
        let bed = try Self.bed()
        // Small when rendered with empty values (so the rule is valid), large with a long userText.
        try bed.createRule(
            #"""
            {"id": "big", "match": {"category": "PUSH_TEST", "action": "big"}, "handler": {"type": "record"},
             "followUps": [
               {"channel": "apns", "payload": {"aps": {"alert": {"title": "{{userText}}", "body": "{{userText}}"}}}},
               {"channel": "apns", "pushType": "background", "payload": {"aps": {"content-available": 1}}}]}
            """#)
        let device = APNsStandIn.deviceToken()
        let answer = try bed.ingest(
            Self.response(action: "big", device: device, userText: String(repeating: "x", count: 3000)))
        let ids = APNsTestBed.followUpIDs(answer)
        try #require(ids.count == 2)
        try await bed.waitForFollowUp(ids[0], in: ["dead", "delivered"])
        try await bed.waitForFollowUp(ids[1], in: ["dead", "delivered"])
        #expect(
            try bed.api.count(
                "SELECT count(*) AS n FROM followups WHERE id = \(UUID(uuidString: ids[0])!) AND octet_length((payload -> 'payload')::text) > 4096"
            ) == 1)
        #expect(try bed.followUp(ids[0]) == .init(status: "dead", attempt: 1, lastError: "PayloadTooLarge"))
        let attempts = try bed.attempts(ids[0])
        #expect(attempts.map(\.result) == ["failed"])
        #expect(attempts.first?.httpStatus == nil)
        #expect(attempts.first?.errorClass == "PayloadTooLarge")
        // The small one went out; the large one never reached the stand-in.
        #expect(try bed.followUp(ids[1]).status == "delivered")
        #expect(try bed.standIn.requests(apnsID: ids[0]).isEmpty)
        #expect(try bed.standIn.requests().map(\.apnsID) == [ids[1]])
    }

    /// A clock tests move: the sender's idea of now, in whole seconds.
    final class TestClock: Sendable {
        let base: Int
        let offset = Atomic<Int>(0)
        init(base: Int) { self.base = base }
        var now: Int { base + offset.load(ordering: .relaxed) }
        func set(minutes: Double) { offset.store(Int(minutes * 60), ordering: .relaxed) }
    }

    /// Sends `count` pushes to `device` at once (texts "`text` 0", "`text` 1", …) and returns their outcomes.
    static func sendAtOnce(
        _ count: Int, from sender: APNsSender, appID: String, credentials: APNsCredentials, device: String,
        text: String
    ) async -> [SendOutcome] {
        await withTaskGroup(of: SendOutcome.self) { group in
            for index in 0..<count {
                group.addTask {
                    await sender.send(
                        id: UUID().uuidString.lowercased(), appID: appID, credentials: credentials,
                        payload: apnsPayload(device, "\(text) \(index)"))
                }
            }
            return await group.reduce(into: []) { $0.append($1) }
        }
    }

    static func apnsPayload(_ device: String, _ text: String) -> JSONValue {
        .object([
            "deviceToken": .string(device), "pushType": .string("alert"),
            "payload": .object(["aps": .object(["alert": .string(text)])]),
        ])
    }

    @Test("APNsSender: one JWT over 50 pushes from 0 to 19 min, a second at 41 min, all on one HTTP/2 connection")
    func providerTokenReuse() async throws {
        let standIn = try APNsStandIn()
        // The clock starts 45 min in the past so that every token is within APNs' hour when it arrives.
        let clock = TestClock(base: Int(Date().timeIntervalSince1970) - 45 * 60)
        let sender = APNsSender(
            endpoints: .init(overrideURL: standIn.baseURL, caFile: standIn.caFile), connections: 1,
            clock: { clock.now })
        let credentials = standIn.credentials
        let device = APNsStandIn.deviceToken()
        var ids: [String] = []
        for index in 0..<50 {
            clock.set(minutes: 19 * Double(index) / 49)
            let id = UUID().uuidString.lowercased()
            ids.append(id)
            let outcome = await sender.send(
                id: id, appID: "jwt", credentials: credentials, payload: Self.apnsPayload(device, "n\(index)"))
            #expect(outcome == .delivered(httpStatus: 200), "push \(index)")
        }
        var requests = try standIn.requests()
        #expect(requests.count == 50)
        #expect(requests.compactMap(\.apnsID) == ids)
        #expect(Set(requests.compactMap(\.jwt)).count == 1)
        #expect(Set(requests.compactMap(\.iat)) == [clock.base])
        #expect(sender.providerTokensIssued == 1)

        // At 41 min the token is stale: the next pushes, sent at once, share one new token.
        clock.set(minutes: 41)
        let outcomes = await Self.sendAtOnce(
            20, from: sender, appID: "jwt", credentials: credentials, device: device, text: "later")
        #expect(outcomes.filter { $0 == .delivered(httpStatus: 200) }.count == 20)
        requests = try standIn.requests()
        #expect(requests.count == 70)
        #expect(Set(requests.compactMap(\.jwt)).count == 2)
        #expect(Set(requests.compactMap(\.iat)) == [clock.base, clock.base + 41 * 60])
        #expect(sender.providerTokensIssued == 2)
        #expect(requests.filter { $0.reason == "TooManyProviderTokenUpdates" }.count == 0)
        #expect(requests.filter { $0.status != 200 }.count == 0)
        // Multiplexed: every request on the one connection.
        #expect(Set(requests.map(\.connection)).count == 1)
        #expect(try standIn.connections().count == 1)
        await sender.shutdown()
    }

    @Test("ACTIONHOOK_APNS_CONNECTIONS: one per core (at most four) by default, 1 to 64, a bad value names it")
    func connectionsSetting() throws {
        let base = ["DATABASE_URL": "postgresql://localhost/x"]
        let defaults = try Configuration.fromEnvironment(base)
        #expect(defaults.apnsConnections == APNsSender.defaultConnections)
        #expect((1...4).contains(APNsSender.defaultConnections))
        #expect(
            try Configuration.fromEnvironment(base.merging(["ACTIONHOOK_APNS_CONNECTIONS": "3"]) { $1 }).apnsConnections
                == 3)
        for bad in ["0", "65", "two"] {
            do {
                _ = try Configuration.fromEnvironment(base.merging(["ACTIONHOOK_APNS_CONNECTIONS": bad]) { $1 })
                Issue.record("ACTIONHOOK_APNS_CONNECTIONS=\(bad) was accepted")
            } catch {
                #expect(error.variable == "ACTIONHOOK_APNS_CONNECTIONS")
            }
        }
    }

    @Test("APNsSender: pushes go over its connections in turn, three kept open for 60 pushes, one token on all")
    func connectionsInTurn() async throws {
        let standIn = try APNsStandIn()
        let sender = APNsSender(
            endpoints: .init(overrideURL: standIn.baseURL, caFile: standIn.caFile), connections: 3)
        let credentials = standIn.credentials
        let device = APNsStandIn.deviceToken()
        // One at a time first (each connection is opened by its first push), then 30 at once.
        for index in 0..<30 {
            let outcome = await sender.send(
                id: UUID().uuidString.lowercased(), appID: "turns", credentials: credentials,
                payload: Self.apnsPayload(device, "n\(index)"))
            #expect(outcome == .delivered(httpStatus: 200), "push \(index)")
        }
        let outcomes = await Self.sendAtOnce(
            30, from: sender, appID: "turns", credentials: credentials, device: device, text: "together")
        #expect(outcomes.filter { $0 == .delivered(httpStatus: 200) }.count == 30)
        let requests = try standIn.requests()
        #expect(requests.count == 60)
        // In turn: each connection carried a third, over HTTP/2, and none was opened twice.
        let perConnection = Dictionary(grouping: requests, by: \.connection).mapValues(\.count)
        #expect(perConnection.count == 3)
        #expect(perConnection.values.allSatisfy { $0 == 20 }, "\(perConnection)")
        let connections = try standIn.connections()
        #expect(connections.count == 3)
        #expect(connections.allSatisfy { $0.alpn == "h2" })
        #expect(Set(requests.compactMap(\.jwt)).count == 1)
        #expect(sender.providerTokensIssued == 1)
        await sender.shutdown()
    }

    @Test(
        "APNsSender: the stand-in refuses a second new token within 20 min (retryable) and a token signed by another key"
    )
    func standInRefusesTokenChurn() async throws {
        let standIn = try APNsStandIn()
        let base = Int(Date().timeIntervalSince1970) - 30 * 60
        let device = APNsStandIn.deviceToken()
        let first = APNsSender(endpoints: .init(overrideURL: standIn.baseURL, caFile: standIn.caFile), clock: { base })
        let outcome = await first.send(
            id: UUID().uuidString.lowercased(), appID: "churn", credentials: standIn.credentials,
            payload: Self.apnsPayload(device, "first"))
        #expect(outcome == .delivered(httpStatus: 200))
        // Another sender (its own token) 5 minutes later: too soon for a new token of the same key.
        let second = APNsSender(
            endpoints: .init(overrideURL: standIn.baseURL, caFile: standIn.caFile), clock: { base + 5 * 60 })
        let refused = await second.send(
            id: UUID().uuidString.lowercased(), appID: "churn", credentials: standIn.credentials,
            payload: Self.apnsPayload(device, "second"))
        #expect(refused == .retryable(httpStatus: 429, errorClass: "TooManyProviderTokenUpdates"))
        // The same key id with another private key: the signature does not verify.
        var forged = standIn.credentials
        forged.privateKey = P256.Signing.PrivateKey().pemRepresentation
        let third = APNsSender(
            endpoints: .init(overrideURL: standIn.baseURL, caFile: standIn.caFile), clock: { base + 25 * 60 })
        let invalid = await third.send(
            id: UUID().uuidString.lowercased(), appID: "churn", credentials: forged,
            payload: Self.apnsPayload(device, "forged"))
        // Refused as invalid: replaced once and sent again, then final.
        #expect(invalid == .permanent(httpStatus: 403, errorClass: "InvalidProviderToken"))
        let requests = try standIn.requests()
        #expect(requests.map(\.status) == [200, 429, 403, 403])
        #expect(requests[2].jwt != requests[3].jwt)
        #expect(third.providerTokensIssued == 2)
        for sender in [first, second, third] { await sender.shutdown() }
    }

    @Test("APNsSender: pushes in flight when the token expires refresh it once between them")
    func concurrentExpiryRefreshesOnce() async throws {
        let standIn = try APNsStandIn()
        let sender = APNsSender(endpoints: .init(overrideURL: standIn.baseURL, caFile: standIn.caFile))
        let credentials = standIn.credentials
        let warmUp = await sender.send(
            id: UUID().uuidString.lowercased(), appID: "expiry", credentials: credentials,
            payload: Self.apnsPayload(APNsStandIn.deviceToken(), "warm-up"))
        #expect(warmUp == .delivered(httpStatus: 200))
        // One e403 device: its first request expires the token it carries, the warm-up's, which every
        // push in flight carries too. (Ten devices would each expire whatever their first request carried,
        // so a push started after the refresh would expire the new token as well: the outcome would depend
        // on when each task got to send.)
        let device = APNsStandIn.deviceToken("e403")
        let outcomes = await Self.sendAtOnce(
            10, from: sender, appID: "expiry", credentials: credentials, device: device, text: "push")
        #expect(outcomes.filter { $0 == .delivered(httpStatus: 200) }.count == 10)
        let requests = try standIn.requests()
        #expect(requests.filter { $0.reason == "TooManyProviderTokenUpdates" }.count == 0)
        #expect(Set(requests.compactMap(\.jwt)).count == 2)
        #expect(sender.providerTokensIssued == 2)
        await sender.shutdown()
    }
}
