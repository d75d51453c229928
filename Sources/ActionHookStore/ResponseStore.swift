import ActionHookCore
import Foundation
import Postgres

/// Filters for the response history.
public struct ResponseFilter: Sendable {
    /// Only responses about this subject.
    public var subject: String?
    /// Only this action identifier.
    public var action: String?
    /// Only this category.
    public var category: String?
    /// Only this outcome.
    public var outcome: Outcome?
    /// Received at or after.
    public var since: Date?
    /// Received before.
    public var until: Date?

    /// Creates a filter; `nil` members filter nothing.
    public init(
        subject: String? = nil, action: String? = nil, category: String? = nil, outcome: Outcome? = nil,
        since: Date? = nil, until: Date? = nil
    ) {
        self.subject = subject
        self.action = action
        self.category = category
        self.outcome = outcome
        self.since = since
        self.until = until
    }
}

/// Stored responses: the ingest transaction and the history.
public struct ResponseStore: Sendable {
    let pool: PostgresPool

    /// Creates the store over a pool.
    public init(pool: PostgresPool) {
        self.pool = pool
    }

    /// The history, newest first, one page at a time.
    public func list(appID: String, filter: ResponseFilter, _ page: PageRequest) throws -> Page<StoredResponseView> {
        let after = try page.cursor.map(Cursor.timeAndID)
        let afterTime = after?.time
        let afterID = after?.id
        let rows = try pool.withConnection { connection in
            try connection.query(
                """
                SELECT \(unsafeSQL: Self.columns) FROM responses
                WHERE app_id = \(appID)
                    AND (\(filter.subject)::text IS NULL OR subject = \(filter.subject))
                    AND (\(filter.action)::text IS NULL OR action_identifier = \(filter.action))
                    AND (\(filter.category)::text IS NULL OR category_identifier = \(filter.category))
                    AND (\(filter.outcome?.rawValue)::text IS NULL OR outcome = \(filter.outcome?.rawValue))
                    AND (\(filter.since)::timestamptz IS NULL OR received_at >= \(filter.since))
                    AND (\(filter.until)::timestamptz IS NULL OR received_at < \(filter.until))
                    AND (\(afterTime)::timestamptz IS NULL OR (received_at, id) < (\(afterTime)::timestamptz, \(afterID)::uuid))
                ORDER BY received_at DESC, id DESC
                LIMIT \(page.limit + 1)
                """)
        }
        let items = try rows.prefix(page.limit).map(Self.decode)
        var next: String?
        if rows.count > page.limit, let last = items.last {
            let time = try rows[page.limit - 1].decode("received_at_text", as: String.self)
            next = Cursor([time, last.id.lowercasedString]).encoded
        }
        return Page(items: items, nextCursor: next)
    }

    /// One response, or `nil`.
    public func get(appID: String, id: UUID) throws -> StoredResponseView? {
        try pool.withConnection { connection in
            try connection.query("SELECT \(unsafeSQL: Self.columns) FROM responses WHERE app_id = \(appID) AND id = \(id)")
                .first.map(Self.decode)
        }
    }

    /// The current decision per device for a subject (empty when there is none): the newest
    /// `accepted` or `declined` response by decision time (`respondedAt`, else when it was received);
    /// of two with the same time, the one stored later.
    public func decisions(appID: String, subject: String) throws -> [JSONValue] {
        try pool.withConnection { connection in
            try connection.query(
                """
                SELECT device_token, outcome, response_id, decided_at FROM (
                    SELECT DISTINCT ON (coalesce(device_token, '')) device_token, outcome, id AS response_id,
                        coalesce(responded_at, received_at) AS decided_at
                    FROM responses
                    WHERE app_id = \(appID) AND subject = \(subject) AND outcome IN ('accepted', 'declined')
                    ORDER BY coalesce(device_token, ''), coalesce(responded_at, received_at) DESC, received_at DESC,
                        id DESC
                ) AS latest
                ORDER BY decided_at DESC, coalesce(device_token, '')
                """
            ).map { row in
                let token = try row.decode("device_token", as: String?.self)
                return .object([
                    "deviceToken": token.map(JSONValue.string) ?? .null,
                    "outcome": .string(try row.decode("outcome")),
                    "responseId": .string(try row.decode("response_id", as: UUID.self).lowercasedString),
                    "decidedAt": .string(Timestamp.format(try row.decode("decided_at"))),
                ])
            }
        }
    }

    // The cursor keeps the database's own microsecond text of received_at, so no row is skipped or
    // repeated by rounding.
    static let columns: StaticString = """
        id, action_identifier, user_text, category_identifier, notification_identifier, user_info, device_token,
        client_response_id, responded_at, received_at, to_char(received_at AT TIME ZONE 'UTC',
        'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS received_at_text, outcome, rule_id, subject
        """

    static func decode(_ row: PostgresRow) throws -> StoredResponseView {
        let userInfo = try JSONParser.parse(try row.decode("user_info", as: PostgresJSON.self).text).objectValue ?? [:]
        let response = NotificationResponse(
            actionIdentifier: try row.decode("action_identifier"), userText: try row.decode("user_text"),
            categoryIdentifier: try row.decode("category_identifier"),
            notificationIdentifier: try row.decode("notification_identifier"), userInfo: userInfo,
            deviceToken: try row.decode("device_token"), responseId: try row.decode("client_response_id"),
            respondedAt: try row.decode("responded_at"))
        return StoredResponseView(
            id: try row.decode("id"), response: response, receivedAt: try row.decode("received_at"),
            outcome: Outcome(rawValue: try row.decode("outcome")) ?? .unmatched, ruleId: try row.decode("rule_id"),
            subject: try row.decode("subject"))
    }
}
