import Basics
import Crypto

/// An app's whole set of categories and rules: what `PUT /v1/apps/{app}/config` replaces at once and
/// `GET /v1/apps/{app}/config` shows, each item in the shape its own route takes.
public struct AppConfiguration: Sendable, Equatable {
    /// The most categories one configuration may hold.
    public static let maxCategories = 1000
    /// The most rules one configuration may hold.
    public static let maxRules = 1000

    /// The categories, ordered by identifier.
    public private(set) var categories: [NotificationCategory]
    /// The rules, ordered by id.
    public private(set) var rules: [Rule]

    /// Creates a configuration; items are kept ordered by id, so equal sets are equal values.
    public init(categories: [NotificationCategory], rules: [Rule]) {
        self.categories = categories.sorted { $0.id < $1.id }
        self.rules = rules.sorted { $0.id < $1.id }
    }

    /// Strictly decodes a `PUT /v1/apps/{app}/config` body: `{"categories": [...], "rules": [...]}`, both
    /// required, each element decoded as its own route decodes it (a category must carry `identifier`).
    ///
    /// Every problem of every item is reported at once, each with its pointer into the whole body
    /// (`/rules/2/handler/type`); a repeated id, and (unless `allowPrivateWebhooks`) a follow-up URL aimed at
    /// a local or private address, are problems too. Any wrong JSON type makes the failure a 400, otherwise
    /// it is a 422.
    public static func decode(_ body: JSONValue, allowPrivateWebhooks: Bool) throws(ValidationFailure)
        -> AppConfiguration
    {
        var shape: [FieldError] = []
        var invalid: [FieldError] = []
        guard case .object(let object) = body else {
            throw .shape([FieldError(pointer: "", detail: "must be a JSON object")])
        }
        for key in object.keys where key != "categories" && key != "rules" {
            invalid.append(FieldError(pointer: JSONPointer.appending(key, to: ""), detail: "is not a known field"))
        }
        func elements(_ key: String, max: Int) -> [JSONValue] {
            let pointer = "/" + key
            guard let value = object[key], !value.isNull else {
                invalid.append(FieldError(pointer: pointer, detail: "is required"))
                return []
            }
            guard let array = value.arrayValue else {
                shape.append(FieldError(pointer: pointer, detail: "must be an array"))
                return []
            }
            if array.count > max {
                invalid.append(FieldError(pointer: pointer, detail: "must have at most \(max) items"))
            }
            return array
        }
        // Errors found inside one item, re-rooted at the item's place in the whole body.
        func collect(_ failure: ValidationFailure, at base: String) {
            let errors = failure.errors.map { FieldError(pointer: base + $0.pointer, detail: $0.detail) }
            if failure.status == 400 { shape += errors } else { invalid += errors }
        }

        var categories: [NotificationCategory] = []
        var categoryIDs = Set<String>()
        for (index, element) in elements("categories", max: maxCategories).enumerated() {
            let base = JSONPointer.appending(index, to: "/categories")
            guard let member = element.objectValue else {
                shape.append(FieldError(pointer: base, detail: "must be an object"))
                continue
            }
            guard let identifier = member["identifier"], !identifier.isNull else {
                invalid.append(FieldError(pointer: base + "/identifier", detail: "is required"))
                continue
            }
            guard let id = identifier.stringValue else {
                shape.append(FieldError(pointer: base + "/identifier", detail: "must be a string"))
                continue
            }
            do {
                let category = try NotificationCategory.decode(element, id: id)
                if !categoryIDs.insert(id).inserted {
                    invalid.append(
                        FieldError(pointer: base + "/identifier", detail: "must be unique in the configuration"))
                }
                categories.append(category)
            } catch {
                collect(error, at: base)
            }
        }

        var rules: [Rule] = []
        var ruleIDs = Set<String>()
        for (index, element) in elements("rules", max: maxRules).enumerated() {
            let base = JSONPointer.appending(index, to: "/rules")
            do {
                let rule = try Rule.decode(element, id: nil)
                if !ruleIDs.insert(rule.id).inserted {
                    invalid.append(FieldError(pointer: base + "/id", detail: "must be unique in the configuration"))
                }
                for (position, followUp) in rule.followUps.enumerated() {
                    guard let url = followUp.url,
                        !WebhookURL.isAllowedTarget(url, allowPrivate: allowPrivateWebhooks)
                    else { continue }
                    invalid.append(
                        FieldError(
                            pointer: base + "/followUps/\(position)/url",
                            detail: WebhookURL.refusedTargetDetail))
                }
                rules.append(rule)
            } catch {
                collect(error, at: base)
            }
        }

        if !shape.isEmpty {
            var failure = ValidationFailure.shape(shape + invalid)
            failure.detail = "The configuration does not have the expected shape."
            throw failure
        }
        if !invalid.isEmpty {
            var failure = ValidationFailure.invalid(invalid)
            failure.detail = "The configuration breaks one or more rules of the API; nothing was changed."
            throw failure
        }
        return AppConfiguration(categories: categories, rules: rules)
    }

