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
}
