/// The result of handling a response, stored with it.
public enum Outcome: String, Sendable, CaseIterable {
    /// An `accept` handler ran.
    case accepted
    /// A `decline` handler ran.
    case declined
    /// A `snooze` handler scheduled the notification again.
    case snoozed
    /// A `snooze` handler ran past its `maxSnoozes`: nothing was scheduled.
    case snoozeLimitReached = "snooze_limit_reached"
    /// A `comment` handler stored the typed text.
    case commented
    /// A `record` handler stored the response only.
    case recorded
    /// No enabled rule matched; the response is stored all the same.
    case unmatched
    /// The reply was older than its age limit when it arrived (``ReplyAgeLimit``): stored, and nothing
    /// else happened (no handler, no follow-up, no snooze cancelled, no decision changed).
    case expired
    /// The reply answered a sent notification (`answers: first`) that another reply had answered first:
    /// stored, and it acted on nothing.
    case superseded
    /// The reply's category, rule or notification requires replies signed by their device's key
    /// (`requireSignedReplies`) and its signature was absent or invalid: stored for the record, it acted on
    /// nothing and answered nothing.
    case unverified
}
