import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// What happened to a queued reply, reported to the app's `onEvent` callback.
///
/// Events carry the reply's `responseId` and statuses, never its text, `userInfo` or the ingest key.
public enum ActionHookEvent: Sendable, Equatable {
    /// The server stored the reply (202) or had stored it before (200, a replay). It left the queue.
    case delivered(responseId: String, status: Int)
    /// The server refused the reply for good (400, 401, 410, 413, 415, 422). It left the queue.
    case refused(responseId: String, status: Int, problem: Problem)
    /// The reply was removed without being sent.
    case dropped(responseId: String, reason: DropReason)
    /// Sending failed and will be tried again after `delay` seconds; `status` is nil for a network error.
    case retrying(responseId: String, attempt: Int, status: Int?, delay: TimeInterval)
    /// The reply could not be written to the queue (the disk is full or the folder cannot be written).
    case notQueued(responseId: String)
}

/// Why a reply was dropped from the queue unsent.
public enum DropReason: Sendable, Equatable {
    /// The queue held `maxQueuedReplies`; the oldest reply made room.
    case queueFull
    /// The reply waited longer than `maxQueueAge`.
    case queuedTooLong
    /// The reply is older than its category's `maxReplyAgeSeconds`: the server would refuse it with 410.
    case expired(maxReplyAgeSeconds: Int)
}

/// An error of the category fetch.
public enum ActionHookClientError: Error, Sendable, Equatable {
    /// The server refused the request (for example 401: a wrong ingest key).
    case refused(status: Int, problem: Problem)
    /// The server could not be reached or failed, and no categories were kept from an earlier fetch.
    case unavailable
}

/// The app side of ActionHook: forwards every notification reply to the server, exactly once stored, and
/// fetches the app's categories.
///
/// A reply is written to an on-device queue before `forward` returns (or calls its completion handler),
/// then sent in the background, oldest first, with its `responseId` as the `Idempotency-Key`: retried with
/// exponential backoff and jitter until the server answers 202 or 200, or refuses it for good. What stays
/// queued is sent again by `resume()` on the next launch.
public final class ActionHookClient: Sendable {
    /// Where the server is, the app's ingest key, and where and how long replies are kept.
    public struct Configuration: Sendable {
        /// The server's base URL, e.g. `https://actionhook.example.com`.
        public var serverURL: URL
        /// The app's ingest key (`ahk_…`).
        public var ingestKey: String
        /// The folder for the queue, the cached categories and the device token. Choose a folder in an App
        /// Group container (`Configuration.appGroupDirectory`) to share the queue with an extension.
        public var directory: URL
        /// The most replies kept; when full, the oldest is dropped and reported.
        public var maxQueuedReplies: Int
        /// The longest a reply is kept unsent; older ones are dropped and reported.
        public var maxQueueAge: TimeInterval
        /// The backoff between attempts.
        public var retry: RetryPolicy
        /// The timeout of one request.
        public var requestTimeout: TimeInterval

        /// A configuration; the folder defaults to `Application Support/ActionHook`.
        public init(
            serverURL: URL, ingestKey: String, directory: URL? = nil, maxQueuedReplies: Int = 1_000,
            maxQueueAge: TimeInterval = 7 * 86_400, retry: RetryPolicy = RetryPolicy(), requestTimeout: TimeInterval = 30
        ) {
            precondition(maxQueuedReplies > 0, "the queue must hold at least one reply")
            self.serverURL = serverURL
            self.ingestKey = ingestKey
            self.directory =
                directory
                ?? FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
                .appendingPathComponent("ActionHook", isDirectory: true)
            self.maxQueuedReplies = maxQueuedReplies
            self.maxQueueAge = maxQueueAge
            self.retry = retry
            self.requestTimeout = requestTimeout
        }

