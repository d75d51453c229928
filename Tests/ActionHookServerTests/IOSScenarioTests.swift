import ActionHookServer
import Foundation
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

/// End-to-end scenarios taken from the iOS notification code ActionHook was conceived from: the
/// WWDC 2016 calendar invite, the iOS 9 quick reply, the iOS 8 background action, the timer with
/// snooze, and the to-do list. Real HTTP against a live service over its own PostgreSQL schema.
@Suite("iOS scenarios end to end")
struct IOSScenarioTests {

    // MARK: - 1. Calendar invite (iOS 10, WWDC 2016 "event-invite")

    @Test("event-invite: accept, decline and comment run their rules, render follow-ups and track the decision")
    func calendarInvite() throws {
        let api = try IOSScenario.makeAPI()
        let key = try IOSScenario.setUpCalendar(api)
        let app = IOSScenario.calendarApp

        // Accept: category comes from userInfo.aps.category.
        let accept = try api.ingest(
            key: key,
            json: IOSScenario.inviteResponse(action: "accept", device: IOSScenario.deviceA, responseId: "inv-accept-1"))
        try #require(accept.status == 202, "\(accept.text)")
        #expect(accept.json["outcome"] as? String == "accepted")
        #expect(accept.json["ruleId"] as? String == "invite-accept")
        #expect(accept.json["subject"] as? String == "42")
        let acceptFollowUps = accept.json["followUps"] as? [[String: Any]] ?? []
        #expect(acceptFollowUps.map { $0["channel"] as? String } == ["webhook", "apns"])
        let acceptID = try #require(accept.json["id"] as? String)

        let stored = try IOSScenario.responseRow(api, id: acceptID)
        #expect(stored["action_identifier"] == "accept")
        #expect(stored["category_identifier"] == "event-invite")
        #expect(stored["notification_identifier"] == "invite-42")
        #expect(stored["outcome"] == "accepted")
        #expect(stored["rule_id"] == "invite-accept")
        #expect(stored["subject"] == "42")
        #expect(stored["device_token"] == IOSScenario.deviceA)
        #expect(stored["user_text"] == nil)

        let rows = try IOSScenario.followUps(api, responseID: acceptID)
        try #require(rows.count == 2)
        #expect(rows[0].ordinal == 0 && rows[0].channel == "webhook" && !rows[0].isSnooze)
        let webhookBody = try #require(rows[0].payload["body"] as? [String: Any])
        #expect(webhookBody["event"] as? String == "invite.accepted")
        // A lone placeholder keeps the value's JSON type: the number stays a number.
        #expect(webhookBody["eventId"] is NSNumber)
        #expect((webhookBody["eventId"] as? NSNumber)?.intValue == 42)
        #expect(try IOSScenario.jsonType(api, followUpID: rows[0].id, path: ["body", "eventId"]) == "number")
        #expect(webhookBody["responseId"] as? String == acceptID)
        #expect(rows[0].payload["url"] is NSNull)
        #expect(rows[1].ordinal == 1 && rows[1].channel == "apns" && !rows[1].isSnooze)
        #expect(rows[1].deviceToken == IOSScenario.deviceA)
        #expect(rows[1].payload["deviceToken"] as? String == IOSScenario.deviceA)
        #expect(rows[1].payload["pushType"] as? String == "alert")
        let aps = (rows[1].payload["payload"] as? [String: Any])?["aps"] as? [String: Any]
        let alert = aps?["alert"] as? [String: Any]
        #expect(alert?["title"] as? String == "Going!")
        #expect(alert?["body"] as? String == #"See you at Tom's place, 1 "Main" St"#)
        #expect(aps?["category"] as? String == "event-update")

        // GET one response, with its follow-ups in order.
        let one = try api.admin("GET", "/v1/apps/\(app)/responses/\(acceptID)")
        try #require(one.status == 200, "\(one.text)")
        #expect(one.json["id"] as? String == acceptID)
        #expect(one.json["outcome"] as? String == "accepted")
        #expect(one.json["actionIdentifier"] as? String == "accept")
        #expect(one.json["categoryIdentifier"] as? String == "event-invite")
        #expect(one.json["ruleId"] as? String == "invite-accept")
        #expect(one.json["subject"] as? String == "42")
        #expect(((one.json["userInfo"] as? [String: Any])?["eventId"] as? NSNumber)?.intValue == 42)
        let listed = one.json["followUps"] as? [[String: Any]] ?? []
        #expect(listed.map { $0["channel"] as? String } == ["webhook", "apns"])
        #expect(listed.map { $0["id"] as? String } == acceptFollowUps.map { $0["id"] as? String })
        #expect(listed.allSatisfy { $0["responseId"] as? String == acceptID })
        #expect(try api.admin("GET", "/v1/apps/\(app)/responses/\(UUID().uuidString.lowercased())").status == 404)

        // The subject's current decision on device A.
        var decisions = try IOSScenario.decisions(api, app: app, subject: "42")
        #expect(decisions == [IOSScenario.deviceA: "accepted"])

        // Decline from the same device: the latest answer wins; the default webhook body is sent.
        let decline = try api.ingest(
            key: key,
            json: IOSScenario.inviteResponse(
                action: "decline", device: IOSScenario.deviceA, responseId: "inv-decline-1",
                respondedAt: "2026-11-20T10:05:00.000Z"))
        try #require(decline.status == 202, "\(decline.text)")
        #expect(decline.json["outcome"] as? String == "declined")
        #expect(decline.json["ruleId"] as? String == "invite-decline")
        let declineID = try #require(decline.json["id"] as? String)
        let declineRows = try IOSScenario.followUps(api, responseID: declineID)
        try #require(declineRows.count == 1)
        let defaultBody = declineRows[0].payload["body"] as? [String: Any]
        #expect(defaultBody?["type"] as? String == "response.declined")
        let embedded = (defaultBody?["data"] as? [String: Any])?["response"] as? [String: Any]
        #expect(embedded?["id"] as? String == declineID)
        #expect(embedded?["actionIdentifier"] as? String == "decline")
        #expect(embedded?["subject"] as? String == "42")

        decisions = try IOSScenario.decisions(api, app: app, subject: "42")
        #expect(decisions == [IOSScenario.deviceA: "declined"])
        let current = try api.admin("GET", "/v1/apps/\(app)/subjects/42").json["decisions"] as? [[String: Any]] ?? []
        #expect(current.count == 1)
        #expect(current.first?["responseId"] as? String == declineID)

        // An older answer that arrives late does not replace the newer decision.
        let stale = try api.ingest(
            key: key,
            json: IOSScenario.inviteResponse(
                action: "accept", device: IOSScenario.deviceA, responseId: "inv-accept-stale",
                respondedAt: "2026-11-20T09:00:00.000Z"))
        #expect(stale.status == 202)
        #expect(stale.json["outcome"] as? String == "accepted")
        #expect(try IOSScenario.decisions(api, app: app, subject: "42") == [IOSScenario.deviceA: "declined"])

        // Another device accepts: one decision per device.
        let otherDevice = try api.ingest(
            key: key,
            json: IOSScenario.inviteResponse(action: "accept", device: IOSScenario.deviceB, responseId: "inv-accept-2"))
        #expect(otherDevice.status == 202)
        decisions = try IOSScenario.decisions(api, app: app, subject: "42")
        #expect(decisions == [IOSScenario.deviceA: "declined", IOSScenario.deviceB: "accepted"])

        // Comment: user text with quotes and a JSON-breaking fragment stays one string.
        let hostile = #"I'll bring "cake"","x":"1"#
        let comment = try api.ingest(
            key: key,
            json: IOSScenario.inviteResponse(
                action: "comment", device: IOSScenario.deviceA, responseId: "inv-comment-1", userText: hostile)
        )
        try #require(comment.status == 202, "\(comment.text)")
        #expect(comment.json["outcome"] as? String == "commented")
        #expect(comment.json["ruleId"] as? String == "invite-comment")
        let commentID = try #require(comment.json["id"] as? String)
        #expect(try IOSScenario.responseRow(api, id: commentID)["user_text"] == hostile)
        let commentRows = try IOSScenario.followUps(api, responseID: commentID)
        try #require(commentRows.count == 1)
        let commentBody = try #require(commentRows[0].payload["body"] as? [String: Any])
        #expect(commentBody["text"] as? String == hostile)
        #expect(commentBody["note"] as? String == "said: " + hostile)
        #expect(commentBody["x"] == nil)
        #expect(Set(commentBody.keys) == ["event", "eventId", "text", "note"])
        #expect(try IOSScenario.jsonType(api, followUpID: commentRows[0].id, path: ["body", "text"]) == "string")
        // A comment is not a decision.
        #expect(
            try IOSScenario.decisions(api, app: app, subject: "42") == [
                IOSScenario.deviceA: "declined", IOSScenario.deviceB: "accepted",
            ])

