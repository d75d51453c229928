import Foundation

/// Where a follow-up goes.
public enum FollowUpChannel: String, Sendable {
    /// A signed HTTP POST to the app's backend.
    case webhook
    /// A push through APNs.
    case apns
}

/// A follow-up a rule asks for, before rendering: a webhook (`url`, `body`) or an APNs push
/// (`deviceToken`, `pushType`, `priority`, `expiration`, `collapseId`, `payload`), sent `delaySeconds`
/// after the response. Only the members of its own channel are meaningful.
public struct FollowUpTemplate: Sendable, Equatable {
    /// The APNs push types (`apns-push-type`).
    public static let pushTypes = [
        "alert", "background", "voip", "complication", "fileprovider", "mdm", "location", "liveactivity",
        "pushtotalk", "widgets", "controls",
    ]
    /// The APNs priorities (`apns-priority`).
    public static let priorities = [1, 5, 10]

    /// The `apns-priority` a push carries when none is given: 10 (at once, APNs's own default), or 5
    /// for a background push, which APNs refuses at 10.
    public static func defaultPriority(pushType: String) -> Int {
        pushType == "background" ? 5 : 10
    }

    /// Whether APNs takes `priority` for a push of `pushType`: a background push must not be 10.
    public static func allows(priority: Int, pushType: String) -> Bool {
        !(pushType == "background" && priority == 10)
    }

    /// Why a priority was refused for a background push.
    public static let backgroundPriorityRefusal = "must be 1 or 5 for a background push (APNs refuses 10)"
    /// The longest delay: 30 days.
    public static let maxDelaySeconds = 2_592_000
    /// The longest webhook URL, in characters.
    public static let maxURLLength = 2048
    /// The longest `apns-collapse-id`, in UTF-8 bytes.
    public static let maxCollapseIdBytes = 64
    /// The largest APNs payload, in bytes.
    public static let maxPayloadBytes = 4096
    /// The device token template an APNs follow-up uses when none is given.
    public static let defaultDeviceToken = "{{deviceToken}}"

    /// The channel.
    public var channel: FollowUpChannel
    /// How long after the response to deliver, in seconds (0 to 30 days).
    public var delaySeconds: Int
    /// Webhook: the target URL (http or https); nil sends to the app's webhook endpoint.
    public var url: String?
    /// Webhook: the body template; nil sends the stored response.
    public var body: JSONValue?
    /// APNs: the device token template.
    public var deviceToken: String
    /// APNs: the push type, one of `pushTypes`.
    public var pushType: String
    /// APNs: the priority (1, 5 or 10), if set.
    public var priority: Int?
    /// APNs: the expiration (UNIX seconds; 0 means deliver once or never), if set.
    public var expiration: Int?
    /// APNs: the collapse id, at most 64 bytes, if set.
    public var collapseId: String?
    /// APNs: the payload template, an object; `null` for a webhook.
    public var payload: JSONValue

    /// Creates a follow-up template from all its members.
    public init(
        channel: FollowUpChannel,
        delaySeconds: Int = 0,
        url: String? = nil,
        body: JSONValue? = nil,
        deviceToken: String = FollowUpTemplate.defaultDeviceToken,
        pushType: String = "alert",
        priority: Int? = nil,
        expiration: Int? = nil,
        collapseId: String? = nil,
        payload: JSONValue = .null
    ) {
        self.channel = channel
        self.delaySeconds = delaySeconds
        self.url = url
        self.body = body
        self.deviceToken = deviceToken
        self.pushType = pushType
        self.priority = priority
        self.expiration = expiration
        self.collapseId = collapseId
        self.payload = payload
    }

    /// A webhook follow-up.
    public static func webhook(url: String? = nil, body: JSONValue? = nil, delaySeconds: Int = 0) -> FollowUpTemplate {
        FollowUpTemplate(channel: .webhook, delaySeconds: delaySeconds, url: url, body: body)
    }

    /// An APNs follow-up.
    public static func apns(
        payload: JSONValue, delaySeconds: Int = 0, deviceToken: String = FollowUpTemplate.defaultDeviceToken,
        pushType: String = "alert", priority: Int? = nil, expiration: Int? = nil, collapseId: String? = nil
    ) -> FollowUpTemplate {
        FollowUpTemplate(
            channel: .apns, delaySeconds: delaySeconds, deviceToken: deviceToken, pushType: pushType,
            priority: priority, expiration: expiration, collapseId: collapseId, payload: payload)
    }

