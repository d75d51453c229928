import ActionHookKit
import Foundation
import Testing

@Suite("Categories: the server's JSON, kept on disk, ETag and the reply age limit")
struct CategoryTests {
    static let page = #"""
        {"items":[
          {"identifier":"TIMER_EXPIRED","actions":[{"identifier":"SNOOZE_ACTION","title":"Snooze","options":[]},
            {"identifier":"STOP_ACTION","title":"Stop","options":["foreground"]}],"options":[],"intentIdentifiers":[],
            "maxReplyAgeSeconds":600},
          {"identifier":"event-invite","actions":[{"identifier":"accept","title":"Accept","options":[]},
            {"identifier":"decline","title":"Decline","options":["destructive"]},
            {"identifier":"comment","title":"Comment","options":[],"textInput":{"buttonTitle":"Send","placeholder":"Add a note"}}],
            "options":["customDismissAction"],"intentIdentifiers":["INSendMessageIntent"],"subjectKey":"eventId",
            "someFutureMember":{"x":1}}
        ],"nextCursor":null}
        """#

    @Test("the server's category JSON decodes one to one, unknown members ignored, sorted by identifier")
    func decoding() async throws {
        let server = ScriptedServer([.status(200, body: Self.page, headers: ["ETag": #""abc""#])])
        let client = try makeClient(server, folder: temporaryFolder())
        let set = try await client.fetchCategories()
        #expect(set.origin == .fetched)
        #expect(set.etag == #""abc""#)
        #expect(set.categories.map(\.identifier) == ["TIMER_EXPIRED", "event-invite"])
        let invite = try #require(set.category("event-invite"))
        #expect(
            invite
                == CategoryDefinition(
                    identifier: "event-invite",
                    actions: [
                        ActionDefinition(identifier: "accept", title: "Accept"),
                        ActionDefinition(identifier: "decline", title: "Decline", options: ["destructive"]),
                        ActionDefinition(
                            identifier: "comment", title: "Comment",
                            textInput: TextInputDefinition(buttonTitle: "Send", placeholder: "Add a note")),
                    ],
                    options: ["customDismissAction"], intentIdentifiers: ["INSendMessageIntent"], subjectKey: "eventId"))
        #expect(set.category("TIMER_EXPIRED")?.maxReplyAgeSeconds == 600)
        let request = try #require(server.sent.first)
        #expect(request.url?.absoluteString == "https://actionhook.example.com/v1/categories")
        #expect(request.value(forHTTPHeaderField: "Authorization") == "Bearer ahk_test_key")
        #expect(request.value(forHTTPHeaderField: "If-None-Match") == nil)
    }

    @Test("the next fetch sends If-None-Match; 304 answers the kept set; offline answers it from disk")
    func etagAndOffline() async throws {
        let folder = temporaryFolder()
        let server = ScriptedServer([.status(200, body: Self.page, headers: ["ETag": #""v1""#])])
        let client = try makeClient(server, folder: folder)
        let first = try await client.fetchCategories()

        server.script([.status(304)])
        let second = try await client.fetchCategories()
        #expect(server.sent.last?.value(forHTTPHeaderField: "If-None-Match") == #""v1""#)
        #expect(second.origin == .notModified)
        #expect(second.categories == first.categories)

        // The next launch, offline: the buttons are still there.
        let offline = try makeClient(ScriptedServer([.networkError]), folder: folder)
        let third = try await offline.fetchCategories()
        #expect(third.origin == .cached)
        #expect(third.categories == first.categories)
        let failing = try makeClient(ScriptedServer([.status(503)]), folder: folder)
        #expect(try await failing.fetchCategories().origin == .cached)
    }

    @Test("no kept set and no server: unavailable; a wrong key: refused with the problem")
    func failures() async throws {
        let offline = try makeClient(ScriptedServer([.networkError]), folder: temporaryFolder())
        await #expect(throws: ActionHookClientError.unavailable) { try await offline.fetchCategories() }
        let problem = #"{"type":"https://actionhook.dev/problems/unauthorized","title":"Unauthorized","status":401}"#
        let refused = try makeClient(ScriptedServer([.status(401, body: problem)]), folder: temporaryFolder())
        await #expect(
            throws: ActionHookClientError.refused(
                status: 401, problem: Problem(type: "https://actionhook.dev/problems/unauthorized", title: "Unauthorized"))
        ) { try await refused.fetchCategories() }
    }

    @Test("after a day offline only replies within their category's age limit are sent, in order, each once")
    func staleRepliesDropped() async throws {
        let folder = temporaryFolder()
        let now = Date()
        let categories = ScriptedServer([.status(200, body: Self.page, headers: ["ETag": #""v1""#])])
        _ = try await makeClient(categories, folder: folder).fetchCategories()

        // Replies queued over a day offline: the timer's limit is 600 s, the invite has none.
        let queue = try ReplyQueue(directory: folder.appendingPathComponent("queue"))
        let replies = [
            Reply(actionIdentifier: "SNOOZE_ACTION", categoryIdentifier: "TIMER_EXPIRED", respondedAt: now.addingTimeInterval(-86_400)),
            Reply(actionIdentifier: "accept", categoryIdentifier: "event-invite", respondedAt: now.addingTimeInterval(-86_000)),
            Reply(actionIdentifier: "STOP_ACTION", categoryIdentifier: "TIMER_EXPIRED", respondedAt: now.addingTimeInterval(-601)),
            Reply(actionIdentifier: "SNOOZE_ACTION", categoryIdentifier: "TIMER_EXPIRED", respondedAt: now.addingTimeInterval(-60)),
            Reply(actionIdentifier: "decline", categoryIdentifier: "event-invite", respondedAt: now.addingTimeInterval(-5)),
        ]
        for (index, reply) in replies.enumerated() {
            try queue.append(reply, now: now.addingTimeInterval(Double(index) - 10))
        }

        let events = EventLog()
        let server = ScriptedServer([.status(202)])
        let client = try makeClient(server, folder: folder, events: events)
        client.resume()
        await client.drain()
        #expect(server.bodies.map { $0["responseId"] as? String } == [replies[1], replies[3], replies[4]].map(\.responseId))
        #expect(events.all.contains(.dropped(responseId: replies[0].responseId, reason: .expired(maxReplyAgeSeconds: 600))))
        #expect(events.all.contains(.dropped(responseId: replies[2].responseId, reason: .expired(maxReplyAgeSeconds: 600))))
        #expect(client.queue.count == 0)
    }

    @Test("a 410 from the server (the reply expired there) removes it as a permanent refusal")
    func goneIsPermanent() async throws {
        let body = #"{"type":"https://actionhook.dev/problems/reply-expired","title":"Reply expired","status":410,"detail":"The reply is older than its category allows."}"#
        let events = EventLog()
        let server = ScriptedServer([.status(410, body: body)])
        let client = try makeClient(server, folder: temporaryFolder(), events: events)
        let reply = Reply(actionIdentifier: "open", categoryIdentifier: "garage")
        try client.enqueue(reply)
        await client.drain()
        #expect(server.sent.count == 1)
        #expect(
            events.all.contains(.refused(responseId: reply.responseId, status: 410, problem: Problem(
                type: "https://actionhook.dev/problems/reply-expired", title: "Reply expired",
                detail: "The reply is older than its category allows."))))
    }

    @Test("foreground presentation by category, with a default for the rest")
    func presentation() {
        let policy = ForegroundPresentation(byCategory: ["silent-sync": [], "event-invite": [.banner, .sound, .badge]])
        #expect(policy.options(forCategory: "silent-sync") == [])
        #expect(policy.options(forCategory: "event-invite") == [.banner, .sound, .badge])
        #expect(policy.options(forCategory: "") == [.banner, .list, .sound])
    }
}
