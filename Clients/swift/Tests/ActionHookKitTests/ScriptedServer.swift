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
        case .status(let status, let body, let headers):
            let response = HTTPURLResponse(url: request.url!, statusCode: status, httpVersion: "HTTP/1.1", headerFields: headers)!
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
    _ server: ScriptedServer, folder: URL, events: EventLog = EventLog(), maxQueuedReplies: Int = 1_000,
    maxQueueAge: TimeInterval = 86_400
) throws -> ActionHookClient {
    let configuration = ActionHookClient.Configuration(
        serverURL: URL(string: "https://actionhook.example.com")!, ingestKey: "ahk_test_key", directory: folder,
        maxQueuedReplies: maxQueuedReplies, maxQueueAge: maxQueueAge, retry: fastRetry)
    return try ActionHookClient(configuration: configuration, transport: server, onEvent: events.record)
}