        #if canImport(Darwin)
            /// `ActionHook` in the App Group container `identifier`, shared by the app and its extensions;
            /// nil when the app lacks the App Group entitlement.
            public static func appGroupDirectory(_ identifier: String) -> URL? {
                FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: identifier)?
                    .appendingPathComponent("ActionHook", isDirectory: true)
            }
        #endif
    }

    /// The configuration.
    public let configuration: Configuration
    /// The on-device queue.
    public let queue: ReplyQueue
    private let courier: Courier
    private let state: Guarded<State>
    private let categoriesFile: URL
    private let deviceTokenFile: URL

    private struct State {
        var deviceToken: String?
        var categories: CategorySet?
    }

    /// Opens the queue in the configured folder (creating it) and reads what earlier launches kept. Call
    /// `resume()` once the app has launched to send what is still queued.
    public init(
        configuration: Configuration, transport: any HTTPTransport = URLSessionTransport(),
        onEvent: @escaping @Sendable (ActionHookEvent) -> Void = { _ in }
    ) throws {
        self.configuration = configuration
        queue = try ReplyQueue(directory: configuration.directory.appendingPathComponent("queue", isDirectory: true))
        categoriesFile = configuration.directory.appendingPathComponent("categories.json")
        deviceTokenFile = configuration.directory.appendingPathComponent("device-token")
        let decoder = JSONDecoder()
        let categories = (try? Data(contentsOf: categoriesFile)).flatMap { try? decoder.decode(CategorySet.self, from: $0) }
        let token = (try? String(contentsOf: deviceTokenFile, encoding: .utf8)).flatMap { $0.isEmpty ? nil : $0 }
        let state = Guarded(State(deviceToken: token, categories: categories))
        self.state = state
        courier = Courier(
            configuration: configuration, queue: queue, transport: transport, onEvent: onEvent,
            replyAgeLimit: { category in state.withLock { $0.categories?.category(category)?.maxReplyAgeSeconds } })
    }

    // MARK: Device token

    /// The device token (hex) sent with each reply; kept on disk for the next launch.
    public var deviceToken: String? {
        state.withLock { $0.deviceToken }
    }

    /// Sets the device token from `didRegisterForRemoteNotificationsWithDeviceToken`.
    public func setDeviceToken(_ token: Data) {
        setDeviceToken(DeviceToken.hex(token))
    }

    /// Sets the device token as hex (nil forgets it).
    public func setDeviceToken(_ hex: String?) {
        state.withLock { $0.deviceToken = hex }
        try? Data((hex ?? "").utf8).write(to: deviceTokenFile, options: .atomic)
    }

    // MARK: Forwarding

    /// Queues `reply` on disk and starts sending it; returns once it is on disk. A reply without a device
    /// token gets the one set with `setDeviceToken`.
    @discardableResult
    public func enqueue(_ reply: Reply) throws -> QueuedReply {
        var reply = reply
        if reply.deviceToken == nil { reply.deviceToken = deviceToken }
        let entry = try queue.append(reply)
        // The cap holds as soon as a reply is added, not only when the send loop next looks: during a
        // long Retry-After the folder would otherwise grow past it.
        courier.trimToCap()
        courier.kick()
        return entry
    }

    /// Queues `reply`, then calls `completionHandler` at once: it is never held for the network. A reply
    /// that cannot be written is reported as `.notQueued`.
    public func forward(_ reply: Reply, completionHandler: @escaping @Sendable () -> Void) {
        forward(reply)
        completionHandler()
    }

    /// Queues `reply` and starts sending it. A reply that cannot be written is reported as `.notQueued`.
    public func forward(_ reply: Reply) {
        do {
            try enqueue(reply)
        } catch {
            courier.report(.notQueued(responseId: reply.responseId))
        }
    }

    /// Starts sending what earlier launches left queued. Call it once the app has launched.
    public func resume() {
        courier.kick()
    }

    /// Sends everything queued now, waiting through retries, and returns when the queue is empty.
    public func drain() async {
        await courier.drain()
    }

    // MARK: Categories

    /// The categories from the last fetch kept on disk, if any.
    public var cachedCategories: CategorySet? {
        state.withLock { $0.categories }
    }

    /// Fetches `GET /v1/categories` with the ingest key, sending the kept set's `ETag` as `If-None-Match`.
    /// A new set is kept on disk. When the server cannot be reached or fails, the kept set is answered
    /// (origin `.cached`), so an app launched offline still has its buttons.
    public func fetchCategories() async throws -> CategorySet {
        let cached = cachedCategories
        var request = URLRequest(url: configuration.serverURL.appendingPathComponent("v1/categories"))
        request.timeoutInterval = configuration.requestTimeout
        request.setValue("Bearer " + configuration.ingestKey, forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.cachePolicy = .reloadIgnoringLocalCacheData
        if let etag = cached?.etag { request.setValue(etag, forHTTPHeaderField: "If-None-Match") }

        let data: Data
        let response: HTTPURLResponse
        do {
            (data, response) = try await courier.transport.send(request)
        } catch {
            return try fallback(cached)
        }
        switch response.statusCode {
        case 200:
            struct Page: Decodable { var items: [CategoryDefinition] }
            guard let page = try? JSONDecoder().decode(Page.self, from: data) else { return try fallback(cached) }
            let set = CategorySet(
                categories: page.items.sorted { $0.identifier < $1.identifier },
                etag: response.value(forHTTPHeaderField: "ETag"), origin: .fetched)
            state.withLock { $0.categories = set }
            if let encoded = try? JSONEncoder().encode(set) { try? encoded.write(to: categoriesFile, options: .atomic) }
            return set
        case 304 where cached != nil:
            var set = cached!
            set.origin = .notModified
            return set
        case 400..<500 where response.statusCode != 408 && response.statusCode != 429:
            let problem = (try? JSONDecoder().decode(Problem.self, from: data)) ?? Problem()
            throw ActionHookClientError.refused(status: response.statusCode, problem: problem)
        default:
            return try fallback(cached)
        }
    }

    private func fallback(_ cached: CategorySet?) throws -> CategorySet {
        guard var cached else { throw ActionHookClientError.unavailable }
        cached.origin = .cached
        return cached
    }
}

