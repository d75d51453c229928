import ActionHookKit
import Foundation
import Testing

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The server answering by the request's key: `good` is stored (202), anything else is refused (401).
final class KeyedServer: HTTPTransport, @unchecked Sendable {
    // @unchecked: `good` and `requests` are only touched under `lock`.
    private let lock = NSLock()
    private var good: String
    private var requests: [URLRequest] = []

    init(good: String) {
        self.good = good
    }

    func accept(_ key: String) {
        lock.withLock { good = key }
    }

    var sent: [URLRequest] { lock.withLock { requests } }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let ok = lock.withLock { () -> Bool in
            requests.append(request)
            return request.value(forHTTPHeaderField: "Authorization") == "Bearer " + good
        }
        let body =
            ok ? "" : #"{"type":"https://actionhook.dev/problems/unauthorized","title":"Unauthorized","status":401}"#
        return (
            Data(body.utf8),
            HTTPURLResponse(url: request.url!, statusCode: ok ? 202 : 401, httpVersion: nil, headerFields: [:])!
        )
    }
}

/// The system's background uploads, played by the test: records what the client schedules and cancels, and
/// reports results when the test says so.
final class RecordingUploads: BackgroundUploading, @unchecked Sendable {
    // @unchecked: every member is only touched under `lock`.
    private let lock = NSLock()
    private var report: (@Sendable (BackgroundUploadResult) -> Void)?
    private var scheduledUploads: [BackgroundUpload] = []
    private var cancelledNames: [String] = []
    private var keptSets: [Set<String>] = []

    func start(reporting report: @escaping @Sendable (BackgroundUploadResult) -> Void) {
        lock.withLock { self.report = report }
    }
    func schedule(_ upload: BackgroundUpload) { lock.withLock { scheduledUploads.append(upload) } }
    func cancel(name: String) { lock.withLock { cancelledNames.append(name) } }
    func cancelAll(except names: Set<String>) { lock.withLock { keptSets.append(names) } }

    var scheduled: [BackgroundUpload] { lock.withLock { scheduledUploads } }
    var cancelled: [String] { lock.withLock { cancelledNames } }
    var kept: [Set<String>] { lock.withLock { keptSets } }

    /// The system finished an upload.
    func finish(_ name: String, _ outcome: BackgroundUploadResult.Outcome) {
        let report = lock.withLock { self.report }
        report?(BackgroundUploadResult(name: name, outcome: outcome))
    }
}

/// Background time, played by the test: counts what is begun and ended, and can run out.
final class CountingActivity: BackgroundActivity, @unchecked Sendable {
    // @unchecked: every member is only touched under `lock`.
    private let lock = NSLock()
    private var next = 1
    private var openTokens: [Int: @Sendable () -> Void] = [:]
    private var begunCount = 0

    func begin(expired: @escaping @Sendable () -> Void) -> BackgroundActivityToken? {
        lock.withLock {
            defer { next += 1 }
            begunCount += 1
            openTokens[next] = expired
            return BackgroundActivityToken(rawValue: next)
        }
    }
    func end(_ token: BackgroundActivityToken) { lock.withLock { _ = openTokens.removeValue(forKey: token.rawValue) } }

    var open: Int { lock.withLock { openTokens.count } }
    var begun: Int { lock.withLock { begunCount } }
    /// The time runs out.
    func expire() {
        for handler in lock.withLock({ Array(openTokens.values) }) { handler() }
    }
}

func reply(_ action: String, userInfo: [String: JSONValue] = [:], respondedAt: Date = Date()) -> Reply {
    Reply(actionIdentifier: action, userInfo: userInfo, respondedAt: respondedAt)
}

