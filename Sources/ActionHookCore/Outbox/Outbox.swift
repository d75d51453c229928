import Foundation

/// A follow-up claimed by a worker for one attempt.
public struct ClaimedFollowUp: Sendable {
    /// The owning app.
    public var appID: String
    /// The follow-up id: the `webhook-id` and `apns-id`.
    public var id: UUID
    /// The attempt number this claim owns; every later write is fenced by it.
    public var attempt: Int
    /// `webhook` or `apns`.
    public var channel: FollowUpChannel
    /// The rendered delivery.
    public var payload: JSONValue
    /// How late the claim is: claim time minus due time, in seconds.
    public var lateness: Double
    /// When the follow-up was due for this attempt (recorded with the attempt).
    public var dueAt: Date
    /// A push to a device token APNs already reported dead: recorded as skipped, never sent.
    public var deviceDead: Bool
    /// Where the claimed row version is, as the store knows it: the finish may reach the row by it. A
    /// row changed since is not found there, which the fence treats as a lost claim.
    public var row: String

    /// Creates a claim.
    public init(
        appID: String, id: UUID, attempt: Int, channel: FollowUpChannel, payload: JSONValue, lateness: Double,
        dueAt: Date = Date(timeIntervalSince1970: 0), deviceDead: Bool = false, row: String = ""
    ) {
        self.appID = appID
        self.id = id
        self.attempt = attempt
        self.channel = channel
        self.payload = payload
        self.lateness = lateness
        self.dueAt = dueAt
        self.deviceDead = deviceDead
        self.row = row
    }
}

/// How an attempt ended, as it is stored.
public enum AttemptResult: Sendable, Equatable {
    /// Delivered (2xx).
    case delivered(httpStatus: Int)
    /// Failed; retried after `retryAfterMilliseconds`, or dead when that is `nil`.
    case failed(httpStatus: Int?, errorClass: String, retryAfterMilliseconds: Int?)
    /// Not sent because the device token is known dead.
    case skipped(reason: String)
}

/// An attempt that ended, to be recorded.
public struct FinishedAttempt: Sendable {
    /// The claim the attempt ran under.
    public var claim: ClaimedFollowUp
    /// How it ended.
    public var result: AttemptResult
    /// When it started.
    public var startedAt: Date
    /// How long the send took.
    public var duration: Duration

    /// Creates a finished attempt.
    public init(claim: ClaimedFollowUp, result: AttemptResult, startedAt: Date, duration: Duration) {
        self.claim = claim
        self.result = result
        self.startedAt = startedAt
        self.duration = duration
    }
}

/// What the delivery worker needs of an app: where and how to deliver.
public struct DeliverySettings: Sendable, Equatable {
    /// The app's webhook endpoint and secret, if set.
    public var webhook: WebhookEndpoint?
    /// The app's APNs credentials, if set.
    public var apns: APNsCredentials?
    /// Whether the app's endpoint answered 410 Gone and is disabled until the webhook is updated.
    public var webhookDisabled: Bool

    /// Creates settings.
    public init(webhook: WebhookEndpoint?, apns: APNsCredentials?, webhookDisabled: Bool) {
        self.webhook = webhook
        self.apns = apns
        self.webhookDisabled = webhookDisabled
    }
}

/// The outbox as the delivery worker sees it: the port the store implements. Every write after a claim
/// is fenced by `(id, attempt, status = running)`, so a worker whose lease was taken over changes
/// nothing. Failures are ``StoreError``s (``StoreError/unavailable`` when the database is away).
public protocol Outbox: Sendable {
    /// Claims up to `limit` due follow-ups, oldest due first, for `leaseSeconds`.
    func claim(limit: Int, leaseSeconds: Int) throws -> [ClaimedFollowUp]
    /// Records the ends of attempts, each fenced by its attempt number; returns the ids recorded.
    func finish(_ attempts: [FinishedAttempt]) throws -> Set<UUID>
    /// Gives claims back without recording an attempt (a graceful stop): due again at once. `claims` may
    /// have reached their receiver (in flight, or sent and not recorded) and keep the attempt number their
    /// claim gave them; `unsent` ones were never sent (held while the database did not give what their send
    /// needed), so their claim does not count: the next one has the same number, and a later failure takes
    /// the same step of the retry schedule.
    func release(_ claims: [ClaimedFollowUp], unsent: [ClaimedFollowUp]) throws
    /// Returns follow-ups whose lease expired to the queue; returns how many.
    func sweepExpiredLeases() throws -> Int
    /// Seconds until the next follow-up is due (0 when one is due now), or `nil` when none waits.
    func secondsUntilNextDue() throws -> Double?
    /// Follow-ups due now and the age in seconds of the oldest.
    func queueStatistics() throws -> (due: Int, oldestDueAge: Double)
    /// Marks a device token dead: no further pushes go to it.
    func markDeviceDead(appID: String, token: String, reason: String) throws
    /// Disables an app's webhook endpoint after it answered 410 Gone.
    func disableWebhook(appID: String) throws
    /// The delivery settings of an app, or `nil` when it was deleted.
    func deliverySettings(appID: String) throws -> DeliverySettings?
}
