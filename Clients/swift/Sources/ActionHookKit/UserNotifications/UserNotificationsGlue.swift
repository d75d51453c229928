// The only file that touches UserNotifications: conversions between its types and ActionHookKit's, nothing
// else. It compiles on Apple platforms; on Linux, the GlueTypeCheck test target compiles this same file
// (a symbolic link) against a stand-in module with Apple's signatures, where ACTIONHOOKKIT_GLUE_CHECK is set.
#if canImport(UserNotifications) && (canImport(Darwin) || ACTIONHOOKKIT_GLUE_CHECK)
    import Foundation
    import UserNotifications
    #if ACTIONHOOKKIT_GLUE_CHECK
        import ActionHookKit
    #endif

    extension Reply {
        /// The reply a `UNNotificationResponse` describes: the action, the typed text of a
        /// `UNTextInputNotificationResponse`, the category, the request's identifier and its `userInfo` made
        /// JSON-safe. `respondedAt` is now: the system calls the delegate when the person answers.
        public init(_ response: UNNotificationResponse, deviceToken: String? = nil, respondedAt: Date = Date()) {
            let request = response.notification.request
            self.init(
                actionIdentifier: response.actionIdentifier,
                userText: (response as? UNTextInputNotificationResponse)?.userText,
                categoryIdentifier: request.content.categoryIdentifier,
                notificationIdentifier: request.identifier,
                userInfo: JSONValue.sanitizing(userInfo: request.content.userInfo),
                deviceToken: deviceToken,
                respondedAt: respondedAt)
        }
    }

    extension ActionHookClient {
        /// Forwards a response from `userNotificationCenter(_:didReceive:withCompletionHandler:)`: queues it on
        /// disk, then calls `completionHandler` at once; sending happens in the background.
        public func forward(_ response: UNNotificationResponse, completionHandler: @escaping () -> Void) {
            forward(Reply(response))
            completionHandler()
        }

        /// Forwards a response from the `async` delegate method; returns once it is queued on disk.
        public func forward(_ response: UNNotificationResponse, isolation: isolated (any Actor)? = #isolation) async {
            forward(Reply(response))
        }

        /// Fetches the categories (or, offline, the last set kept on disk) and registers them with `center`,
        /// one `UNNotificationCategory` per server category.
        @MainActor
        @discardableResult
        public func registerCategories(on center: UNUserNotificationCenter) async throws -> CategorySet {
            let set = try await fetchCategories()
            center.setNotificationCategories(Set(set.categories.map(\.notificationCategory)))
            return set
        }
    }

    extension CategoryDefinition {
        /// The `UNNotificationCategory`: identifier, actions in order, intent identifiers and options.
        public var notificationCategory: UNNotificationCategory {
            UNNotificationCategory(
                identifier: identifier, actions: actions.map(\.notificationAction),
                intentIdentifiers: intentIdentifiers, options: categoryOptions)
        }

        /// The options by name; names this version does not know are left out.
        public var categoryOptions: UNNotificationCategoryOptions {
            var result: UNNotificationCategoryOptions = []
            for option in options {
                switch option {
                case "customDismissAction": result.insert(.customDismissAction)
                case "allowInCarPlay":
                    // Not in macOS's UserNotifications (iOS, watchOS and visionOS have it).
                    #if !os(macOS)
                        result.insert(.allowInCarPlay)
                    #endif
                case "hiddenPreviewsShowTitle": result.insert(.hiddenPreviewsShowTitle)
                case "hiddenPreviewsShowSubtitle": result.insert(.hiddenPreviewsShowSubtitle)
                case "allowAnnouncement": result.insert(.allowAnnouncement)
                default: break
                }
            }
            return result
        }
    }

    extension ActionDefinition {
        /// A `UNTextInputNotificationAction` when the action has a text field, else a `UNNotificationAction`.
        public var notificationAction: UNNotificationAction {
            if let textInput {
                return UNTextInputNotificationAction(
                    identifier: identifier, title: title, options: actionOptions,
                    textInputButtonTitle: textInput.buttonTitle, textInputPlaceholder: textInput.placeholder)
            }
            return UNNotificationAction(identifier: identifier, title: title, options: actionOptions)
        }

        /// The options by name; names this version does not know are left out.
        public var actionOptions: UNNotificationActionOptions {
            var result: UNNotificationActionOptions = []
            for option in options {
                switch option {
                case "foreground": result.insert(.foreground)
                case "destructive": result.insert(.destructive)
                case "authenticationRequired": result.insert(.authenticationRequired)
                default: break
                }
            }
            return result
        }
    }

    extension ForegroundPresentation {
        /// The options for `userNotificationCenter(_:willPresent:withCompletionHandler:)`.
        public func presentationOptions(for notification: UNNotification) -> UNNotificationPresentationOptions {
            let options = options(forCategory: notification.request.content.categoryIdentifier)
            var result: UNNotificationPresentationOptions = []
            if options.contains(.banner) { result.insert(.banner) }
            if options.contains(.list) { result.insert(.list) }
            if options.contains(.sound) { result.insert(.sound) }
            if options.contains(.badge) { result.insert(.badge) }
            return result
        }
    }
#endif
