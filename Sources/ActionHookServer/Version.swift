/// The service's version.
public enum ActionHookVersion {
    /// The version string printed by `actionhook version`.
    public static let current = "0.1.0"
}
