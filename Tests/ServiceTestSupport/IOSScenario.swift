import ActionHookServer
import Foundation
import Postgres
import TestSupport
import Testing

/// Fixtures and row readers for the scenario tests.
package enum IOSScenario {
    package static let calendarApp = "acme-calendar"
    package static let deviceA = String(repeating: "a1b2c3d4", count: 8)
    package static let deviceB = String(repeating: "0f1e2d3c", count: 8)

    package struct FollowUpRow {
        package var id: String
        package var ordinal: Int
        package var channel: String
        package var isSnooze: Bool
        package var status: String
        package var deviceToken: String?
        package var payload: [String: Any]
    }

    package struct Counts: Equatable {
        package var responses: Int
        package var followUps: Int
    }

    /// A live service for ingest tests. The delivery worker is off so that follow-up rows keep the state
    /// ingest gave them (delivery has its own tests).
    package static func makeAPI(configure: (inout Configuration) -> Void = { _ in }) throws -> TestAPI {
        try TestAPI(configure: { configuration in
            configuration.workerEnabled = false
            configure(&configuration)
        })
    }

    /// The calendar app of WWDC 2016: categories `event-invite` and `event-update`, three rules.
    package static func setUpCalendar(_ api: TestAPI) throws -> String {
        let key = try api.createApp(
            calendarApp, extra: #""webhook": {"url": "https://hooks.acme.example/actionhook"}"#)
        try putCategory(
            api, app: calendarApp, id: "event-invite",
            #"""
            {"identifier": "event-invite",
             "actions": [{"identifier": "accept", "title": "Accept", "options": ["foreground"]},
                         {"identifier": "decline", "title": "Decline", "options": ["destructive"]},
                         {"identifier": "comment", "title": "Comment", "options": [],
                          "textInput": {"buttonTitle": "Send", "placeholder": "Type here..."}}],
             "options": [], "intentIdentifiers": [], "subjectKey": "eventId"}
            """#, expectStatus: [201])
        try putCategory(api, app: calendarApp, id: "event-update", #"{"actions": []}"#, expectStatus: [201])
        try createRule(
            api, app: calendarApp,
            #"""
            {"id": "invite-accept", "description": "Tell the calendar backend when an invite is accepted",
             "priority": 100, "enabled": true,
             "match": {"category": "event-invite", "action": ["accept", "ACCEPT"],
                       "userInfo": [{"path": "eventId", "op": "exists"}]},
             "handler": {"type": "accept"},
             "followUps": [
               {"channel": "webhook", "delaySeconds": 0,
                "body": {"event": "invite.accepted", "eventId": "{{userInfo.eventId}}", "responseId": "{{response.id}}"}},
               {"channel": "apns", "delaySeconds": 0, "pushType": "alert",
                "payload": {"aps": {"alert": {"title": "Going!", "body": "See you at {{userInfo.location}}"},
                                    "category": "event-update"}}}]}
            """#)
        try createRule(
            api, app: calendarApp,
            #"""
            {"id": "invite-decline", "match": {"category": "event-invite", "action": "decline"},
             "handler": {"type": "decline"}, "followUps": [{"channel": "webhook"}]}
            """#)
        try createRule(
            api, app: calendarApp,
            #"""
            {"id": "invite-comment", "match": {"category": "event-invite", "action": "comment"},
             "handler": {"type": "comment", "maxLength": 140},
             "followUps": [{"channel": "webhook",
                            "body": {"event": "invite.comment", "eventId": "{{userInfo.eventId}}",
                                     "text": "{{userText}}", "note": "said: {{userText}}"}}]}
            """#)
        return key
    }

    /// A response to the party invite, `userInfo` as the push carried it (event 42 unless given).
    package static func inviteResponse(
        action: String, device: String, responseId: String, userText: String? = nil, userTextJSON: String? = nil,
        eventId: String = "42", respondedAt: String = "2026-11-20T10:00:00.000Z"
    ) -> String {
        var text = ""
        if let userTextJSON {
            text = #""userText": \#(userTextJSON), "#
        } else if let userText {
            text = #""userText": \#(jsonString(userText)), "#
        }
        return #"""
            {"actionIdentifier": "\#(action)", \#(text)"notificationIdentifier": "invite-\#(eventId)",
             "deviceToken": "\#(device)", "responseId": "\#(responseId)", "respondedAt": "\#(respondedAt)",
             "userInfo": {"aps": {"alert": {"title": "Party at Tom's", "body": "Saturday 8pm"},
                                  "category": "event-invite", "mutable-content": 1},
                          "eventId": \#(eventId), "location": "Tom's place, 1 \"Main\" St"}}
            """#
    }

    package static func jsonString(_ text: String) -> String {
        let data = try! JSONSerialization.data(withJSONObject: [text], options: [])
        let array = String(decoding: data, as: UTF8.self)
        return String(array.dropFirst().dropLast())
    }

    package static func putCategory(_ api: TestAPI, app: String, id: String, _ json: String, expectStatus: [Int]) throws
    {
        let answer = try api.admin("PUT", "/v1/apps/\(app)/categories/\(id)", json: json)
        try #require(expectStatus.contains(answer.status), "PUT category \(id): \(answer.status) \(answer.text)")
    }

    package static func createRule(_ api: TestAPI, app: String, _ json: String) throws {
        let answer = try api.admin("POST", "/v1/apps/\(app)/rules", json: json)
        try #require(answer.status == 201, "POST rule: \(answer.status) \(answer.text)")
    }

    /// The stored columns of one response, as text (`nil` for NULL).
    package static func responseRow(_ api: TestAPI, id: String) throws -> [String: String] {
        let rows = try api.query(
            """
            SELECT action_identifier, category_identifier, notification_identifier, user_text, outcome, rule_id,
                subject, device_token, idempotency_key, client_response_id
            FROM responses WHERE id = \(UUID(uuidString: id)!)
            """)
        try #require(rows.count == 1)
        var result: [String: String] = [:]
        for column in [
            "action_identifier", "category_identifier", "notification_identifier", "user_text", "outcome", "rule_id",
            "subject", "device_token", "idempotency_key", "client_response_id",
        ] {
            result[column] = try rows[0].decode(column, as: String?.self)
        }
        return result
    }

    /// A response's follow-up rows, by ordinal.
    package static func followUps(_ api: TestAPI, responseID: String) throws -> [FollowUpRow] {
        try api.query(
            """
            SELECT id, ordinal, channel, is_snooze, status, device_token, payload::text AS payload
            FROM followups WHERE response_id = \(UUID(uuidString: responseID)!) ORDER BY ordinal
            """
        ).map { row in
            let text = try row.decode("payload", as: String.self)
            let payload = try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any] ?? [:]
            return FollowUpRow(
                id: try row.decode("id", as: UUID.self).uuidString.lowercased(), ordinal: try row.decode("ordinal"),
                channel: try row.decode("channel"), isSnooze: try row.decode("is_snooze"),
                status: try row.decode("status"), deviceToken: try row.decode("device_token", as: String?.self),
                payload: payload)
        }
    }

    /// `jsonb_typeof` of a member of a follow-up's stored payload.
    package static func jsonType(_ api: TestAPI, followUpID: String, path: [String]) throws -> String? {
        let rows = try api.query(
            "SELECT jsonb_typeof(payload #> \(path)) AS t FROM followups WHERE id = \(UUID(uuidString: followUpID)!)")
        return try rows.first?.decode("t", as: String?.self)
    }

    /// The subject's decisions through the API, device token → outcome.
    package static func decisions(_ api: TestAPI, app: String, subject: String) throws -> [String: String] {
        let answer = try api.admin("GET", "/v1/apps/\(app)/subjects/\(subject)")
        try #require(answer.status == 200, "\(answer.text)")
        var result: [String: String] = [:]
        for decision in answer.json["decisions"] as? [[String: Any]] ?? [] {
            result[decision["deviceToken"] as? String ?? ""] = decision["outcome"] as? String
        }
        return result
    }

    package static func counts(_ api: TestAPI) throws -> Counts {
        Counts(
            responses: try api.count("SELECT count(*) AS n FROM responses"),
            followUps: try api.count("SELECT count(*) AS n FROM followups"))
    }

    /// The pointers of a problem's field errors.
    package static func pointers(_ response: TestResponse) -> [String] {
        (response.json["errors"] as? [[String: Any]] ?? []).compactMap { $0["pointer"] as? String }
    }
}
