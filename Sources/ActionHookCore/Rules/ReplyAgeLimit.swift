import Foundation

/// How old a reply may be when it arrives and still act.
///
/// A reply kept on the phone and retried (offline, app killed) can arrive long after the person
/// answered; for anything that opens, pays or confirms, acting on it then does harm. A reply's age is
/// `receivedAt − respondedAt` (the database's clock against the device's). A category sets the limit
/// and a rule may override it for the replies it takes. A reply older than the limit is stored with
/// outcome ``Outcome/expired`` and acts on nothing.
public struct ReplyAgeLimit: Sendable, Equatable {
    /// The limits a category or rule may set: a second to a year.
    public static let range = 1...31_536_000

    /// The oldest a reply may be, in seconds; nil: no limit.
    public var maxAgeSeconds: Int?
    /// Whether a reply without `respondedAt`, whose age cannot be judged, is refused.
    public var requireRespondedAt: Bool

    /// Creates a limit.
    public init(maxAgeSeconds: Int? = nil, requireRespondedAt: Bool = false) {
        self.maxAgeSeconds = maxAgeSeconds
        self.requireRespondedAt = requireRespondedAt
    }

    /// The limit for a reply: the category's, with what the matched rule sets in its place.
    public static func resolve(rule: Rule?, category: NotificationCategory?) -> ReplyAgeLimit {
        var limit = category?.replyAgeLimit ?? ReplyAgeLimit()
        if let maxAgeSeconds = rule?.maxReplyAgeSeconds { limit.maxAgeSeconds = maxAgeSeconds }
        if let requireRespondedAt = rule?.requireRespondedAt { limit.requireRespondedAt = requireRespondedAt }
        return limit
    }

    /// The reply's age in seconds when it was received, or nil when it carries no `respondedAt`.
    public static func age(respondedAt: Date?, receivedAt: Date) -> Double? {
        respondedAt.map { receivedAt.timeIntervalSince($0) }
    }

    /// An age as the API writes it: seconds, to the millisecond.
    public static func json(age: Double) -> JSONValue {
        .number(String((age * 1000).rounded() / 1000))
    }

    /// Whether a reply of this age is past the limit (an age equal to the limit is not).
    public func isExpired(age: Double?) -> Bool {
        guard let maxAgeSeconds, let age else { return false }
        return age > Double(maxAgeSeconds)
    }
}