        // Refused comments: empty, blank, missing or too long text; nothing stored.
        let before = try IOSScenario.counts(api)
        for (index, text) in [#""""#, #""  \n\t ""#, "null", "\"" + String(repeating: "c", count: 141) + "\""]
            .enumerated()
        {
            let body = IOSScenario.inviteResponse(
                action: "comment", device: IOSScenario.deviceA, responseId: "inv-bad-comment-\(index)",
                userTextJSON: text)
            let refused = try api.ingest(key: key, json: body)
            #expect(refused.status == 422, "text \(index): \(refused.text)")
            #expect(refused.headers["content-type"] == "application/problem+json")
            #expect(IOSScenario.pointers(refused) == ["/userText"], "text \(index)")
        }
        #expect(try IOSScenario.counts(api) == before)
        // The 141-character text is the only one over maxLength; 140 is accepted.
        let longest = try api.ingest(
            key: key,
            json: IOSScenario.inviteResponse(
                action: "comment", device: IOSScenario.deviceA, responseId: "inv-longest",
                userText: String(repeating: "c", count: 140)))
        #expect(longest.status == 202, "\(longest.text)")
    }

    // MARK: - 2. iOS 9 quick reply (legacy shape)

    @Test("iOS 9 reply: the legacy responseInfo shape is normalised; the new shape under the same key replays")
    func iOS9QuickReply() throws {
        let api = try IOSScenario.makeAPI()
        let key = try api.createApp("jpush-demo")
        try IOSScenario.putCategory(
            api, app: "jpush-demo", id: "reply",
            #"""
            {"actions": [{"identifier": "comment-reply", "title": "Reply", "options": [],
                          "textInput": {"buttonTitle": "Reply", "placeholder": "Type a reply"}}]}
            """#, expectStatus: [201])
        try IOSScenario.createRule(
            api, app: "jpush-demo",
            #"""
            {"id": "quick-reply", "match": {"category": "reply", "action": "comment-reply"},
             "handler": {"type": "comment"},
             "followUps": [{"channel": "webhook", "url": "https://backend.example/replies",
                            "body": {"reply": "{{userText}}", "category": "{{categoryIdentifier}}"}}]}
            """#)
        let userInfo =
            #"{"aps": {"alert": "example", "sound": "default", "badge": 1, "category": "reply"}, "threadId": "t-7"}"#

        let legacy = try api.ingest(
            key: key,
            json: #"""
                {"identifier": "comment-reply",
                 "responseInfo": {"UIUserNotificationActionResponseTypedTextKey": "On my way"},
                 "userInfo": \#(userInfo)}
                """#,
            headers: [("Idempotency-Key", "reply-0001")])
        try #require(legacy.status == 202, "\(legacy.text)")
        #expect(legacy.json["outcome"] as? String == "commented")
        #expect(legacy.json["ruleId"] as? String == "quick-reply")
        #expect(legacy.headers["idempotent-replayed"] == nil)
        let id = try #require(legacy.json["id"] as? String)

        let row = try IOSScenario.responseRow(api, id: id)
        #expect(row["action_identifier"] == "comment-reply")
        #expect(row["user_text"] == "On my way")
        #expect(row["category_identifier"] == "reply")
        #expect(row["idempotency_key"] == "reply-0001")
        let followUps = try IOSScenario.followUps(api, responseID: id)
        try #require(followUps.count == 1)
        let body = followUps[0].payload["body"] as? [String: Any]
        #expect(body?["reply"] as? String == "On my way")
        #expect(body?["category"] as? String == "reply")
        #expect(followUps[0].payload["url"] as? String == "https://backend.example/replies")

        // The same reply in the iOS 10 shape, same key: the stored answer again.
        let modern = try api.ingest(
            key: key,
            json: #"{"actionIdentifier": "comment-reply", "userText": "On my way", "userInfo": \#(userInfo)}"#,
            headers: [("Idempotency-Key", "reply-0001")])
        #expect(modern.status == 200, "\(modern.text)")
        #expect(modern.headers["idempotent-replayed"] == "true")
        #expect(modern.body == legacy.body)
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 1)
        #expect(try api.count("SELECT count(*) AS n FROM followups") == 1)

        // Other typed text under that key is another body.
        let other = try api.ingest(
            key: key,
            json: #"""
                {"identifier": "comment-reply",
                 "responseInfo": {"UIUserNotificationActionResponseTypedTextKey": "Running late"},
                 "userInfo": \#(userInfo)}
                """#,
            headers: [("Idempotency-Key", "reply-0001")])
        #expect(other.status == 422)
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 1)

        // Mixing the two shapes is a malformed request.
        let mixed = try api.ingest(
            key: key, json: #"{"identifier": "comment-reply", "userText": "x", "userInfo": \#(userInfo)}"#)
        #expect(mixed.status == 400)
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 1)
    }

    // MARK: - 3. iOS 8 background action

    @Test("iOS 8: category 'identifier', background action 'test2' is recorded")
    func iOS8BackgroundAction() throws {
        let api = try IOSScenario.makeAPI()
        let key = try api.createApp("jpush-ios8")
        try IOSScenario.putCategory(
            api, app: "jpush-ios8", id: "identifier",
            #"""
            {"identifier": "identifier",
             "actions": [{"identifier": "test2", "title": "test", "options": ["authenticationRequired"]}]}
            """#, expectStatus: [201])
        try IOSScenario.createRule(
            api, app: "jpush-ios8",
            #"{"id": "test2-record", "match": {"category": "identifier", "action": ["test2"]}, "handler": {"type": "record"}}"#
        )

        let answer = try api.ingest(
            key: key,
            json: #"""
                {"identifier": "test2",
                 "userInfo": {"aps": {"alert": "example", "sound": "default", "badge": 1, "category": "identifier"}}}
                """#)
        try #require(answer.status == 202, "\(answer.text)")
        #expect(answer.json["outcome"] as? String == "recorded")
        #expect(answer.json["ruleId"] as? String == "test2-record")
        #expect((answer.json["followUps"] as? [Any])?.isEmpty == true)
        #expect(answer.json["subject"] is NSNull)
        let id = try #require(answer.json["id"] as? String)
        let row = try IOSScenario.responseRow(api, id: id)
        #expect(row["action_identifier"] == "test2")
        #expect(row["category_identifier"] == "identifier")
        #expect(row["outcome"] == "recorded")
        #expect(row["user_text"] == nil)
        #expect(try api.count("SELECT count(*) AS n FROM followups") == 0)

        // The category the app fetches keeps the action's option.
        let categories = try api.call("GET", "/v1/categories", token: key)
        let items = categories.json["items"] as? [[String: Any]] ?? []
        let actions = items.first?["actions"] as? [[String: Any]]
        #expect(actions?.first?["options"] as? [String] == ["authenticationRequired"])
    }

    // MARK: - 4. Timer with snooze

    @Test("TIMER_EXPIRED: two snoozes re-deliver, the third hits the limit, STOP_ACTION cancels pending snoozes")
    func timerSnooze() throws {
        let api = try IOSScenario.makeAPI()
        let key = try api.createApp("timers")
        try IOSScenario.putCategory(
            api, app: "timers", id: "TIMER_EXPIRED",
            #"""
            {"actions": [{"identifier": "SNOOZE_ACTION", "title": "Snooze", "options": []},
                         {"identifier": "STOP_ACTION", "title": "Stop", "options": ["foreground"]}],
             "options": [], "intentIdentifiers": []}
            """#, expectStatus: [201])
        try IOSScenario.createRule(
            api, app: "timers",
            #"""
            {"id": "timer-snooze", "match": {"category": "TIMER_EXPIRED", "action": "SNOOZE_ACTION"},
             "handler": {"type": "snooze", "delaySeconds": 60, "maxSnoozes": 2}}
            """#)
        try IOSScenario.createRule(
            api, app: "timers",
            #"{"id": "timer-stop", "match": {"category": "TIMER_EXPIRED", "action": "STOP_ACTION"}, "handler": {"type": "record"}}"#
        )
        // The timer's notification, sent through ActionHook to the device: a snooze re-sends its push.
        let serverKey = try #require(
            try api.admin("POST", "/v1/apps/timers/keys", json: #"{"scope": "send"}"#).json["secret"] as? String)
        let sent = try api.call(
            "POST", "/v1/apps/timers/notifications", token: serverKey,
            json: #"""
                {"to": ["\#(IOSScenario.deviceA)"], "category": "TIMER_EXPIRED", "ttlSeconds": 3600,
                 "aps": {"alert": {"title": "Timer", "body": "Your tea is ready"}, "sound": "default"},
                 "userInfo": {"timerId": "tea"}}
                """#)
        try #require(sent.status == 202, "\(sent.text)")
        let sentID = try #require(sent.json["id"] as? String)
        func timer(_ action: String, _ responseId: String, notification: String = "timer-tea-1") -> String {
            #"""
            {"actionIdentifier": "\#(action)", "notificationIdentifier": "\#(notification)",
             "deviceToken": "\#(IOSScenario.deviceA)", "responseId": "\#(responseId)",
             "userInfo": {"aps": {"alert": {"title": "Timer", "body": "Your tea is ready"},
                                  "category": "TIMER_EXPIRED", "sound": "default"},
                          "timerId": "tea", "actionhook": {"n": "\#(sentID)", "d": 0}}}
            """#
        }

        var snoozeIDs: [String] = []
        for attempt in 1...2 {
            let snooze = try api.ingest(key: key, json: timer("SNOOZE_ACTION", "snooze-\(attempt)"))
            try #require(snooze.status == 202, "\(snooze.text)")
            #expect(snooze.json["outcome"] as? String == "snoozed")
            #expect(snooze.json["ruleId"] as? String == "timer-snooze")
            let planned = snooze.json["followUps"] as? [[String: Any]] ?? []
            #expect(planned.map { $0["channel"] as? String } == ["apns"])
            snoozeIDs.append(try #require(snooze.json["id"] as? String))
        }
        for id in snoozeIDs {
            let rows = try IOSScenario.followUps(api, responseID: id)
            try #require(rows.count == 1)
            #expect(rows[0].isSnooze)
            #expect(rows[0].ordinal == -1)
            #expect(rows[0].channel == "apns")
            #expect(rows[0].status == "pending")
            #expect(rows[0].deviceToken == IOSScenario.deviceA)
            #expect(rows[0].payload["deviceToken"] as? String == IOSScenario.deviceA)
            #expect(rows[0].payload["pushType"] as? String == "alert")
            let original = rows[0].payload["payload"] as? [String: Any]
            #expect(original?["timerId"] as? String == "tea")
            #expect((original?["aps"] as? [String: Any])?["category"] as? String == "TIMER_EXPIRED")
            // The re-delivered payload is exactly the push the send made, due 60 s after receipt.
            #expect(
                try api.count(
                    """
                    SELECT count(*) AS n FROM followups f JOIN responses r ON r.app_id = f.app_id AND r.id = f.response_id
                    JOIN followups p ON p.app_id = f.app_id AND p.notification_id = r.notification_id AND p.kind = 'push'
                    WHERE f.id = \(UUID(uuidString: rows[0].id)!) AND f.payload -> 'payload' = p.payload -> 'payload'
                        AND abs(extract(epoch FROM f.due_at - r.received_at) - 60) < 0.01
                        AND f.notification_identifier = 'timer-tea-1'
                    """) == 1)
        }

        // A snooze of another notification, to show cancellation is per notification.
        let otherTimer = try api.ingest(
            key: key, json: timer("SNOOZE_ACTION", "egg-snooze-1", notification: "timer-egg-1"))
        #expect(otherTimer.status == 202)

        let third = try api.ingest(key: key, json: timer("SNOOZE_ACTION", "snooze-3"))
        try #require(third.status == 202, "\(third.text)")
        #expect(third.json["outcome"] as? String == "snooze_limit_reached")
        #expect((third.json["followUps"] as? [Any])?.isEmpty == true)
        let thirdID = try #require(third.json["id"] as? String)
        #expect(try IOSScenario.followUps(api, responseID: thirdID).isEmpty)
        #expect(try IOSScenario.responseRow(api, id: thirdID)["outcome"] == "snooze_limit_reached")
        #expect(
            try api.count(
                "SELECT count(*) AS n FROM followups WHERE is_snooze AND notification_identifier = 'timer-tea-1'")
                == 2)
        // The limit does not cancel the pending snoozes.
        #expect(
            try api.count(
                "SELECT count(*) AS n FROM followups WHERE notification_identifier = 'timer-tea-1' AND status = 'pending'"
            )
                == 2)

        let stop = try api.ingest(key: key, json: timer("STOP_ACTION", "stop-1"))
        try #require(stop.status == 202, "\(stop.text)")
        #expect(stop.json["outcome"] as? String == "recorded")
        #expect(stop.json["ruleId"] as? String == "timer-stop")
        #expect(
            try api.count(
                "SELECT count(*) AS n FROM followups WHERE notification_identifier = 'timer-tea-1' AND status = 'cancelled'"
            )
                == 2)
        #expect(
            try api.count(
                "SELECT count(*) AS n FROM followups WHERE notification_identifier = 'timer-tea-1' AND status <> 'cancelled'"
            )
                == 0)
        #expect(
            try api.count(
                "SELECT count(*) AS n FROM followups WHERE notification_identifier = 'timer-egg-1' AND status = 'pending'"
            )
                == 1)
        let cancelled = try api.admin("GET", "/v1/apps/timers/followups?status=cancelled")
        #expect((cancelled.json["items"] as? [Any])?.count == 2)
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 5)
    }

    // MARK: - 5. To-do list

    @Test("TODO_CATEGORY: priority order, disabled rules skipped, default and dismiss recorded, unmatched stored")
    func todoList() throws {
        let api = try IOSScenario.makeAPI()
        let key = try api.createApp("todo")
        try IOSScenario.putCategory(
            api, app: "todo", id: "TODO_CATEGORY",
            #"""
            {"actions": [{"identifier": "MARK_DONE", "title": "Done", "options": ["authenticationRequired"]},
                         {"identifier": "INPUT", "title": "Input", "options": ["authenticationRequired", "foreground"],
                          "textInput": {"buttonTitle": "Send", "placeholder": "Add a note"}}],
             "options": ["customDismissAction"], "intentIdentifiers": [], "subjectKey": "todoId"}
            """#, expectStatus: [201])
        // Rule ids are chosen so that id order would pick the wrong rule: priority must decide.
        try IOSScenario.createRule(
            api, app: "todo",
            #"{"id": "a-done-disabled", "priority": 1, "enabled": false, "match": {"action": "MARK_DONE"}, "handler": {"type": "decline"}}"#
        )
        try IOSScenario.createRule(
            api, app: "todo",
            #"{"id": "z-done-first", "priority": 10, "match": {"category": "TODO_CATEGORY", "action": "MARK_DONE"}, "handler": {"type": "accept"}}"#
        )
        try IOSScenario.createRule(
            api, app: "todo",
            #"{"id": "b-done-later", "priority": 20, "match": {"category": "TODO_CATEGORY", "action": "MARK_DONE"}, "handler": {"type": "record"}}"#
        )
        try IOSScenario.createRule(
            api, app: "todo",
            #"{"id": "todo-input", "match": {"category": "TODO_CATEGORY", "action": "INPUT"}, "handler": {"type": "comment", "maxLength": 200}}"#
        )
        try IOSScenario.createRule(
            api, app: "todo",
            #"""
            {"id": "todo-open-dismiss", "match": {"category": "TODO_CATEGORY",
                "action": ["com.apple.UNNotificationDefaultActionIdentifier", "com.apple.UNNotificationDismissActionIdentifier"]},
             "handler": {"type": "record"}}
            """#)
        func todo(_ action: String, _ responseId: String, text: String? = nil, category: String = "TODO_CATEGORY")
            -> String
        {
            let textMember = text.map { #""userText": "\#($0)", "# } ?? ""
            return #"""
                {"actionIdentifier": "\#(action)", \#(textMember)"responseId": "\#(responseId)",
                 "notificationIdentifier": "todo-7-reminder",
                 "userInfo": {"aps": {"alert": {"title": "Buy milk"}, "category": "\#(category)"}, "todoId": "todo-7"}}
                """#
        }

        var ids: [String: String] = [:]
        let cases: [(String, String, String?, String, String?)] = [
            ("MARK_DONE", "r-done", nil, "accepted", "z-done-first"),
            ("INPUT", "r-input", "buy oat milk", "commented", "todo-input"),
            ("com.apple.UNNotificationDefaultActionIdentifier", "r-open", nil, "recorded", "todo-open-dismiss"),
            ("com.apple.UNNotificationDismissActionIdentifier", "r-dismiss", nil, "recorded", "todo-open-dismiss"),
            ("SHARE_ACTION", "r-share", nil, "unmatched", nil),
        ]
        for (action, responseId, text, outcome, ruleId) in cases {
            let answer = try api.ingest(key: key, json: todo(action, responseId, text: text))
            try #require(answer.status == 202, "\(action): \(answer.text)")
            #expect(answer.json["outcome"] as? String == outcome, "\(action)")
            #expect(answer.json["ruleId"] as? String == ruleId, "\(action)")
            #expect(answer.json["subject"] as? String == "todo-7", "\(action)")
            let id = try #require(answer.json["id"] as? String)
            ids[responseId] = id
            let row = try IOSScenario.responseRow(api, id: id)
            #expect(row["action_identifier"] == action)
            #expect(row["outcome"] == outcome)
            #expect(row["rule_id"] == ruleId)
            #expect(row["subject"] == "todo-7")
            #expect(row["user_text"] == text)
        }
        // An unmatched response is stored with no rule and no follow-ups.
        #expect(
            try api.count("SELECT count(*) AS n FROM responses WHERE outcome = 'unmatched' AND rule_id IS NULL") == 1)
        #expect(try api.count("SELECT count(*) AS n FROM followups") == 0)
        // A notification of an unknown category matches nothing either.
        let stray = try api.ingest(key: key, json: todo("MARK_DONE", "r-stray", category: "GENERAL"))
        #expect(stray.status == 202)
        #expect(stray.json["outcome"] as? String == "unmatched")
        #expect(stray.json["subject"] is NSNull)

        // Disabling the first rule hands MARK_DONE to the next one at once.
        let disable = try api.admin(
            "PUT", "/v1/apps/todo/rules/z-done-first",
            json:
                #"{"priority": 10, "enabled": false, "match": {"category": "TODO_CATEGORY", "action": "MARK_DONE"}, "handler": {"type": "accept"}}"#
        )
        try #require(disable.status == 200, "\(disable.text)")
        let again = try api.ingest(key: key, json: todo("MARK_DONE", "r-done-2"))
        #expect(again.status == 202)
        #expect(again.json["outcome"] as? String == "recorded")
        #expect(again.json["ruleId"] as? String == "b-done-later")
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 7)
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE rule_id = 'a-done-disabled'") == 0)
    }

    // MARK: - Dry run, categories, history

    @Test("rules/test renders follow-ups without storing anything")
    func dryRun() throws {
        let api = try IOSScenario.makeAPI()
        _ = try IOSScenario.setUpCalendar(api)
        let app = IOSScenario.calendarApp
        let before = try IOSScenario.counts(api)

        let result = try api.admin(
            "POST", "/v1/apps/\(app)/rules/test",
            json: IOSScenario.inviteResponse(action: "accept", device: IOSScenario.deviceA, responseId: "dry-1"))
        try #require(result.status == 200, "\(result.text)")
        #expect(result.json["matched"] as? Bool == true)
        #expect(result.json["ruleId"] as? String == "invite-accept")
        #expect(result.json["outcome"] as? String == "accepted")
        #expect(result.json["subject"] as? String == "42")
        let followUps = result.json["followUps"] as? [[String: Any]] ?? []
        try #require(followUps.count == 2)
        #expect(followUps[0]["channel"] as? String == "webhook")
        let body = (followUps[0]["payload"] as? [String: Any])?["body"] as? [String: Any]
        #expect((body?["eventId"] as? NSNumber)?.intValue == 42)
        #expect(body?["event"] as? String == "invite.accepted")
        #expect(followUps[1]["channel"] as? String == "apns")
        let alert =
            (((followUps[1]["payload"] as? [String: Any])?["payload"] as? [String: Any])?["aps"]
            as? [String: Any])?["alert"] as? [String: Any]
        #expect(alert?["body"] as? String == #"See you at Tom's place, 1 "Main" St"#)

        let unmatched = try api.admin(
            "POST", "/v1/apps/\(app)/rules/test",
            json: #"{"actionIdentifier": "maybe", "categoryIdentifier": "event-invite"}"#)
        #expect(unmatched.status == 200)
        #expect(unmatched.json["matched"] as? Bool == false)
        #expect(unmatched.json["outcome"] as? String == "unmatched")
        #expect(unmatched.json["ruleId"] is NSNull)

        let blankComment = try api.admin(
            "POST", "/v1/apps/\(app)/rules/test",
            json: IOSScenario.inviteResponse(
                action: "comment", device: IOSScenario.deviceA, responseId: "dry-2", userText: "  "))
        #expect(blankComment.status == 422)
        #expect(IOSScenario.pointers(blankComment) == ["/userText"])

        #expect(try IOSScenario.counts(api) == before)
        #expect(before.responses == 0)
    }

    @Test("GET /v1/categories with the ingest key returns the app's categories as UNNotificationCategory")
    func categoriesForTheApp() throws {
        let api = try IOSScenario.makeAPI()
        let key = try IOSScenario.setUpCalendar(api)
        let otherKey = try api.createApp("someone-else")
        try IOSScenario.putCategory(
            api, app: "someone-else", id: "GENERAL", #"{"actions": [], "options": ["customDismissAction"]}"#,
            expectStatus: [201])

        let answer = try api.call("GET", "/v1/categories", token: key)
        try #require(answer.status == 200, "\(answer.text)")
        #expect(answer.json["nextCursor"] is NSNull)
        let items = answer.json["items"] as? [[String: Any]] ?? []
        #expect(items.map { $0["identifier"] as? String } == ["event-invite", "event-update"])
        let invite = try #require(items.first)
        #expect(invite["subjectKey"] as? String == "eventId")
        #expect(invite["options"] as? [String] == [])
        #expect(invite["intentIdentifiers"] as? [String] == [])
        let actions = invite["actions"] as? [[String: Any]] ?? []
        #expect(actions.map { $0["identifier"] as? String } == ["accept", "decline", "comment"])
        #expect(actions.map { $0["title"] as? String } == ["Accept", "Decline", "Comment"])
        #expect(actions.map { $0["options"] as? [String] } == [["foreground"], ["destructive"], []])
        #expect(actions[0]["textInput"] == nil)
        let textInput = actions[2]["textInput"] as? [String: Any]
        #expect(textInput?["buttonTitle"] as? String == "Send")
        #expect(textInput?["placeholder"] as? String == "Type here...")
        #expect(Set(invite.keys) == ["identifier", "actions", "options", "intentIdentifiers", "subjectKey"])

        let others = try api.call("GET", "/v1/categories", token: otherKey)
        #expect((others.json["items"] as? [[String: Any]])?.map { $0["identifier"] as? String } == ["GENERAL"])
        #expect(
            ((others.json["items"] as? [[String: Any]])?.first?["options"] as? [String]) == ["customDismissAction"])

        // A category changed through the admin API shows at once.
        try IOSScenario.putCategory(
            api, app: IOSScenario.calendarApp, id: "event-update",
            #"{"actions": [], "options": ["hiddenPreviewsShowTitle"]}"#,
            expectStatus: [200])
        let updated = try api.call("GET", "/v1/categories", token: key)
        let update = (updated.json["items"] as? [[String: Any]])?.last
        #expect(update?["options"] as? [String] == ["hiddenPreviewsShowTitle"])
    }

    @Test("history: filters by subject, action, category, outcome and time; keyset pages without gaps")
    func history() throws {
        let api = try IOSScenario.makeAPI()
        let key = try IOSScenario.setUpCalendar(api)
        let app = IOSScenario.calendarApp
        // Seven responses: accept/decline/comment on two events, plus unmatched ones.
        let bodies: [(String, String)] = [
            ("h1", IOSScenario.inviteResponse(action: "accept", device: IOSScenario.deviceA, responseId: "h1")),
            ("h2", IOSScenario.inviteResponse(action: "decline", device: IOSScenario.deviceB, responseId: "h2")),
            (
                "h3",
                IOSScenario.inviteResponse(
                    action: "comment", device: IOSScenario.deviceA, responseId: "h3", userText: "late")
            ),
            (
                "h4",
                IOSScenario.inviteResponse(
                    action: "accept", device: IOSScenario.deviceB, responseId: "h4", eventId: "77")
            ),
            ("h5", IOSScenario.inviteResponse(action: "maybe", device: IOSScenario.deviceA, responseId: "h5")),
            ("h6", #"{"actionIdentifier": "open", "categoryIdentifier": "event-update", "responseId": "h6"}"#),
            (
                "h7",
                IOSScenario.inviteResponse(
                    action: "decline", device: IOSScenario.deviceA, responseId: "h7", eventId: "77")
            ),
        ]
        var ids: [String: String] = [:]
        for (name, body) in bodies {
            let answer = try api.ingest(key: key, json: body)
            try #require(answer.status == 202, "\(name): \(answer.text)")
            ids[name] = try #require(answer.json["id"] as? String)
        }
        // Fixed receipt times make the time filters exact: h1 at 01:00 ... h7 at 07:00, except that
        // h2, h3 and h4 share 03:00 so that a page boundary falls inside a tie.
        let hours = ["h1": 1, "h2": 3, "h3": 3, "h4": 3, "h5": 5, "h6": 6, "h7": 7]
        for (name, hour) in hours {
            _ = try api.query(
                """
                UPDATE responses SET received_at = timestamptz '2026-01-10T00:00:00Z' + make_interval(hours => \(hour))
                WHERE id = \(UUID(uuidString: ids[name]!)!)
                """)
        }
        func list(_ query: String) throws -> (names: [String], next: String?, status: Int) {
            let answer = try api.admin("GET", "/v1/apps/\(app)/responses?\(query)")
            let items = answer.json["items"] as? [[String: Any]] ?? []
            let byID = Dictionary(uniqueKeysWithValues: ids.map { ($0.value, $0.key) })
            return (
                items.map { byID[$0["id"] as? String ?? ""] ?? "?" }, answer.json["nextCursor"] as? String,
                answer.status
            )
        }

        #expect(Set(try list("subject=42").names) == ["h1", "h2", "h3", "h5"])
        #expect(Set(try list("subject=77").names) == ["h4", "h7"])
        #expect(Set(try list("action=decline").names) == ["h2", "h7"])
        #expect(try list("category=event-update").names == ["h6"])
        #expect(Set(try list("outcome=unmatched").names) == ["h5", "h6"])
        #expect(try list("outcome=commented").names == ["h3"])
        #expect(Set(try list("subject=42&action=accept").names) == ["h1"])
        #expect(try list("since=2026-01-10T05:00:00Z").names == ["h7", "h6", "h5"])
        #expect(Set(try list("until=2026-01-10T05:00:00Z").names) == ["h1", "h2", "h3", "h4"])
        #expect(
            Set(try list("since=2026-01-10T03:00:00Z&until=2026-01-10T05:00:00.000001Z").names) == [
                "h2", "h3", "h4", "h5",
            ])
        #expect(try list("since=2026-01-10T05:30:00%2B01:00").names.sorted() == ["h5", "h6", "h7"])
        #expect(try list("outcome=wrong").status == 400)
        #expect(try list("since=yesterday").status == 400)

        // The expected order: received_at descending, then id descending.
        let expected = try api.query("SELECT id FROM responses ORDER BY received_at DESC, id DESC").map {
            try $0.decode("id", as: UUID.self).uuidString.lowercased()
        }
        var seen: [String] = []
        var cursor: String?
        var pages = 0
        repeat {
            let page = try api.admin(
                "GET", "/v1/apps/\(app)/responses?limit=3" + (cursor.map { "&cursor=\($0)" } ?? ""))
            try #require(page.status == 200, "\(page.text)")
            let items = page.json["items"] as? [[String: Any]] ?? []
            #expect(items.count == (pages < 2 ? 3 : 1))
            seen += items.compactMap { $0["id"] as? String }
            cursor = page.json["nextCursor"] as? String
            if cursor == nil { #expect(page.json["nextCursor"] is NSNull) }
            pages += 1
        } while cursor != nil && pages < 10
        #expect(pages == 3)
        #expect(seen == expected)
        #expect(Set(seen).count == 7)

        // Filters and paging together.
        let first = try list("subject=42&limit=2")
        #expect(first.names == ["h5", "h3"] || first.names == ["h5", "h2"])
        let next = try #require(first.next)
        let second = try list("subject=42&limit=2&cursor=\(next)")
        #expect(Set(first.names + second.names) == ["h1", "h2", "h3", "h5"])
        #expect(second.next == nil)

        for bad in ["not-a-cursor", "AAAA", "MjAyNi0wMS0xMA"] {
            let refused = try api.admin("GET", "/v1/apps/\(app)/responses?limit=3&cursor=\(bad)")
            #expect(refused.status == 400, "\(bad)")
            #expect(refused.headers["content-type"] == "application/problem+json")
        }
        #expect(try api.admin("GET", "/v1/apps/\(app)/responses?limit=0").status == 400)
        #expect(try api.admin("GET", "/v1/apps/\(app)/responses?limit=501").status == 400)
    }
}
