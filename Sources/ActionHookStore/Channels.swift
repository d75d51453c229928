/// The LISTEN/NOTIFY channels instances use to tell each other about changes.
public enum Channels {
    /// Payload: an app id whose cached keys, settings, categories or rules changed.
    public static let invalidate = "actionhook_invalidate"
    /// Payload: an app id with new due follow-ups.
    public static let followUps = "actionhook_followups"
}
