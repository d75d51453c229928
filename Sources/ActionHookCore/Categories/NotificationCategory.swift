/// The text field of a `UNTextInputNotificationAction`.
public struct TextInput: Sendable, Equatable {
    /// The title of the send button (`textInputButtonTitle`).
    public var buttonTitle: String
    /// The placeholder text (`textInputPlaceholder`).
    public var placeholder: String

    /// Creates a text input.
    public init(buttonTitle: String, placeholder: String) {
        self.buttonTitle = buttonTitle
        self.placeholder = placeholder
    }
}

/// A `UNNotificationAction` (or, with `textInput`, a `UNTextInputNotificationAction`) as data.
public struct NotificationAction: Sendable, Equatable {
    /// The option names an action may carry (`UNNotificationActionOptions`).
    public static let allowedOptions = ["foreground", "destructive", "authenticationRequired"]

    /// The identifier iOS reports as `actionIdentifier`.
    public var identifier: String
    /// The button title.
    public var title: String
    /// A subset of `allowedOptions`.
    public var options: [String]
    /// The text field, for a text-input action.
    public var textInput: TextInput?

    /// Creates an action.
    public init(identifier: String, title: String, options: [String] = [], textInput: TextInput? = nil) {
        self.identifier = identifier
        self.title = title
        self.options = options
        self.textInput = textInput
    }

    /// `{"identifier", "title", "options", ("textInput": {"buttonTitle", "placeholder"})}`.
    public var json: JSONValue {
        var object: JSONObject = [
            "identifier": .string(identifier),
            "title": .string(title),
            "options": .array(options.map(JSONValue.string)),
        ]
        if let textInput {
            object["textInput"] = .object([
                "buttonTitle": .string(textInput.buttonTitle),
                "placeholder": .string(textInput.placeholder),
            ])
        }
        return .object(object)
    }
}

/// A `UNNotificationCategory` as data, plus the `userInfo` key that names a response's subject.
public struct NotificationCategory: Sendable, Equatable {
    /// The option names a category may carry (`UNNotificationCategoryOptions`).
    public static let allowedOptions = [
        "customDismissAction", "allowInCarPlay", "hiddenPreviewsShowTitle", "hiddenPreviewsShowSubtitle",
        "allowAnnouncement",
    ]
    /// The longest action identifier, title, text-input string, intent identifier or subject key.
    static let maxTextLength = 256

    /// The category identifier (a slug), as `aps.category` names it.
    public var id: String
    /// The actions, in the order iOS shows them.
    public var actions: [NotificationAction]
    /// A subset of `allowedOptions`.
    public var options: [String]
    /// The SiriKit intent identifiers.
    public var intentIdentifiers: [String]
    /// The `userInfo` key whose value is the subject of a response.
    public var subjectKey: String?
    /// The oldest a reply may be when it arrives (`receivedAt − respondedAt`), in seconds; nil: no limit.
    public var maxReplyAgeSeconds: Int?
    /// Whether a reply without `respondedAt` (whose age cannot be judged) is refused.
    public var requireRespondedAt: Bool
    /// Whether a reply acts only when signed by its device's registered key (``ReplySignature``); an unsigned
    /// or invalid one is stored as `unverified` and answered 403. Sends of the category require it too.
    public var requireSignedReplies: Bool

    /// Creates a category.
    public init(
        id: String, actions: [NotificationAction] = [], options: [String] = [], intentIdentifiers: [String] = [],
        subjectKey: String? = nil, maxReplyAgeSeconds: Int? = nil, requireRespondedAt: Bool = false,
        requireSignedReplies: Bool = false
    ) {
        self.requireSignedReplies = requireSignedReplies
        self.id = id
        self.actions = actions
        self.options = options
        self.intentIdentifiers = intentIdentifiers
        self.subjectKey = subjectKey
        self.maxReplyAgeSeconds = maxReplyAgeSeconds
        self.requireRespondedAt = requireRespondedAt
    }

    /// The age limit this category gives its replies.
    public var replyAgeLimit: ReplyAgeLimit {
        ReplyAgeLimit(maxAgeSeconds: maxReplyAgeSeconds, requireRespondedAt: requireRespondedAt)
    }

