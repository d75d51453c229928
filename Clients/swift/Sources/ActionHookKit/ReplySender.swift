import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// Sends the queue, one reply at a time, oldest first; one loop runs at a time. Plain Swift: the system's
/// background uploads and background time come in through `BackgroundUploading` and `BackgroundActivity`.
final class ReplySender: Sendable {
    let configuration: ActionHookClient.Configuration
    let queue: ReplyQueue
    let transport: any HTTPTransport
    private let uploads: (any BackgroundUploading)?
    private let activity: (any BackgroundActivity)?
    private let identity: UserIdentity
    private let onEvent: @Sendable (ActionHookEvent) -> Void
    /// The `maxReplyAgeSeconds` of a category, from the categories kept on disk.
    private let replyAgeLimit: @Sendable (String) -> Int?
    private let state: Guarded<State>

    /// The shortest wait for a reply another process is sending; it doubles up to a second.
    private static let firstClaimPoll: TimeInterval = 0.025

    private struct State {
        var ingestKey: String
        var task: Task<Void, Never>?
        var wait: Task<Void, Error>?
        /// The current wait follows a network error (or an unreadable file): a kick may cut it short.
        var waitInterruptible = false
        /// A kick cut the last wait short: a network error on the attempt it started is not counted.
        var early = false
        var attempts: [UInt64: Int] = [:]
        /// When a reply was due to be tried again, so an early attempt that fails waits no longer than that.
        var retryAt: [UInt64: Date] = [:]
        /// The reply being sent now; the cap never drops it (it may already be stored).
        var sending: UInt64?
        /// The server refused the key: nothing is sent until `updateIngestKey` (or, when it refused the user
        /// token, until the app changes the user).
        var paused = false
        /// The pause is the user token's: `identify` and `signOut` end it too.
        var pausedForUserToken = false
        /// What the path monitor said last; nil while nobody said.
        var networkAvailable: Bool?
        var activity: BackgroundActivityToken?
        var claimPoll = ReplySender.firstClaimPoll
    }

    init(
        configuration: ActionHookClient.Configuration, queue: ReplyQueue, transport: any HTTPTransport,
        uploads: (any BackgroundUploading)?, activity: (any BackgroundActivity)?, identity: UserIdentity,
        onEvent: @escaping @Sendable (ActionHookEvent) -> Void, replyAgeLimit: @escaping @Sendable (String) -> Int?
    ) {
        self.configuration = configuration
        self.queue = queue
        self.transport = transport
        self.uploads = uploads
        self.activity = activity
        self.identity = identity
        self.onEvent = onEvent
        self.replyAgeLimit = replyAgeLimit
        state = Guarded(State(ingestKey: configuration.ingestKey))
    }

    func report(_ event: ActionHookEvent) {
        onEvent(event)
    }

    var ingestKey: String {
        state.withLock { $0.ingestKey }
    }

    // MARK: From the app

    /// A reply was queued: hold the cap, hand it to the system's uploads, start sending.
    func queued(_ entry: QueuedReply) {
        trimToCap()
        scheduleUpload(entry)
        kick()
    }

    func resume() {
        if let uploads { uploads.cancelAll(except: Set(queue.fileNames)) }
        kick()
    }

    func updateIngestKey(_ key: String) {
        state.withLock { state in
            state.ingestKey = key
            state.paused = false
            state.pausedForUserToken = false
            state.attempts = [:]
            state.retryAt = [:]
        }
        // Uploads the system holds carry the old key; the loop sends their replies now.
        uploads?.cancelAll(except: [])
        kick()
    }

    /// The app set a user token or signed out: a pause the user token caused ends, and what waits is sent.
    func identityChanged() {
        state.withLock { state in
            guard state.paused, state.pausedForUserToken else { return }
            state.paused = false
            state.pausedForUserToken = false
            state.attempts = [:]
            state.retryAt = [:]
        }
        kick()
    }

    func networkPathChanged(isSatisfied: Bool) {
        let cameBack = state.withLock { state -> Bool in
            let before = state.networkAvailable
            state.networkAvailable = isSatisfied
            return isSatisfied && before != true
        }
        if cameBack { kick() }
    }