/// Sends the queue, one reply at a time, oldest first; one loop runs at a time.
final class Courier: Sendable {
    let configuration: ActionHookClient.Configuration
    let queue: ReplyQueue
    let transport: any HTTPTransport
    private let onEvent: @Sendable (ActionHookEvent) -> Void
    /// The `maxReplyAgeSeconds` of a category, from the categories kept on disk.
    private let replyAgeLimit: @Sendable (String) -> Int?
    private let loop = Guarded<Loop>(Loop())

    private struct Loop {
        var task: Task<Void, Never>?
        /// Cancelled by `kick()` to try again early; nil while the server asked to wait (`Retry-After`, 5xx).
        var interruptibleWait: Task<Void, Error>?
        var attempts: [String: Int] = [:]
        /// The reply being sent now; the cap never drops it (it may already be stored).
        var sending: String?
    }

    init(
        configuration: ActionHookClient.Configuration, queue: ReplyQueue, transport: any HTTPTransport,
        onEvent: @escaping @Sendable (ActionHookEvent) -> Void, replyAgeLimit: @escaping @Sendable (String) -> Int?
    ) {
        self.configuration = configuration
        self.queue = queue
        self.transport = transport
        self.onEvent = onEvent
        self.replyAgeLimit = replyAgeLimit
    }

    func report(_ event: ActionHookEvent) {
        onEvent(event)
    }

    /// Drops the oldest replies, reported as `.queueFull`, while the queue holds more than the cap; the
    /// reply being sent is kept.
    func trimToCap() {
        var entries = queue.entries()
        let sending = loop.withLock { $0.sending }
        entries.removeAll { $0.reply.responseId == sending }
        let keep = configuration.maxQueuedReplies - (sending == nil ? 0 : 1)
        while entries.count > max(0, keep) {
            drop(entries.removeFirst(), .queueFull)
        }
    }

    /// Starts the loop, or cuts short a wait that followed a network error (the app is active again).
    func kick() {
        loop.withLock { state in
            if state.task == nil {
                state.task = Task { await self.run() }
            } else {
                state.interruptibleWait?.cancel()
            }
        }
    }

