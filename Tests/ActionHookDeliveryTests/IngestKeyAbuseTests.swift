import Foundation
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

/// What the app's ingest key alone can do, tried from outside (quality F12): the key ships inside every copy
/// of the app, so anyone can hold it. Through HTTP and the APNs stand-in only; the database is read for
/// what the service recorded.
@Suite("The public ingest key alone: no enrolment, no relayed pushes, no other device's snooze", .serialized)
struct IngestKeyAbuseTests {
    typealias Bed = NotificationSendTests.Bed

    /// A bed with a `TIMER` category (subject key `timer`) whose SNOOZE snoozes (at most `maxSnoozes`
    /// times, 600 s) and whose STOP records.
    static func timerBed(_ app: String, maxSnoozes: Int = 3) throws -> Bed {
        let bed = try Bed(app: app, worker: false)
        let category = try bed.api.admin(
            "PUT", "/v1/apps/\(app)/categories/TIMER",
            json: #"""
                {"actions": [{"identifier": "SNOOZE", "title": "Snooze", "options": []},
                             {"identifier": "STOP", "title": "Stop", "options": []}],
                 "options": [], "intentIdentifiers": [], "subjectKey": "timer"}
                """#)
        try #require([200, 201].contains(category.status), "category: \(category.status) \(category.text)")
        try Hooks.saveRule(
            bed.api, app: app,
            #"""
            {"id": "snooze", "match": {"category": "TIMER", "action": "SNOOZE"},
             "handler": {"type": "snooze", "delaySeconds": 600, "maxSnoozes": \#(maxSnoozes)}}
            """#)
        try Hooks.saveRule(
            bed.api, app: app,
            #"{"id": "stop", "match": {"category": "TIMER", "action": "STOP"}, "handler": {"type": "record"}}"#)
        return bed
    }

    /// Posts a reply built from `body` with the bed's ingest key.
    static func reply(_ bed: Bed, _ body: [String: Any]) throws -> TestResponse {
        var body = body
        if body["responseId"] == nil { body["responseId"] = UUID().uuidString.lowercased() }
        let data = try JSONSerialization.data(withJSONObject: body, options: [.sortedKeys])
        return try bed.api.ingest(key: bed.ingestKey, json: String(decoding: data, as: UTF8.self))
    }

    static func tokens(_ sent: [String: Any]) -> [String] {
        (sent["devices"] as? [[String: Any]] ?? []).compactMap { $0["deviceToken"] as? String }
    }

    @Test(
        "replies claiming a subject enrol nothing: a send to the subject reaches only devices the backend named, and none after erasure"
    )
    func noEnrolment() throws {
        let bed = try Bed(app: "enrol", worker: false)
        let real = APNsStandIn.deviceToken()
        // The backend sends about event S to the real device.
        _ = try bed.send(
            #"{"to": [{"deviceToken": "\#(real)", "recipient": "alice"}], "category": "INVITE", "aps": {"alert": "?"}, "userInfo": {"eventId": "S"}, "subject": "S"}"#
        )
        // The subject key is public (the app fetches it with the ingest key).
        let categories = try bed.api.call("GET", "/v1/categories", token: bed.ingestKey)
        #expect(categories.text.contains(#""subjectKey":"eventId""#))
        // Twenty forged claims of the subject, each from a device of the attacker's, all stored.
        var forged: [String] = []
        for _ in 0..<20 {
            let token = APNsStandIn.deviceToken()
            forged.append(token)
            let claim = try Self.reply(
                bed,
                [
                    "actionIdentifier": "x", "userInfo": ["eventId": "S", "aps": ["category": "INVITE"]],
                    "deviceToken": token,
                ])
            #expect(claim.status == 202)
        }
        #expect(try bed.api.count("SELECT count(*) AS n FROM responses WHERE app_id = 'enrol' AND subject = 'S'") == 20)

        let toSubject = try bed.send(#"{"subject": "S", "aps": {"alert": "Still open"}}"#)
        #expect(Self.tokens(toSubject) == [real])
        #expect((toSubject["devices"] as? [[String: Any]])?.first?["recipient"] as? String == "alice")
        let pushedTo = try bed.api.query(
            "SELECT device_token FROM followups WHERE app_id = 'enrol' AND kind = 'push' AND device_token IS NOT NULL"
        ).map { try $0.decode("device_token", as: String.self) }
        #expect(Set(pushedTo) == [real])

        // Erasing the subject takes its devices out: the next send to it has none to go to.
        let erased = try bed.api.admin("DELETE", "/v1/apps/enrol/subjects/S")
        #expect(erased.status == 200, "erasure: \(erased.status) \(erased.text)")
        let after = try bed.send(#"{"subject": "S", "aps": {"alert": "?"}}"#, status: 422)
        #expect((after["errors"] as? [[String: Any]])?.first?["pointer"] as? String == "/subject")
        #expect(
            try bed.api.count("SELECT count(*) AS n FROM subject_devices WHERE app_id = 'enrol' AND subject = 'S'") == 0
        )

        // Erasing a device takes it out of every subject the backend named it for.
        let other = APNsStandIn.deviceToken()
        _ = try bed.send(
            #"{"to": ["\#(real)", "\#(other)"], "category": "INVITE", "aps": {"alert": "?"}, "subject": "T"}"#)
        #expect(try bed.api.admin("DELETE", "/v1/apps/enrol/devices/\(real)").status == 200)
        #expect(Self.tokens(try bed.send(#"{"subject": "T", "aps": {"alert": "?"}}"#)) == [other])
    }

    @Test(
        "a snooze re-delivers only what ActionHook sent, to the device it sent it to: never the reply's own userInfo to the reply's own token"
    )
    func noRelayedPushes() throws {
        let bed = try Self.timerBed("relay")
        // A snooze of a notification ActionHook never sent: stored as snoozed, nothing to push.
        let chosen = APNsStandIn.deviceToken()
        let relay = try Self.reply(
            bed,
            [
                "actionIdentifier": "SNOOZE", "notificationIdentifier": "any", "deviceToken": chosen,
                "userInfo": ["aps": ["category": "TIMER", "alert": "Your account is locked: call 555-0100"]],
            ])
        #expect(relay.status == 202)
        #expect(relay.json["outcome"] as? String == "snoozed")
        #expect((relay.json["followUps"] as? [Any])?.isEmpty == true)
        #expect(try bed.api.count("SELECT count(*) AS n FROM followups WHERE app_id = 'relay'") == 0)

        // A snooze of a notification ActionHook sent re-delivers that push, whatever the reply carries.
        let device = APNsStandIn.deviceToken()
        let sent = try bed.send(
            #"{"to": ["\#(device)"], "category": "TIMER", "aps": {"alert": "Tea is ready"}, "userInfo": {"timer": "tea"}}"#
        )
        let id = try #require(sent["id"] as? String)
        let collapse = try #require(sent["collapseId"] as? String)
        let snoozed = try Self.reply(
            bed,
            [
                "actionIdentifier": "SNOOZE", "notificationIdentifier": collapse, "deviceToken": device,
                "userInfo": [
                    "aps": ["category": "TIMER", "alert": "Something else"], "actionhook": ["n": id, "d": 0],
                ],
            ])
        #expect(snoozed.json["outcome"] as? String == "snoozed")
        let followUps = try #require(snoozed.json["followUps"] as? [[String: Any]])
        #expect(followUps.count == 1)
        let rows = try bed.api.query(
            """
            SELECT f.device_token, f.payload::text AS payload, p.payload::text AS pushed FROM followups f
            JOIN followups p ON p.app_id = f.app_id AND p.notification_id = \(UUID(uuidString: id)!) AND p.kind = 'push'
            WHERE f.app_id = 'relay' AND f.is_snooze
            """)
        try #require(rows.count == 1)
        #expect(try rows[0].decode("device_token", as: String.self) == device)
        let redelivery = try #require(
            try JSONSerialization.jsonObject(with: Data(try rows[0].decode("payload", as: String.self).utf8))
                as? [String: Any])
        let pushed = try #require(
            try JSONSerialization.jsonObject(with: Data(try rows[0].decode("pushed", as: String.self).utf8))
                as? [String: Any])
        #expect(NSDictionary(dictionary: redelivery) == NSDictionary(dictionary: pushed))
        #expect(!(try rows[0].decode("payload", as: String.self)).contains("Something else"))

        // The same key from another token binds no device: nothing re-delivered to it.
        let stranger = try Self.reply(
            bed,
            [
                "actionIdentifier": "SNOOZE", "notificationIdentifier": collapse, "deviceToken": chosen,
                "userInfo": ["aps": ["category": "TIMER"], "actionhook": ["n": id, "d": 0]],
            ])
        #expect(stranger.json["outcome"] as? String == "snoozed")
        #expect((stranger.json["followUps"] as? [Any])?.isEmpty == true)
    }

    @Test(
        "another device's answer to the same notification leaves a snooze pending; the snoozing device's own answer cancels it"
    )
    func snoozesAreTheDevicesOwn() throws {
        let bed = try Self.timerBed("scoped")
        let (a, b) = (APNsStandIn.deviceToken(), APNsStandIn.deviceToken())
        let sent = try bed.send(
            #"{"to": ["\#(a)", "\#(b)"], "category": "TIMER", "aps": {"alert": "Tea"}, "userInfo": {"timer": "tea"}, "answers": "each"}"#
        )
        let id = try #require(sent["id"] as? String)
        let collapse = try #require(sent["collapseId"] as? String)
        func answer(_ action: String, _ token: String, _ position: Int) throws -> TestResponse {
            try Self.reply(
                bed,
                [
                    "actionIdentifier": action, "notificationIdentifier": collapse, "deviceToken": token,
                    "userInfo": [
                        "aps": ["category": "TIMER"], "timer": "tea", "actionhook": ["n": id, "d": position],
                    ],
                ])
        }
        func pending(_ token: String) throws -> Int {
            try bed.api.count(
                """
                SELECT count(*) AS n FROM followups WHERE app_id = 'scoped' AND is_snooze AND device_token = \(token)
                    AND status = 'pending'
                """)
        }
        #expect(try answer("SNOOZE", a, 0).json["outcome"] as? String == "snoozed")
        #expect(try pending(a) == 1)
        // Device B stops its own timer: A's re-delivery stays.
        #expect(try answer("STOP", b, 1).json["outcome"] as? String == "recorded")
        #expect(try pending(a) == 1)
        // A's own answer cancels it.
        #expect(try answer("STOP", a, 0).json["outcome"] as? String == "recorded")
        #expect(try pending(a) == 0)
    }

    @Test(
        "concurrent snoozes of one device never pass maxSnoozes: of two at once, one snoozes and one reaches the limit")
    func concurrentSnoozesCounted() async throws {
        let bed = try Self.timerBed("limit", maxSnoozes: 1)
        for _ in 0..<10 {
            let device = APNsStandIn.deviceToken()
            let sent = try bed.send(
                #"{"to": ["\#(device)"], "category": "TIMER", "aps": {"alert": "Tea"}, "userInfo": {"timer": "tea"}}"#)
            let id = try #require(sent["id"] as? String)
            let collapse = try #require(sent["collapseId"] as? String)
            let body: [String: Any] = [
                "actionIdentifier": "SNOOZE", "notificationIdentifier": collapse, "deviceToken": device,
                "userInfo": ["aps": ["category": "TIMER"], "actionhook": ["n": id, "d": 0]],
            ]
            let data = try JSONSerialization.data(withJSONObject: body)
            let outcomes = try await withThrowingTaskGroup(of: String?.self) { group in
                for _ in 0..<2 {
                    group.addTask {
                        var copy = try JSONSerialization.jsonObject(with: data) as? [String: Any] ?? [:]
                        copy["responseId"] = UUID().uuidString.lowercased()
                        return try Self.reply(bed, copy).json["outcome"] as? String
                    }
                }
                var all: [String?] = []
                for try await outcome in group { all.append(outcome) }
                return all
            }
            #expect(outcomes.sorted { ($0 ?? "") < ($1 ?? "") } == ["snooze_limit_reached", "snoozed"])
        }
        #expect(try bed.api.count("SELECT count(*) AS n FROM followups WHERE app_id = 'limit' AND is_snooze") == 10)
    }
}
