// The device registration's glue: reads the facts a registration sends (UIDevice, Locale, TimeZone, the app's
// Info.plist) and the app's provisioning profile. It compiles on iOS and visionOS (watchOS has no UIDevice); on
// Linux the GlueTypeCheck test target compiles this same file (a symbolic link) against a stand-in module with
// Apple's signatures, where ACTIONHOOKKIT_GLUE_CHECK is set. Parsing the profile is the core's
// (`PushEnvironment(provisioningProfile:)`).
#if canImport(UIKit) && !os(watchOS) && (canImport(Darwin) || ACTIONHOOKKIT_GLUE_CHECK)
    import Foundation
    import UIKit
    #if ACTIONHOOKKIT_GLUE_CHECK
        import ActionHookKit
    #endif

    extension DeviceInfo {
        /// This device: `UIDevice`'s `model` and `systemVersion`, the current locale and time zone, and the
        /// app's `CFBundleShortVersionString`; platform `ios`.
        @MainActor
        public static var current: DeviceInfo {
            let device = UIDevice.current
            return DeviceInfo(
                platform: "ios", locale: Locale.current.identifier, timeZone: TimeZone.current.identifier,
                appVersion: Bundle.main.object(forInfoDictionaryKey: "CFBundleShortVersionString") as? String,
                osVersion: device.systemVersion, model: device.model)
        }
    }

    extension PushEnvironment {
        /// The bytes of the app's `embedded.mobileprovision`; nil when it has none (App Store builds).
        public static func embeddedProvisioningProfile(in bundle: Bundle = .main) -> Data? {
            bundle.url(forResource: "embedded", withExtension: "mobileprovision").flatMap { try? Data(contentsOf: $0) }
        }
    }

    extension ActionHookClient {
        /// Registers this device for the current user (anonymous without a user token): call it from
        /// `application(_:didRegisterForRemoteNotificationsWithDeviceToken:)`. Sends `PUT /v1/devices/{hex}`
        /// with the APNs environment (`Configuration.pushEnvironment`, else the one the embedded provisioning
        /// profile grants: `development` is `sandbox`; no profile is `production`), `DeviceInfo.current`,
        /// and the user token; keeps the device token for the replies. With signing on
        /// (`Configuration.appID`) it registers the device key too, made on first need; `rotatingKey` makes a
        /// new one in its place.
        ///
        /// - Throws: `ActionHookClientError.refused` when the server refuses the registration,
        ///   `.unavailable` when it cannot be reached or fails, the token provider's error, or the key store's.
        public func register(deviceToken: Data, rotatingKey: Bool = false) async throws {
            let device = await DeviceInfo.current
            let profile = configuration.pushEnvironment == nil ? PushEnvironment.embeddedProvisioningProfile() : nil
            try await register(
                deviceToken: deviceToken, device: device, provisioningProfile: profile, rotatingKey: rotatingKey)
        }
    }
#endif
