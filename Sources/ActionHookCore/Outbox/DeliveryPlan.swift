/// What to do with a claimed follow-up, decided before anything is sent.
public enum DeliveryPlan: Sendable, Equatable {
    /// POST the body to the URL, signed with the secret.
    case webhook(url: String, body: [UInt8], secret: String)
    /// Push the payload through APNs with the app's credentials.
    case push(credentials: APNsCredentials, payload: JSONValue)
    /// Send nothing and record it skipped (a push to a device token APNs reported dead).
    case skip(reason: String)
    /// Send nothing: it failed before sending, for a reason retrying cannot fix.
    case fail(errorClass: String)

    /// Plans the delivery of `claim` with its app's settings (`nil`: the app was deleted).
    public static func plan(_ claim: ClaimedFollowUp, settings: DeliverySettings?) -> DeliveryPlan {
        guard let settings else { return .fail(errorClass: "app_deleted") }
        switch claim.channel {
        case .webhook:
            // A rule's own URL goes on even while the app's endpoint is disabled.
            let ownURL = claim.payload.value(atPath: "url")?.stringValue
            guard let url = ownURL ?? settings.webhook?.url else { return .fail(errorClass: "no_webhook_url") }
            guard let secret = settings.webhook?.secret else { return .fail(errorClass: "no_webhook_secret") }
            if ownURL == nil && settings.webhookDisabled { return .fail(errorClass: "endpoint_disabled") }
            return .webhook(url: url, body: (claim.payload.value(atPath: "body") ?? .null).jsonBytes, secret: secret)
        case .apns:
            guard let credentials = settings.apns else { return .fail(errorClass: "no_apns_credentials") }
            if claim.deviceDead { return .skip(reason: "device_dead") }
            return .push(credentials: credentials, payload: claim.payload)
        }
    }
}

/// An attempt's result as metrics count it.
public enum DeliveryResultLabel: String, Sendable, Equatable, CaseIterable {
    /// Delivered.
    case delivered
    /// Failed; tried again later.
    case retrying
    /// Failed for good.
    case dead
    /// Not sent (a dead device token).
    case skipped
    /// Finished after its lease was taken over: the result was not recorded.
    case leaseLost = "lease_lost"
    /// Its record failed and its lease ran out meanwhile: another attempt will be made.
    case unrecorded
}

/// A side effect an attempt's outcome calls for, beside recording it.
public enum DeliverySideEffect: Sendable, Equatable {
    /// APNs said the token is dead: mark it, so nothing more is pushed to it.
    case markDeviceDead(token: String, reason: String)
    /// The app's own endpoint answered 410 Gone: disable it until the webhook is updated.
    case disableWebhook
}

/// How an attempt is recorded, counted and followed up.
public struct AttemptRecord: Sendable, Equatable {
    /// What is stored.
    public var result: AttemptResult
    /// How metrics count it.
    public var label: DeliveryResultLabel
    /// What else to do.
    public var sideEffect: DeliverySideEffect?

    /// Creates a record.
    public init(result: AttemptResult, label: DeliveryResultLabel, sideEffect: DeliverySideEffect? = nil) {
        self.result = result
        self.label = label
        self.sideEffect = sideEffect
    }
}

/// Turns how a send went into what is recorded: retried on the retry policy's schedule, or dead.
public struct AttemptPolicy: Sendable {
    /// When failed deliveries are retried.
    public var retryPolicy: RetryPolicy

    /// Creates the policy.
    public init(retryPolicy: RetryPolicy) {
        self.retryPolicy = retryPolicy
    }

    /// The record of `claim`'s attempt that ended with `outcome`; `jitterUnit` in `0..<1` picks the
    /// retry's place within the jitter.
    public func record(_ claim: ClaimedFollowUp, outcome: SendOutcome, jitterUnit: Double) -> AttemptRecord {
        switch outcome {
        case .delivered(let status):
            return AttemptRecord(result: .delivered(httpStatus: status), label: .delivered)
        case .retryable(let status, let errorClass):
            let delay = retryPolicy.delayMilliseconds(afterFailedAttempt: claim.attempt, unit: jitterUnit)
            return AttemptRecord(
                result: .failed(httpStatus: status, errorClass: errorClass, retryAfterMilliseconds: delay),
                label: delay == nil ? .dead : .retrying)
        case .permanent(let status, let errorClass):
            return Self.dead(httpStatus: status, errorClass: errorClass)
        case .deadDevice(let status, let reason):
            var record = Self.dead(httpStatus: status, errorClass: reason)
            if let token = claim.payload.value(atPath: "deviceToken")?.stringValue, !token.isEmpty {
                record.sideEffect = .markDeviceDead(token: token, reason: reason)
            }
            return record
        case .endpointGone:
            var record = Self.dead(httpStatus: 410, errorClass: "endpoint_gone")
            // Only the app's own endpoint is disabled; a 410 from a rule's own URL ends that follow-up alone.
            if claim.payload.value(atPath: "url")?.stringValue == nil { record.sideEffect = .disableWebhook }
            return record
        case .notSent:
            // The worker never records this outcome: it holds the claim and sends it again
            // (`OutboxWorker.send`). Any other caller that records it records a failure retried on the schedule.
            let delay = retryPolicy.delayMilliseconds(afterFailedAttempt: claim.attempt, unit: jitterUnit)
            return AttemptRecord(
                result: .failed(httpStatus: nil, errorClass: "database_error", retryAfterMilliseconds: delay),
                label: delay == nil ? .dead : .retrying)
        }
    }

    /// The record of a plan that sent nothing.
    public func record(_ claim: ClaimedFollowUp, unsent plan: DeliveryPlan) -> AttemptRecord? {
        switch plan {
        case .skip(let reason): AttemptRecord(result: .skipped(reason: reason), label: .skipped)
        case .fail(let errorClass): Self.dead(httpStatus: nil, errorClass: errorClass)
        case .webhook, .push: nil
        }
    }

    static func dead(httpStatus: Int?, errorClass: String) -> AttemptRecord {
        AttemptRecord(
            result: .failed(httpStatus: httpStatus, errorClass: errorClass, retryAfterMilliseconds: nil), label: .dead)
    }
}