@Suite("A queue that stays cheap and honest")
struct CheapQueueTests {
    @Test(
        "damaged files among good ones are moved aside once, reported once, and drain() returns with the good ones sent in order"
    )
    func damagedFiles() async throws {
        let folder = temporaryFolder()
        let queue = try ReplyQueue(directory: folder.appendingPathComponent("queue"))
        var good: [Reply] = []
        for index in 0..<6 {
            let reply = reply("a\(index)")
            good.append(reply)
            let entry = try queue.append(reply)
            if index == 1 || index == 3 {
                // Empty and truncated files named like replies, between good ones.
                let name = ReplyQueue.fileName(of: entry.sequence + 1)
                let content = index == 1 ? Data() : Data(#"{"responseId":"x","actionIde"#.utf8)
                try content.write(to: queue.directory.appendingPathComponent(name))
            }
        }
        let events = EventLog()
        let server = ScriptedServer([.status(202)])
        let client = try makeClient(server, folder: folder, events: events)
        #expect(client.queue.count == 8)
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(server.bodies.map { $0["actionIdentifier"] as? String } == good.map(\.actionIdentifier))
        #expect(events.damaged.count == 2)
        #expect(Set(events.damaged).count == 2)
        let aside = try FileManager.default.contentsOfDirectory(atPath: client.queue.damagedDirectory.path)
        #expect(Set(aside) == Set(events.damaged))
        #expect(client.queue.count == 0)

        // The next launch does not see them again.
        let again = EventLog()
        let relaunched = try makeClient(server, folder: folder, events: again)
        await relaunched.drain()
        #expect(again.damaged.isEmpty)
    }

    @Test("forward at depth 1,000 reads none of the queued files: with every one of them damaged, it reports nothing")
    func forwardDoesNotReadTheQueue() async throws {
        let folder = temporaryFolder()
        let queue = try ReplyQueue(directory: folder.appendingPathComponent("queue"))
        for index in 0..<1_000 { try queue.append(reply("q\(index)")) }
        for name in queue.fileNames {
            try Data("not a reply".utf8).write(to: queue.directory.appendingPathComponent(name))
        }
        let events = EventLog()
        // A server that never answers keeps the loop on its first (damaged) file only after forward returned.
        let server = ScriptedServer([.hang])
        let client = try makeClient(server, folder: folder, events: events, maxQueuedReplies: 2_000)
        #expect(client.queue.count == 1_000)
        let fresh = reply("fresh")
        let entry = try client.enqueue(fresh)
        // What forward did on the caller's thread: one file added after the others, nothing read. The send loop,
        // started with the client, may meanwhile set damaged files aside (and report each): every one of them
        // is either still queued or set aside, none lost.
        #expect(client.queue.fileNames.last == entry.fileName)
        let queued = try FileManager.default.contentsOfDirectory(atPath: queue.directory.path).filter {
            $0.hasSuffix(".reply.json")
        }.count
        let setAside =
            (try? FileManager.default.contentsOfDirectory(atPath: client.queue.damagedDirectory.path))?
            .count ?? 0
        #expect(queued + setAside >= 1_001)
        #expect(events.all.filter { if case .dropped = $0 { true } else { false } }.isEmpty)
    }

    @Test("1,000 queued replies are sent oldest first, each once, each reported once")
    func thousandReplies() async throws {
        let folder = temporaryFolder()
        let offline = try makeClient(
            ScriptedServer([.networkError]), folder: folder, retry: RetryPolicy(initialDelay: 60, maximumDelay: 60))
        var replies: [Reply] = []
        for index in 0..<1_000 {
            let reply = reply("r\(index)")
            replies.append(reply)
            try offline.enqueue(reply)
        }
        #expect(offline.queue.count == 1_000)
        let events = EventLog()
        let server = ScriptedServer([.status(202)])
        let client = try makeClient(server, folder: folder, events: events)
        #expect(await finishes(within: 120) { await client.drain() })
        #expect(server.sent.compactMap { $0.value(forHTTPHeaderField: "Idempotency-Key") } == replies.map(\.responseId))
        #expect(events.delivered == replies.map(\.responseId))
        #expect(client.queue.count == 0)
    }

    @Test("at the cap, forward drops the oldest reply it queued without reading it")
    func capWithoutRead() throws {
        let events = EventLog()
        let client = try makeClient(
            ScriptedServer([.status(503, headers: ["Retry-After": "3600"])]), folder: temporaryFolder(), events: events,
            maxQueuedReplies: 3)
        let replies = (0..<6).map { reply("c\($0)") }
        for reply in replies { try client.enqueue(reply) }
        #expect(client.queue.count <= 3)
        let dropped = events.all.compactMap { if case .dropped(let id, .queueFull) = $0 { id } else { nil } }
        #expect(dropped.count >= 3)
        #expect(Set(dropped).count == dropped.count)
        #expect(!dropped.contains(replies[5].responseId))
    }
}

@Suite("Networks that come and go")
struct NetworkTests {
    @Test("forwards while offline do not grow the backoff: every retry stays the first one")
    func offlineForwards() async throws {
        let server = ScriptedServer([.networkError])
        let events = EventLog()
        let client = try makeClient(
            server, folder: temporaryFolder(), events: events, retry: RetryPolicy(initialDelay: 30, maximumDelay: 300))
        client.forward(reply("first"))
        #expect(await eventually { events.retries.count == 1 })
        for index in 0..<12 {
            let before = server.sent.count
            client.forward(reply("f\(index)"))
            #expect(await eventually { server.sent.count > before && events.retries.count == index + 2 })
        }
        #expect(events.retries.count == 13)
        #expect(events.retries.allSatisfy { $0.attempt == 1 })
        #expect(events.retries.allSatisfy { $0.delay <= 30 })
        #expect(client.queue.count == 13)
    }