    /// The shape the API accepts: `{"channel": "webhook", "delaySeconds", ("url"), ("body")}` or
    /// `{"channel": "apns", "delaySeconds", "deviceToken", "pushType", ("priority"), ("expiration"),
    /// ("collapseId"), "payload"}`.
    public var json: JSONValue {
        var object: JSONObject = ["channel": .string(channel.rawValue), "delaySeconds": .integer(delaySeconds)]
        switch channel {
        case .webhook:
            if let url { object["url"] = .string(url) }
            if let body { object["body"] = body }
        case .apns:
            object["deviceToken"] = .string(deviceToken)
            object["pushType"] = .string(pushType)
            if let priority { object["priority"] = .integer(priority) }
            if let expiration { object["expiration"] = .integer(expiration) }
            if let collapseId { object["collapseId"] = .string(collapseId) }
            object["payload"] = payload
        }
        return .object(object)
    }

    /// Decodes one element of a rule's `followUps`; members of the other channel are unknown fields.
    static func decode(
        _ object: JSONObject, at pointer: String, _ diagnostics: inout Diagnostics
    ) -> FollowUpTemplate? {
        var reader = ObjectReader(object, at: pointer)
        var channel: FollowUpChannel?
        if let name = reader.string("channel", &diagnostics) {
            channel = FollowUpChannel(rawValue: name)
            if channel == nil { diagnostics.invalid(reader.pointer("channel"), "must be one of webhook, apns") }
        } else if !reader.has("channel") {
            diagnostics.invalid(reader.pointer("channel"), "is required")
        }
        let delaySeconds = reader.integer("delaySeconds", in: 0...maxDelaySeconds, &diagnostics) ?? 0

        switch channel {
        case .webhook?:
            let url = reader.string("url", &diagnostics)
            if let url, !isWebhookURL(url) {
                diagnostics.invalid(
                    reader.pointer("url"), "must be an absolute http or https URL of at most \(maxURLLength) characters"
                )
            }
            let body = reader.raw("body").flatMap { $0.isNull ? nil : $0 }
            if let body {
                diagnostics.invalid(Template.validate(body, pointer: reader.pointer("body")))
            }
            reader.reportUnknown(&diagnostics)
            return FollowUpTemplate(channel: .webhook, delaySeconds: delaySeconds, url: url, body: body)

        case .apns?:
            let deviceToken = reader.string("deviceToken", &diagnostics) ?? defaultDeviceToken
            if deviceToken.isEmpty || deviceToken.count > 200 {
                diagnostics.invalid(reader.pointer("deviceToken"), "must be 1 to 200 characters")
            } else {
                diagnostics.invalid(Template.validate(.string(deviceToken), pointer: reader.pointer("deviceToken")))
            }
            let pushType = reader.string("pushType", &diagnostics) ?? "alert"
            if !pushTypes.contains(pushType) {
                diagnostics.invalid(reader.pointer("pushType"), "must be one of " + pushTypes.joined(separator: ", "))
            }
            let priority = reader.integer("priority", in: 1...10, &diagnostics)
            if let priority, !priorities.contains(priority) {
                diagnostics.invalid(reader.pointer("priority"), "must be 1, 5 or 10")
            } else if let priority, !allows(priority: priority, pushType: pushType) {
                diagnostics.invalid(reader.pointer("priority"), backgroundPriorityRefusal)
            }
            let expiration = reader.integer("expiration", in: 0...Int(Int32.max), &diagnostics)
            let collapseId = reader.string("collapseId", &diagnostics)
            if let collapseId, collapseId.isEmpty || collapseId.utf8.count > maxCollapseIdBytes {
                diagnostics.invalid(reader.pointer("collapseId"), "must be 1 to \(maxCollapseIdBytes) bytes")
            }
            let payload = reader.object("payload", &diagnostics)
            let payloadPointer = reader.pointer("payload")
            if let payload {
                let problems = Template.validate(.object(payload), pointer: payloadPointer)
                diagnostics.invalid(problems)
                if problems.isEmpty && Template.renderEmpty(.object(payload)).jsonByteCount > maxPayloadBytes {
                    diagnostics.invalid(
                        payloadPointer, "must be at most \(maxPayloadBytes) bytes when rendered with empty values")
                }
            } else if !reader.has("payload") {
                diagnostics.invalid(payloadPointer, "is required for an APNs follow-up")
            }
            reader.reportUnknown(&diagnostics)
            return FollowUpTemplate(
                channel: .apns, delaySeconds: delaySeconds, deviceToken: deviceToken, pushType: pushType,
                priority: priority, expiration: expiration, collapseId: collapseId,
                payload: payload.map(JSONValue.object) ?? .null)

        case nil:
            // Without a channel the other members cannot be judged; only the channel error is reported.
            return nil
        }
    }

    private static func isWebhookURL(_ text: String) -> Bool {
        guard text.count <= maxURLLength, let components = URLComponents(string: text),
            let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = components.host, !host.isEmpty
        else { return false }
        return true
    }
}
