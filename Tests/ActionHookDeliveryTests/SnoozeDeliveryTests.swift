import ActionHookServer
import Foundation
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

/// Snooze re-delivery end to end (R6 in the small): the original notification goes back to the
/// response's device through the APNs stand-in, not before it is due, exactly once.
@Suite("Snooze re-delivery through APNs", .serialized)
struct SnoozeDeliveryTests {
    /// The timer app: category `TIMER_EXPIRED`, `SNOOZE_ACTION` snoozes for `delay` seconds,
    /// `STOP_ACTION` records (and so cancels pending snoozes).
    static func bed(delay: Int) throws -> APNsTestBed {
        let bed = try APNsTestBed(app: "timers")
        try bed.putCategory(
            "TIMER_EXPIRED",
            #"""
            {"actions": [{"identifier": "SNOOZE_ACTION", "title": "Snooze", "options": []},
                         {"identifier": "STOP_ACTION", "title": "Stop", "options": ["foreground"]}],
             "options": [], "intentIdentifiers": []}
            """#)
        try bed.createRule(
            #"""
            {"id": "timer-snooze", "match": {"category": "TIMER_EXPIRED", "action": "SNOOZE_ACTION"},
             "handler": {"type": "snooze", "delaySeconds": \#(delay), "maxSnoozes": 3}}
            """#)
        try bed.createRule(
            #"""
            {"id": "timer-stop", "match": {"category": "TIMER_EXPIRED", "action": "STOP_ACTION"},
             "handler": {"type": "record"}}
            """#)
        return bed
    }

    /// A reply from `device`; `sent` names the notification ActionHook sent it, whose key the reply carries.
    static func timer(_ action: String, device: String, notification: String, sent: String? = nil) -> [String: Any] {
        var userInfo: [String: Any] = [
            "aps": [
                "alert": ["title": "Timer", "body": "Your tea is ready"], "category": "TIMER_EXPIRED",
                "sound": "default",
            ] as [String: Any],
            "timerId": notification,
        ]
        if let sent { userInfo["actionhook"] = ["n": sent, "d": 0] as [String: Any] }
        return [
            "actionIdentifier": action, "notificationIdentifier": notification, "deviceToken": device,
            "responseId": UUID().uuidString.lowercased(), "userInfo": userInfo,
        ]
    }

    /// Sends the timer's notification to `device` through ActionHook (a snooze re-sends only such a push)
    /// and waits until the stand-in has it; returns the notification's id.
    static func sendTimer(_ bed: APNsTestBed, device: String, notification: String) async throws -> String {
        let sent = try bed.send(
            #"""
            {"to": ["\#(device)"], "category": "TIMER_EXPIRED", "ttlSeconds": 3600,
             "aps": {"alert": {"title": "Timer", "body": "Your tea is ready"}, "sound": "default"},
             "userInfo": {"timerId": "\#(notification)"}}
            """#)
        let push = try #require((sent["devices"] as? [[String: Any]])?.first?["followUpId"] as? String)
        try await bed.waitForFollowUp(push, in: ["delivered"], timeoutSeconds: 10)
        return try #require(sent["id"] as? String)
    }

    /// Snoozes `notification` on `device` (sent to it first); returns the re-delivery's follow-up id and due
    /// time (database clock, UNIX seconds).
    static func snooze(_ bed: APNsTestBed, device: String, notification: String, sent: String? = nil) async throws
        -> (responseID: String, followUpID: String, dueAt: Double)
    {
        var sent = sent
        if sent == nil { sent = try await sendTimer(bed, device: device, notification: notification) }
        let answer = try bed.ingest(timer("SNOOZE_ACTION", device: device, notification: notification, sent: sent))
        #expect(answer["outcome"] as? String == "snoozed")
        let ids = APNsTestBed.followUpIDs(answer)
        try #require(ids.count == 1)
        let rows = try bed.api.query(
            """
            SELECT extract(epoch FROM due_at)::float8 AS due, ordinal, is_snooze
            FROM followups WHERE id = \(UUID(uuidString: ids[0])!)
            """)
        try #require(rows.count == 1)
        #expect(try rows[0].decode("ordinal", as: Int.self) == -1)
        #expect(try rows[0].decode("is_snooze", as: Bool.self))
        return (try #require(answer["id"] as? String), ids[0], try rows[0].decode("due", as: Double.self))
    }

    /// Checks the requests the stand-in saw for a snoozed device: the send's push, then the same push again
    /// for the snooze, on time.
    static func expectRedelivered(
        _ bed: APNsTestBed, device: String, notification: String, followUpID: String, dueAt: Double
    ) throws {
        let requests = try bed.standIn.requests(token: device)
        try #require(requests.count == 2, "the stand-in saw \(requests.count) requests for the device")
        let request = try #require(requests.first { $0.apnsID == followUpID })
        #expect(requests.filter { $0.apnsID == followUpID }.count == 1)
        #expect(requests[0].apnsID != followUpID)
        #expect(request.status == 200)
        #expect(request.apnsID == followUpID)
        #expect(request.headers["apns-push-type"] == "alert")
        #expect(request.headers["apns-topic"] == APNsStandIn.topic)
        // Not early by the database clock, and at most 1.5 s late.
        let attempts = try bed.attempts(followUpID)
        let timing =
            "received \(request.time - dueAt) s after due; attempt started \((attempts.first?.startedAt ?? 0) - dueAt) s, "
            + "finished \((attempts.first?.finishedAt ?? 0) - dueAt) s after due"
        #expect(request.time >= dueAt, Comment(rawValue: timing))
        #expect(request.time - dueAt <= 1.5, Comment(rawValue: timing))
        // The push ActionHook sent, aps included.
        let alert = request.aps?["alert"] as? [String: Any]
        #expect(alert?["title"] as? String == "Timer")
        #expect(alert?["body"] as? String == "Your tea is ready")
        #expect(request.aps?["category"] as? String == "TIMER_EXPIRED")
        #expect(request.aps?["sound"] as? String == "default")
        #expect(request.payloadObject?["timerId"] as? String == notification)
        #expect(try bed.followUp(followUpID) == .init(status: "delivered", attempt: 1, lastError: nil))
        #expect(try bed.attempts(followUpID).map(\.result) == ["delivered"])
    }

    @Test("a 1 s snooze re-sends the original notification to the device once, not before it is due")
    func firesOnceOnTime() async throws {
        let bed = try Self.bed(delay: 1)
        let device = APNsStandIn.deviceToken()
        let snooze = try await Self.snooze(bed, device: device, notification: "tea-1")
        #expect(
            try bed.api.count(
                """
                SELECT count(*) AS n FROM followups f JOIN responses r ON r.app_id = f.app_id AND r.id = f.response_id
                JOIN followups p ON p.app_id = f.app_id AND p.notification_id = r.notification_id AND p.kind = 'push'
                WHERE f.id = \(UUID(uuidString: snooze.followUpID)!) AND abs(extract(epoch FROM f.due_at - r.received_at) - 1) < 0.001
                    AND f.payload -> 'payload' = p.payload -> 'payload'
                """) == 1)
        try await bed.waitForFollowUp(snooze.followUpID, in: ["delivered", "dead"], timeoutSeconds: 10)
        // Time for a duplicate to show up, were there one.
        try await Task.sleep(for: .seconds(1.5))
        try Self.expectRedelivered(
            bed, device: device, notification: "tea-1", followUpID: snooze.followUpID, dueAt: snooze.dueAt)
        #expect(try bed.standIn.requests().count == 2)
        let shown = try bed.responseFollowUps(snooze.responseID)[snooze.followUpID]
        #expect(shown?["status"] as? String == "delivered")
        #expect((shown?["attempts"] as? [[String: Any]])?.count == 1)
    }

    @Test("a snooze cancelled by STOP_ACTION before it is due never reaches APNs")
    func cancelledNeverSent() async throws {
        let bed = try Self.bed(delay: 2)
        let stopped = APNsStandIn.deviceToken()
        let kept = APNsStandIn.deviceToken()
        // Both sent first: the stop must come within the 2 s before the snooze is due.
        let stoppedSent = try await Self.sendTimer(bed, device: stopped, notification: "tea-2")
        let keptSent = try await Self.sendTimer(bed, device: kept, notification: "egg-2")
        let cancelled = try await Self.snooze(bed, device: stopped, notification: "tea-2", sent: stoppedSent)
        let control = try await Self.snooze(bed, device: kept, notification: "egg-2", sent: keptSent)
        let stop = try bed.ingest(Self.timer("STOP_ACTION", device: stopped, notification: "tea-2"))
        #expect(stop["outcome"] as? String == "recorded")
        let stopID = try #require(stop["id"] as? String)
        // The stop was stored before the snooze was due, and cancelled it.
        #expect(
            try bed.api.count(
                """
                SELECT count(*) AS n FROM responses r, followups f
                WHERE r.id = \(UUID(uuidString: stopID)!) AND f.id = \(UUID(uuidString: cancelled.followUpID)!)
                    AND r.received_at < f.due_at
                """) == 1)
        #expect(try bed.followUp(cancelled.followUpID) == .init(status: "cancelled", attempt: 0, lastError: nil))

        // The other notification's snooze fires; by then, and a while after the cancelled one was due,
        // nothing went to the stopped device.
        try await bed.waitForFollowUp(control.followUpID, in: ["delivered", "dead"], timeoutSeconds: 10)
        let waitUntil = cancelled.dueAt + 1.5
        try await Task.sleep(for: .seconds(max(0, waitUntil - Date().timeIntervalSince1970)))
        try Self.expectRedelivered(
            bed, device: kept, notification: "egg-2", followUpID: control.followUpID, dueAt: control.dueAt)
        // Only the send's own push.
        #expect(try bed.standIn.requests(token: stopped).map(\.apnsID) != [cancelled.followUpID])
        #expect(try bed.standIn.requests(token: stopped).count == 1)
        #expect(try bed.followUp(cancelled.followUpID) == .init(status: "cancelled", attempt: 0, lastError: nil))
        #expect(try bed.attempts(cancelled.followUpID).isEmpty)
    }

    @Test("two instances over one schema, both with workers: the snooze fires once")
    func twoInstancesFireOnce() async throws {
        let bed = try Self.bed(delay: 1)
        let second = TestService.make(database: bed.api.database, migrate: false) { bed.standIn.configure(&$0) }
        try second.start()
        defer { second.stop() }
        #expect(second.configuration.workerEnabled)

        let device = APNsStandIn.deviceToken()
        let snooze = try await Self.snooze(bed, device: device, notification: "tea-3")
        try await bed.waitForFollowUp(snooze.followUpID, in: ["delivered", "dead"], timeoutSeconds: 10)
        // Both workers poll every 200 ms: a second delivery would show within this wait.
        try await Task.sleep(for: .seconds(1.5))
        try Self.expectRedelivered(
            bed, device: device, notification: "tea-3", followUpID: snooze.followUpID, dueAt: snooze.dueAt)
        #expect(try bed.standIn.requests(apnsID: snooze.followUpID).count == 1)
    }
}
