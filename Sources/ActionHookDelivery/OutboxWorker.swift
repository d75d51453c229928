import ActionHookCore
import Foundation
import Locks
import Logging

/// Receives delivery events, for metrics.
public protocol DeliveryObserver: Sendable {
    /// An attempt ended; `latency` is the time from due to the end of the attempt.
    func attemptFinished(channel: FollowUpChannel, result: DeliveryResultLabel, latency: Double)
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

/// Delivers follow-ups from the outbox: claims due rows under a lease, sends them concurrently, and
/// records each attempt, fenced by its attempt number.
///
/// The loop: one dedicated thread makes every (blocking) outbox call; sends run as tasks, whose ends
/// come back to that thread through ``Shared``. What to send is decided by ``DeliveryPlan``, how an
/// attempt is recorded by ``AttemptPolicy`` (both pure, in the domain); this type only moves claims
/// between the outbox, the senders and the records. It sleeps until a wake-up (``wake()``: new
/// follow-ups were written), a send ending, the next due time or the poll interval.
public final class OutboxWorker: Sendable {
    let outbox: any Outbox
    let webhooks: WebhookSender
    let apns: APNsSender
    let configuration: WorkerConfiguration
    let policy: AttemptPolicy
    let observer: (any DeliveryObserver)?
    let logger: Logger
    private let background = BackgroundLoop("actionhook-outbox", Shared(), loop: \.loop)
    private var shared: Monitor<Shared> { background.state }

    /// What the worker's thread shares with the sends' tasks and its callers. Every claim the worker
    /// holds is, at any moment, in exactly one place: `inFlight` (being sent), `completions` (sent,
    /// to be recorded), `unsent` (its send found the database away and sent nothing), or the thread's own
    /// `unplanned` (its app's settings could not be read, or it was unsent) or `unrecorded` (its record
    /// failed); the last two are kept while their lease lasts.
    struct Shared {
        var loop = LoopState()
        var inFlight: [UUID: ClaimedFollowUp] = [:]
        var completions: [Completion] = []
        var unsent: [(claim: ClaimedFollowUp, claimedAt: ContinuousClock.Instant)] = []
        var changes = SettingsChanges.none
    }

    /// A send that ended, with how it is to be recorded.
    struct Completion: Sendable {
        var attempt: FinishedAttempt
        var record: AttemptRecord
    }

    /// Creates a worker; it does nothing until ``start()``.
    public init(
        outbox: any Outbox, webhooks: WebhookSender, apns: APNsSender, configuration: WorkerConfiguration,
        observer: (any DeliveryObserver)?, logger: Logger
    ) {
        self.outbox = outbox
        self.webhooks = webhooks
        self.apns = apns
        self.configuration = configuration
        policy = AttemptPolicy(retryPolicy: configuration.retryPolicy)
        self.observer = observer
        self.logger = logger
    }

    /// Starts the worker's thread.
    public func start() {
        background.start { [self] _ in run() }
    }

    /// Forgets the cached settings of an app that changed (`nil`: of every app), so that a changed or
    /// re-enabled webhook endpoint is used from the next claim on.
    public func invalidate(appID: String?) {
        shared.withLock { $0.changes.add(appID) }
    }

    /// Looks at the queue now (new follow-ups were written).
    public func wake() {
        background.wake()
    }

    /// Stops claiming, lets deliveries in flight finish within `gracePeriod`, gives the rest back to
    /// the queue, and returns when the worker's thread has ended.
    public func stop(gracePeriod: Duration) {
        background.stop(gracePeriod: gracePeriod)
    }

    /// What only the worker's thread touches.
    private struct ThreadState {
        var settings = DeliverySettingsCache()
        var unrecorded: [Completion] = []
        var unplanned: [(claim: ClaimedFollowUp, claimedAt: ContinuousClock.Instant)] = []
        /// When held claims (`unplanned`) are planned again: once a second while the database is away.
        var replanAt = ContinuousClock.now
    }

