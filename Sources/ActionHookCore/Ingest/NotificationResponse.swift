import Crypto
import Foundation

/// One forwarded `UNNotificationResponse`, normalised: the action, the typed text, the notification's
/// identifiers and `userInfo`, and what the app adds (device token, idempotency id, time of answer).
public struct NotificationResponse: Sendable, Equatable {
    /// The action identifier iOS reports when the person opened the app from the notification's body.
    public static let defaultActionIdentifier = "com.apple.UNNotificationDefaultActionIdentifier"
    /// The action identifier iOS reports when the person dismissed the notification.
    public static let dismissActionIdentifier = "com.apple.UNNotificationDismissActionIdentifier"

    /// The identifier of the action the person chose.
    public var actionIdentifier: String
    /// The text typed into a text-input action, if any.
    public var userText: String?
    /// The category of the notification (given, or taken from `userInfo.aps.category`).
    public var categoryIdentifier: String?
    /// `UNNotificationRequest.identifier`.
    public var notificationIdentifier: String?
    /// The notification's `userInfo`, `aps` included.
    public var userInfo: JSONObject
    /// The device's APNs token, lowercase hex.
    public var deviceToken: String?
    /// The client-made unique id of this response.
    public var responseId: String?
    /// When the person answered, by the device's clock (to the millisecond).
    public var respondedAt: Date?
    /// The user the reply's user token proved (its verified `sub`). Never read from the body: the server
    /// sets it after verifying `ActionHook-User-Token`; nil when the reply carried no token.
    public var user: String?
    /// What the reply's `ActionHook-Reply-Signature` proved (``ReplySignature``). Never read from the body: the
    /// server sets it after checking the header against the device's registered key.
    public var signature: SignatureCheck = .absent

    /// Creates a response from its parts, as they are (no normalisation).
    public init(
        actionIdentifier: String,
        userText: String? = nil,
        categoryIdentifier: String? = nil,
        notificationIdentifier: String? = nil,
        userInfo: JSONObject = JSONObject(),
        deviceToken: String? = nil,
        responseId: String? = nil,
        respondedAt: Date? = nil
    ) {
        self.actionIdentifier = actionIdentifier
        self.userText = userText
        self.categoryIdentifier = categoryIdentifier
        self.notificationIdentifier = notificationIdentifier
        self.userInfo = userInfo
        self.deviceToken = deviceToken
        self.responseId = responseId
        self.respondedAt = respondedAt
    }

    private static let legacyTextKey = "UIUserNotificationActionResponseTypedTextKey"

    /// Decodes and normalises an ingest body.
    ///
    /// Accepts the iOS 10+ shape (`actionIdentifier`, `userText`, …) and the iOS 8/9 shape
    /// `{"identifier", "responseInfo": {"UIUserNotificationActionResponseTypedTextKey": …}, "userInfo"}`;
    /// mixing the two is a 400. `categoryIdentifier` falls back to `userInfo.aps.category` when that is a
    /// string. `null` reads as absent. `deviceToken` must be even-length hex of 16 to 200 characters and
    /// is lowercased; `respondedAt` must be RFC 3339 with an offset and is kept to the millisecond.
    /// Unknown members and broken limits are 422s with their pointer. Every error is collected before
    /// throwing; wrong types (400) take precedence over broken rules (422).
    ///
    /// `sourceByteCount` is the length of the text `body` was parsed from, when known. No JSON text
    /// writes more than three compact bytes per byte it was read from (the worst is a two-byte `\b`
    /// written as the six-byte `\u0008`), so a body under a third of `maxUserInfoBytes` cannot hold a
    /// `userInfo` over it and is not measured.
    public static func decode(
        _ body: JSONValue, limits: IngestLimits = IngestLimits(), sourceByteCount: Int? = nil
    ) throws(ValidationFailure) -> NotificationResponse {
        var diagnostics = Diagnostics()
        guard var reader = ObjectReader.root(body, &diagnostics) else {
            try diagnostics.check()
            preconditionFailure("a non-object body is always a shape error")
        }
        let (actionIdentifier, userText) = actionAndText(&reader, limits, &diagnostics)
        let userInfo = userInfo(&reader, limits, sourceByteCount: sourceByteCount, &diagnostics)
        let categoryIdentifier = categoryIdentifier(&reader, userInfo: userInfo, limits, &diagnostics)
        let notificationIdentifier = reader.string("notificationIdentifier", &diagnostics)
        if let notificationIdentifier {
            diagnostics.checkLength(notificationIdentifier, "/notificationIdentifier", max: limits.maxIdentifierLength)
        }
        let responseId = reader.string("responseId", &diagnostics)
        if let responseId {
            diagnostics.checkLength(responseId, "/responseId", max: limits.maxIdentifierLength)
        }
        let deviceToken = deviceToken(&reader, &diagnostics)
        let respondedAt = respondedAt(&reader, &diagnostics)

        reader.reportUnknown(&diagnostics)
        try diagnostics.check()
        guard let actionIdentifier else { preconditionFailure("a missing action is always recorded as an error") }
        return NotificationResponse(
            actionIdentifier: actionIdentifier,
            userText: userText,
            categoryIdentifier: categoryIdentifier,
            notificationIdentifier: notificationIdentifier,
            userInfo: userInfo,
            deviceToken: deviceToken,
            responseId: responseId,
            respondedAt: respondedAt
        )
    }

