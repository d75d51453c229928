import ActionHookCore
import ActionHookStore
import Foundation
import Logging
import Postgres

/// Receives delivery events, for metrics.
public protocol DeliveryObserver: Sendable {
    /// An attempt ended: `result` is `delivered`, `retrying`, `dead` or `skipped`; `latency` is the
    /// time from due to the end of the attempt.
    func attemptFinished(channel: FollowUpChannel, result: String, latency: Double)
    /// The queue's state: follow-ups due now and the age of the oldest.
    func queueObserved(due: Int, oldestDueAge: Double)
    /// The worker looked at the queue and claimed `count` follow-ups (0: nothing was due).
    func claimed(count: Int)
}

/// How the worker paces itself.
public struct WorkerConfiguration: Sendable {
    /// Deliveries in flight at once, across all endpoints.
    public var concurrency: Int
    /// How long a claim is held before another worker may take it over.
    public var leaseSeconds: Int
    /// The longest wait between looks at the queue when no notification arrives.
    public var pollInterval: Duration
    /// How often expired leases are returned to the queue.
    public var sweepInterval: Duration
    /// When failed deliveries are retried.
    public var retryPolicy: RetryPolicy

    /// Creates a configuration.
    public init(
        concurrency: Int = 256, leaseSeconds: Int = 60, pollInterval: Duration = .seconds(1),
        sweepInterval: Duration = .seconds(5), retryPolicy: RetryPolicy = .standard
    ) {
        self.concurrency = concurrency
        self.leaseSeconds = leaseSeconds
        self.pollInterval = pollInterval
        self.sweepInterval = sweepInterval
        self.retryPolicy = retryPolicy
    }
}

/// Delivers follow-ups from the outbox: claims due rows under a lease, sends them concurrently,
/// and records each attempt, fenced by its attempt number.
///
/// One dedicated thread owns every (blocking) database call; sends run as async tasks, whose
/// results come back to that thread. `LISTEN/NOTIFY` wakes it early (``wake()``); the next due
/// time and the poll interval bound its sleep.
public final class OutboxWorker: @unchecked Sendable {
    // @unchecked: every mutable member below is read and written only with `condition` locked,
    // except `thread`, which only `start` and `stop` touch.
    let outbox: OutboxStore
    let apps: AppStore
    let webhooks: WebhookSender
    let apns: APNsSender
    let configuration: WorkerConfiguration
    let observer: (any DeliveryObserver)?
    let logger: Logger

    private let condition = NSCondition()
    private var woken = false
    private var stopping = false
    private var gracePeriod: Duration = .seconds(10)
    private var inFlight: [UUID: ClaimedFollowUp] = [:]
    private var completions: [Completion] = []
    /// Finished attempts whose recording failed because the database did not answer, kept to be
    /// recorded again while their leases last (touched by the worker thread only).
    private var unrecorded: [(attempt: FinishedAttempt, label: String, completion: Completion)] = []
    private var thread: Thread?
    private let finished = DispatchSemaphore(value: 0)
    private var appSettings: [String: (app: StoredApp?, loadedAt: ContinuousClock.Instant)] = [:]
    /// Apps changed since their settings were cached (`nil` in the set's place: every app).
    private var changedApps: Set<String>? = []

    struct Completion {
        var claim: ClaimedFollowUp
        var outcome: SendOutcome
        var startedAt: Date
        var duration: Duration
    }

    /// Creates a worker; it does nothing until ``start()``.
    public init(
        outbox: OutboxStore, apps: AppStore, webhooks: WebhookSender, apns: APNsSender,
        configuration: WorkerConfiguration, observer: (any DeliveryObserver)?, logger: Logger
    ) {
        self.outbox = outbox
        self.apps = apps
        self.webhooks = webhooks
        self.apns = apns
        self.configuration = configuration
        self.observer = observer
        self.logger = logger
    }