    private func run() {
        var local = ThreadState()
        let clock = ContinuousClock()
        var nextSweep = clock.now
        while true {
            let (ready, unsent, busy, changes, running) = shared.withLock { shared in
                defer {
                    shared.completions = []
                    shared.unsent = []
                    shared.changes = .none
                }
                return (
                    shared.completions, shared.unsent, shared.inFlight.count, shared.changes,
                    shared.loop.takeWakeUp()
                )
            }
            local.settings.apply(changes)
            local.unplanned += unsent
            record(ready, &local)
            if !running { break }

            if clock.now >= nextSweep {
                nextSweep = clock.now + configuration.sweepInterval
                sweepAndObserve()
            }

            var wait = configuration.pollInterval
            if !local.unplanned.isEmpty {
                // Claims held while the database did not give their settings or their provider token:
                // planned again once a second while their lease lasts; past it, the sweep hands them out again.
                if clock.now >= local.replanAt {
                    let held = local.unplanned.filter {
                        clock.now - $0.claimedAt < .seconds(configuration.leaseSeconds)
                    }
                    local.unplanned = []
                    local.replanAt = clock.now + .seconds(1)
                    launch(held, &local)
                }
                if !local.unplanned.isEmpty { wait = min(wait, max(local.replanAt - clock.now, .milliseconds(1))) }
            }
            let capacity = configuration.concurrency - busy - local.unplanned.count
            if capacity > 0 {
                do {
                    let claimedAt = clock.now
                    let claims = try outbox.claim(limit: capacity, leaseSeconds: configuration.leaseSeconds)
                    observer?.claimed(count: claims.count)
                    launch(claims.map { ($0, claimedAt) }, &local)
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
            shared.wait(until: clock.now + wait, for: { $0.loop.mustWake || !$0.completions.isEmpty }, then: { _ in })
        }
        drain(&local, clock: clock)
    }

    /// On stop: records what finishes within the grace period, then releases the rest. The last step
    /// takes the completions and the claims in flight at once under the lock, so a send that ends while
    /// an earlier batch is being recorded is recorded too, and every other claim is released: none is
    /// left `running`, however slow the machine.
    private func drain(_ local: inout ThreadState, clock: ContinuousClock) {
        let deadline = clock.now + shared.withLock { $0.loop.gracePeriod }
        while clock.now < deadline {
            let (ready, idle) = shared.wait(
                until: deadline, for: { !$0.completions.isEmpty || $0.inFlight.isEmpty },
                then: { shared -> ([Completion], Bool) in
                    defer { shared.completions = [] }
                    return (shared.completions, shared.inFlight.isEmpty)
                })
            record(ready, &local)
            if idle { break }
        }
        let (ready, abandoned, unsent) = shared.withLock { shared in
            defer {
                shared.completions = []
                shared.unsent = []
                shared.inFlight = [:]
            }
            return (shared.completions, Array(shared.inFlight.values), shared.unsent.map(\.claim))
        }
        record(ready, &local)
        // Finished but not recorded: given back like the unfinished ones, which may have reached their
        // receiver too. Never sent (the database did not give their settings or token): given back uncounted.
        let released = abandoned + local.unrecorded.map(\.attempt.claim)
        let held = unsent + local.unplanned.map(\.claim)
        local.unrecorded = []
        local.unplanned = []
        do {
            try outbox.release(released, unsent: held)
        } catch {
            logger.warning("could not release claims; their leases will expire", metadata: ["error": "\(error)"])
        }
        logger.info("outbox worker stopped", metadata: ["released": "\(released.count + held.count)"])
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

    /// Starts a claimed batch: what is decided without sending (a push to a token known dead, an app
    /// without credentials) is recorded at once, in one statement; the rest is sent as tasks. A claim
    /// whose app's settings the database did not give (it is away) is held to be planned again: that
    /// is no attempt of the delivery, and recording it as a failed one would spend a step of the
    /// receiver's retry schedule (the second one waits five minutes) on the database's outage.
    private func launch(
        _ claims: [(claim: ClaimedFollowUp, claimedAt: ContinuousClock.Instant)], _ local: inout ThreadState
    ) {
        var decided: [Completion] = []
        for (claim, claimedAt) in claims {
            let startedAt = Date()
            let plan: DeliveryPlan
            do {
                plan = DeliveryPlan.plan(claim, settings: try local.settings.settings(for: claim.appID, from: outbox))
            } catch StoreError.unavailable {
                local.unplanned.append((claim, claimedAt))
                continue
            } catch {
                let record = policy.record(
                    claim, outcome: .retryable(httpStatus: nil, errorClass: "database_error"),
                    jitterUnit: Double.random(in: 0..<1))
                decided.append(Completion(attempt: finished(claim, record, startedAt, .zero), record: record))
                continue
            }
            if let record = policy.record(claim, unsent: plan) {
                decided.append(Completion(attempt: finished(claim, record, startedAt, .zero), record: record))
                continue
            }
            send(claim, plan, startedAt: startedAt, claimedAt: claimedAt)
        }
        record(decided, &local)
    }

    private func send(
        _ claim: ClaimedFollowUp, _ plan: DeliveryPlan, startedAt: Date, claimedAt: ContinuousClock.Instant
    ) {
        shared.withLock { $0.inFlight[claim.id] = claim }
        let id = claim.id.lowercasedString
        Task(executorPreference: DeliveryExecutor.shared) { [self] in
            let started = ContinuousClock.now
            let outcome: SendOutcome
            switch plan {
            case .webhook(let url, let body, let secret):
                outcome = await webhooks.send(id: id, url: url, body: body, secret: secret)
            case .push(let credentials, let payload):
                outcome = await apns.send(id: id, appID: claim.appID, credentials: credentials, payload: payload)
            case .skip, .fail:
                preconditionFailure("a plan that sends nothing is recorded without a task")
            }
            if outcome == .notSent {
                // No attempt: held by the thread and planned again once the database answers.
                shared.withLock { shared in
                    if shared.inFlight.removeValue(forKey: claim.id) != nil {
                        shared.unsent.append((claim, claimedAt))
                    }
                }
                return
            }
            let record = policy.record(claim, outcome: outcome, jitterUnit: Double.random(in: 0..<1))
            let completion = Completion(
                attempt: finished(claim, record, startedAt, .now - started), record: record)
            shared.withLockWakingAll { shared in
                // A claim released at shutdown is no longer ours to record.
                if shared.inFlight.removeValue(forKey: claim.id) != nil { shared.completions.append(completion) }
            }
        }
    }

    private func finished(
        _ claim: ClaimedFollowUp, _ record: AttemptRecord, _ startedAt: Date, _ duration: Duration
    ) -> FinishedAttempt {
        FinishedAttempt(claim: claim, result: record.result, startedAt: startedAt, duration: duration)
    }

    /// Stores the ends of finished attempts, all in one statement (fenced per row), after their side
    /// effects (a dead device, a gone endpoint); runs on the worker's thread.
    private func record(_ completions: [Completion], _ local: inout ThreadState) {
        for completion in completions {
            if let effect = completion.record.sideEffect { perform(effect, for: completion.attempt.claim, &local) }
        }
        let batch = local.unrecorded + completions
        local.unrecorded = []
        guard !batch.isEmpty else { return }
        let recorded: Set<UUID>?
        do {
            recorded = try outbox.finish(batch.map(\.attempt))
        } catch {
            logger.warning("could not record attempts", metadata: ["error": "\(error)", "count": "\(batch.count)"])
            if case .unavailable? = error as? StoreError {
                // The database is away: keep them and record them when it answers again, as long as
                // their leases last (fenced per row, so a late record changes nothing it should not).
                // Past the lease, the sweep hands them out again: at least once either way.
                let now = Date()
                local.unrecorded = batch.filter {
                    now.timeIntervalSince($0.attempt.startedAt) < Double(configuration.leaseSeconds)
                }
                if local.unrecorded.count == batch.count { return }
            }
            recorded = nil
        }
        // Kept ones are counted once, when they are recorded in the end.
        let kept = Set(local.unrecorded.map(\.attempt.claim.id))
        for completion in batch where !kept.contains(completion.attempt.claim.id) {
            let claim = completion.attempt.claim
            var label = completion.record.label
            if let recorded, !recorded.contains(claim.id) {
                label = .leaseLost
                logger.notice(
                    "attempt result discarded: the claim was taken over", metadata: ["followup": "\(claim.id)"])
            } else if recorded == nil {
                label = .unrecorded
            }
            let duration = completion.attempt.duration
            let latency =
                claim.lateness + Double(duration.components.seconds)
                + Double(duration.components.attoseconds) / 1e18
            observer?.attemptFinished(channel: claim.channel, result: label, latency: latency)
        }
    }

    private func perform(_ effect: DeliverySideEffect, for claim: ClaimedFollowUp, _ local: inout ThreadState) {
        switch effect {
        case .markDeviceDead(let token, let reason):
            do {
                try outbox.markDeviceDead(appID: claim.appID, token: token, reason: reason)
            } catch {
                // The follow-up still ends dead; later pushes to the token are tried and fail again.
                logger.warning("could not mark a device dead", metadata: ["error": "\(error)"])
            }
        case .disableWebhook:
            do {
                try outbox.disableWebhook(appID: claim.appID)
            } catch {
                // Later deliveries reach the endpoint, get 410 again and try to disable it again.
                logger.warning("could not disable a gone webhook endpoint", metadata: ["error": "\(error)"])
            }
            local.settings.apply(.apps([claim.appID]))
        }
    }
}

/// Apps whose settings changed since the worker last looked.
enum SettingsChanges: Sendable, Equatable {
    /// None.
    case none
    /// These apps.
    case apps(Set<String>)
    /// Every app (after a reconnection, when notifications may have been missed).
    case all

    /// Adds an app (`nil`: every app).
    mutating func add(_ appID: String?) {
        guard let appID else {
            self = .all
            return
        }
        switch self {
        case .none: self = .apps([appID])
        case .apps(var apps):
            apps.insert(appID)
            self = .apps(apps)
        case .all: break
        }
    }
}

/// The delivery settings of apps, read from the outbox and kept five seconds (or until the app changes).
struct DeliverySettingsCache {
    /// How long settings are kept without a change notice.
    static let lifetime = Duration.seconds(5)
    private var entries: [String: (settings: DeliverySettings?, loadedAt: ContinuousClock.Instant)] = [:]

    /// Forgets what changed.
    mutating func apply(_ changes: SettingsChanges) {
        switch changes {
        case .none: break
        case .apps(let apps): for app in apps { entries[app] = nil }
        case .all: entries = [:]
        }
    }

    /// The settings of an app, from the cache while fresh, else from `outbox`.
    mutating func settings(
        for appID: String, from outbox: any Outbox, now: ContinuousClock.Instant = .now
    ) throws -> DeliverySettings? {
        if let cached = entries[appID], now - cached.loadedAt < Self.lifetime { return cached.settings }
        let settings = try outbox.deliverySettings(appID: appID)
        entries[appID] = (settings, now)
        return settings
    }
}
