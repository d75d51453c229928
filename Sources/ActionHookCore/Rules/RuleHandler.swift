/// What a matched rule does with a response.
public enum RuleHandler: Sendable, Equatable {
    /// Records an acceptance of the subject.
    case accept
    /// Records a refusal of the subject.
    case decline
    /// Sends the notification again after `delaySeconds`, at most `maxSnoozes` times per notification.
    ///
    /// A snooze needs the reply's `notificationIdentifier` (to count and cancel snoozes) and its
    /// `deviceToken` (to send the notification again); a reply without them is refused (422) unless
    /// the field is in `allowMissing`.
    case snooze(delaySeconds: Int, maxSnoozes: Int, allowMissing: Set<String> = [])
    /// Stores non-blank `userText` of at most `maxLength` characters.
    case comment(maxLength: Int)
    /// Stores the response only.
    case record

    /// The default snooze delay, in seconds.
    public static let defaultSnoozeDelay = 600
    /// The default number of snoozes per notification.
    public static let defaultMaxSnoozes = 3
    /// The default longest comment, in characters.
    public static let defaultCommentLength = 2000

    static let snoozeDelayRange = 1...2_592_000
    static let maxSnoozesRange = 1...100
    static let commentLengthRange = 1...4000
    /// The reply fields a snooze needs, which `allowMissing` may name.
    public static let snoozeFields = ["deviceToken", "notificationIdentifier"]

    /// `{"type": …}` with the handler's settings: the shape the API accepts.
    public var json: JSONValue {
        switch self {
        case .accept: .object(["type": .string("accept")])
        case .decline: .object(["type": .string("decline")])
        case .record: .object(["type": .string("record")])
        case .snooze(let delaySeconds, let maxSnoozes, let allowMissing):
            allowMissing.isEmpty
                ? .object([
                    "type": .string("snooze"), "delaySeconds": .integer(delaySeconds),
                    "maxSnoozes": .integer(maxSnoozes),
                ])
                : .object([
                    "type": .string("snooze"), "delaySeconds": .integer(delaySeconds),
                    "maxSnoozes": .integer(maxSnoozes),
                    "allowMissing": .array(allowMissing.sorted().map(JSONValue.string)),
                ])
        case .comment(let maxLength):
            .object(["type": .string("comment"), "maxLength": .integer(maxLength)])
        }
    }

    /// Decodes a rule's `handler`; settings that do not belong to the type are unknown fields.
    static func decode(_ object: JSONObject, at pointer: String, _ diagnostics: inout Diagnostics) -> RuleHandler? {
        var reader = ObjectReader(object, at: pointer)
        var handler: RuleHandler?
        switch reader.string("type", &diagnostics) {
        case "accept": handler = .accept
        case "decline": handler = .decline
        case "record": handler = .record
        case "snooze":
            let delay = reader.integer("delaySeconds", in: snoozeDelayRange, &diagnostics)
            let maxSnoozes = reader.integer("maxSnoozes", in: maxSnoozesRange, &diagnostics)
            let allowMissing = reader.strings("allowMissing", &diagnostics) ?? []
            for (index, field) in allowMissing.enumerated() where !snoozeFields.contains(field) {
                diagnostics.invalid(
                    JSONPointer.appending(index, to: reader.pointer("allowMissing")),
                    "must be one of " + snoozeFields.joined(separator: ", "))
            }
            handler = .snooze(
                delaySeconds: delay ?? defaultSnoozeDelay, maxSnoozes: maxSnoozes ?? defaultMaxSnoozes,
                allowMissing: Set(allowMissing))
        case "comment":
            let maxLength = reader.integer("maxLength", in: commentLengthRange, &diagnostics)
            handler = .comment(maxLength: maxLength ?? defaultCommentLength)
        case nil:
            if !reader.has("type") { diagnostics.invalid(reader.pointer("type"), "is required") }
        default:
            diagnostics.invalid(reader.pointer("type"), "must be one of accept, decline, snooze, comment, record")
        }
        reader.reportUnknown(&diagnostics)
        return handler
    }
}
