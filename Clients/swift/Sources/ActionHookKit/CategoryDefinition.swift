import Foundation

/// A category as `GET /v1/categories` answers it: one to one onto `UNNotificationCategory`.
///
/// Members the server adds later are ignored, so an older app keeps working against a newer server.
public struct CategoryDefinition: Sendable, Hashable, Codable {
    /// The category identifier, as `aps.category` names it.
    public var identifier: String
    /// The actions, in the order iOS shows them.
    public var actions: [ActionDefinition]
    /// `UNNotificationCategoryOptions` by name: `customDismissAction`, `allowInCarPlay`,
    /// `hiddenPreviewsShowTitle`, `hiddenPreviewsShowSubtitle`, `allowAnnouncement`.
    public var options: [String]
    /// The SiriKit intent identifiers.
    public var intentIdentifiers: [String]
    /// The `userInfo` key that names a reply's subject on the server.
    public var subjectKey: String?
    /// The oldest a reply to this category may be when it reaches the server; older replies are not sent.
    public var maxReplyAgeSeconds: Int?

    /// Creates a category.
    public init(
        identifier: String, actions: [ActionDefinition] = [], options: [String] = [], intentIdentifiers: [String] = [],
        subjectKey: String? = nil, maxReplyAgeSeconds: Int? = nil
    ) {
        self.identifier = identifier
        self.actions = actions
        self.options = options
        self.intentIdentifiers = intentIdentifiers
        self.subjectKey = subjectKey
        self.maxReplyAgeSeconds = maxReplyAgeSeconds
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        identifier = try container.decode(String.self, forKey: .identifier)
        actions = try container.decodeIfPresent([ActionDefinition].self, forKey: .actions) ?? []
        options = try container.decodeIfPresent([String].self, forKey: .options) ?? []
        intentIdentifiers = try container.decodeIfPresent([String].self, forKey: .intentIdentifiers) ?? []
        subjectKey = try container.decodeIfPresent(String.self, forKey: .subjectKey)
        maxReplyAgeSeconds = try container.decodeIfPresent(Int.self, forKey: .maxReplyAgeSeconds)
    }
}

/// An action as the server describes it: `UNNotificationAction`, or with `textInput`
/// `UNTextInputNotificationAction`.
public struct ActionDefinition: Sendable, Hashable, Codable {
    /// The identifier iOS reports as `actionIdentifier`.
    public var identifier: String
    /// The button title.
    public var title: String
    /// `UNNotificationActionOptions` by name: `foreground`, `destructive`, `authenticationRequired`.
    public var options: [String]
    /// The text field of a text-input action.
    public var textInput: TextInputDefinition?

    /// Creates an action.
    public init(identifier: String, title: String, options: [String] = [], textInput: TextInputDefinition? = nil) {
        self.identifier = identifier
        self.title = title
        self.options = options
        self.textInput = textInput
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        identifier = try container.decode(String.self, forKey: .identifier)
        title = try container.decode(String.self, forKey: .title)
        options = try container.decodeIfPresent([String].self, forKey: .options) ?? []
        textInput = try container.decodeIfPresent(TextInputDefinition.self, forKey: .textInput)
    }
}

/// The text field of a text-input action.
public struct TextInputDefinition: Sendable, Hashable, Codable {
    /// `textInputButtonTitle`.
    public var buttonTitle: String
    /// `textInputPlaceholder`.
    public var placeholder: String

    /// Creates a text input.
    public init(buttonTitle: String, placeholder: String) {
        self.buttonTitle = buttonTitle
        self.placeholder = placeholder
    }
}

/// The app's categories and where they came from.
public struct CategorySet: Sendable, Equatable, Codable {
    /// Where a set came from.
    public enum Origin: String, Sendable, Codable {
        /// Fetched from the server: it changed, or was never fetched before.
        case fetched
        /// The server answered 304: the copy on disk is current.
        case notModified
        /// The server could not be reached or failed: the last set kept on disk.
        case cached
    }

    /// The categories, ordered by identifier.
    public var categories: [CategoryDefinition]
    /// The server's `ETag` for this set.
    public var etag: String?
    /// Where this set came from.
    public var origin: Origin

    /// The category named `identifier`.
    public func category(_ identifier: String) -> CategoryDefinition? {
        categories.first { $0.identifier == identifier }
    }
}

/// How the app presents a notification that arrives while it is in the foreground
/// (`userNotificationCenter(_:willPresent:withCompletionHandler:)`), by category.
///
/// iOS shows nothing for a notification that arrives while the app is in front unless the delegate says
/// so; most apps want some categories shown (an invite) and others not (a silent update).
public struct ForegroundPresentation: Sendable, Equatable {
    /// The ways to present a notification (`UNNotificationPresentationOptions`).
    public struct Options: OptionSet, Sendable, Hashable {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }
        /// Show a banner.
        public static let banner = Options(rawValue: 1 << 0)
        /// Keep it in Notification Center.
        public static let list = Options(rawValue: 1 << 1)
        /// Play its sound.
        public static let sound = Options(rawValue: 1 << 2)
        /// Apply its badge.
        public static let badge = Options(rawValue: 1 << 3)
    }

    /// Options by category identifier.
    public var byCategory: [String: Options]
    /// Options for a category not named in `byCategory` (and for notifications without a category).
    public var otherwise: Options

    /// Creates a policy; by default every notification shows as a banner, in the list, with its sound.
    public init(byCategory: [String: Options] = [:], otherwise: Options = [.banner, .list, .sound]) {
        self.byCategory = byCategory
        self.otherwise = otherwise
    }

    /// The options for a notification of `categoryIdentifier` (empty: no category).
    public func options(forCategory categoryIdentifier: String) -> Options {
        byCategory[categoryIdentifier] ?? otherwise
    }
}