    /// Starts the worker thread.
    public func start() {
        precondition(thread == nil, "worker already started")
        let thread = Thread { [self] in
            run()
            finished.signal()
        }
        thread.name = "actionhook-outbox"
        self.thread = thread
        thread.start()
    }

    /// Forgets the cached settings of an app that changed (`nil`: of every app), so that a changed or
    /// re-enabled webhook endpoint is used from the next claim on.
    public func invalidate(appID: String?) {
        condition.lock()
        if let appID { changedApps?.insert(appID) } else { changedApps = nil }
        condition.unlock()
    }

    /// Looks at the queue now (new follow-ups were written).
    public func wake() {
        condition.lock()
        woken = true
        condition.signal()
        condition.unlock()
    }

    /// Stops claiming, lets deliveries in flight finish within `gracePeriod`, gives the rest back
    /// to the queue, and returns when the thread has ended.
    public func stop(gracePeriod: Duration) {
        guard thread != nil else { return }
        condition.lock()
        stopping = true
        self.gracePeriod = gracePeriod
        condition.signal()
        condition.unlock()
        finished.wait()
        thread = nil
    }

    private func run() {
        let clock = ContinuousClock()
        var lastSweep = clock.now - configuration.sweepInterval
        while true {
            condition.lock()
            let done = stopping
            let ready = completions
            completions = []
            let busy = inFlight.count
            condition.unlock()

            record(ready)
            if done { break }

            if clock.now - lastSweep >= configuration.sweepInterval {
                lastSweep = clock.now
                sweepAndObserve()
            }

            var wait = configuration.pollInterval
            let capacity = configuration.concurrency - busy
            if capacity > 0 {
                do {
                    let claims = try outbox.claim(limit: capacity, leaseSeconds: configuration.leaseSeconds)
                    observer?.claimed(count: claims.count)
                    launch(claims)
                    // A full batch means more may be due: look again at once.
                    if claims.count == capacity { continue }
                    if let next = try outbox.secondsUntilNextDue() {
                        wait = min(wait, .milliseconds(Int(next * 1000) + 1))
                    }
                } catch {
                    logger.warning("outbox unavailable", metadata: ["error": "\(error)"])
                    wait = .seconds(1)
                }
            }
            sleep(upTo: wait)
        }
        drain(clock: clock)
    }

    /// Waits for a wake-up, a completion, a stop, or `duration`.
    private func sleep(upTo duration: Duration) {
        let deadline = Date().addingTimeInterval(Double(duration.components.seconds) + Double(duration.components.attoseconds) / 1e18)
        condition.lock()
        while !woken && !stopping && completions.isEmpty {
            if !condition.wait(until: deadline) { break }
        }
        woken = false
        condition.unlock()
    }

    /// On stop: record what finishes within the grace period, then release the rest.
    ///
    /// Every claim this worker holds is, at any moment, in exactly one of three places: in flight, in
    /// `completions` (finished, to be recorded), or in `unrecorded` (finished, its record failed). The
    /// last step takes all three at once under the lock, so a send that ends while an earlier batch is
    /// being recorded is recorded too, and whatever is left is released: none is left `running`.
    private func drain(clock: ContinuousClock) {
        condition.lock()
        let deadline = clock.now + gracePeriod
        while !inFlight.isEmpty && clock.now < deadline {
            if completions.isEmpty {
                _ = condition.wait(until: Date().addingTimeInterval(0.05))
                continue
            }
            let ready = completions
            completions = []
            condition.unlock()
            record(ready)
            condition.lock()
        }
        let ready = completions
        completions = []
        let abandoned = Array(inFlight.values)
        inFlight.removeAll()
        condition.unlock()
        record(ready)
        // Finished but not recorded (the database did not answer): given back like the unfinished ones.
        let release = abandoned + unrecorded.map(\.completion.claim)
        unrecorded = []
        do {
            try outbox.release(release)
        } catch {
            logger.warning("could not release claims; their leases will expire", metadata: ["error": "\(error)"])
        }
        logger.info("outbox worker stopped", metadata: ["released": "\(release.count)"])
    }