    @Test("the network coming back sends what waits, without a new forward")
    func networkReturns() async throws {
        let server = ScriptedServer([.networkError])
        let events = EventLog()
        let client = try makeClient(
            server, folder: temporaryFolder(), events: events,
            retry: RetryPolicy(initialDelay: 3_600, maximumDelay: 3_600))
        client.networkPathChanged(isSatisfied: false)
        let replies = (0..<3).map { reply("n\($0)") }
        for reply in replies { client.forward(reply) }
        #expect(await eventually { events.retries.count >= 1 })
        server.script([.status(202)])
        client.networkPathChanged(isSatisfied: true)
        // The wait was an hour: finishing at all means the path change cut it short.
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(events.delivered == replies.map(\.responseId))
    }

    @Test("drain() returns when its task is cancelled; the request in flight is cancelled and the reply stays queued")
    func drainCancelled() async throws {
        let server = ScriptedServer([.hang])
        let events = EventLog()
        let client = try makeClient(server, folder: temporaryFolder(), events: events)
        let queued = try client.enqueue(reply("stuck"))
        let draining = Task { await client.drain() }
        #expect(await eventually { server.sent.count == 1 })
        draining.cancel()
        #expect(await finishes(within: 10) { await draining.value })
        #expect(client.queue.fileNames == [queued.fileName])
        #expect(events.all.isEmpty)
        #expect(server.sent.count == 1)
    }
}

@Suite("Keys that change")
struct KeyTests {
    @Test("a 401 keeps every reply and pauses, reported once; a new key sends them all, in order, with it")
    func revokedThenReplaced() async throws {
        let server = KeyedServer(good: "ahk_new")
        let events = EventLog()
        let client = try makeClient(server, folder: temporaryFolder(), events: events)
        let replies = (0..<5).map { reply("k\($0)") }
        for reply in replies { try client.enqueue(reply) }
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(events.pauses == 1)
        #expect(client.queue.count == 5)
        #expect(events.delivered.isEmpty)
        #expect(!events.all.contains { if case .refused = $0 { true } else { false } })
        let triedBefore = server.sent.count
        #expect(triedBefore >= 1)

        // While paused, a new reply is queued but not sent.
        try client.enqueue(reply("k5"))
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(server.sent.count == triedBefore)

        client.updateIngestKey("ahk_new")
        #expect(client.ingestKey == "ahk_new")
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(client.queue.count == 0)
        #expect(events.delivered.count == 6)
        #expect(events.delivered.prefix(5) == replies.map(\.responseId)[...])
        let after = server.sent.dropFirst(triedBefore)
        #expect(after.allSatisfy { $0.value(forHTTPHeaderField: "Authorization") == "Bearer ahk_new" })
        #expect(events.pauses == 1)
    }

    @Test("400, 413, 415 and 422 remove the reply; 401 does not", arguments: [400, 413, 415, 422])
    func contentRefusals(status: Int) async throws {
        let events = EventLog()
        let client = try makeClient(
            ScriptedServer([.status(status), .status(202)]), folder: temporaryFolder(), events: events)
        let bad = reply("bad")
        try client.enqueue(bad)
        try client.enqueue(reply("good"))
        await client.drain()
        #expect(events.all.first == .refused(responseId: bad.responseId, status: status, problem: Problem()))
        #expect(events.delivered.count == 1)
        #expect(client.queue.count == 0)
    }
}

@Suite("Late replies judged from the notification")
struct DeadlineTests {
    @Test("a reply past userInfo.actionhook.exp is dropped unsent without any categories; one before it is sent")
    func deadlineWithoutCategories() async throws {
        let now = Date()
        let late = reply(
            "open",
            userInfo: [
                "actionhook": .object([
                    "n": .string("8d2c4b6a"), "r": .string("alice"), "exp": .number(now.timeIntervalSince1970 - 10),
                ])
            ])
        let timely = reply("open", userInfo: ["actionhook": .object(["exp": .number(now.timeIntervalSince1970 + 600)])])
        let plain = reply("open")
        #expect(late.deadline == Date(timeIntervalSince1970: now.timeIntervalSince1970 - 10))
        #expect(plain.deadline == nil)
        #expect(reply("x", userInfo: ["actionhook": .object(["exp": .string("soon")])]).deadline == nil)

        let events = EventLog()
        let server = ScriptedServer([.status(202)])
        let client = try makeClient(server, folder: temporaryFolder(), events: events)
        #expect(client.cachedCategories == nil)
        for reply in [late, timely, plain] { try client.enqueue(reply) }
        await client.drain()
        #expect(
            server.sent.compactMap { $0.value(forHTTPHeaderField: "Idempotency-Key") } == [
                timely.responseId, plain.responseId,
            ])
        #expect(events.all.first == .dropped(responseId: late.responseId, reason: .pastDeadline(late.deadline!)))
        // The userInfo is sent as it came: the server reads its own members of "actionhook".
        let sentInfo = server.bodies.first?["userInfo"] as? [String: Any]
        #expect((sentInfo?["actionhook"] as? [String: Any])?["exp"] != nil)
    }