    /// The action and the typed text, from whichever shape was sent (mixing the two is an error).
    private static func actionAndText(
        _ reader: inout ObjectReader, _ limits: IngestLimits, _ diagnostics: inout Diagnostics
    ) -> (action: String?, text: String?) {
        let isLegacy = reader.has("identifier") || reader.has("responseInfo")
        let isCurrent = reader.has("actionIdentifier") || reader.has("userText")
        if isLegacy && isCurrent {
            for key in ["identifier", "responseInfo"] where reader.has(key) {
                diagnostics.malformed(reader.pointer(key), "must not be combined with actionIdentifier or userText")
            }
        }
        let actionIdentifier: String?
        let actionPointer: String
        var userText: String?
        var userTextPointer = "/userText"
        if isLegacy {
            actionPointer = "/identifier"
            actionIdentifier = reader.string("identifier", &diagnostics)
            if let info = reader.object("responseInfo", &diagnostics) {
                var infoReader = ObjectReader(info, at: "/responseInfo")
                userText = infoReader.string(legacyTextKey, &diagnostics)
                userTextPointer = infoReader.pointer(legacyTextKey)
                infoReader.reportUnknown(&diagnostics)
            }
            reader.allow("actionIdentifier", "userText")
        } else {
            actionPointer = "/actionIdentifier"
            actionIdentifier = reader.string("actionIdentifier", &diagnostics)
            userText = reader.string("userText", &diagnostics)
            reader.allow("identifier", "responseInfo")
        }
        if let actionIdentifier {
            diagnostics.checkLength(actionIdentifier, actionPointer, max: limits.maxActionIdentifierLength)
        } else if !reader.has(isLegacy ? "identifier" : "actionIdentifier") {
            diagnostics.invalid(actionPointer, "is required")
        }
        if let userText {
            diagnostics.checkLength(userText, userTextPointer, min: 0, max: limits.maxUserTextLength)
        }
        return (actionIdentifier, userText)
    }

    /// `userInfo` within its depth and size (measured only when the body could hold one too large).
    private static func userInfo(
        _ reader: inout ObjectReader, _ limits: IngestLimits, sourceByteCount: Int?, _ diagnostics: inout Diagnostics
    ) -> JSONObject {
        let userInfo = reader.object("userInfo", &diagnostics) ?? JSONObject()
        let userInfoValue = JSONValue.object(userInfo)
        if userInfoValue.depth > limits.maxUserInfoDepth {
            diagnostics.invalid("/userInfo", "must nest at most \(limits.maxUserInfoDepth) levels deep")
        }
        let mayBeTooLarge =
            sourceByteCount.map { $0 > limits.maxUserInfoBytes / JSONValue.maxCompactBytesPerSourceByte } ?? true
        if mayBeTooLarge, userInfoValue.jsonByteCount > limits.maxUserInfoBytes {
            diagnostics.invalid("/userInfo", "must be at most \(limits.maxUserInfoBytes) bytes as compact JSON")
        }
        return userInfo
    }

    /// `categoryIdentifier`, else `userInfo.aps.category` when that is a non-empty string.
    private static func categoryIdentifier(
        _ reader: inout ObjectReader, userInfo: JSONObject, _ limits: IngestLimits, _ diagnostics: inout Diagnostics
    ) -> String? {
        var categoryIdentifier = reader.string("categoryIdentifier", &diagnostics)
        var categoryPointer = "/categoryIdentifier"
        if categoryIdentifier == nil, !reader.has("categoryIdentifier"),
            case .string(let category)? = JSONValue.object(userInfo).value(atPath: "aps.category"), !category.isEmpty
        {
            categoryIdentifier = category
            categoryPointer = "/userInfo/aps/category"
        }
        if let categoryIdentifier {
            diagnostics.checkLength(categoryIdentifier, categoryPointer, max: limits.maxIdentifierLength)
        }
        return categoryIdentifier
    }