    private func sweepAndObserve() {
        do {
            let swept = try outbox.sweepExpiredLeases()
            if swept > 0 { logger.notice("returned expired leases to the queue", metadata: ["count": "\(swept)"]) }
            let (due, age) = try outbox.queueStatistics()
            observer?.queueObserved(due: due, oldestDueAge: age)
        } catch {
            logger.warning("lease sweep failed", metadata: ["error": "\(error)"])
        }
    }

    /// Starts a claimed batch: what can be decided without sending (a push to a token known dead, an
    /// app without credentials) is recorded at once, in one statement; the rest is sent as tasks.
    private func launch(_ claims: [ClaimedFollowUp]) {
        var decided: [Completion] = []
        for claim in claims {
            if let outcome = launch(claim) {
                decided.append(Completion(claim: claim, outcome: outcome, startedAt: Date(), duration: .zero))
            }
        }
        record(decided)
    }

    /// Starts the send of one claim as a task, or returns the outcome decided without sending.
    private func launch(_ claim: ClaimedFollowUp) -> SendOutcome? {
        let startedAt = Date()
        let app: StoredApp?
        do {
            app = try settings(for: claim.appID)
        } catch {
            return .retryable(httpStatus: nil, errorClass: "database_error")
        }
        guard let app else {
            return .permanent(httpStatus: nil, errorClass: "app_deleted")
        }
        let id = claim.id.lowercasedString
        let task: @Sendable () async -> SendOutcome
        switch claim.channel {
        case .webhook:
            let ownURL = claim.payload.value(atPath: "url")?.stringValue
            guard let url = ownURL ?? app.definition.webhook?.url else {
                return .permanent(httpStatus: nil, errorClass: "no_webhook_url")
            }
            guard let secret = app.definition.webhook?.secret else {
                return .permanent(httpStatus: nil, errorClass: "no_webhook_secret")
            }
            if ownURL == nil && app.webhookDisabledAt != nil {
                return .permanent(httpStatus: nil, errorClass: "endpoint_disabled")
            }
            let body = (claim.payload.value(atPath: "body") ?? .null).jsonBytes
            task = { [webhooks] in await webhooks.send(id: id, url: url, body: body, secret: secret) }
        case .apns:
            guard let credentials = app.definition.apns else {
                return .permanent(httpStatus: nil, errorClass: "no_apns_credentials")
            }
            if claim.deviceDead {
                return .deadDevice(httpStatus: 0, reason: "device_dead")
            }
            let appID = claim.appID
            let payload = claim.payload
            task = { [apns] in await apns.send(id: id, appID: appID, credentials: credentials, payload: payload) }
        }
        condition.lock()
        inFlight[claim.id] = claim
        condition.unlock()
        Task(executorPreference: DeliveryExecutor.shared) { [self] in
            let started = ContinuousClock.now
            let outcome = await task()
            complete(Completion(claim: claim, outcome: outcome, startedAt: startedAt, duration: .now - started))
        }
        return nil
    }

    private func complete(_ completion: Completion) {
        condition.lock()
        // A claim released at shutdown is no longer ours to record.
        if inFlight.removeValue(forKey: completion.claim.id) != nil {
            completions.append(completion)
            condition.signal()
        }
        condition.unlock()
    }