    @Test("a queue file is the ingest body itself, and reads back as the reply it was")
    func fileIsTheBody() throws {
        let queue = try ReplyQueue(directory: temporaryFolder())
        let original = Reply(
            actionIdentifier: "comment", userText: "on my way", categoryIdentifier: "event-invite",
            notificationIdentifier: "n-1", userInfo: ["eventId": .number(42)], deviceToken: "ab",
            respondedAt: Date(timeIntervalSince1970: 1_795_631_514.304))
        let entry = try queue.append(original)
        let data = try Data(contentsOf: queue.directory.appendingPathComponent(entry.fileName))
        #expect(data == original.ingestBody())
        #expect(try Reply(ingestBody: data) == original)
        #expect(queue.entries().map(\.reply) == [original])
    }
}

@Suite("One event per reply: an app and its extension over one folder")
struct SharedFolderTests {
    @Test("two clients over one folder send 40 replies; each is reported delivered exactly once")
    func twoProcesses() async throws {
        let folder = temporaryFolder()
        let appEvents = EventLog()
        let extensionEvents = EventLog()
        let appServer = ScriptedServer([.status(202)])
        let extensionServer = ScriptedServer([.status(202)])
        let app = try makeClient(appServer, folder: folder, events: appEvents)
        let appExtension = try makeClient(extensionServer, folder: folder, events: extensionEvents)
        var replies: [Reply] = []
        for index in 0..<40 {
            let reply = reply("s\(index)")
            replies.append(reply)
            try (index % 2 == 0 ? app : appExtension).enqueue(reply)
        }
        async let first: Void = app.drain()
        async let second: Void = appExtension.drain()
        _ = await (first, second)
        #expect(
            await finishes(within: 30) {
                await app.drain()
                await appExtension.drain()
            })
        let reported = appEvents.delivered + extensionEvents.delivered
        #expect(reported.count == 40)
        #expect(Set(reported) == Set(replies.map(\.responseId)))
        let sent = Set(
            (appServer.sent + extensionServer.sent).compactMap { $0.value(forHTTPHeaderField: "Idempotency-Key") })
        #expect(sent == Set(replies.map(\.responseId)))
        #expect(app.queue.count == 0 && appExtension.queue.count == 0)
    }

    @Test("of two processes removing one reply's file, only the first is told it did (and so reports it)")
    func removalDecidesTheReport() throws {
        let folder = temporaryFolder()
        let queue = try ReplyQueue(directory: folder)
        let other = try ReplyQueue(directory: folder)
        let entry = try queue.append(reply("c"))
        #expect(queue.remove(entry) == true)
        #expect(other.remove(entry) == false)
    }
}

