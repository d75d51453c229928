import ActionHookKit
import Foundation
import Testing
import UserNotifications

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The server as the phone sees it: one fixed answer.
struct FixedServer: HTTPTransport {
    let status: Int
    let body: String

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let response = HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: ["ETag": #""e""#])!
        return (Data(body.utf8), response)
    }
}

@Suite("The UserNotifications glue, compiled against Apple's signatures")
struct GlueTests {
    static func response(_ action: String, category: String, text: String? = nil) -> UNNotificationResponse {
        let content = UNNotificationContent(
            standInCategoryIdentifier: category,
            userInfo: ["aps": ["category": category, "alert": "Party"], "eventId": 42, "sent": Date(timeIntervalSince1970: 0)])
        let notification = UNNotification(
            standInRequest: UNNotificationRequest(standInIdentifier: "req-1", content: content), date: Date())
        if let text {
            return UNTextInputNotificationResponse(standInNotification: notification, actionIdentifier: action, userText: text)
        }
        return UNNotificationResponse(standInNotification: notification, actionIdentifier: action)
    }

    @Test("a text-input response becomes a reply with its text, category, request id and JSON-safe userInfo")
    func textInputResponse() {
        let reply = Reply(Self.response("comment", category: "event-invite", text: "See you"), deviceToken: "ab")
        #expect(reply.actionIdentifier == "comment")
        #expect(reply.userText == "See you")
        #expect(reply.categoryIdentifier == "event-invite")
        #expect(reply.notificationIdentifier == "req-1")
        #expect(reply.deviceToken == "ab")
        #expect(reply.userInfo["eventId"] == .number(42))
        #expect(reply.userInfo["sent"] == .string("1970-01-01T00:00:00.000Z"))
        #expect(reply.userInfo["aps"]?["category"] == .string("event-invite"))
    }

    @Test("default and dismiss responses are forwarded too, without text")
    func defaultAndDismiss() {
        for action in [UNNotificationDefaultActionIdentifier, UNNotificationDismissActionIdentifier] {
            let reply = Reply(Self.response(action, category: "TODO_CATEGORY"))
            #expect(reply.actionIdentifier == action)
            #expect(reply.userText == nil)
        }
        #expect(UNNotificationDefaultActionIdentifier == Reply.defaultActionIdentifier)
        #expect(UNNotificationDismissActionIdentifier == Reply.dismissActionIdentifier)
    }

    @Test("forward queues the response on disk before calling the completion handler")
    func forwardQueuesFirst() throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("glue-\(UUID().uuidString)")
        let configuration = ActionHookClient.Configuration(
            serverURL: URL(string: "https://actionhook.example.com")!, ingestKey: "ahk_k", directory: folder,
            retry: RetryPolicy(initialDelay: 60, maximumDelay: 60))
        let client = try ActionHookClient(configuration: configuration, transport: FixedServer(status: 503, body: ""))
        var queuedAtCompletion = -1
        client.forward(Self.response("MARK_DONE", category: "TODO_CATEGORY")) {
            queuedAtCompletion = client.queue.count
        }
        #expect(queuedAtCompletion == 1)
        #expect(client.queue.entries().first?.reply.actionIdentifier == "MARK_DONE")
    }

    @Test("categories map one to one onto UNNotificationCategory and are registered with the center")
    @MainActor
    func registerCategories() async throws {
        let page = #"""
            {"items":[{"identifier":"event-invite","actions":[
              {"identifier":"accept","title":"Accept","options":["foreground"]},
              {"identifier":"decline","title":"Decline","options":["destructive","authenticationRequired"]},
              {"identifier":"comment","title":"Comment","options":[],"textInput":{"buttonTitle":"Send","placeholder":"Add a note"}}],
              "options":["customDismissAction","allowInCarPlay","hiddenPreviewsShowTitle","hiddenPreviewsShowSubtitle","allowAnnouncement"],
              "intentIdentifiers":["INSendMessageIntent"]}],"nextCursor":null}
            """#
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("glue-\(UUID().uuidString)")
        let configuration = ActionHookClient.Configuration(
            serverURL: URL(string: "https://actionhook.example.com")!, ingestKey: "ahk_k", directory: folder)
        let client = try ActionHookClient(configuration: configuration, transport: FixedServer(status: 200, body: page))
        let center = UNUserNotificationCenter.current()
        try await client.registerCategories(on: center)

        let category = try #require(center.standInRegistered.first)
        #expect(center.standInRegistered.count == 1)
        #expect(category.identifier == "event-invite")
        #expect(category.intentIdentifiers == ["INSendMessageIntent"])
        #expect(
            category.options == [
                .customDismissAction, .allowInCarPlay, .hiddenPreviewsShowTitle, .hiddenPreviewsShowSubtitle,
                .allowAnnouncement,
            ])
        #expect(category.actions.map(\.identifier) == ["accept", "decline", "comment"])
        #expect(category.actions.map(\.title) == ["Accept", "Decline", "Comment"])
        #expect(category.actions[0].options == .foreground)
        #expect(category.actions[1].options == [.destructive, .authenticationRequired])
        #expect(!(category.actions[0] is UNTextInputNotificationAction))
        let comment = try #require(category.actions[2] as? UNTextInputNotificationAction)
        #expect(comment.textInputButtonTitle == "Send")
        #expect(comment.textInputPlaceholder == "Add a note")
    }

    @Test("willPresent options follow the category")
    func presentation() {
        let policy = ForegroundPresentation(byCategory: ["quiet": [.list]])
        let quiet = Self.response("x", category: "quiet").notification
        let other = Self.response("x", category: "event-invite").notification
        #expect(policy.presentationOptions(for: quiet) == .list)
        #expect(policy.presentationOptions(for: other) == [.banner, .list, .sound])
    }
}
