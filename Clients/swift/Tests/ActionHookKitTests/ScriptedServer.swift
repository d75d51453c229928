import ActionHookKit
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// The customer's ActionHook server as the phone sees it, answering from a script: each request takes the
/// next answer (the last one repeats). Records every request it was sent.
final class ScriptedServer: HTTPTransport, @unchecked Sendable {
    // @unchecked: `answers` and `requests` are only touched under `lock`.
    enum Answer {
        case status(Int, body: String = "", headers: [String: String] = [:])
        case networkError
        /// No answer until the request is cancelled.
        case hang
    }

    private let lock = NSLock()
    private var answers: [Answer]
    private var requests: [URLRequest] = []

    init(_ answers: [Answer]) {
        self.answers = answers
    }

    /// Replaces the script.
    func script(_ answers: [Answer]) {
        lock.withLock { self.answers = answers }
    }

    var sent: [URLRequest] { lock.withLock { requests } }

    /// The JSON bodies of the ingest requests sent, in order.
    var bodies: [[String: Any]] {
        sent.compactMap { $0.httpBody }.compactMap { try? JSONSerialization.jsonObject(with: $0) as? [String: Any] }
    }

    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        let answer = lock.withLock { () -> Answer in
            requests.append(request)
            return answers.count > 1 ? answers.removeFirst() : answers[0]
        }
        switch answer {
        case .networkError:
            throw URLError(.notConnectedToInternet)
        case .hang:
            while !Task.isCancelled { try? await Task.sleep(nanoseconds: 1_000_000) }
            throw URLError(.cancelled)
        case .status(let status, let body, let headers):
            let response = HTTPURLResponse(
                url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
            return (Data(body.utf8), response)
        }
    }
}

/// Collects the client's events.
final class EventLog: @unchecked Sendable {
    // @unchecked: `events` is only touched under `lock`.
    private let lock = NSLock()
    private var events: [ActionHookEvent] = []

    func record(_ event: ActionHookEvent) {
        lock.withLock { events.append(event) }
    }

    var all: [ActionHookEvent] { lock.withLock { events } }
}

/// A fresh folder under the temporary directory.
func temporaryFolder() -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("actionhookkit-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

/// A retry policy fast enough for tests (milliseconds).
let fastRetry = RetryPolicy(initialDelay: 0.005, multiplier: 2, maximumDelay: 0.05, jitter: 0.5)

func makeClient(
    _ server: any HTTPTransport, folder: URL, events: EventLog = EventLog(), maxQueuedReplies: Int = 1_000,
    maxQueueAge: TimeInterval = 86_400, retry: RetryPolicy = fastRetry, uploads: (any BackgroundUploading)? = nil,
    activity: (any BackgroundActivity)? = nil
) throws -> ActionHookClient {
    let configuration = ActionHookClient.Configuration(
        serverURL: URL(string: "https://actionhook.example.com")!, ingestKey: "ahk_test_key", directory: folder,
        maxQueuedReplies: maxQueuedReplies, maxQueueAge: maxQueueAge, retry: retry)
    return try ActionHookClient(
        configuration: configuration, transport: server, backgroundUploads: uploads, backgroundActivity: activity,
        onEvent: events.record)
}

/// Runs `body` and answers whether it finished within `seconds` (a guard against hanging, not a measurement).
func finishes(within seconds: Double, _ body: @escaping @Sendable () async -> Void) async -> Bool {
    await withTaskGroup(of: Bool.self) { group in
        group.addTask {
            await body()
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

/// Waits until `condition` holds, up to `seconds`.
func eventually(within seconds: Double = 10, _ condition: @escaping @Sendable () -> Bool) async -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        try? await Task.sleep(nanoseconds: 2_000_000)
    }
    return condition()
}

extension EventLog {
    var delivered: [String] {
        all.compactMap { if case .delivered(let id, _) = $0 { id } else { nil } }
    }
    var retries: [(attempt: Int, delay: TimeInterval)] {
        all.compactMap { if case .retrying(_, let attempt, _, let delay) = $0 { (attempt, delay) } else { nil } }
    }
    var damaged: [String] {
        all.compactMap { if case .damaged(let file) = $0 { file } else { nil } }
    }
    var pauses: Int {
        all.filter { if case .paused = $0 { true } else { false } }.count
    }
}
