// A stand-in for Apple's UserNotifications framework, for Linux only (Package.swift declares it inside
// `#if os(Linux)`), so that ActionHookKit's glue in Sources/ActionHookKit/UserNotifications type-checks and
// runs in tests here. Every public declaration Apple has is written with Apple's name and signature (from
// the UserNotifications reference); the classes derive from NSObject as Apple's do, without the NSCopying
// and NSSecureCoding conformances the glue does not use. The only additions are the `standIn` initialisers
// and `standInRegistered`, which tests use to make the objects the system would hand the app; the glue
// must never call them (their names say so at any call site).
import Foundation

public let UNNotificationDefaultActionIdentifier: String = "com.apple.UNNotificationDefaultActionIdentifier"
public let UNNotificationDismissActionIdentifier: String = "com.apple.UNNotificationDismissActionIdentifier"

public struct UNNotificationActionOptions: OptionSet, @unchecked Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    public static var authenticationRequired: UNNotificationActionOptions { UNNotificationActionOptions(rawValue: 1 << 0) }
    public static var destructive: UNNotificationActionOptions { UNNotificationActionOptions(rawValue: 1 << 1) }
    public static var foreground: UNNotificationActionOptions { UNNotificationActionOptions(rawValue: 1 << 2) }
}

public struct UNNotificationCategoryOptions: OptionSet, @unchecked Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    public static var customDismissAction: UNNotificationCategoryOptions { UNNotificationCategoryOptions(rawValue: 1 << 0) }
    public static var allowInCarPlay: UNNotificationCategoryOptions { UNNotificationCategoryOptions(rawValue: 1 << 1) }
    public static var hiddenPreviewsShowTitle: UNNotificationCategoryOptions {
        UNNotificationCategoryOptions(rawValue: 1 << 2)
    }
    public static var hiddenPreviewsShowSubtitle: UNNotificationCategoryOptions {
        UNNotificationCategoryOptions(rawValue: 1 << 3)
    }
    public static var allowAnnouncement: UNNotificationCategoryOptions { UNNotificationCategoryOptions(rawValue: 1 << 4) }
}

public struct UNNotificationPresentationOptions: OptionSet, @unchecked Sendable {
    public let rawValue: UInt
    public init(rawValue: UInt) { self.rawValue = rawValue }
    public static var badge: UNNotificationPresentationOptions { UNNotificationPresentationOptions(rawValue: 1 << 0) }
    public static var sound: UNNotificationPresentationOptions { UNNotificationPresentationOptions(rawValue: 1 << 1) }
    public static var list: UNNotificationPresentationOptions { UNNotificationPresentationOptions(rawValue: 1 << 3) }
    public static var banner: UNNotificationPresentationOptions { UNNotificationPresentationOptions(rawValue: 1 << 4) }
}

open class UNNotificationAction: NSObject {
    open private(set) var identifier: String
    open private(set) var title: String
    open private(set) var options: UNNotificationActionOptions

    init(standInIdentifier identifier: String, title: String, options: UNNotificationActionOptions) {
        self.identifier = identifier
        self.title = title
        self.options = options
    }

    public convenience init(identifier: String, title: String, options: UNNotificationActionOptions = []) {
        self.init(standInIdentifier: identifier, title: title, options: options)
    }
}

open class UNTextInputNotificationAction: UNNotificationAction {
    open private(set) var textInputButtonTitle: String = ""
    open private(set) var textInputPlaceholder: String = ""

    public convenience init(
        identifier: String, title: String, options: UNNotificationActionOptions = [], textInputButtonTitle: String,
        textInputPlaceholder: String
    ) {
        self.init(standInIdentifier: identifier, title: title, options: options)
        self.textInputButtonTitle = textInputButtonTitle
        self.textInputPlaceholder = textInputPlaceholder
    }
}

open class UNNotificationCategory: NSObject {
    open private(set) var identifier: String
    open private(set) var actions: [UNNotificationAction]
    open private(set) var intentIdentifiers: [String]
    open private(set) var options: UNNotificationCategoryOptions

    init(
        standInIdentifier identifier: String, actions: [UNNotificationAction], intentIdentifiers: [String],
        options: UNNotificationCategoryOptions
    ) {
        self.identifier = identifier
        self.actions = actions
        self.intentIdentifiers = intentIdentifiers
        self.options = options
    }

    public convenience init(
        identifier: String, actions: [UNNotificationAction], intentIdentifiers: [String],
        options: UNNotificationCategoryOptions = []
    ) {
        self.init(standInIdentifier: identifier, actions: actions, intentIdentifiers: intentIdentifiers, options: options)
    }
}

open class UNNotificationContent: NSObject {
    open private(set) var categoryIdentifier: String
    open private(set) var userInfo: [AnyHashable: Any]

    public init(standInCategoryIdentifier categoryIdentifier: String, userInfo: [AnyHashable: Any]) {
        self.categoryIdentifier = categoryIdentifier
        self.userInfo = userInfo
    }
}

open class UNNotificationRequest: NSObject {
    open private(set) var identifier: String
    open private(set) var content: UNNotificationContent

    public init(standInIdentifier identifier: String, content: UNNotificationContent) {
        self.identifier = identifier
        self.content = content
    }
}

open class UNNotification: NSObject {
    open private(set) var date: Date
    open private(set) var request: UNNotificationRequest

    public init(standInRequest request: UNNotificationRequest, date: Date) {
        self.request = request
        self.date = date
    }
}

open class UNNotificationResponse: NSObject {
    open private(set) var notification: UNNotification
    open private(set) var actionIdentifier: String

    public init(standInNotification notification: UNNotification, actionIdentifier: String) {
        self.notification = notification
        self.actionIdentifier = actionIdentifier
    }
}

open class UNTextInputNotificationResponse: UNNotificationResponse {
    open private(set) var userText: String

    public init(standInNotification notification: UNNotification, actionIdentifier: String, userText: String) {
        self.userText = userText
        super.init(standInNotification: notification, actionIdentifier: actionIdentifier)
    }
}

open class UNUserNotificationCenter: NSObject {
    nonisolated(unsafe) private static let shared = UNUserNotificationCenter()

    /// What `setNotificationCategories` was last given (stand-in only).
    public private(set) var standInRegistered: Set<UNNotificationCategory> = []

    open class func current() -> UNUserNotificationCenter { shared }

    open func setNotificationCategories(_ categories: Set<UNNotificationCategory>) {
        standInRegistered = categories
    }
}