    /// `deviceToken`, lowercased.
    private static func deviceToken(_ reader: inout ObjectReader, _ diagnostics: inout Diagnostics) -> String? {
        guard let token = reader.string("deviceToken", &diagnostics) else { return nil }
        guard let hasUpperCase = deviceTokenCase(token) else {
            diagnostics.invalid("/deviceToken", "must be hexadecimal with an even length of 16 to 200 characters")
            return token
        }
        // Tokens are sent lower case (Data's hex); fold only the rare upper-case one.
        return hasUpperCase ? token.lowercased() : token
    }

    /// `respondedAt`, kept to the millisecond so the stored form reads back to the same value; a time whose
    /// UTC form leaves years 0000-9999 cannot be stored that way and is refused.
    private static func respondedAt(_ reader: inout ObjectReader, _ diagnostics: inout Diagnostics) -> Date? {
        guard let text = reader.string("respondedAt", &diagnostics) else { return nil }
        guard let date = Timestamp.parse(text), let normalised = Timestamp.toTheMillisecond(date) else {
            diagnostics.invalid("/respondedAt", "must be an RFC 3339 date-time with a time-zone offset")
            return nil
        }
        return normalised
    }

    /// Nil unless `token` looks like an APNs device token (hex digits, even length, 16 to 200
    /// characters); else whether it has upper-case digits.
    static func deviceTokenCase(_ token: String) -> Bool? {
        var token = token
        return token.withUTF8 { bytes -> Bool? in
            guard (16...200).contains(bytes.count), bytes.count % 2 == 0 else { return nil }
            var hasUpperCase = false
            for byte in bytes {
                switch byte {
                case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "a")...UInt8(ascii: "f"): continue
                case UInt8(ascii: "A")...UInt8(ascii: "F"): hasUpperCase = true
                default: return nil
                }
            }
            return hasUpperCase
        }
    }

    /// The normalised form as JSON, members always present and in a stable order (`null` when absent):
    /// `actionIdentifier`, `userText`, `categoryIdentifier`, `notificationIdentifier`, `userInfo`,
    /// `deviceToken`, `responseId`, `respondedAt`. `decode(json)` gives this response back.
    public var json: JSONValue {
        .object([
            "actionIdentifier": .string(actionIdentifier),
            "userText": userText.map(JSONValue.string) ?? .null,
            "categoryIdentifier": categoryIdentifier.map(JSONValue.string) ?? .null,
            "notificationIdentifier": notificationIdentifier.map(JSONValue.string) ?? .null,
            "userInfo": .object(userInfo),
            "deviceToken": deviceToken.map(JSONValue.string) ?? .null,
            "responseId": responseId.map(JSONValue.string) ?? .null,
            "respondedAt": respondedAt.map { .string(Timestamp.format($0)) } ?? .null,
        ])
    }

    /// SHA-256 (32 bytes) of `json.canonicalText`: equal normalised requests give equal hashes, so a
    /// legacy-shape body and the equivalent iOS 10+ body hash the same.
    public var requestHash: [UInt8] {
        SHA256.hash(data: canonicalBytes).withUnsafeBytes { Array($0) }
    }

    /// `json.canonicalBytes`, written without building `json`: the members in their sorted order.
    /// (The hashes of stored responses depend on these bytes; a test holds the two forms equal.)
    var canonicalBytes: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(256)
        func member(_ name: StaticString, _ value: String?, first: Bool = false) {
            out.append(first ? UInt8(ascii: "{") : UInt8(ascii: ","))
            out.append(UInt8(ascii: "\""))
            out.append(contentsOf: UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            out.append(contentsOf: "\":".utf8)
            if let value { JSONValue.writeString(value, to: &out) } else { out.append(contentsOf: "null".utf8) }
        }
        member("actionIdentifier", actionIdentifier, first: true)
        member("categoryIdentifier", categoryIdentifier)
        member("deviceToken", deviceToken)
        member("notificationIdentifier", notificationIdentifier)
        member("respondedAt", respondedAt.map(Timestamp.format))
        member("responseId", responseId)
        out.append(contentsOf: ",\"userInfo\":".utf8)
        JSONValue.object(userInfo).write(to: &out, sortedKeys: true)
        member("userText", userText)
        out.append(UInt8(ascii: "}"))
        return out
    }
}
