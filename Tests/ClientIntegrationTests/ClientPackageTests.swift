import ActionHookKit
import Foundation
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// ActionHookKit, the app-side package, against the real service and PostgreSQL, through a proxy that
/// loses connections the way a phone's network does.
@Suite("Client package against the real service", .serialized)
struct ClientPackageTests {
    /// Retries in tens of milliseconds, so outages of a second are crossed quickly.
    static let retry = ActionHookKit.RetryPolicy(initialDelay: 0.05, multiplier: 2, maximumDelay: 0.4, jitter: 0.5)

    static func client(
        port: Int, key: String, events: Events = Events(),
        folder: URL = FileManager.default.temporaryDirectory.appendingPathComponent(
            "actionhookkit-it-\(UUID().uuidString)")
    ) throws -> ActionHookClient {
        let configuration = ActionHookClient.Configuration(
            serverURL: URL(string: "http://127.0.0.1:\(port)")!, ingestKey: key, directory: folder, retry: retry,
            requestTimeout: 5)
        return try ActionHookClient(configuration: configuration, onEvent: events.record)
    }

    static func reply(_ index: Int) -> Reply {
        Reply(
            actionIdentifier: index % 2 == 0 ? "accept" : "decline", categoryIdentifier: "event-invite",
            notificationIdentifier: "n-\(index)",
            userInfo: ["aps": .object(["category": .string("event-invite")]), "eventId": .string("\(index)")],
            deviceToken: String(repeating: "ab", count: 32))
    }

