/// The LISTEN/NOTIFY channels instances use to tell each other about changes.
public enum Channels {
    /// Payload: an app id whose cached keys, settings, categories or rules changed.
    public static let invalidate = "actionhook_invalidate"
    /// Payload: an app id with new due follow-ups.
    public static let followUps = "actionhook_followups"
    /// Payload: the id of an app that was deleted, whose rows are now to be purged (``AppPurger``).
    public static let appDeleted = "actionhook_app_deleted"
    /// Payload: an app id and a device token joined by U+001F (``UnitSeparated``), whose keys changed or which
    /// was removed; an app id alone: any of the app's devices (erasure).
    public static let deviceKeys = "actionhook_device_keys"
}