@Suite("Delivery that survives suspension: system uploads and background time")
struct SuspensionTests {
    @Test("forward schedules the reply's system upload and begins background time before the completion handler")
    func scheduledBeforeCompletion() async throws {
        let uploads = RecordingUploads()
        let activity = CountingActivity()
        let server = ScriptedServer([.hang])
        let client = try makeClient(server, folder: temporaryFolder(), uploads: uploads, activity: activity)
        let forwarded = reply("accept")
        let before = Date()
        let seen = Mutex<(Int, Int)>((0, 0))
        client.forward(forwarded) { seen.set((uploads.scheduled.count, activity.begun)) }
        #expect(seen.value.0 == 1)
        #expect(seen.value.1 == 1)
        let upload = try #require(uploads.scheduled.first)
        #expect(upload.name == client.queue.fileNames.first)
        #expect(upload.file.lastPathComponent == upload.name)
        #expect(try Data(contentsOf: upload.file) == forwarded.ingestBody())
        #expect(upload.url.absoluteString == "https://actionhook.example.com/v1/responses")
        #expect(upload.headers["Idempotency-Key"] == forwarded.responseId)
        #expect(upload.headers["Authorization"] == "Bearer ahk_test_key")
        #expect(upload.headers["Content-Type"] == "application/json")
        #expect(upload.earliestBeginDate >= before.addingTimeInterval(20))

        // The time runs out: sending stops, the time is given back, the reply stays queued for the upload.
        #expect(await eventually { server.sent.count == 1 })
        activity.expire()
        #expect(activity.open == 0)
        #expect(client.queue.count == 1)
        #expect(uploads.cancelled.isEmpty)
    }

    @Test("sent by the app first: the system upload is cancelled, and its late 200 reports nothing more")
    func appFirst() async throws {
        let uploads = RecordingUploads()
        let activity = CountingActivity()
        let events = EventLog()
        let client = try makeClient(
            ScriptedServer([.status(202)]), folder: temporaryFolder(), events: events, uploads: uploads,
            activity: activity)
        let forwarded = reply("accept")
        client.forward(forwarded)
        await client.drain()
        let name = try #require(uploads.scheduled.first?.name)
        #expect(uploads.cancelled == [name])
        uploads.finish(name, .answered(status: 200, body: Data(), retryAfter: nil))
        #expect(events.all == [.delivered(responseId: forwarded.responseId, status: 202)])
        #expect(activity.open == 0)
        #expect(activity.begun >= 1)
    }

    @Test("sent by the system while the app was suspended: the next launch reconciles it, once, and sends nothing")
    func systemFirst() async throws {
        let folder = temporaryFolder()
        let first = RecordingUploads()
        let suspended = try makeClient(ScriptedServer([.hang]), folder: folder, uploads: first)
        let forwarded = reply("accept")
        let other = reply("decline")
        try suspended.enqueue(forwarded)
        try suspended.enqueue(other)
        let names = first.scheduled.map(\.name)
        #expect(names.count == 2)

        // Relaunched: the session reports what it finished meanwhile.
        let uploads = RecordingUploads()
        let events = EventLog()
        let server = ScriptedServer([.networkError])
        let client = try makeClient(server, folder: folder, events: events, uploads: uploads)
        uploads.finish(names[0], .answered(status: 202, body: Data(), retryAfter: nil))
        uploads.finish(names[0], .answered(status: 200, body: Data(), retryAfter: nil))
        let problem = #"{"type":"https://actionhook.dev/problems/validation","title":"Invalid","status":422}"#
        uploads.finish(names[1], .answered(status: 422, body: Data(problem.utf8), retryAfter: nil))
        #expect(
            events.all.prefix(2) == [
                .delivered(responseId: forwarded.responseId, status: 202),
                .refused(
                    responseId: other.responseId, status: 422,
                    problem: Problem(type: "https://actionhook.dev/problems/validation", title: "Invalid")),
            ])
        #expect(client.queue.count == 0)
        client.resume()
        await client.drain()
        #expect(server.sent.isEmpty)
        #expect(uploads.kept.last == [])
    }

    @Test("a system upload that failed or met a 401 leaves the reply to the app, which sends it with its own key")
    func systemFailureLeftToTheApp() async throws {
        let folder = temporaryFolder()
        let uploads = RecordingUploads()
        let events = EventLog()
        let server = ScriptedServer([.networkError])
        let client = try makeClient(
            server, folder: folder, events: events, retry: RetryPolicy(initialDelay: 3_600, maximumDelay: 3_600),
            uploads: uploads)
        let forwarded = reply("accept")
        try client.enqueue(forwarded)
        #expect(await eventually { events.retries.count == 1 })
        server.script([.status(202)])
        let name = try #require(uploads.scheduled.first?.name)
        uploads.finish(name, .answered(status: 401, body: Data(), retryAfter: nil))
        #expect(events.pauses == 0)
        // Either result starts the app's own send at once, cutting its hour-long wait.
        uploads.finish(name, .failed)
        #expect(await finishes(within: 20) { await client.drain() })
        #expect(events.delivered == [forwarded.responseId])
    }
}
