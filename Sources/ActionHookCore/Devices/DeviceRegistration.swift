import Basics
import Foundation

/// A device registered by the app's backend (`PUT /v1/apps/{app}/devices/{deviceToken}`): whose it is, the
/// APNs environment it is pushed in, and what the app reported of it. Registering again replaces all of it.
public struct DeviceRegistration: Sendable, Equatable {
    /// The user the device belongs to; nil registers it without a user (no send to a user reaches it).
    public var user: String?
    /// `ios`: the only platform so far.
    public var platform: String
    /// `sandbox` (a development build) or `production` (TestFlight and the App Store).
    public var environment: String
    /// What the app reported: locale, time zone, app and OS version, model (each at most 64 characters).
    public var locale: String?
    public var timeZone: String?
    public var appVersion: String?
    public var osVersion: String?
    public var model: String?
    /// The device's P-256 public key for signed replies (``ReplySignature``); nil keeps the key it has. A new
    /// key replaces the old one, which still verifies replies for the idempotency window.
    public var publicKey: DevicePublicKey?

    /// The platforms a device may have.
    public static let platforms: Set<String> = ["ios"]
    /// The APNs environments.
    public static let environments: Set<String> = ["sandbox", "production"]
    /// The most active devices a user keeps: registering one more removes the one registered longest ago.
    public static let maxDevicesPerUser = 20

    /// Creates a registration.
    public init(
        user: String?, platform: String = "ios", environment: String, locale: String? = nil,
        timeZone: String? = nil, appVersion: String? = nil, osVersion: String? = nil, model: String? = nil
    ) {
        self.user = user
        self.platform = platform
        self.environment = environment
        self.locale = locale
        self.timeZone = timeZone
        self.appVersion = appVersion
        self.osVersion = osVersion
        self.model = model
    }

    /// The device token of the path, lowercased; nil when it is not one (16 to 200 hex digits, even).
    public static func token(_ text: String) -> String? {
        guard let hasUpperCase = NotificationResponse.deviceTokenCase(text) else { return nil }
        return hasUpperCase ? text.lowercased() : text
    }

    /// Decodes and validates a registration body; every problem is reported with its pointer. The app's own
    /// registration (`userFromToken`) names no `user`: its user is the one its user token proves.
    public static func decode(_ body: JSONValue, userFromToken: Bool) throws(ValidationFailure) -> DeviceRegistration {
        var diagnostics = Diagnostics()
        guard var reader = ObjectReader.root(body, &diagnostics) else {
            try diagnostics.check()
            preconditionFailure("a non-object body is always a shape error")
        }
        let user = reader.string("user", &diagnostics)
        if userFromToken, reader.has("user") {
            diagnostics.invalid("/user", "is not accepted here: the user is the one the user token proves")
        } else if let user, !SendUser.isValid(user) {
            diagnostics.invalid("/user", "must be 1 to 64 characters")
        }
        let platform = reader.string("platform", &diagnostics) ?? "ios"
        if !platforms.contains(platform) { diagnostics.invalid("/platform", "must be ios") }
        let environment = reader.string("environment", &diagnostics)
        if let environment, !environments.contains(environment) {
            diagnostics.invalid("/environment", "must be sandbox or production")
        } else if environment == nil && !reader.has("environment") {
            diagnostics.invalid("/environment", "is required: sandbox or production")
        }
        var reported: [String: String] = [:]
        for name in ["locale", "timeZone", "appVersion", "osVersion", "model"] {
            guard let value = reader.string(name, &diagnostics) else { continue }
            diagnostics.checkLength(value, "/" + name, max: 64)
            reported[name] = value
        }
        var publicKey: DevicePublicKey?
        if let text = reader.string("publicKey", &diagnostics) {
            publicKey = DevicePublicKey(base64: text)
            if publicKey == nil {
                diagnostics.invalid(
                    "/publicKey", "must be the base64 of a P-256 public key: its X9.63 form (65 bytes) or its DER")
            }
        }
        reader.reportUnknown(&diagnostics)
        try diagnostics.check()
        var registration = DeviceRegistration(
            user: user, platform: platform, environment: environment ?? "production", locale: reported["locale"],
            timeZone: reported["timeZone"], appVersion: reported["appVersion"], osVersion: reported["osVersion"],
            model: reported["model"])
        registration.publicKey = publicKey
        return registration
    }
}