    /// Strictly decodes a PUT body; `id` comes from the path.
    ///
    /// A body `identifier`, if present, must equal `id`; `id` must be a slug (`[A-Za-z0-9._-]{1,64}`).
    /// Unknown members, duplicate action identifiers, unknown or repeated options → 422 with pointers;
    /// wrong JSON types → 400. `actions`, `options` and `intentIdentifiers` default to empty.
    public static func decode(_ body: JSONValue, id: String) throws(ValidationFailure) -> NotificationCategory {
        var diagnostics = Diagnostics()
        guard var reader = ObjectReader.root(body, &diagnostics) else {
            try diagnostics.check()
            preconditionFailure("a non-object body is always a shape error")
        }
        if !Slug.isValid(id) {
            diagnostics.invalid("/identifier", Slug.rule)
        }
        if let identifier = reader.string("identifier", &diagnostics), identifier != id {
            diagnostics.invalid("/identifier", "must equal the identifier in the path")
        }

        var actions: [NotificationAction] = []
        var seen = Set<String>()
        for (index, element) in (reader.array("actions", &diagnostics) ?? []).enumerated() {
            let pointer = JSONPointer.appending(index, to: "/actions")
            guard let object = element.objectValue else {
                diagnostics.wrongType(pointer, expected: "an object")
                continue
            }
            guard let action = decodeAction(object, at: pointer, &diagnostics) else { continue }
            if !seen.insert(action.identifier).inserted {
                diagnostics.invalid(pointer + "/identifier", "must be unique within the category")
            }
            actions.append(action)
        }

        let options = reader.strings("options", &diagnostics) ?? []
        checkOptions(options, allowed: allowedOptions, at: "/options", &diagnostics)

        let intentIdentifiers = reader.strings("intentIdentifiers", &diagnostics) ?? []
        for (index, intent) in intentIdentifiers.enumerated() {
            diagnostics.checkLength(intent, JSONPointer.appending(index, to: "/intentIdentifiers"), max: maxTextLength)
        }

        let subjectKey = reader.string("subjectKey", &diagnostics)
        if let subjectKey {
            diagnostics.checkLength(subjectKey, "/subjectKey", max: maxTextLength)
        }

        let maxReplyAgeSeconds = reader.integer("maxReplyAgeSeconds", in: ReplyAgeLimit.range, &diagnostics)
        let requireRespondedAt = reader.bool("requireRespondedAt", &diagnostics) ?? false
        let requireSignedReplies = reader.bool("requireSignedReplies", &diagnostics) ?? false

        reader.reportUnknown(&diagnostics, serverOwned: ["createdAt", "updatedAt", "etag", "version"])
        try diagnostics.check()
        return NotificationCategory(
            id: id, actions: actions, options: options, intentIdentifiers: intentIdentifiers, subjectKey: subjectKey,
            maxReplyAgeSeconds: maxReplyAgeSeconds, requireRespondedAt: requireRespondedAt,
            requireSignedReplies: requireSignedReplies)
    }

    private static func decodeAction(
        _ object: JSONObject, at pointer: String, _ diagnostics: inout Diagnostics
    ) -> NotificationAction? {
        var reader = ObjectReader(object, at: pointer)
        let identifier = reader.string("identifier", &diagnostics)
        let title = reader.string("title", &diagnostics)
        for (key, value) in [("identifier", identifier), ("title", title)] {
            if let value {
                diagnostics.checkLength(value, reader.pointer(key), max: maxTextLength)
            } else if !reader.has(key) {
                diagnostics.invalid(reader.pointer(key), "is required")
            }
        }
        let options = reader.strings("options", &diagnostics) ?? []
        checkOptions(options, allowed: NotificationAction.allowedOptions, at: reader.pointer("options"), &diagnostics)

        var textInput: TextInput?
        if let input = reader.object("textInput", &diagnostics) {
            var inputReader = ObjectReader(input, at: reader.pointer("textInput"))
            let buttonTitle = inputReader.string("buttonTitle", &diagnostics)
            let placeholder = inputReader.string("placeholder", &diagnostics)
            for (key, value) in [("buttonTitle", buttonTitle), ("placeholder", placeholder)] {
                if let value {
                    diagnostics.checkLength(value, inputReader.pointer(key), min: 0, max: maxTextLength)
                } else if !inputReader.has(key) {
                    diagnostics.invalid(inputReader.pointer(key), "is required")
                }
            }
            inputReader.reportUnknown(&diagnostics)
            if let buttonTitle, let placeholder {
                textInput = TextInput(buttonTitle: buttonTitle, placeholder: placeholder)
            }
        }
        reader.reportUnknown(&diagnostics)
        guard let identifier, let title else { return nil }
        return NotificationAction(identifier: identifier, title: title, options: options, textInput: textInput)
    }

    private static func checkOptions(
        _ options: [String], allowed: [String], at pointer: String, _ diagnostics: inout Diagnostics
    ) {
        var seen = Set<String>()
        for (index, option) in options.enumerated() {
            let optionPointer = JSONPointer.appending(index, to: pointer)
            if !allowed.contains(option) {
                diagnostics.invalid(optionPointer, "must be one of " + allowed.joined(separator: ", "))
            } else if !seen.insert(option).inserted {
                diagnostics.invalid(optionPointer, "must not repeat an option")
            }
        }
    }

    /// `{"identifier", "actions": [...], "options", "intentIdentifiers", ("subjectKey"), ("maxReplyAgeSeconds"),
    /// ("requireRespondedAt"), ("requireSignedReplies")}`: one to one onto
    /// `UNNotificationCategory`, and accepted back by `decode`.
    public var json: JSONValue {
        var object: JSONObject = [
            "identifier": .string(id),
            "actions": .array(actions.map(\.json)),
            "options": .array(options.map(JSONValue.string)),
            "intentIdentifiers": .array(intentIdentifiers.map(JSONValue.string)),
        ]
        if let subjectKey {
            object["subjectKey"] = .string(subjectKey)
        }
        if let maxReplyAgeSeconds {
            object["maxReplyAgeSeconds"] = .integer(maxReplyAgeSeconds)
        }
        if requireRespondedAt {
            object["requireRespondedAt"] = .bool(true)
        }
        if requireSignedReplies {
            object["requireSignedReplies"] = .bool(true)
        }
        return .object(object)
    }
}
