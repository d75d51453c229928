/// The bounds an ingest body must keep; going past one is a 422 naming the field.
public struct IngestLimits: Sendable {
    /// The longest `actionIdentifier`, in characters.
    public var maxActionIdentifierLength = 256
    /// The longest `userText`, in characters.
    public var maxUserTextLength = 4000
    /// The largest `userInfo`, in bytes of compact JSON.
    public var maxUserInfoBytes = 8192
    /// The deepest nesting of `userInfo` (the object itself is depth 1).
    public var maxUserInfoDepth = 32
    /// The longest `categoryIdentifier`, `notificationIdentifier` and `responseId`, in characters.
    public var maxIdentifierLength = 256

    /// The default limits.
    public init() {}
}
