import ActionHookCore
import Foundation
import Postgres

/// The result of replacing an app's configuration.
public struct ConfigurationReplacement: Sendable {
    /// What was (or, in a dry run, would be) created, changed and deleted.
    public var changes: AppConfigurationChanges
    /// The entity tag of the configuration now stored (in a dry run, the one that would be).
    public var etag: String
}

/// An app's categories and rules taken together, read and replaced as one.
public struct ConfigurationStore: Sendable {
    let pool: Database

    /// Creates the store over a pool.
    public init(pool: PostgresPool) {
        self.pool = Database(pool)
    }

    /// The app's current configuration, read in one statement (one snapshot).
    public func current(appID: String) throws -> AppConfiguration {
        let rows = try pool.withConnection { connection in
            try connection.query(
                """
                SELECT 'category' AS kind, id, definition FROM categories WHERE app_id = \(appID)
                UNION ALL
                SELECT 'rule' AS kind, id, definition FROM rules WHERE app_id = \(appID)
                """)
        }
        var categories: [NotificationCategory] = []
        var rules: [Rule] = []
        for row in rows {
            if try row.decode("kind", as: String.self) == "category" {
                categories.append(try CategoryStore.decode(row))
            } else {
                rules.append(try RuleStore.decodeRule(row))
            }
        }
        return AppConfiguration(categories: categories, rules: rules)
    }

    /// Replaces the app's categories and rules with `configuration` in one transaction: items that are
    /// new are inserted, changed ones updated (a rule's version goes up), missing ones deleted, and the
    /// same ones left untouched; nothing is written when nothing changes. With `ifMatch`, only when the
    /// current configuration still has that entity tag (``StoreError/versionMismatch`` otherwise). With
    /// `dryRun`, only reports what would change. Every instance is told (NOTIFY) when anything changed.
    public func replace(
        appID: String, with configuration: AppConfiguration, ifMatch: String?, dryRun: Bool
    ) throws -> ConfigurationReplacement {
        do {
            return try pool.transaction { connection in
                // The app's row lock makes concurrent replacements of one app take turns, so each compares
                // its If-Match against what the previous one left. It also holds off items created through
                // their own routes meanwhile: their foreign key to the app waits for a KEY SHARE lock.
                let app = try connection.query("SELECT 1 AS one FROM apps WHERE id = \(appID) FOR UPDATE")
                guard !app.isEmpty else { throw StoreError.notFound }
                // Row locks hold off single-item writes to what is compared here until this commits.
                let categoryRows = try connection.query(
                    "SELECT id, definition FROM categories WHERE app_id = \(appID) ORDER BY id FOR UPDATE")
                let ruleRows = try connection.query(
                    "SELECT id, definition FROM rules WHERE app_id = \(appID) ORDER BY id FOR UPDATE")
                let current = AppConfiguration(
                    categories: try categoryRows.map(CategoryStore.decode),
                    rules: try ruleRows.map(RuleStore.decodeRule))
                if let ifMatch, ifMatch != current.etag { throw StoreError.versionMismatch }
                let changes = configuration.changes(from: current)
                let result = ConfigurationReplacement(changes: changes, etag: configuration.etag)
                if dryRun || changes.isEmpty { return result }

                for id in changes.categories.deleted {
                    try connection.execute("DELETE FROM categories WHERE app_id = \(appID) AND id = \(id)")
                }
                for id in changes.rules.deleted {
                    try connection.execute("DELETE FROM rules WHERE app_id = \(appID) AND id = \(id)")
                }
                let touchedCategories = Set(changes.categories.created + changes.categories.updated)
                for category in configuration.categories where touchedCategories.contains(category.id) {
                    try connection.execute(
                        """
                        INSERT INTO categories (app_id, id, definition)
                        VALUES (\(appID), \(category.id), \(PostgresJSON(category.json.jsonText)))
                        ON CONFLICT (app_id, id) DO UPDATE SET definition = EXCLUDED.definition, updated_at = now()
                        """)
                }
                let created = Set(changes.rules.created)
                let updated = Set(changes.rules.updated)
                for rule in configuration.rules {
                    let definition = PostgresJSON(rule.json.jsonText)
                    if created.contains(rule.id) {
                        try connection.execute(
                            """
                            INSERT INTO rules (app_id, id, priority, enabled, definition)
                            VALUES (\(appID), \(rule.id), \(rule.priority), \(rule.enabled), \(definition))
                            """)
                    } else if updated.contains(rule.id) {
                        try connection.execute(
                            """
                            UPDATE rules SET priority = \(rule.priority), enabled = \(rule.enabled),
                                definition = \(definition), version = version + 1, updated_at = now()
                            WHERE app_id = \(appID) AND id = \(rule.id)
                            """)
                    }
                }
                try connection.notify(channel: Channels.invalidate, payload: appID)
                return result
            }
        } catch let error as PostgresError where error.isUniqueViolation {
            // A rule or category created through its own route after the rows were locked: the
            // configuration changed under this request.
            throw StoreError.versionMismatch
        }
    }
}
