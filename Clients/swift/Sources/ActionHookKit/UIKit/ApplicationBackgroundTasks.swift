// The only file that touches UIKit: background time while replies are sent. It compiles on iOS and
// visionOS (watchOS has no UIApplication); on Linux the GlueTypeCheck test target compiles this same file (a
// symbolic link) against a stand-in module with Apple's signatures, where ACTIONHOOKKIT_GLUE_CHECK is set.
#if canImport(UIKit) && !os(watchOS) && (canImport(Darwin) || ACTIONHOOKKIT_GLUE_CHECK)
    import Foundation
    import UIKit
    #if ACTIONHOOKKIT_GLUE_CHECK
        import ActionHookKit
    #endif

    /// `BackgroundActivity` over `UIApplication.beginBackgroundTask(withName:expirationHandler:)`: the app keeps
    /// running after the notification delegate's completion handler while the client sends, and when the time
    /// runs out the client stops at once and ends the task (the system-run upload carries on).
    public struct ApplicationBackgroundTasks: BackgroundActivity {
        private let application: UIApplication

        /// Background tasks of `application` (the shared one by default).
        @MainActor
        public init(application: UIApplication = .shared) {
            self.application = application
        }

        public func begin(expired: @escaping @Sendable () -> Void) -> BackgroundActivityToken? {
            let identifier = application.beginBackgroundTask(
                withName: "ActionHookKit: sending replies", expirationHandler: { expired() })
            return identifier == .invalid ? nil : BackgroundActivityToken(rawValue: identifier.rawValue)
        }

        public func end(_ token: BackgroundActivityToken) {
            application.endBackgroundTask(UIBackgroundTaskIdentifier(rawValue: token.rawValue))
        }
    }
#endif
