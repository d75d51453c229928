import Foundation

/// The APNs environment a device token belongs to, as `PUT /v1/devices/{token}` names it.
public enum PushEnvironment: String, Sendable, Codable, CaseIterable {
    /// The development APNs environment: builds signed with a development profile
    /// (`aps-environment` `development`).
    case sandbox
    /// The production APNs environment: App Store, TestFlight and ad hoc builds.
    case production

    /// The environment the app's provisioning profile grants (`embedded.mobileprovision`):
    /// `aps-environment` `development` is `.sandbox`, `production` is `.production`. No profile (an App Store
    /// build has none), a profile without the entitlement, or bytes that hold no readable profile answer
    /// `.production`.
    public init(provisioningProfile: Data?) {
        self =
            provisioningProfile.flatMap(Self.apsEnvironment(inProvisioningProfile:)) == "development"
            ? .sandbox : .production
    }

    /// The `aps-environment` entitlement of a provisioning profile: a CMS-signed blob whose property list is
    /// found between `<?xml` and `</plist>`. Reads `Entitlements` → `aps-environment` (iOS) or
    /// `com.apple.developer.aps-environment` (macOS); nil when there is none.
    public static func apsEnvironment(inProvisioningProfile data: Data) -> String? {
        guard let start = data.range(of: Data("<?xml".utf8)),
            let end = data.range(of: Data("</plist>".utf8), in: start.upperBound..<data.endIndex),
            let plist = try? PropertyListSerialization.propertyList(
                from: data.subdata(in: start.lowerBound..<end.upperBound), options: [], format: nil),
            let entitlements = (plist as? [String: Any])?["Entitlements"] as? [String: Any]
        else { return nil }
        return (entitlements["aps-environment"] ?? entitlements["com.apple.developer.aps-environment"]) as? String
    }
}

/// What a device tells the server about itself when it registers (`PUT /v1/devices/{token}`). On iOS
/// `DeviceInfo.current` reads it from `UIDevice`, `Locale`, `TimeZone` and the app's `Info.plist`.
public struct DeviceInfo: Sendable, Equatable {
    /// The platform; `ios` unless given.
    public var platform: String
    /// The locale's identifier, e.g. `de_CH`.
    public var locale: String?
    /// The time zone's identifier, e.g. `Europe/Zurich`.
    public var timeZone: String?
    /// The app's `CFBundleShortVersionString`.
    public var appVersion: String?
    /// The operating system's version, e.g. `18.1`.
    public var osVersion: String?
    /// The device's model, e.g. `iPhone`.
    public var model: String?

    /// Facts about a device.
    public init(
        platform: String = "ios", locale: String? = nil, timeZone: String? = nil, appVersion: String? = nil,
        osVersion: String? = nil, model: String? = nil
    ) {
        self.platform = platform
        self.locale = locale
        self.timeZone = timeZone
        self.appVersion = appVersion
        self.osVersion = osVersion
        self.model = model
    }

    /// The longest value the server takes for each member; longer ones are cut to it.
    public static let maxLength = 64

    /// The body of `PUT /v1/devices/{token}` for `environment`, with the device key's public half
    /// (`publicKey`: the standard base64 of its X9.63 form) when given. Absent values are left out.
    public func registrationBody(environment: PushEnvironment, publicKey: Data? = nil) -> Data {
        var object: [String: JSONValue] = [
            "environment": .string(environment.rawValue), "platform": .string(Self.cut(platform)),
        ]
        if let publicKey { object["publicKey"] = .string(publicKey.base64EncodedString()) }
        let optional = [
            ("locale", locale), ("timeZone", timeZone), ("appVersion", appVersion), ("osVersion", osVersion),
            ("model", model),
        ]
        for case (let name, let value?) in optional where !value.isEmpty { object[name] = .string(Self.cut(value)) }
        return JSONValue.object(object).encoded()
    }

    private static func cut(_ value: String) -> String {
        String(String.UnicodeScalarView(value.unicodeScalars.prefix(maxLength)))
    }
}
