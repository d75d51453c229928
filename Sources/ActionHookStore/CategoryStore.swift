import ActionHookCore
import Foundation
import Postgres

/// An app's notification categories.
public struct CategoryStore: Sendable {
    let pool: Database

    /// Creates the store over a pool.
    public init(pool: PostgresPool) {
        self.pool = Database(pool)
    }

    /// Creates or replaces a category. Returns `true` when it was created.
    public func put(appID: String, _ category: NotificationCategory) throws -> Bool {
        try pool.transaction { connection in
            let rows = try connection.query(
                """
                INSERT INTO categories (app_id, id, definition) VALUES (\(appID), \(category.id), \(PostgresJSON(category.json.jsonText)))
                ON CONFLICT (app_id, id) DO UPDATE SET definition = EXCLUDED.definition, updated_at = now()
                RETURNING (xmax = 0) AS inserted
                """)
            try connection.notify(channel: Channels.invalidate, payload: appID)
            return try rows[0].decode("inserted", as: Bool.self)
        }
    }

    /// The category, or `nil`.
    public func get(appID: String, id: String) throws -> NotificationCategory? {
        try pool.withConnection { connection in
            try connection.query("SELECT id, definition FROM categories WHERE app_id = \(appID) AND id = \(id)")
                .first.map(Self.decode)
        }
    }

    /// Deletes a category. Returns whether it existed.
    public func delete(appID: String, id: String) throws -> Bool {
        try pool.transaction { connection in
            let deleted = try connection.execute("DELETE FROM categories WHERE app_id = \(appID) AND id = \(id)")
            if deleted > 0 { try connection.notify(channel: Channels.invalidate, payload: appID) }
            return deleted > 0
        }
    }

    /// The app's categories ordered by id, one page at a time.
    public func list(appID: String, _ page: PageRequest) throws -> Page<NotificationCategory> {
        let after: String? = try page.cursor.map { encoded in
            guard let cursor = Cursor(encoded: encoded, count: 1) else { throw InvalidCursor() }
            return cursor.parts[0]
        }
        let rows = try pool.withConnection { connection in
            try connection.query(
                """
                SELECT id, definition FROM categories
                WHERE app_id = \(appID) AND (\(after)::text IS NULL OR id > \(after))
                ORDER BY id LIMIT \(page.limit + 1)
                """)
        }
        let items = try rows.prefix(page.limit).map(Self.decode)
        let next = rows.count > page.limit ? items.last.map { Cursor([$0.id]).encoded } : nil
        return Page(items: items, nextCursor: next)
    }

    /// Every category of the app, keyed by id (for the rule cache).
    public func all(appID: String) throws -> [String: NotificationCategory] {
        let rows = try pool.withConnection { connection in
            try connection.query("SELECT id, definition FROM categories WHERE app_id = \(appID)")
        }
        return Dictionary(
            uniqueKeysWithValues: try rows.map { row in
                let category = try Self.decode(row)
                return (category.id, category)
            })
    }

    static func decode(_ row: PostgresRow) throws -> NotificationCategory {
        let json = try JSONParser.parse(try row.decode("definition", as: PostgresJSON.self).text)
        // Stored definitions were validated on the way in; failing here means the row was edited by hand.
        return try NotificationCategory.decode(json, id: try row.decode("id"))
    }
}
