import Foundation

/// An upload the system performs for the app, also while it is suspended or after it was killed: on Apple
/// platforms a background `URLSession` (`BackgroundURLSessionUploads`). The client hands it each reply it
/// queues, and reconciles what it reports with the queue.
public protocol BackgroundUploading: Sendable {
    /// Starts (or reconnects to) the system's session; `report` receives every finished upload, including
    /// those that finished while the app was not running.
    func start(reporting report: @escaping @Sendable (BackgroundUploadResult) -> Void)
    /// Schedules `upload`; the system may run it at `earliestBeginDate` or later.
    func schedule(_ upload: BackgroundUpload)
    /// Cancels the upload of the queue file `name` (it was sent another way, or left the queue).
    func cancel(name: String)
    /// Cancels every scheduled upload whose file is not among `names`.
    func cancelAll(except names: Set<String>)
}

/// One reply for the system to upload: the queue file itself is the request body.
public struct BackgroundUpload: Sendable, Equatable {
    /// The queue file's name: the upload's identity (its task description).
    public var name: String
    /// The queue file, sent as the body.
    public var file: URL
    /// `POST` to this URL.
    public var url: URL
    /// The headers: `Authorization`, `Content-Type`, `Idempotency-Key`, `ActionHook-User-Token` when the
    /// client held a user token when the upload was scheduled, and `ActionHook-Reply-Signature` for a signed
    /// reply.
    public var headers: [String: String]
    /// Not before this time: the app's own send usually finishes first, and then the upload is cancelled.
    public var earliestBeginDate: Date

    /// An upload.
    public init(name: String, file: URL, url: URL, headers: [String: String], earliestBeginDate: Date) {
        self.name = name
        self.file = file
        self.url = url
        self.headers = headers
        self.earliestBeginDate = earliestBeginDate
    }
}

/// What a system-run upload came to.
public struct BackgroundUploadResult: Sendable, Equatable {
    /// How it ended.
    public enum Outcome: Sendable, Equatable {
        /// The server answered.
        case answered(status: Int, body: Data, retryAfter: String?)
        /// No answer: a network error, or it was cancelled.
        case failed
    }

    /// The queue file's name, as scheduled.
    public var name: String
    /// How it ended.
    public var outcome: Outcome

    /// A result.
    public init(name: String, outcome: Outcome) {
        self.name = name
        self.outcome = outcome
    }
}

/// Time the app asks the system for to finish sending before it is suspended: on iOS
/// `UIApplication.beginBackgroundTask` (`ApplicationBackgroundTasks`).
public protocol BackgroundActivity: Sendable {
    /// Begins an activity; `expired` is called when the system will not wait longer (then the client stops
    /// sending, and the system-run upload carries on). Answers nil when no time was granted.
    func begin(expired: @escaping @Sendable () -> Void) -> BackgroundActivityToken?
    /// Ends an activity.
    func end(_ token: BackgroundActivityToken)
}

/// An activity begun with `BackgroundActivity.begin`.
public struct BackgroundActivityToken: Sendable, Hashable {
    /// The system's identifier.
    public var rawValue: Int

    /// A token.
    public init(rawValue: Int) {
        self.rawValue = rawValue
    }
}
