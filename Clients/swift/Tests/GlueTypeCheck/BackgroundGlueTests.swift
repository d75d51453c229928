import ActionHookKit
import Foundation
import Network
import Testing
import URLSessionStandIn

/// The client's events, collected.
final class GlueEvents: @unchecked Sendable {
    // @unchecked: `events` is only touched under `lock`.
    private let lock = NSLock()
    private var events: [ActionHookEvent] = []
    func record(_ event: ActionHookEvent) { lock.withLock { events.append(event) } }
    var all: [ActionHookEvent] { lock.withLock { events } }
    var retries: [Int] { all.compactMap { if case .retrying(_, let attempt, _, _) = $0 { attempt } else { nil } } }
}

func waitFor(_ condition: @escaping @Sendable () -> Bool) async -> Bool {
    for _ in 0..<5_000 {
        if condition() { return true }
        try? await Task.sleep(nanoseconds: 2_000_000)
    }
    return condition()
}

/// A client whose own sends fail at once (nothing listens on the discard port) and wait an hour between tries,
/// so what reaches the queue is the glue's doing.
func glueClient(
    events: GlueEvents, uploads: (any BackgroundUploading)? = nil, activity: (any BackgroundActivity)? = nil
) throws -> ActionHookClient {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("glue-\(UUID().uuidString)")
    let configuration = ActionHookClient.Configuration(
        serverURL: URL(string: "http://127.0.0.1:9")!, ingestKey: "ahk_k", directory: folder,
        retry: RetryPolicy(initialDelay: 3_600, maximumDelay: 3_600), requestTimeout: 5)
    return try ActionHookClient(
        configuration: configuration, backgroundUploads: uploads, backgroundActivity: activity, onEvent: events.record)
}

@Suite("The background URLSession, UIKit and Network glue, compiled against Apple's signatures")
struct BackgroundGlueTests {
    @Test("each forwarded reply becomes a background upload of its queue file; the system's 202 reconciles it once")
    @MainActor
    func backgroundUpload() async throws {
        let identifier = "com.example.app.actionhook.\(UUID().uuidString)"
        let uploads = BackgroundURLSessionUploads(
            identifier: identifier, sharedContainerIdentifier: "group.com.example")
        let events = GlueEvents()
        let client = try glueClient(events: events, uploads: uploads)
        let session = try #require(URLSession.standInSessions.last { $0.configuration.standInIdentifier == identifier })
        #expect(session.configuration.sessionSendsLaunchEvents)
        #expect(!session.configuration.isDiscretionary)
        #expect(session.configuration.sharedContainerIdentifier == "group.com.example")

        let reply = Reply(actionIdentifier: "accept")
        let before = Date()
        client.forward(reply) {}
        let task = try #require(session.standInTasks.first)
        #expect(session.standInTasks.count == 1)
        #expect(task.standInResumed)
        #expect(task.taskDescription == client.queue.fileNames.first)
        #expect(task.standInFile?.lastPathComponent == task.taskDescription)
        #expect(task.standInRequest.httpMethod == "POST")
        #expect(task.standInRequest.url?.absoluteString == "http://127.0.0.1:9/v1/responses")
        #expect(task.standInRequest.value(forHTTPHeaderField: "Idempotency-Key") == reply.responseId)
        #expect(task.standInRequest.value(forHTTPHeaderField: "Authorization") == "Bearer ahk_k")
        #expect((task.earliestBeginDate ?? .distantPast) >= before.addingTimeInterval(20))

        // The system ran it while the app was suspended, then relaunched the app for the session's events.
        var finished = false
        #expect(!uploads.handleEvents(forBackgroundURLSession: "another", completionHandler: {}))
        #expect(uploads.handleEvents(forBackgroundURLSession: identifier, completionHandler: { finished = true }))
        session.standInAnswer(task, status: 202)
        session.standInFinishEvents()
        #expect(
            events.all.filter { if case .delivered = $0 { true } else { false } } == [
                .delivered(responseId: reply.responseId, status: 202)
            ])
        #expect(client.queue.count == 0)
        for _ in 0..<500 where !finished { try await Task.sleep(nanoseconds: 2_000_000) }
        #expect(finished)
    }

    @Test("a refusal's problem body comes through the delegate; a failed upload leaves the reply queued")
    func refusalAndFailure() async throws {
        let identifier = "com.example.app.actionhook.\(UUID().uuidString)"
        let uploads = BackgroundURLSessionUploads(identifier: identifier)
        let events = GlueEvents()
        let client = try glueClient(events: events, uploads: uploads)
        let session = try #require(URLSession.standInSessions.last { $0.configuration.standInIdentifier == identifier })
        let refused = Reply(actionIdentifier: "comment")
        let kept = Reply(actionIdentifier: "accept")
        client.forward(refused)
        client.forward(kept)
        let tasks = session.standInTasks
        #expect(tasks.count == 2)
        let problem = #"{"type":"https://actionhook.dev/problems/validation","title":"Invalid","status":422}"#
        session.standInAnswer(tasks[0], status: 422, body: Data(problem.utf8))
        session.standInFail(tasks[1])
        #expect(
            events.all.contains(
                .refused(
                    responseId: refused.responseId, status: 422,
                    problem: Problem(type: "https://actionhook.dev/problems/validation", title: "Invalid"))))
        #expect(client.queue.entries().map(\.reply.responseId) == [kept.responseId])
    }

    @Test("background time is begun before the completion handler and given back when the client waits")
    @MainActor
    func backgroundTime() async throws {
        let begunBefore = StandInApplication.begun
        let events = GlueEvents()
        let client = try glueClient(events: events, activity: StandInApplication.backgroundTasks())
        let begunAtCompletion = GlueEvents()
        client.forward(Reply(actionIdentifier: "accept")) {
            begunAtCompletion.record(.notQueued(responseId: String(StandInApplication.begun)))
        }
        #expect(begunAtCompletion.all == [.notQueued(responseId: String(begunBefore + 1))])
        // The send fails and an hour's wait follows: the time is given back.
        for _ in 0..<5_000 where !(events.retries.count == 1 && StandInApplication.openTasks == 0) {
            try await Task.sleep(nanoseconds: 2_000_000)
        }
        #expect(events.retries.count == 1)
        #expect(StandInApplication.openTasks == 0)
    }

    @Test("the path monitor's satisfied path sends what waits, without counting the attempt")
    func pathMonitor() async throws {
        let events = GlueEvents()
        let client = try glueClient(events: events)
        let monitor = client.startNetworkPathMonitor()
        #expect(monitor.queue != nil)
        #expect(monitor.pathUpdateHandler != nil)
        client.forward(Reply(actionIdentifier: "accept"))
        #expect(await waitFor { events.retries.count == 1 })
        monitor.standInUpdate(.unsatisfied)
        monitor.standInUpdate(.satisfied)
        #expect(await waitFor { events.retries.count == 2 })
        #expect(events.retries == [1, 1])
        monitor.cancel()
        #expect(monitor.queue == nil)
    }
}
