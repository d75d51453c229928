import Foundation

/// What happened to a queued reply, reported to the app's `onEvent` callback.
///
/// Events carry the reply's `responseId` and statuses, never its text, `userInfo` or the ingest key. Each reply
/// ends in exactly one of `.delivered`, `.refused` or `.dropped`, also when an app and its extension share the
/// queue: only the process whose removal of the reply's file succeeds reports it.
///
/// New cases may come in a minor version (CHANGELOG.md). Switch over events with `@unknown default:` so that
/// a new case is a compiler warning, not an error; or read ``responseId`` and ``endsReply``, which every
/// case, present and future, answers.
public enum ActionHookEvent: Sendable, Equatable {
    /// The server stored the reply (202) or had stored it before (200, a replay). It left the queue.
    case delivered(responseId: String, status: Int)
    /// The server refused the reply itself for good (400, 410, 413, 415, 422, and 403 with
    /// `problem.requiresSignedReply`: signed replies are required and this one's signature was absent or
    /// invalid; the server stored it as `unverified`). It left the queue.
    case refused(responseId: String, status: Int, problem: Problem)
    /// The reply was removed without being sent.
    case dropped(responseId: String, reason: DropReason)
    /// Sending failed and will be tried again after `delay` seconds; `status` is nil for a network error.
    case retrying(responseId: String, attempt: Int, status: Int?, delay: TimeInterval)
    /// The reply could not be written to the queue (the disk is full or the folder cannot be written).
    case notQueued(responseId: String)
    /// The server refused the ingest key (401: revoked or mistyped). Every reply stays queued and nothing is
    /// sent until the app sets a key with `updateIngestKey(_:)`. Reported once per pause.
    ///
    /// Also when it refused the user token twice, the second time after the token provider gave a new one
    /// (`problem.refusesUserToken`): then `identify(userToken:)` or `signOut()` ends the pause as well.
    case paused(status: Int, problem: Problem)
    /// A file in the queue held no reply (empty, truncated, or not a reply's JSON). It was moved to
    /// `queue/damaged/`, is not tried again, and is reported once.
    case damaged(file: String)
}

extension ActionHookEvent {
    /// The reply the event is about; `nil` for an event about the queue as a whole (`.paused`, `.damaged`).
    public var responseId: String? {
        switch self {
        case .delivered(let id, _), .refused(let id, _, _), .dropped(let id, _), .retrying(let id, _, _, _),
            .notQueued(let id):
            id
        case .paused, .damaged:
            nil
        }
    }

    /// Whether the reply left the queue with this event, for good: `.delivered`, `.refused` or `.dropped`,
    /// the one event of that kind each reply gets. A reply that was never queued (`.notQueued`) is not in
    /// the queue to leave it.
    public var endsReply: Bool {
        switch self {
        case .delivered, .refused, .dropped: true
        case .retrying, .notQueued, .paused, .damaged: false
        }
    }
}

/// Why a reply was dropped from the queue unsent.
///
/// New reasons may come in a minor version, as new events do: switch with `@unknown default:`.
public enum DropReason: Sendable, Equatable {
    /// The queue held `maxQueuedReplies`; the oldest reply made room.
    case queueFull
    /// The reply waited longer than `maxQueueAge`.
    case queuedTooLong
    /// The reply is older than its category's `maxReplyAgeSeconds`: the server would refuse it with 410.
    case expired(maxReplyAgeSeconds: Int)
    /// The deadline the notification carried (`userInfo["actionhook"]["exp"]`) has passed.
    case pastDeadline(Date)
}
