import ActionHookCore
import Foundation
import Postgres

/// A rule with its version, the basis of its `ETag`.
public struct StoredRule: Sendable {
    /// The rule.
    public var rule: Rule
    /// Incremented at every change.
    public var version: Int
    /// When it was created.
    public var createdAt: Date
    /// When it last changed.
    public var updatedAt: Date

    /// The strong entity tag for the current version.
    public var etag: String { "\"\(version)\"" }

    /// The rule as the API shows it, with its timestamps.
    public var json: JSONValue {
        guard case .object(var object) = rule.json else { return rule.json }
        object["createdAt"] = .string(Timestamp.format(createdAt))
        object["updatedAt"] = .string(Timestamp.format(updatedAt))
        return .object(object)
    }
}

/// An app's rules.
public struct RuleStore: Sendable {
    let pool: Database

    /// Creates the store over a pool.
    public init(pool: PostgresPool) {
        self.pool = Database(pool)
    }

    /// Creates a rule; an existing id is ``StoreError/alreadyExists``.
    public func create(appID: String, _ rule: Rule) throws -> StoredRule {
        do {
            return try pool.transaction { connection in
                let rows = try connection.query(
                    """
                    INSERT INTO rules (app_id, id, priority, enabled, definition)
                    VALUES (\(appID), \(rule.id), \(rule.priority), \(rule.enabled), \(PostgresJSON(rule.json.jsonText)))
                    RETURNING \(unsafeSQL: Self.columns)
                    """)
                try connection.notify(channel: Channels.invalidate, payload: appID)
                return try Self.decode(rows[0])
            }
        } catch let error as PostgresError where error.isUniqueViolation {
            throw StoreError.alreadyExists
        }
    }

    /// The rule, or `nil`.
    public func get(appID: String, id: String) throws -> StoredRule? {
        try pool.withConnection { connection in
            try connection.query("SELECT \(unsafeSQL: Self.columns) FROM rules WHERE app_id = \(appID) AND id = \(id)")
                .first.map(Self.decode)
        }
    }

    /// Replaces a rule; with `ifMatch`, only when that is still its version.
    public func replace(appID: String, _ rule: Rule, ifMatch version: Int?) throws -> StoredRule {
        try pool.transaction { connection in
            let rows = try connection.query(
                """
                UPDATE rules SET priority = \(rule.priority), enabled = \(rule.enabled),
                    definition = \(PostgresJSON(rule.json.jsonText)), version = version + 1, updated_at = now()
                WHERE app_id = \(appID) AND id = \(rule.id) AND (\(version)::bigint IS NULL OR version = \(version))
                RETURNING \(unsafeSQL: Self.columns)
                """)
            guard let row = rows.first else {
                let exists = try connection.query(
                    "SELECT 1 AS one FROM rules WHERE app_id = \(appID) AND id = \(rule.id)")
                throw exists.isEmpty ? StoreError.notFound : StoreError.versionMismatch
            }
            try connection.notify(channel: Channels.invalidate, payload: appID)
            return try Self.decode(row)
        }
    }

    /// Deletes a rule; with `ifMatch`, only when that is still its version.
    public func delete(appID: String, id: String, ifMatch version: Int?) throws {
        try pool.transaction { connection in
            let deleted = try connection.execute(
                """
                DELETE FROM rules WHERE app_id = \(appID) AND id = \(id)
                    AND (\(version)::bigint IS NULL OR version = \(version))
                """)
            guard deleted > 0 else {
                let exists = try connection.query("SELECT 1 AS one FROM rules WHERE app_id = \(appID) AND id = \(id)")
                throw exists.isEmpty ? StoreError.notFound : StoreError.versionMismatch
            }
            try connection.notify(channel: Channels.invalidate, payload: appID)
        }
    }

    /// The app's rules in evaluation order (priority, then id), one page at a time.
    public func list(appID: String, _ page: PageRequest) throws -> Page<StoredRule> {
        var afterPriority: Int?
        var afterID: String?
        if let encoded = page.cursor {
            guard let cursor = Cursor(encoded: encoded, count: 2), let priority = Int(cursor.parts[0]) else {
                throw InvalidCursor()
            }
            afterPriority = priority
            afterID = cursor.parts[1]
        }
        let rows = try pool.withConnection { connection in
            try connection.query(
                """
                SELECT \(unsafeSQL: Self.columns) FROM rules
                WHERE app_id = \(appID)
                    AND (\(afterPriority)::integer IS NULL OR (priority, id) > (\(afterPriority)::integer, \(afterID)::text))
                ORDER BY priority, id LIMIT \(page.limit + 1)
                """)
        }
        let items = try rows.prefix(page.limit).map(Self.decode)
        let next =
            rows.count > page.limit
            ? items.last.map { Cursor([String($0.rule.priority), $0.rule.id]).encoded } : nil
        return Page(items: items, nextCursor: next)
    }

    /// Every rule of the app in evaluation order (for the rule cache).
    public func all(appID: String) throws -> [Rule] {
        let rows = try pool.withConnection { connection in
            try connection.query(
                "SELECT \(unsafeSQL: Self.columns) FROM rules WHERE app_id = \(appID) ORDER BY priority, id")
        }
        return try rows.map { try Self.decode($0).rule }
    }

    static let columns: StaticString = "id, definition, version, created_at, updated_at"

    static func decode(_ row: PostgresRow) throws -> StoredRule {
        StoredRule(
            rule: try decodeRule(row), version: try row.decode("version"),
            createdAt: try row.decode("created_at"), updatedAt: try row.decode("updated_at"))
    }

    /// The rule of a row with `id` and `definition` (the other columns need not be selected).
    static func decodeRule(_ row: PostgresRow) throws -> Rule {
        let json = try JSONParser.parse(try row.decode("definition", as: PostgresJSON.self).text)
        return try Rule.decode(json, id: try row.decode("id"))
    }
}