    /// Runs the loop until the queue is empty.
    func drain() async {
        kick()
        while let task = loop.withLock({ $0.task }) {
            await task.value
        }
    }

    private enum Pass {
        case empty
        case wait(TimeInterval, interruptible: Bool)
    }

    private func run() async {
        while true {
            switch await pass() {
            case .empty:
                // The check and the hand-over happen under the lock: a reply queued after the check kicks a
                // new loop.
                let finished = loop.withLock { state -> Bool in
                    guard queue.count == 0 else { return false }
                    state.task = nil
                    return true
                }
                if finished { return }
            case .wait(let seconds, let interruptible):
                let wait = Task { try await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1_000_000_000)) }
                if interruptible { loop.withLock { $0.interruptibleWait = wait } }
                _ = try? await wait.value
                loop.withLock { $0.interruptibleWait = nil }
            }
        }
    }

    /// Sends queued replies in order until the queue is empty or one must wait.
    private func pass() async -> Pass {
        while true {
            guard let entry = nextEntry() else { return .empty }
            loop.withLock { $0.sending = entry.reply.responseId }
            let outcome = await send(entry.reply)
            loop.withLock { $0.sending = nil }
            switch outcome {
            case .delivered(let status):
                queue.remove(entry)
                loop.withLock { $0.attempts[entry.reply.responseId] = nil }
                onEvent(.delivered(responseId: entry.reply.responseId, status: status))
            case .refused(let status, let problem):
                queue.remove(entry)
                loop.withLock { $0.attempts[entry.reply.responseId] = nil }
                onEvent(.refused(responseId: entry.reply.responseId, status: status, problem: problem))
            case .retry(let status, let retryAfter):
                let attempt = loop.withLock { state -> Int in
                    state.attempts[entry.reply.responseId, default: 0] += 1
                    return state.attempts[entry.reply.responseId]!
                }
                let delay = configuration.retry.delay(attempt: attempt, retryAfter: retryAfter)
                onEvent(.retrying(responseId: entry.reply.responseId, attempt: attempt, status: status, delay: delay))
                return .wait(delay, interruptible: status == nil)
            }
        }
    }

    /// The oldest reply worth sending, after dropping what the caps and age limits rule out.
    private func nextEntry(now: Date = Date()) -> QueuedReply? {
        var entries = queue.entries()
        while entries.count > configuration.maxQueuedReplies {
            drop(entries.removeFirst(), .queueFull)
        }
        while let first = entries.first {
            if now.timeIntervalSince(first.queuedAt) > configuration.maxQueueAge {
                drop(entries.removeFirst(), .queuedTooLong)
            } else if let category = first.reply.categoryIdentifier, let limit = replyAgeLimit(category),
                now.timeIntervalSince(first.reply.respondedAt) > TimeInterval(limit)
            {
                drop(entries.removeFirst(), .expired(maxReplyAgeSeconds: limit))
            } else {
                return first
            }
        }
        return nil
    }

    private func drop(_ entry: QueuedReply, _ reason: DropReason) {
        queue.remove(entry)
        onEvent(.dropped(responseId: entry.reply.responseId, reason: reason))
    }

    private func send(_ reply: Reply) async -> DeliveryOutcome {
        var request = URLRequest(url: configuration.serverURL.appendingPathComponent("v1/responses"))
        request.httpMethod = "POST"
        request.timeoutInterval = configuration.requestTimeout
        request.setValue("Bearer " + configuration.ingestKey, forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Content-Type")
        request.setValue(reply.responseId, forHTTPHeaderField: "Idempotency-Key")
        request.httpBody = reply.ingestBody()
        do {
            let (body, response) = try await transport.send(request)
            return DeliveryOutcome.classify(
                status: response.statusCode, body: body,
                retryAfterHeader: response.value(forHTTPHeaderField: "Retry-After"))
        } catch {
            return .retry(status: nil, retryAfter: nil)
        }
    }
}

/// A value behind a lock.
final class Guarded<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched inside `withLock`, under `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
