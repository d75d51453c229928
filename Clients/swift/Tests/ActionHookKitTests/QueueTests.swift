import Foundation
import Testing

@testable import ActionHookKit

@Suite("The on-device queue: durable, ordered, capped, sent once each")
struct QueueTests {
    static func reply(_ action: String, category: String? = nil, respondedAt: Date = Date()) -> Reply {
        Reply(actionIdentifier: action, categoryIdentifier: category, respondedAt: respondedAt)
    }

    @Test("a name listed again before its own append is noted is counted once; another process's older one goes in order")
    func indexAppendAfterRelist() {
        var index = ReplyQueue.Index()
        index.append(10)
        // Another thread listed the folder between this process's link of 20 and its note of it.
        index.replace(with: [10, 20])
        index.append(20)
        #expect(index.count == 2)
        index.append(15)
        index.append(30)
        #expect(index.sequences == [10, 15, 20, 30])
        index.remove(10)
        index.append(15)
        #expect(index.count == 3)
    }

    @Test("a reply is on disk when forward returns, before the completion handler runs; nothing is sent while the server is unreachable")
    func durableBeforeCompletion() async throws {
        let server = ScriptedServer([.networkError])
        let folder = temporaryFolder()
        let client = try makeClient(server, folder: folder)
        let queued = Mutex(-1)
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            client.forward(Self.reply("accept")) {
                queued.set(try! ReplyQueue(directory: folder.appendingPathComponent("queue")).count)
                done.resume()
            }
        }
        #expect(queued.value == 1)
        try await Task.sleep(nanoseconds: 50_000_000)
        #expect(client.queue.count == 1)
        #expect(server.sent.count >= 1)
    }

    @Test("a new client over the same folder (the next launch) sends what was left, in order, with the same ids")
    func resumeAfterRelaunch() async throws {
        let folder = temporaryFolder()
        let offline = ScriptedServer([.networkError])
        let first = try makeClient(offline, folder: folder)
        let replies = (0..<5).map { Self.reply("a\($0)") }
        for reply in replies { try first.enqueue(reply) }
        #expect(first.queue.count == 5)

        let online = ScriptedServer([.status(202)])
        let events = EventLog()
        let second = try makeClient(online, folder: folder, events: events)
        #expect(second.queue.entries().map(\.reply) == replies.map { var r = $0; r.deviceToken = nil; return r })
        second.resume()
        await second.drain()
        #expect(second.queue.count == 0)
        #expect(online.bodies.map { $0["actionIdentifier"] as? String } == replies.map(\.actionIdentifier))
        #expect(online.sent.map { $0.value(forHTTPHeaderField: "Idempotency-Key") } == replies.map(\.responseId))
        #expect(events.all.filter { if case .delivered = $0 { true } else { false } }.count == 5)
    }

    @Test("the head of the queue blocks those behind it: a retried reply is never overtaken")
    func orderKeptThroughRetries() async throws {
        let server = ScriptedServer([.status(503), .networkError, .status(500), .status(202)])
        let client = try makeClient(server, folder: temporaryFolder())
        try client.enqueue(Self.reply("first"))
        try client.enqueue(Self.reply("second"))
        await client.drain()
        let actions = server.bodies.map { $0["actionIdentifier"] as? String ?? "" }
        #expect(actions == ["first", "first", "first", "first", "second"])
        let keys = Set(server.sent.prefix(4).map { $0.value(forHTTPHeaderField: "Idempotency-Key") })
        #expect(keys.count == 1)
    }

    @Test("statuses: 2xx delivers; 400, 410, 413, 415, 422 refuse the reply; 401 refuses the key; 409, 429, 5xx retry", arguments: [
        (202, "delivered"), (200, "delivered"), (400, "refused"), (401, "key"), (410, "refused"), (413, "refused"),
        (415, "refused"), (422, "refused"), (409, "retry"), (429, "retry"), (500, "retry"), (502, "retry"),
        (503, "retry"), (504, "retry"), (408, "retry"),
    ])
    func classification(status: Int, kind: String) {
        let outcome = DeliveryOutcome.classify(status: status, body: Data(), retryAfterHeader: nil)
        switch outcome {
        case .delivered: #expect(kind == "delivered")
        case .refused: #expect(kind == "refused")
        case .keyRefused: #expect(kind == "key")
        case .retry: #expect(kind == "retry")
        }
    }

    @Test("a permanent refusal removes the reply and reports the problem's type and detail; the next one is sent")
    func refusalReported() async throws {
        let problem = #"{"type":"https://actionhook.dev/problems/validation","title":"Invalid","status":422,"detail":"userText is required"}"#
        let server = ScriptedServer([.status(422, body: problem, headers: ["Content-Type": "application/problem+json"]), .status(202)])
        let events = EventLog()
        let client = try makeClient(server, folder: temporaryFolder(), events: events)
        let bad = Self.reply("comment")
        try client.enqueue(bad)
        try client.enqueue(Self.reply("accept"))
        await client.drain()
        #expect(client.queue.count == 0)
        #expect(events.all.contains(.refused(responseId: bad.responseId, status: 422, problem: Problem(
            type: "https://actionhook.dev/problems/validation", title: "Invalid", detail: "userText is required"))))
        #expect(server.sent.count == 2)
    }

    @Test("Retry-After is honoured: seconds or an HTTP date, capped by the policy")
    func retryAfter() {
        let now = Date(timeIntervalSince1970: 1_700_000_000)
        let seconds = DeliveryOutcome.classify(status: 503, body: Data(), retryAfterHeader: "7", now: now)
        #expect(seconds == .retry(status: 503, retryAfter: 7))
        let date = DeliveryOutcome.classify(
            status: 429, body: Data(), retryAfterHeader: "Tue, 14 Nov 2023 22:13:40 GMT", now: now)
        #expect(date == .retry(status: 429, retryAfter: 20))
        let junk = DeliveryOutcome.classify(status: 503, body: Data(), retryAfterHeader: "soon", now: now)
        #expect(junk == .retry(status: 503, retryAfter: nil))
        let policy = RetryPolicy(initialDelay: 1, maximumDelay: 60)
        #expect(policy.delay(attempt: 1, retryAfter: 7, random: 0.9) == 7)
        #expect(policy.delay(attempt: 1, retryAfter: 3_600, random: 0.9) == 60)
    }

    @Test("backoff doubles from the first wait up to the cap, jitter taking at most its share")
    func backoffSchedule() {
        let policy = RetryPolicy(initialDelay: 1, multiplier: 2, maximumDelay: 300, jitter: 0.5)
        let full = (1...11).map { policy.delay(attempt: $0, random: 0) }
        #expect(full == [1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300])
        let least = (1...11).map { policy.delay(attempt: $0, random: 1) }
        #expect(least == full.map { $0 / 2 })
        for attempt in 1...20 {
            let delay = policy.delay(attempt: attempt)
            #expect(delay >= min(300, pow(2, Double(attempt - 1))) / 2 && delay <= 300)
        }
    }

    @Test("a full queue drops its oldest replies and reports them")
    func countCap() async throws {
        let events = EventLog()
        let server = ScriptedServer([.status(202)])
        let folder = temporaryFolder()
        // Fill the folder while offline, then open it with a cap of 3.
        let offline = try makeClient(ScriptedServer([.networkError]), folder: folder)
        let replies = (0..<5).map { Self.reply("a\($0)") }
        for reply in replies { try offline.enqueue(reply) }
        let client = try makeClient(server, folder: folder, events: events, maxQueuedReplies: 3)
        await client.drain()
        #expect(server.bodies.map { $0["actionIdentifier"] as? String } == ["a2", "a3", "a4"])
        #expect(events.all.contains(.dropped(responseId: replies[0].responseId, reason: .queueFull)))
        #expect(events.all.contains(.dropped(responseId: replies[1].responseId, reason: .queueFull)))
    }

    @Test("the cap holds when a reply is queued, even while the loop waits out a long Retry-After")
    func countCapOnEnqueue() async throws {
        let events = EventLog()
        let folder = temporaryFolder()
        // The server asks for an hour's pause: nothing is sent meanwhile, and the cap must still hold.
        let client = try makeClient(
            ScriptedServer([.status(503, headers: ["Retry-After": "3600"])]), folder: folder, events: events,
            maxQueuedReplies: 2)
        let replies = (0..<5).map { Self.reply("c\($0)") }
        for reply in replies { try client.enqueue(reply) }
        #expect(client.queue.count <= 2)
        let dropped = events.all.compactMap { event -> String? in
            if case .dropped(let id, .queueFull) = event { id } else { nil }
        }
        #expect(dropped.count >= 3)
        #expect(!dropped.contains(replies[4].responseId))
        #expect(client.queue.entries().last?.reply.responseId == replies[4].responseId)
    }

    @Test("a reply queued longer than maxQueueAge is dropped unsent and reported")
    func ageCap() async throws {
        let folder = temporaryFolder()
        let queue = try ReplyQueue(directory: folder.appendingPathComponent("queue"))
        let old = Self.reply("old")
        try queue.append(old, now: Date().addingTimeInterval(-7_200))
        try queue.append(Self.reply("new"))
        let events = EventLog()
        let server = ScriptedServer([.status(202)])
        let client = try makeClient(server, folder: folder, events: events, maxQueueAge: 3_600)
        await client.drain()
        #expect(server.bodies.map { $0["actionIdentifier"] as? String } == ["new"])
        #expect(events.all.contains(.dropped(responseId: old.responseId, reason: .queuedTooLong)))
    }

    @Test("files that are not replies are ignored; a damaged reply file is skipped")
    func foreignFiles() throws {
        let folder = temporaryFolder()
        let queue = try ReplyQueue(directory: folder)
        try Data("x".utf8).write(to: folder.appendingPathComponent("notes.txt"))
        try Data("{".utf8).write(to: folder.appendingPathComponent("00000000000000000001.reply.json"))
        try queue.append(Self.reply("kept"))
        #expect(queue.entries().map(\.reply.actionIdentifier) == ["kept"])
    }

    @Test("sequences increase even when the clock does not")
    func sequencesIncrease() throws {
        let queue = try ReplyQueue(directory: temporaryFolder())
        let now = Date()
        let a = try queue.append(Self.reply("a"), now: now)
        let b = try queue.append(Self.reply("b"), now: now)
        let c = try queue.append(Self.reply("c"), now: now.addingTimeInterval(-10))
        #expect(a.sequence < b.sequence && b.sequence < c.sequence)
        #expect(queue.entries().map(\.reply.actionIdentifier) == ["a", "b", "c"])
    }

    @Test("the device token set by the app is sent with each reply and remembered by the next launch")
    func deviceToken() async throws {
        let folder = temporaryFolder()
        let server = ScriptedServer([.status(202)])
        let client = try makeClient(server, folder: folder)
        client.setDeviceToken(Data([0xde, 0xad, 0xbe, 0xef]))
        try client.enqueue(Self.reply("accept"))
        await client.drain()
        #expect(server.bodies.first?["deviceToken"] as? String == "deadbeef")
        let relaunched = try makeClient(server, folder: folder)
        #expect(relaunched.deviceToken == "deadbeef")
    }

    @Test("requests carry the ingest key, JSON and the responseId as Idempotency-Key")
    func requestShape() async throws {
        let server = ScriptedServer([.status(202)])
        let client = try makeClient(server, folder: temporaryFolder())
        let reply = Self.reply("accept")
        try client.enqueue(reply)
        await client.drain()
        let request = try #require(server.sent.first)
        #expect(request.httpMethod == "POST")
        #expect(request.url?.absoluteString == "https://actionhook.example.com/v1/responses")
        #expect(request.value(forHTTPHeaderField: "Authorization") == "Bearer ahk_test_key")
        #expect(request.value(forHTTPHeaderField: "Content-Type") == "application/json")
        #expect(request.value(forHTTPHeaderField: "Idempotency-Key") == reply.responseId)
    }
}

/// A value behind a lock, for test closures.
final class Mutex<Value>: @unchecked Sendable {
    // @unchecked: `stored` is only touched under `lock`.
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    func set(_ value: Value) { lock.withLock { stored = value } }
    var value: Value { lock.withLock { stored } }
}
