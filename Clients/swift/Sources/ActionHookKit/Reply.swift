import Foundation

/// One reply to a notification, as the app forwards it: a `UNNotificationResponse` as data.
///
/// Its `responseId` is made once, when the reply is created, and kept on disk with it: every retry is sent
/// with it as the `Idempotency-Key`, so the server stores the reply exactly once.
public struct Reply: Sendable, Hashable, Codable {
    /// `UNNotificationDefaultActionIdentifier`: the person opened the notification.
    public static let defaultActionIdentifier = "com.apple.UNNotificationDefaultActionIdentifier"
    /// `UNNotificationDismissActionIdentifier`: the person dismissed it (category option `customDismissAction`).
    public static let dismissActionIdentifier = "com.apple.UNNotificationDismissActionIdentifier"

    /// The client-made idempotency key (a lowercased UUID unless given).
    public var responseId: String
    /// The action's identifier, or the default or dismiss identifier.
    public var actionIdentifier: String
    /// The quick-reply text of a text-input action.
    public var userText: String?
    /// The notification's category; nil when it had none.
    public var categoryIdentifier: String?
    /// `UNNotificationRequest.identifier`.
    public var notificationIdentifier: String?
    /// The notification's `userInfo`, JSON-safe (see `JSONValue.sanitizing(userInfo:)`).
    public var userInfo: [String: JSONValue]
    /// The device token as hex, when the app has one.
    public var deviceToken: String?
    /// When the person answered, on the device's clock, to the millisecond (as it is sent and kept).
    public var respondedAt: Date

    /// Creates a reply.
    public init(
        actionIdentifier: String, userText: String? = nil, categoryIdentifier: String? = nil,
        notificationIdentifier: String? = nil, userInfo: [String: JSONValue] = [:], deviceToken: String? = nil,
        respondedAt: Date = Date(), responseId: String = UUID().uuidString.lowercased()
    ) {
        self.responseId = responseId
        self.actionIdentifier = actionIdentifier
        self.userText = userText
        self.categoryIdentifier = categoryIdentifier.flatMap { $0.isEmpty ? nil : $0 }
        self.notificationIdentifier = notificationIdentifier
        self.userInfo = userInfo
        self.deviceToken = deviceToken
        self.respondedAt = Timestamp.milliseconds(Timestamp.milliseconds(respondedAt))
    }

    /// The body of `POST /v1/responses`. Absent values are left out; `userInfo` is always sent.
    public func ingestBody() -> Data {
        var object: [String: JSONValue] = [
            "responseId": .string(responseId),
            "actionIdentifier": .string(actionIdentifier),
            "userInfo": .object(userInfo),
            "respondedAt": .string(Timestamp.string(from: respondedAt)),
        ]
        if let userText { object["userText"] = .string(userText) }
        if let categoryIdentifier { object["categoryIdentifier"] = .string(categoryIdentifier) }
        if let notificationIdentifier { object["notificationIdentifier"] = .string(notificationIdentifier) }
        if let deviceToken { object["deviceToken"] = .string(deviceToken) }
        return JSONValue.object(object).encoded()
    }
}

extension Reply {
    /// The reply an ingest body describes (as `ingestBody()` writes it): how the queue reads its files back.
    public init(ingestBody data: Data) throws {
        struct Body: Decodable {
            var responseId: String
            var actionIdentifier: String
            var userText: String?
            var categoryIdentifier: String?
            var notificationIdentifier: String?
            var userInfo: [String: JSONValue]
            var deviceToken: String?
            var respondedAt: String
        }
        let body = try JSONDecoder().decode(Body.self, from: data)
        guard let respondedAt = Timestamp.date(from: body.respondedAt) else {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(codingPath: [], debugDescription: "respondedAt is not an RFC 3339 time"))
        }
        self.init(
            actionIdentifier: body.actionIdentifier, userText: body.userText,
            categoryIdentifier: body.categoryIdentifier,
            notificationIdentifier: body.notificationIdentifier, userInfo: body.userInfo, deviceToken: body.deviceToken,
            respondedAt: respondedAt, responseId: body.responseId)
    }

    /// The `userInfo` key of what the sender says about the notification: an object whose `exp` member is the
    /// time, in seconds since 1970, after which a reply to it must not act. Other members (the server's
    /// notification id `n` and recipient `r`) are left to the server.
    ///
    /// ```json
    /// {"aps": {"category": "garage", "alert": "Open the garage?"}, "actionhook": {"n": "…", "r": "…", "exp": 1795600120}}
    /// ```
    public static let notificationKey = "actionhook"

    /// The deadline the notification carried in `userInfo["actionhook"]["exp"]` (the sender's expiry, or the
    /// time it was sent plus its category's `maxReplyAgeSeconds`), if any. Past it the reply is dropped unsent,
    /// whether or not categories were ever fetched.
    public var deadline: Date? {
        guard case .object(let members)? = userInfo[Self.notificationKey], case .number(let seconds)? = members["exp"],
            seconds.isFinite, seconds > 0
        else { return nil }
        return Date(timeIntervalSince1970: seconds)
    }
}

extension JSONValue {
    /// Compact JSON text with sorted keys.
    func encoded() -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        // A JSONValue holds only finite numbers and strings, so encoding cannot fail.
        guard let data = try? encoder.encode(self) else { preconditionFailure("a JSONValue always encodes") }
        return data
    }
}

/// The APNs device token as the hex string ActionHook expects.
public enum DeviceToken {
    /// Lowercase hex of the token `Data` from `didRegisterForRemoteNotificationsWithDeviceToken`.
    public static func hex(_ token: Data) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var bytes: [UInt8] = []
        bytes.reserveCapacity(token.count * 2)
        for byte in token {
            bytes.append(digits[Int(byte >> 4)])
            bytes.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