    /// Drops the oldest replies, reported as `.queueFull`, while the queue holds more than the cap; the
    /// reply being sent is kept. Costs nothing in the queue's depth: the index knows the count and the oldest.
    func trimToCap() {
        while queue.count > configuration.maxQueuedReplies {
            guard var victim = queue.oldest() else { return }
            if victim == state.withLock({ $0.sending }) {
                guard let next = queue.sequence(after: victim) else { return }
                victim = next
            }
            if let responseId = queue.knownResponseId(victim) {
                drop(victim, responseId: responseId, .queueFull)
            } else {
                switch queue.load(victim) {
                case .reply(let entry, _): drop(victim, responseId: entry.reply.responseId, .queueFull)
                case .damaged: setAside(victim)
                case .gone, .unreadable: return
                }
            }
        }
    }

    /// Starts the loop, or cuts short a wait that followed a network error (the app is active again, or
    /// the network came back). While the path monitor says the network is gone, a wait is left alone.
    func kick() {
        let starting = state.withLock { $0.task == nil && !$0.paused }
        // Begun on the caller's thread (the notification delegate's), before it calls its completion handler.
        let token = starting ? beginActivity() : nil
        let unused = state.withLock { state -> BackgroundActivityToken? in
            if state.task == nil && !state.paused {
                state.activity = token
                state.task = Task { await self.run() }
                return nil
            }
            if state.waitInterruptible, state.networkAvailable != false, let wait = state.wait {
                state.early = true
                wait.cancel()
            }
            return token
        }
        if let unused { activity?.end(unused) }
    }

    /// Runs the loop until the queue is empty, the key is refused, or the calling task is cancelled.
    func drain() async {
        kick()
        await withTaskCancellationHandler {
            while !Task.isCancelled, let task = state.withLock({ $0.task }) {
                await task.value
            }
        } onCancel: {
            state.withLock { $0.task }?.cancel()
        }
    }

    // MARK: System-run uploads

    /// Reconciles a finished system-run upload with the queue: stored or refused for good removes the reply
    /// (reported by whichever of the upload and the app's own send removes it first); anything else leaves it
    /// to the app's own send, which is started.
    func reconcile(_ result: BackgroundUploadResult) {
        guard let sequence = ReplyQueue.sequence(of: result.name),
            case .answered(let status, let body, let retryAfter) = result.outcome
        else {
            kick()
            return
        }
        switch DeliveryOutcome.classify(status: status, body: body, retryAfterHeader: retryAfter) {
        case .delivered(let status):
            settle(sequence) { .delivered(responseId: $0, status: status) }
        case .refused(let status, let problem):
            settle(sequence) { .refused(responseId: $0, status: status, problem: problem) }
        case .keyRefused, .retry:
            // A 401 here may be an old key's: the app's own send finds out with the current one.
            kick()
        }
    }

    private func settle(_ sequence: UInt64, _ event: (String) -> ActionHookEvent) {
        guard case .reply(let entry, _) = queue.load(sequence) else { return }
        if queue.remove(sequence) { onEvent(event(entry.reply.responseId)) }
        forget(sequence)
    }

    private func scheduleUpload(_ entry: QueuedReply, now: Date = Date()) {
        guard let uploads, dropReason(entry, now: now) == nil else { return }
        uploads.schedule(
            BackgroundUpload(
                name: entry.fileName, file: queue.url(of: entry.sequence), url: ingestURL,
                headers: headers(for: entry, key: ingestKey, userToken: identity.held),
                earliestBeginDate: now.addingTimeInterval(configuration.backgroundUploadDelay)))
    }

    // MARK: The loop

    private enum Step {
        case empty
        case wait(TimeInterval, interruptible: Bool)
        case paused
        case stopped
    }

    private func run() async {
        while true {
            switch Task.isCancelled ? .stopped : await pass() {
            case .empty:
                // The check and the hand-over happen under the lock: a reply queued after the check kicks a new
                // loop. The folder is listed once more, for a reply another process queued unnoticed.
                let finished = state.withLock { state -> Bool in
                    guard queue.isEmptyAfterListing() else { return false }
                    state.task = nil
                    return true
                }
                if finished {
                    endActivity()
                    return
                }
            case .wait(let seconds, let interruptible):
                // Background time is not held through a long wait: the system-run upload covers it.
                if seconds >= 1 { endActivity() }
                await wait(seconds, interruptible: interruptible)
                if Task.isCancelled {
                    stop()
                    return
                }
                if state.withLock({ $0.activity == nil }) {
                    let token = beginActivity()
                    state.withLock { $0.activity = token }
                }
            case .paused, .stopped:
                stop()
                return
            }
        }
    }