    /// `{"categories": [...], "rules": [...]}`, items ordered by id, each in the shape its route
    /// accepts, so `decode` gives this configuration back.
    public var json: JSONValue {
        .object([
            "categories": .array(categories.map(\.json)),
            "rules": .array(rules.map(\.json)),
        ])
    }

    /// The strong entity tag of the whole configuration: a digest of its canonical JSON, so two reads
    /// of the same set give the same tag on every instance, and any change to any item gives another.
    public var etag: String {
        let digest = SHA256.hash(data: json.canonicalBytes)
        return "\""
            + digest.prefix(16).map { byte in
                let hex = String(byte, radix: 16)
                return byte < 16 ? "0" + hex : hex
            }.joined() + "\""
    }

    /// What replacing `current` with this configuration creates, changes and deletes.
    public func changes(from current: AppConfiguration) -> AppConfigurationChanges {
        AppConfigurationChanges(
            categories: .between(
                current.categories.map { ($0.id, $0.json.canonicalText) },
                categories.map { ($0.id, $0.json.canonicalText) }),
            rules: .between(
                current.rules.map { ($0.id, $0.json.canonicalText) }, rules.map { ($0.id, $0.json.canonicalText) }))
    }
}

/// The ids a configuration change touches, per kind of item.
public struct AppConfigurationChanges: Sendable, Equatable {
    /// The ids created, changed, deleted and left as they were, each sorted.
    public struct Items: Sendable, Equatable {
        /// Ids new in the configuration.
        public var created: [String] = []
        /// Ids whose definition changed.
        public var updated: [String] = []
        /// Ids no longer in the configuration.
        public var deleted: [String] = []
        /// Ids whose definition is the same.
        public var unchanged: [String] = []

        static func between(_ old: [(String, String)], _ new: [(String, String)]) -> Items {
            let before = Dictionary(old, uniquingKeysWith: { first, _ in first })
            let after = Dictionary(new, uniquingKeysWith: { first, _ in first })
            var items = Items()
            for (id, text) in new {
                switch before[id] {
                case nil: items.created.append(id)
                case text: items.unchanged.append(id)
                default: items.updated.append(id)
                }
            }
            items.deleted = old.map(\.0).filter { after[$0] == nil }
            items.created.sort()
            items.updated.sort()
            items.deleted.sort()
            items.unchanged.sort()
            return items
        }

        /// Whether nothing is created, changed or deleted.
        public var isEmpty: Bool { created.isEmpty && updated.isEmpty && deleted.isEmpty }

        var json: JSONValue {
            .object([
                "created": .array(created.map(JSONValue.string)), "updated": .array(updated.map(JSONValue.string)),
                "deleted": .array(deleted.map(JSONValue.string)), "unchanged": .array(unchanged.map(JSONValue.string)),
            ])
        }
    }

    /// The categories touched.
    public var categories: Items
    /// The rules touched.
    public var rules: Items

    /// Whether the change leaves the configuration as it was.
    public var isEmpty: Bool { categories.isEmpty && rules.isEmpty }

    /// `{"changed", "categories": {"created", "updated", "deleted", "unchanged"}, "rules": {...}}`.
    public var json: JSONValue {
        .object(["changed": .bool(!isEmpty), "categories": categories.json, "rules": rules.json])
    }
}
