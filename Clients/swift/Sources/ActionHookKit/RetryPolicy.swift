import Foundation

/// When a reply that could not be delivered is tried again: exponential backoff with jitter, capped.
public struct RetryPolicy: Sendable, Equatable {
    /// The wait before the first retry, before jitter.
    public var initialDelay: TimeInterval
    /// The factor between one wait and the next.
    public var multiplier: Double
    /// The longest wait, before jitter; also the longest `Retry-After` honoured.
    public var maximumDelay: TimeInterval
    /// The share of each wait that is random: the wait lies in `[delay × (1 − jitter), delay]`.
    public var jitter: Double

    /// Creates a policy; the defaults wait about 1, 2, 4, … seconds up to 5 minutes.
    public init(
        initialDelay: TimeInterval = 1, multiplier: Double = 2, maximumDelay: TimeInterval = 300, jitter: Double = 0.5
    ) {
        precondition(initialDelay >= 0 && multiplier >= 1 && maximumDelay >= initialDelay, "a retry policy must grow")
        precondition((0...1).contains(jitter), "jitter is a share between 0 and 1")
        self.initialDelay = initialDelay
        self.multiplier = multiplier
        self.maximumDelay = maximumDelay
        self.jitter = jitter
    }

    /// The wait before retry number `attempt` (1 for the first retry). `random` is a value in `0...1`.
    public func delay(attempt: Int, random: Double = Double.random(in: 0...1)) -> TimeInterval {
        let exponent = Double(max(0, attempt - 1))
        let base = min(maximumDelay, initialDelay * pow(multiplier, exponent))
        return base * (1 - jitter * random)
    }

    /// The wait after a failure: the server's `Retry-After` when it sent one (at most `maximumDelay`),
    /// else the backoff for `attempt`.
    public func delay(attempt: Int, retryAfter: TimeInterval?, random: Double = Double.random(in: 0...1))
        -> TimeInterval
    {
        if let retryAfter { return min(maximumDelay, retryAfter) }
        return delay(attempt: attempt, random: random)
    }
}

/// An `application/problem+json` answer (RFC 9457) as the server sends it; it never echoes the reply's values.
public struct Problem: Sendable, Equatable, Codable {
    /// The problem type URI.
    public var type: String?
    /// A short summary.
    public var title: String?
    /// What was wrong.
    public var detail: String?

    /// Creates a problem.
    public init(type: String? = nil, title: String? = nil, detail: String? = nil) {
        self.type = type
        self.title = title
        self.detail = detail
    }

    /// The type of the 403 a reply gets when its category, rule or notification requires replies signed by the
    /// device's key and its signature was absent or invalid: the server stored it as `unverified`, it acted on
    /// nothing, and sending it again as it is cannot change that.
    public static let replySignatureRequiredType = "https://actionhook.dev/problems/reply-signature-required"

    /// Whether this problem refuses the reply for its missing or invalid signature.
    public var requiresSignedReply: Bool {
        type == Self.replySignatureRequiredType
    }
}

/// What one attempt to send a reply came to.
public enum DeliveryOutcome: Sendable, Equatable {
    /// 202 (stored now) or 200 (stored before: a replay). The reply leaves the queue.
    case delivered(status: Int)
    /// A refusal of the reply itself that sending again cannot change: 400, 413, 415, 422 (its content), 410 (it
    /// is too old for its rule) and 403 `reply-signature-required` (unsigned or invalid where signed replies are
    /// required). The reply leaves the queue.
    case refused(status: Int, problem: Problem)
    /// 401: the ingest key (or, with `problem.refusesUserToken`, the user token) was refused, not the reply. The
    /// queue keeps it and pauses until a new key is set (a user-token refusal first asks the token provider).
    case keyRefused(problem: Problem)
    /// Worth another try: a network error, a timeout, 5xx, 409 (the first send is still in flight), 429,
    /// and any other status (a 403 of another type, too). `retryAfter` is the server's `Retry-After`, in seconds.
    case retry(status: Int?, retryAfter: TimeInterval?)

    /// The statuses after which a reply is removed without success (and 403 with the problem type
    /// `Problem.replySignatureRequiredType`).
    public static let permanentStatuses: Set<Int> = [400, 410, 413, 415, 422]

    /// Classifies an HTTP answer.
    public static func classify(status: Int, body: Data, retryAfterHeader: String?, now: Date = Date())
        -> DeliveryOutcome
    {
        switch status {
        case 200, 201, 202:
            return .delivered(status: status)
        case 401:
            return .keyRefused(problem: (try? JSONDecoder().decode(Problem.self, from: body)) ?? Problem())
        case _ where permanentStatuses.contains(status):
            let problem = (try? JSONDecoder().decode(Problem.self, from: body)) ?? Problem()
            return .refused(status: status, problem: problem)
        case 403:
            let problem = (try? JSONDecoder().decode(Problem.self, from: body)) ?? Problem()
            if problem.requiresSignedReply { return .refused(status: status, problem: problem) }
            return .retry(status: status, retryAfter: Timestamp.retryAfter(retryAfterHeader, now: now))
        default:
            return .retry(status: status, retryAfter: Timestamp.retryAfter(retryAfterHeader, now: now))
        }
    }
}