    private func stop() {
        state.withLock { $0.task = nil }
        endActivity()
    }

    private func wait(_ seconds: TimeInterval, interruptible: Bool) async {
        let wait = state.withLock { state -> Task<Void, Error> in
            let wait = Task { try await Task.sleep(nanoseconds: UInt64(max(0, seconds) * 1_000_000_000)) }
            state.wait = wait
            state.waitInterruptible = interruptible
            return wait
        }
        await withTaskCancellationHandler {
            _ = try? await wait.value
        } onCancel: {
            wait.cancel()
        }
        state.withLock { state in
            state.wait = nil
            state.waitInterruptible = false
        }
    }

    /// Sends queued replies in order until the queue is empty or one must wait.
    private func pass() async -> Step {
        trimToCap()
        // The reply last retried with a new user token after a user-token 401: a second one pauses.
        var refreshedFor: UInt64?
        while true {
            if Task.isCancelled { return .stopped }
            if state.withLock({ $0.paused }) { return .paused }
            guard let sequence = queue.oldest() else { return .empty }
            let entry: QueuedReply
            let body: Data
            switch queue.load(sequence) {
            case .gone:
                continue
            case .damaged:
                setAside(sequence)
                continue
            case .unreadable:
                return .wait(configuration.retry.maximumDelay, interruptible: true)
            case .reply(let loaded, let data):
                entry = loaded
                body = data
            }
            let responseId = entry.reply.responseId
            if let reason = dropReason(entry) {
                drop(sequence, responseId: responseId, reason)
                continue
            }
            let userToken: String?
            do {
                userToken = try await identity.current()
            } catch {
                // The provider failed (its backend unreachable, most likely): tried again as after a network error.
                let early = state.withLock { state -> Bool in
                    defer { state.early = false }
                    return state.early
                }
                return retry(sequence, responseId: responseId, status: nil, retryAfter: nil, early: early)
            }
            switch queue.claim(sequence, lease: configuration.requestTimeout + 5) {
            case .heldElsewhere(let until):
                let poll = state.withLock { state -> TimeInterval in
                    defer { state.claimPoll = min(1, state.claimPoll * 2) }
                    return state.claimPoll
                }
                return .wait(min(poll, max(0.001, until.timeIntervalSinceNow)), interruptible: false)
            case .claimed:
                break
            }
            let generation = identity.generation
            let (early, key) = state.withLock { state -> (Bool, String) in
                defer { state.early = false }
                state.claimPoll = Self.firstClaimPoll
                state.sending = sequence
                return (state.early, state.ingestKey)
            }
            let outcome = await send(body, entry: entry, key: key, userToken: userToken)
            state.withLock { $0.sending = nil }
            switch outcome {
            case .delivered(let status):
                finish(sequence, .delivered(responseId: responseId, status: status))
            case .refused(let status, let problem):
                finish(sequence, .refused(responseId: responseId, status: status, problem: problem))
            case .keyRefused(let problem):
                queue.release(sequence)
                if problem.refusesUserToken, refreshedFor != sequence {
                    // The user token was refused: a new one from the provider is tried once before pausing.
                    refreshedFor = sequence
                    switch await identity.refresh(after: userToken) {
                    case .changed: continue
                    case .failed:
                        return retry(sequence, responseId: responseId, status: nil, retryAfter: nil, early: early)
                    case .unchanged: break
                    }
                }
                let (changed, first) = state.withLock { state -> (Bool, Bool) in
                    // A key or a user set while this request was out is tried before pausing.
                    guard state.ingestKey == key, identity.generation == generation else { return (true, false) }
                    defer {
                        state.paused = true
                        state.pausedForUserToken = problem.refusesUserToken
                    }
                    return (false, !state.paused)
                }
                if changed { continue }
                if first { onEvent(.paused(status: 401, problem: problem)) }
                return .paused
            case .retry(let status, let retryAfter):
                queue.release(sequence)
                return retry(sequence, responseId: responseId, status: status, retryAfter: retryAfter, early: early)
            }
        }
    }