    /// Runs `drain()` and answers whether it finished within `seconds`.
    ///
    /// The bounds these tests give (two minutes) are for a loaded machine, not the time a healthy run takes
    /// (a second): the client's tasks run on the concurrency pool, as wide as the machine's cores, which the
    /// suite's other tests can hold with blocking work for a minute on two cores.
    static func drain(_ client: ActionHookClient, within seconds: Double) async -> Bool {
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                await client.drain()
                return true
            }
            group.addTask {
                try? await Task.sleep(nanoseconds: UInt64(seconds * 1_000_000_000))
                return false
            }
            let first = await group.next() ?? false
            group.cancelAll()
            return first
        }
    }

    /// Rows per client responseId in the app's responses.
    static func rowsByResponseID(_ api: TestAPI, app: String) throws -> [String: Int] {
        let rows = try api.query(
            "SELECT client_response_id, count(*)::int AS n FROM responses WHERE app_id = \(app) GROUP BY client_response_id"
        )
        var counts: [String: Int] = [:]
        for row in rows {
            counts[try row.decode("client_response_id", as: String.self)] = try row.decode("n", as: Int.self)
        }
        return counts
    }

    @Test("replies forwarded while the service cannot be reached are stored once each when it comes back")
    func serverDown() async throws {
        let api = try TestAPI()
        let key = try api.createApp("kit-down")
        let down = Atomic<Bool>(true)
        let proxy = try FlakyProxy(upstreamPort: api.port) { _ in
            down.load(ordering: .sequentiallyConsistent) ? .dropBeforeRequest : .pass
        }
        defer { proxy.stop() }
        let events = Events()
        let client = try Self.client(port: proxy.port, key: key, events: events)
        let replies = (0..<20).map(Self.reply)
        for reply in replies { client.forward(reply) }

        #expect(await eventually(within: 120) { events.retries >= 3 })
        #expect(client.queue.count == 20)
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 0)

        down.store(false, ordering: .sequentiallyConsistent)
        #expect(await Self.drain(client, within: 120))
        let rows = try Self.rowsByResponseID(api, app: "kit-down")
        #expect(rows == Dictionary(uniqueKeysWithValues: replies.map { ($0.responseId, 1) }))
        #expect(client.queue.count == 0)
        // Sent in order: the stored rows' received times follow the order the replies were made in.
        let order = try api.query("SELECT client_response_id FROM responses ORDER BY received_at, id")
            .map { try $0.decode("client_response_id", as: String.self) }
        #expect(order == replies.map(\.responseId))
    }

    @Test("100 replies through a proxy that loses a third of the connections end as 100 rows, none twice")
    func flakyNetwork() async throws {
        let api = try TestAPI()
        let key = try api.createApp("kit-flaky")
        // Of every three connections one is lost: alternately before the request reaches the service and
        // after the service stored it, so some retries are answered as replays.
        let proxy = try FlakyProxy(upstreamPort: api.port) { index in
            switch index % 6 {
            case 1: .dropBeforeRequest
            case 4: .dropAnswer
            default: .pass
            }
        }
        defer { proxy.stop() }
        let events = Events()
        let client = try Self.client(port: proxy.port, key: key, events: events)
        let replies = (0..<100).map(Self.reply)
        for reply in replies { client.forward(reply) }
        #expect(await Self.drain(client, within: 120))

        let rows = try Self.rowsByResponseID(api, app: "kit-flaky")
        #expect(rows.count == 100)
        #expect(rows.values.allSatisfy { $0 == 1 })
        #expect(Set(rows.keys) == Set(replies.map(\.responseId)))
        #expect(events.delivered(status: 200) > 0, "no retry was answered as a replay")
        #expect(events.retries > 0)
        #expect(events.refusals == 0)
    }

    @Test("the service killed (SIGKILL) after storing a reply and before answering: the retry is a replay, one row")
    func killedBeforeAnswering() async throws {
        let binary = try ServeProcess.binary()
        let api = try TestAPI()
        let key = try api.createApp("kit-kill")

        let log = FileManager.default.temporaryDirectory.appendingPathComponent(
            "actionhook-kit-\(UUID().uuidString).log")
        defer { try? FileManager.default.removeItem(at: log) }
        func start() throws -> (ServeProcess, Int) {
            let port = try LoopbackListener.freePort()
            var environment = ProcessInfo.processInfo.environment.filter {
                !$0.key.hasPrefix("ACTIONHOOK_") && !$0.key.hasPrefix("PG") && $0.key != "DATABASE_URL"
            }
            environment["DATABASE_URL"] = api.database.connectionString
            environment["ACTIONHOOK_HOST"] = "127.0.0.1"
            environment["ACTIONHOOK_PORT"] = String(port)
            environment["ACTIONHOOK_WORKER"] = "0"
            let process = try ServeProcess(binary: binary, environment: environment, log: log)
            return (process, port)
        }

        var (server, port) = try start()
        #expect(
            await eventually(within: 60) { (try? HTTPTestClient(port: port).request("GET", "/healthz").status) == 200 })
        let pid = Atomic<Int32>(server.pid)
        let killedAfterStoring = Atomic<Int>(0)
        let proxy = try FlakyProxy(
            upstreamPort: port,
            afterAnswer: {
                let target = pid.exchange(0, ordering: .sequentiallyConsistent)
                if target > 0 {
                    kill(target, SIGKILL)
                    killedAfterStoring.add(1, ordering: .sequentiallyConsistent)
                }
            },
            decide: { index in index == 0 ? .dropAnswer : .pass })
        defer { proxy.stop() }

        let events = Events()
        let client = try Self.client(port: proxy.port, key: key, events: events)
        let reply = Self.reply(7)
        client.forward(reply)

        #expect(await eventually(within: 60) { !server.process.isRunning })
        server.process.waitUntilExit()
        #expect(server.process.terminationReason == .uncaughtSignal && server.process.terminationStatus == SIGKILL)
        #expect(killedAfterStoring.load(ordering: .sequentiallyConsistent) == 1)
        // Acknowledged to nobody, yet stored: the kill came after the commit.
        #expect(try Self.rowsByResponseID(api, app: "kit-kill") == [reply.responseId: 1])

        (server, port) = try start()
        defer {
            kill(server.pid, SIGKILL)
            server.process.waitUntilExit()
        }
        #expect(
            await eventually(within: 60) { (try? HTTPTestClient(port: port).request("GET", "/healthz").status) == 200 })
        proxy.redirect(to: port)
        client.resume()
        #expect(await Self.drain(client, within: 120))
        #expect(try Self.rowsByResponseID(api, app: "kit-kill") == [reply.responseId: 1])
        #expect(events.all.contains(.delivered(responseId: reply.responseId, status: 200)))
    }

    @Test("categories fetched by the package equal what the admin API stored; unchanged, the server answers 304")
    func categories() async throws {
        let api = try TestAPI()
        let key = try api.createApp("kit-categories")
        let invite = #"""
            {"actions":[{"identifier":"accept","title":"Accept","options":["foreground"]},
              {"identifier":"decline","title":"Decline","options":["destructive"]},
              {"identifier":"comment","title":"Comment","textInput":{"buttonTitle":"Send","placeholder":"Add a note"}}],
             "options":["customDismissAction"],"intentIdentifiers":["INSendMessageIntent"],"subjectKey":"eventId"}
            """#
        let timer =
            #"{"actions":[{"identifier":"SNOOZE_ACTION","title":"Snooze"},{"identifier":"STOP_ACTION","title":"Stop","options":["foreground"]}]}"#
        #expect(try api.admin("PUT", "/v1/apps/kit-categories/categories/event-invite", json: invite).status == 201)
        #expect(try api.admin("PUT", "/v1/apps/kit-categories/categories/TIMER_EXPIRED", json: timer).status == 201)

        let client = try Self.client(port: api.port, key: key)
        let first = try await client.fetchCategories()
        #expect(first.origin == .fetched)
        let stored = try api.admin("GET", "/v1/apps/kit-categories/categories")
        let storedData = try JSONSerialization.data(withJSONObject: ["items": stored.json["items"] ?? []])
        struct Page: Decodable { var items: [CategoryDefinition] }
        let expected = try JSONDecoder().decode(Page.self, from: storedData).items.sorted {
            $0.identifier < $1.identifier
        }
        #expect(first.categories == expected)
        #expect(first.categories.map(\.identifier) == ["TIMER_EXPIRED", "event-invite"])
        #expect(
            first.category("event-invite")?.actions.last?.textInput
                == TextInputDefinition(buttonTitle: "Send", placeholder: "Add a note"))
        #expect(first.etag?.hasPrefix("\"") == true)

        let second = try await client.fetchCategories()
        #expect(second.origin == .notModified)
        #expect(second.categories == first.categories)
        let raw = try api.call("GET", "/v1/categories", token: key, headers: [("If-None-Match", first.etag ?? "")])
        #expect(raw.status == 304)
        #expect(raw.body.isEmpty)
        #expect(raw.headers["etag"] == first.etag)

        // A change is seen at once: a new ETag and the new set.
        #expect(try api.admin("DELETE", "/v1/apps/kit-categories/categories/TIMER_EXPIRED").status == 204)
        let third = try await client.fetchCategories()
        #expect(third.origin == .fetched)
        #expect(third.categories.map(\.identifier) == ["event-invite"])
        #expect(third.etag != first.etag)

        // Another app's key sees its own (empty) set; a wrong key is refused.
        let otherKey = try api.createApp("kit-other")
        let other = try await Self.client(port: api.port, key: otherKey).fetchCategories()
        #expect(other.categories.isEmpty)
        do {
            _ = try await Self.client(port: api.port, key: "ahk_wrong").fetchCategories()
            Issue.record("a wrong key fetched categories")
        } catch ActionHookClientError.refused(let status, _) {
            #expect(status == 401)
        }
    }

    @Test(
        "after a day offline only replies within their age limit act: the package drops the late ones, the server answers 410 to what only it can judge late"
    )
    func lateReplies() async throws {
        let api = try TestAPI()
        let key = try api.createApp("kit-late", extra: #""webhook":{"url":"https://hooks.example.com/kit-late"}"#)
        #expect(
            try api.admin(
                "PUT", "/v1/apps/kit-late/categories/garage",
                json: #"{"actions":[{"identifier":"open","title":"Open"}],"maxReplyAgeSeconds":120}"#
            ).status == 201)
        // A rule stricter than its category: only the server knows it.
        let strict =
            #"{"id":"open-now","priority":10,"match":{"action":"open","userInfo":[{"path":"strict","op":"exists"}]},"handler":{"type":"accept"},"followUps":[{"channel":"webhook"}],"maxReplyAgeSeconds":30}"#
        let open =
            #"{"id":"open","match":{"action":"open"},"handler":{"type":"accept"},"followUps":[{"channel":"webhook"}]}"#
        #expect(try api.admin("POST", "/v1/apps/kit-late/rules", json: strict).status == 201)
        #expect(try api.admin("POST", "/v1/apps/kit-late/rules", json: open).status == 201)

        let events = Events()
        let client = try Self.client(port: api.port, key: key, events: events)
        _ = try await client.fetchCategories()
        func reply(_ index: Int, age: TimeInterval, strict: Bool = false) -> Reply {
            var userInfo: [String: JSONValue] = [
                "aps": .object(["category": .string("garage")]), "door": .string("\(index)"),
            ]
            if strict { userInfo["strict"] = .bool(true) }
            return Reply(
                actionIdentifier: "open", categoryIdentifier: "garage", notificationIdentifier: "g-\(index)",
                userInfo: userInfo, respondedAt: Date().addingTimeInterval(-age))
        }
        // Queued over a day offline, oldest first: a day old, an hour old, a minute old (late for the
        // strict rule only), and two fresh ones.
        let replies = [
            reply(0, age: 86_400), reply(1, age: 3600), reply(2, age: 60, strict: true), reply(3, age: 20),
            reply(4, age: 5),
        ]
        for reply in replies { _ = try client.enqueue(reply) }
        #expect(await Self.drain(client, within: 120))

        let rows = try api.query(
            "SELECT client_response_id, outcome FROM responses WHERE app_id = 'kit-late' ORDER BY received_at, id")
        let stored = try rows.map {
            [try $0.decode("client_response_id", as: String.self), try $0.decode("outcome", as: String.self)]
        }
        #expect(
            stored == [
                [replies[2].responseId, "expired"], [replies[3].responseId, "accepted"],
                [replies[4].responseId, "accepted"],
            ])
        let dropped = events.all.compactMap { event -> String? in
            if case .dropped(let id, .expired(120)) = event { id } else { nil }
        }
        #expect(dropped == [replies[0].responseId, replies[1].responseId])
        let refused = events.all.compactMap { event -> String? in
            if case .refused(let id, 410, let problem) = event,
                problem.type == "https://actionhook.dev/problems/reply-expired"
            {
                id
            } else {
                nil
            }
        }
        #expect(refused == [replies[2].responseId])
        #expect(client.queue.count == 0)
        #expect(try api.count("SELECT count(*) AS n FROM followups WHERE app_id = 'kit-late'") == 2)
    }

    @Test(
        "a damaged file among 10 good ones: the 10 are stored once each, in order; the damaged one is reported once; drain() returns"
    )
    func damagedFile() async throws {
        let api = try TestAPI()
        let key = try api.createApp("kit-damaged")
        // Left by an earlier launch: ten replies, and among them a file a crash or a full disk cut short.
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent(
            "actionhookkit-it-\(UUID().uuidString)")
        let queue = try ReplyQueue(directory: folder.appendingPathComponent("queue"))
        let replies = (0..<10).map(Self.reply)
        var damagedName = ""
        for (index, reply) in replies.enumerated() {
            let entry = try queue.append(reply)
            if index == 4 {
                damagedName = ReplyQueue.fileName(of: entry.sequence + 1)
                try Data(#"{"responseId":"0b6d","actionIdentifier":"acc"#.utf8)
                    .write(to: queue.directory.appendingPathComponent(damagedName))
            }
        }

        let events = Events()
        let client = try Self.client(port: api.port, key: key, events: events, folder: folder)
        #expect(client.queue.count == 11)
        client.resume()
        #expect(await Self.drain(client, within: 120))
        #expect(
            try Self.rowsByResponseID(api, app: "kit-damaged")
                == Dictionary(uniqueKeysWithValues: replies.map { ($0.responseId, 1) }))
        let order = try api.query(
            "SELECT client_response_id FROM responses WHERE app_id = 'kit-damaged' ORDER BY received_at, id"
        )
        .map { try $0.decode("client_response_id", as: String.self) }
        #expect(order == replies.map(\.responseId))
        #expect(events.damaged == [damagedName])
        #expect(events.delivered(status: 202) == 10)
        #expect(client.queue.count == 0)

        // Reported once: a second drain and the next launch see nothing more.
        #expect(await Self.drain(client, within: 120))
        let relaunched = Events()
        #expect(
            await Self.drain(try Self.client(port: api.port, key: key, events: relaunched, folder: folder), within: 120)
        )
        #expect(events.damaged == [damagedName])
        #expect(relaunched.all.isEmpty)
    }

    @Test(
        "replies to a notification the service sent, forwarded as they came: the first is bound and acts, the second is superseded, one past the key's exp is never sent"
    )
    func repliesToSentNotifications() async throws {
        let api = try TestAPI()
        let key = try api.createApp("kit-sent", extra: #""webhook":{"url":"https://hooks.example.com/kit-sent"}"#)
        #expect(
            try api.admin(
                "PUT", "/v1/apps/kit-sent/categories/garage",
                json: #"{"actions":[{"identifier":"close","title":"Close"}]}"#
            ).status == 201)
        #expect(
            try api.admin(
                "POST", "/v1/apps/kit-sent/rules",
                json: #"{"id":"close","match":{"action":"close"},"handler":{"type":"accept"}}"#
            ).status == 201)
        let (phone, watch) = (String(repeating: "a1", count: 32), String(repeating: "b2", count: 32))
        let sent = try api.admin(
            "POST", "/v1/apps/kit-sent/notifications",
            json: #"""
                {"to": [{"deviceToken": "\#(phone)", "recipient": "ann"}, {"deviceToken": "\#(watch)", "recipient": "ann"}],
                 "category": "garage", "aps": {"alert": "Close the garage?"}, "userInfo": {"door": "1"}}
                """#)
        #expect(sent.status == 202)
        let id = try #require(sent.json["id"] as? String)
        let expiresAt = try #require(
            (sent.json["expiresAt"] as? String).flatMap { ISO8601DateFormatter.withFractions.date(from: $0) })

        // What each device's push carried in userInfo, as iOS hands it to the app.
        func userInfo(device: Int, exp: Date) -> [String: JSONValue] {
            [
                "aps": .object(["alert": .string("Close the garage?"), "category": .string("garage")]),
                "door": .string("1"),
                "actionhook": .object([
                    "n": .string(id), "d": .number(Double(device)), "r": .string("ann"),
                    "exp": .number(exp.timeIntervalSince1970.rounded(.up)),
                ]),
            ]
        }
        let events = Events()
        let client = try Self.client(port: api.port, key: key, events: events)
        let first = Reply(
            actionIdentifier: "close", categoryIdentifier: "garage", userInfo: userInfo(device: 0, exp: expiresAt),
            deviceToken: phone)
        let second = Reply(
            actionIdentifier: "close", categoryIdentifier: "garage", userInfo: userInfo(device: 1, exp: expiresAt),
            deviceToken: watch)
        // A reply to an older notification whose key says it expired a minute ago: dropped on the phone.
        let late = Reply(
            actionIdentifier: "close", categoryIdentifier: "garage",
            userInfo: userInfo(device: 0, exp: Date().addingTimeInterval(-60)), deviceToken: phone)
        for reply in [first, second, late] { _ = try client.enqueue(reply) }
        #expect(await Self.drain(client, within: 120))

        let rows = try api.query(
            """
            SELECT client_response_id, outcome, notification_id::text AS notification, recipient FROM responses
            WHERE app_id = 'kit-sent' ORDER BY received_at, id
            """)
        let stored = try rows.map {
            [
                try $0.decode("client_response_id", as: String.self), try $0.decode("outcome", as: String.self),
                try $0.decode("notification", as: String.self), try $0.decode("recipient", as: String.self),
            ]
        }
        #expect(stored == [[first.responseId, "accepted", id, "ann"], [second.responseId, "superseded", id, "ann"]])
        let dropped = events.all.compactMap { event -> String? in
            if case .dropped(let responseId, .pastDeadline) = event { responseId } else { nil }
        }
        #expect(dropped == [late.responseId])
        let receipt = try api.admin("GET", "/v1/apps/kit-sent/notifications/\(id)")
        #expect(receipt.json["status"] as? String == "answered")
        #expect((receipt.json["answer"] as? [String: Any])?["responseId"] as? String != nil)
    }

    @Test("a key revoked and replaced: every reply queued meanwhile is kept, then stored once with the new key")
    func keyRevokedAndReplaced() async throws {
        let api = try TestAPI()
        let created = try api.admin("POST", "/v1/apps", json: #"{"id":"kit-keys","name":"kit-keys"}"#)
        try #require(created.status == 201)
        let first = try #require(created.json["ingestKey"] as? [String: Any])
        let firstID = try #require(first["id"] as? String)
        let firstSecret = try #require(first["secret"] as? String)

        let events = Events()
        let client = try Self.client(port: api.port, key: firstSecret, events: events)
        let before = (0..<3).map(Self.reply)
        for reply in before { client.forward(reply) }
        #expect(await Self.drain(client, within: 120))
        #expect(try Self.rowsByResponseID(api, app: "kit-keys").count == 3)

        #expect(try api.admin("DELETE", "/v1/apps/kit-keys/keys/\(firstID)").status == 204)
        let after = (3..<13).map(Self.reply)
        for reply in after { client.forward(reply) }
        // The 401 pauses the queue: drain() returns, nothing is dropped, nothing is stored.
        #expect(await Self.drain(client, within: 120))
        #expect(events.pauses == 1)
        #expect(events.refusals == 0)
        #expect(client.queue.count == 10)
        #expect(try Self.rowsByResponseID(api, app: "kit-keys").count == 3)

        let second = try #require(try api.admin("POST", "/v1/apps/kit-keys/keys").json["secret"] as? String)
        client.updateIngestKey(second)
        #expect(await Self.drain(client, within: 120))
        // Every reply once; the ten stored after the revocation can only have carried the new key.
        #expect(
            try Self.rowsByResponseID(api, app: "kit-keys")
                == Dictionary(uniqueKeysWithValues: (before + after).map { ($0.responseId, 1) }))
        let order = try api.query(
            "SELECT client_response_id FROM responses WHERE app_id = 'kit-keys' ORDER BY received_at, id"
        )
        .map { try $0.decode("client_response_id", as: String.self) }
        #expect(order == (before + after).map(\.responseId))
        #expect(events.delivered(status: 202) == 13)
        #expect(events.pauses == 1)
        #expect(client.queue.count == 0)
    }
}

extension ISO8601DateFormatter {
    /// RFC 3339 with milliseconds, as the service writes times.
    static var withFractions: ISO8601DateFormatter {
        let formatter = ISO8601DateFormatter()
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter
    }
}

/// The client's events, collected.
final class Events: Sendable {
    private let events = Mutex<[ActionHookEvent]>([])

    func record(_ event: ActionHookEvent) {
        events.withLock { $0.append(event) }
    }

    var all: [ActionHookEvent] { events.withLock { $0 } }

    var retries: Int { all.filter { if case .retrying = $0 { true } else { false } }.count }
    var refusals: Int { all.filter { if case .refused = $0 { true } else { false } }.count }
    var pauses: Int { all.filter { if case .paused = $0 { true } else { false } }.count }
    var damaged: [String] { all.compactMap { if case .damaged(let file) = $0 { file } else { nil } } }

    func delivered(status: Int) -> Int {
        all.filter { if case .delivered(_, status) = $0 { true } else { false } }.count
    }
}
