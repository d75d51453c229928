/// How one send went, before the retry policy turns it into a stored result.
public enum SendOutcome: Sendable, Equatable {
    /// The receiver took it (2xx).
    case delivered(httpStatus: Int)
    /// A failure worth retrying (timeouts, 5xx, 429, most 4xx from webhooks, 3xx).
    case retryable(httpStatus: Int?, errorClass: String)
    /// A failure that retrying cannot fix (payload too large, forbidden target, APNs 4xx).
    case permanent(httpStatus: Int?, errorClass: String)
    /// APNs says the device token is dead: mark it and send nothing more to it.
    case deadDevice(httpStatus: Int, reason: String)
    /// The webhook endpoint answered 410 Gone: disable it until the app is updated.
    case endpointGone
    /// Nothing was sent: what the send needed from the database (APNs' shared provider token) could not be
    /// read, because the database is away. No attempt of the delivery: the worker holds the claim and sends
    /// it once the database answers, as it does a claim whose app's settings it could not read.
    case notSent
}