    /// Stores the ends of finished attempts, all in one statement (fenced per row), after their side
    /// effects (a dead device, a gone endpoint); runs on the worker thread.
    private func record(_ completions: [Completion]) {
        var batch = unrecorded
        unrecorded = []
        for completion in completions {
            let (result, label) = attemptResult(completion)
            batch.append(
                (
                    FinishedAttempt(
                        claim: completion.claim, result: result, startedAt: completion.startedAt,
                        duration: completion.duration), label, completion
                ))
        }
        guard !batch.isEmpty else { return }
        let recorded: Set<UUID>?
        do {
            recorded = try outbox.finish(batch.map(\.attempt))
        } catch {
            logger.warning("could not record attempts", metadata: ["error": "\(error)", "count": "\(batch.count)"])
            if let error = error as? PostgresError,
                error.isConnectionError || error.kind == .timedOut || error.kind == .poolTimeout
            {
                // The database is away: keep them and record them when it answers again, as long as
                // their leases last (fenced per row, so a late record changes nothing it should not).
                // Past the lease, the sweep hands them out again: at least once either way.
                let now = Date()
                unrecorded = batch.filter {
                    now.timeIntervalSince($0.completion.startedAt) < Double(configuration.leaseSeconds)
                }
                if unrecorded.count == batch.count { return }
            }
            recorded = nil
        }
        // Kept ones are counted once, when they are recorded in the end.
        let kept = Set(unrecorded.map(\.completion.claim.id))
        for (_, label, completion) in batch where !kept.contains(completion.claim.id) {
            var label = label
            let claim = completion.claim
            if let recorded, !recorded.contains(claim.id) {
                label = "lease_lost"
                logger.notice("attempt result discarded: the claim was taken over", metadata: ["followup": "\(claim.id)"])
            } else if recorded == nil {
                label = "unrecorded"
            }
            let latency = claim.lateness + Double(completion.duration.components.seconds)
                + Double(completion.duration.components.attoseconds) / 1e18
            observer?.attemptFinished(channel: claim.channel, result: label, latency: latency)
        }
    }

    /// What an attempt's outcome is recorded as, and its metrics label, after its side effects.
    private func attemptResult(_ completion: Completion) -> (AttemptResult, String) {
        let claim = completion.claim
        switch completion.outcome {
        case .delivered(let status):
            return (.delivered(httpStatus: status), "delivered")
        case .retryable(let status, let errorClass):
            let delay = configuration.retryPolicy.delayMilliseconds(
                afterFailedAttempt: claim.attempt, unit: Double.random(in: 0..<1))
            return (
                .failed(httpStatus: status, errorClass: errorClass, retryAfterMilliseconds: delay),
                delay == nil ? "dead" : "retrying"
            )
        case .permanent(let status, let errorClass):
            return (.failed(httpStatus: status, errorClass: errorClass, retryAfterMilliseconds: nil), "dead")
        case .deadDevice(let status, let reason):
            if status == 0 { return (.skipped(reason: "device_dead"), "skipped") }
            if let token = claim.payload.value(atPath: "deviceToken")?.stringValue, !token.isEmpty {
                do {
                    try outbox.markDeviceDead(appID: claim.appID, token: token, reason: reason)
                } catch {
                    // The follow-up still ends dead; later pushes to the token are tried and fail again.
                    logger.warning("could not mark a device dead", metadata: ["error": "\(error)"])
                }
            }
            return (.failed(httpStatus: status, errorClass: reason, retryAfterMilliseconds: nil), "dead")
        case .endpointGone:
            // Only the app's own endpoint is disabled; a 410 from a rule's own URL ends that follow-up alone.
            if claim.payload.value(atPath: "url")?.stringValue == nil {
                do {
                    try outbox.disableWebhook(appID: claim.appID)
                } catch {
                    // Later deliveries reach the endpoint, get 410 again and try to disable it again.
                    logger.warning("could not disable a gone webhook endpoint", metadata: ["error": "\(error)"])
                }
                invalidateSettings(claim.appID)
            }
            return (.failed(httpStatus: 410, errorClass: "endpoint_gone", retryAfterMilliseconds: nil), "dead")
        }
    }

    private func settings(for appID: String) throws -> StoredApp? {
        condition.lock()
        let changed = changedApps
        changedApps = []
        condition.unlock()
        if let changed { changed.forEach(invalidateSettings) } else { appSettings.removeAll() }
        if let cached = appSettings[appID], ContinuousClock.now - cached.loadedAt < .seconds(5) { return cached.app }
        let app = try apps.app(appID)
        appSettings[appID] = (app, ContinuousClock.now)
        return app
    }

    private func invalidateSettings(_ appID: String) {
        appSettings[appID] = nil
    }
}