    /// Schedules the next attempt of a reply that failed (`status` nil: no answer), reports `.retrying` and
    /// answers the wait.
    private func retry(_ sequence: UInt64, responseId: String, status: Int?, retryAfter: TimeInterval?, early: Bool)
        -> Step
    {
        if Task.isCancelled { return .stopped }
        let now = Date()
        let (attempt, delay) = state.withLock { state -> (Int, TimeInterval) in
            // An early attempt (the app forwarded again, the network came back) that meets the same
            // network error does not count: the schedule it interrupted stands.
            if early, status == nil, let due = state.retryAt[sequence], due > now,
                let attempt = state.attempts[sequence]
            {
                return (attempt, due.timeIntervalSince(now))
            }
            let attempt = state.attempts[sequence, default: 0] + 1
            let delay = configuration.retry.delay(attempt: attempt, retryAfter: retryAfter)
            state.attempts[sequence] = attempt
            state.retryAt[sequence] = now.addingTimeInterval(delay)
            return (attempt, delay)
        }
        onEvent(.retrying(responseId: responseId, attempt: attempt, status: status, delay: delay))
        return .wait(delay, interruptible: status == nil)
    }

    /// Why a reply must not be sent any more, if so.
    private func dropReason(_ entry: QueuedReply, now: Date = Date()) -> DropReason? {
        if now.timeIntervalSince(entry.queuedAt) > configuration.maxQueueAge { return .queuedTooLong }
        if let deadline = entry.reply.deadline, now > deadline { return .pastDeadline(deadline) }
        if let category = entry.reply.categoryIdentifier, let limit = replyAgeLimit(category),
            now.timeIntervalSince(entry.reply.respondedAt) > TimeInterval(limit)
        {
            return .expired(maxReplyAgeSeconds: limit)
        }
        return nil
    }

    private func finish(_ sequence: UInt64, _ event: ActionHookEvent) {
        if queue.remove(sequence) { onEvent(event) }
        queue.release(sequence)
        uploads?.cancel(name: ReplyQueue.fileName(of: sequence))
        forget(sequence)
    }

    private func drop(_ sequence: UInt64, responseId: String, _ reason: DropReason) {
        if queue.remove(sequence) { onEvent(.dropped(responseId: responseId, reason: reason)) }
        uploads?.cancel(name: ReplyQueue.fileName(of: sequence))
        forget(sequence)
    }

    private func setAside(_ sequence: UInt64) {
        let name = ReplyQueue.fileName(of: sequence)
        if queue.moveAside(sequence) { onEvent(.damaged(file: name)) }
        uploads?.cancel(name: name)
        forget(sequence)
    }

    private func forget(_ sequence: UInt64) {
        state.withLock { state in
            state.attempts[sequence] = nil
            state.retryAt[sequence] = nil
        }
    }

    // MARK: Background time

    private func beginActivity() -> BackgroundActivityToken? {
        activity?.begin(expired: { [weak self] in self?.expire() })
    }

    private func endActivity() {
        if let token = state.withLock({ state -> BackgroundActivityToken? in
            defer { state.activity = nil }
            return state.activity
        }) {
            activity?.end(token)
        }
    }

    /// The system will suspend the app: stop sending (the request in flight is cancelled, the reply stays
    /// queued and its system-run upload scheduled) and give the time back at once.
    private func expire() {
        state.withLock { $0.task }?.cancel()
        endActivity()
    }

    // MARK: Requests

    private var ingestURL: URL {
        configuration.serverURL.appendingPathComponent("v1/responses")
    }

    /// The headers of a reply's request: the `Idempotency-Key` is its `responseId` (which a signed reply's
    /// signature covers), and a signed reply carries the signature it was queued with.
    private func headers(for entry: QueuedReply, key: String, userToken: String?) -> [String: String] {
        var headers = [
            "Authorization": "Bearer " + key, "Content-Type": "application/json",
            "Idempotency-Key": entry.reply.responseId,
        ]
        if let userToken { headers[UserToken.headerName] = userToken }
        if let signature = entry.signature { headers[ReplySignature.header] = signature }
        return headers
    }

    private func send(_ body: Data, entry: QueuedReply, key: String, userToken: String?) async -> DeliveryOutcome {
        var request = URLRequest(url: ingestURL)
        request.httpMethod = "POST"
        request.timeoutInterval = configuration.requestTimeout
        for (name, value) in headers(for: entry, key: key, userToken: userToken) {
            request.setValue(value, forHTTPHeaderField: name)
        }
        request.httpBody = body
        do {
            let (answer, response) = try await transport.send(request)
            return DeliveryOutcome.classify(
                status: response.statusCode, body: answer,
                retryAfterHeader: response.value(forHTTPHeaderField: "Retry-After"))
        } catch {
            return .retry(status: nil, retryAfter: nil)
        }
    }
}
