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
    /// Only responses from this device token.
    public var deviceToken: String?
    /// Only responses of this user, verified or not (the reply's `user.id`).
    public var user: String?

    /// Creates a filter; `nil` members filter nothing.
    public init(
        subject: String? = nil, action: String? = nil, category: String? = nil, outcome: Outcome? = nil,
        since: Date? = nil, until: Date? = nil, deviceToken: String? = nil, user: String? = nil
    ) {
        self.deviceToken = deviceToken
        self.user = user
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
    let pool: Database

    /// Creates the store over a pool.
    public init(pool: PostgresPool) {
        self.pool = Database(pool)
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
                    AND (\(filter.deviceToken)::text IS NULL OR device_token = \(filter.deviceToken))
                    AND (\(filter.user)::text IS NULL OR user_id = \(filter.user))
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
            try connection.query(
                "SELECT \(unsafeSQL: Self.columns) FROM responses WHERE app_id = \(appID) AND id = \(id)"
            )
            .first.map(Self.decode)
        }
    }

    /// The current decision per category and device for a subject (empty when there is none): the
    /// newest `accepted` or `declined` response by decision time (`respondedAt`, else when it was
    /// received); of two with the same time, the one stored later. A subject value names different
    /// things in different categories (invite 42, task 42), so each category keeps its own decision;
    /// `category` narrows the answer to one.
    public func decisions(appID: String, subject: String, category: String? = nil) throws -> [JSONValue] {
        try pool.withConnection { connection in
            try connection.query(
                """
                SELECT category_identifier, device_token, outcome, response_id, decided_at FROM (
                    SELECT DISTINCT ON (coalesce(category_identifier, ''), coalesce(device_token, ''))
                        category_identifier, device_token, outcome, id AS response_id,
                        coalesce(responded_at, received_at) AS decided_at
                    FROM responses
                    WHERE app_id = \(appID) AND subject = \(subject) AND outcome IN ('accepted', 'declined')
                        AND (\(category)::text IS NULL OR category_identifier = \(category))
                    ORDER BY coalesce(category_identifier, ''), coalesce(device_token, ''),
                        coalesce(responded_at, received_at) DESC, received_at DESC, id DESC
                ) AS latest
                ORDER BY decided_at DESC, coalesce(category_identifier, ''), coalesce(device_token, '')
                """
            ).map { row in
                let token = try row.decode("device_token", as: String?.self)
                let categoryIdentifier = try row.decode("category_identifier", as: String?.self)
                return .object([
                    "category": categoryIdentifier.map(JSONValue.string) ?? .null,
                    "deviceToken": token.map(JSONValue.string) ?? .null,
                    "outcome": .string(try row.decode("outcome")),
                    "responseId": .string(try row.decode("response_id", as: UUID.self).lowercasedString),
                    "decidedAt": .string(Timestamp.format(try row.decode("decided_at"))),
                ])
            }
        }
    }

    /// Whose replies an erasure removes.
    public enum ErasureScope: Sendable {
        /// Every response about this subject.
        case subject(String)
        /// Every response from this device token.
        case device(String)
    }

    /// Erases what people wrote and sent, in one transaction.
    ///
    /// - Responses in `scope`: their `userText`, `userInfo` and recipient label (and, for a device, its
    ///   token and what APNs said of it) are cleared, their follow-ups' rendered payloads (which may quote
    ///   them) emptied, and follow-ups not yet finished (pending, retrying, running or dead) cancelled, so
    ///   nothing erased is sent later. A delivery in flight at that moment may still arrive; its worker's
    ///   result is fenced out by the cancellation.
    /// - Sent notifications (the subject's, or those sent to the device), locked in id order as ingest
    ///   locks them: recipient labels cleared, the device's token taken out, their pushes and steps (all
    ///   of them for a subject, the device's for a device) cancelled and emptied, and the replies bound to
    ///   them stripped of their recipient label.
    ///
    /// The rows stay, so counts by outcome, action and time remain. Reads the app's responses through the
    /// subject index, or, for a device, all of them: erasure is rare, and an index on device tokens would
    /// cost every ingest. Nothing stored in `scope`: (0, 0, 0), and nothing is changed.
    public func erase(appID: String, _ scope: ErasureScope) throws -> (
        responses: Int, notifications: Int, followUpsCancelled: Int, devices: Int
    ) {
        var subject: String?
        var device: String?
        switch scope {
        case .subject(let value): subject = value
        case .device(let value): device = value
        }
        return try pool.transaction { connection in
            let erased = try connection.query(
                """
                UPDATE responses SET user_text = NULL, user_info = '{}'::jsonb, recipient = NULL,
                    device_token = CASE WHEN \(device)::text IS NULL THEN device_token END
                WHERE app_id = \(appID)
                    AND ((\(subject)::text IS NOT NULL AND subject = \(subject))
                        OR (\(device)::text IS NOT NULL AND device_token = \(device)))
                RETURNING id
                """
            ).map { try $0.decode("id", as: UUID.self) }
            // Sent notifications hold the same data: the subject's, or those sent to the device.
            let sent = try connection.query(
                """
                SELECT id FROM notifications
                WHERE app_id = \(appID)
                    AND ((\(subject)::text IS NOT NULL AND subject = \(subject))
                        OR (\(device)::text IS NOT NULL
                            AND devices @> jsonb_build_array(jsonb_build_object('deviceToken', \(device)::text))))
                ORDER BY id
                FOR UPDATE
                """
            ).map { try $0.decode("id", as: UUID.self) }
            // Later sends to the subject no longer reach the erased subject's devices, nor the erased device;
            // what APNs said of the token, and its registration, go too: the token itself is the device's data.
            let named = try connection.execute(
                """
                DELETE FROM subject_devices
                WHERE app_id = \(appID) AND (subject = \(subject) OR device_token = \(device))
                """)
            let registered =
                device == nil
                ? 0
                : try connection.query(
                    """
                    DELETE FROM devices WHERE app_id = \(appID) AND token = \(device)
                    RETURNING pg_notify(\(Channels.deviceKeys), \(appID) || chr(31) || token)::text AS told
                    """
                ).count
            guard !erased.isEmpty || !sent.isEmpty else { return (0, 0, 0, named + registered) }
            var cancelledSent = 0
            if !sent.isEmpty {
                // A subject's notifications lose every device's label and what they would still send; a
                // device is taken out of each notification sent to it, with its pushes and reminders.
                // The stored device list and the answer replayed for the send's key both list the devices.
                _ = try connection.execute(
                    """
                    UPDATE notifications n SET devices = actionhook_erase_devices(n.devices, \(subject), \(device)),
                        answer = jsonb_set(n.answer::jsonb, '{devices}',
                            actionhook_erase_devices(n.answer::jsonb -> 'devices', \(subject), \(device)))::json
                    WHERE n.app_id = \(appID) AND n.id = ANY(\(sent)::uuid[])
                    """)
                // Replies bound to them lose the recipient label too, in the row and in the answer replayed.
                _ = try connection.execute(
                    """
                    UPDATE responses SET recipient = NULL,
                        answer = jsonb_set(answer::jsonb, '{recipient}', 'null'::jsonb, false)::json
                    WHERE app_id = \(appID) AND notification_id = ANY(\(sent)::uuid[]) AND recipient IS NOT NULL
                    """)
                cancelledSent = try Self.cancel(
                    connection, appID: appID, notifications: sent, device: subject == nil ? device : nil)
                _ = try connection.execute(
                    """
                    UPDATE followups SET payload = '{}'::jsonb, device_token = NULL
                    WHERE app_id = \(appID) AND notification_id = ANY(\(sent)::uuid[])
                        AND (\(subject)::text IS NOT NULL OR device_token = \(device))
                    """)
            }
            let cancelled = try Self.cancel(connection, appID: appID, responses: erased)
            _ = try connection.execute(
                """
                UPDATE followups SET payload = '{}'::jsonb,
                    device_token = CASE WHEN \(device)::text IS NULL THEN device_token END
                WHERE app_id = \(appID) AND response_id = ANY(\(erased)::uuid[])
                """)
            return (erased.count, sent.count, cancelled + cancelledSent, named + registered)
        }
    }

    /// Cancels the app's follow-ups of `responses`, or of `notifications` (only those to `device` when
    /// one is given), that are not finished, or are dead (an erased follow-up is not retried): queued
    /// ones leave the queue, dead ones become cancelled.
    static func cancel(
        _ connection: PostgresConnection, appID: String, responses: [UUID] = [], notifications: [UUID] = [],
        device: String? = nil
    ) throws -> Int {
        let condition: StaticString = """
            (response_id = ANY($2::uuid[])
                OR (notification_id = ANY($3::uuid[]) AND ($4::text IS NULL OR device_token = $4::text)))
            """
        let queued = try connection.query(
            PostgresQuery(
                unsafeSQL: """
                    SELECT actionhook_cancel_followups(array_agg(app_id), array_agg(id), '{pending,retrying,running}')
                        AS n
                    FROM followups_queue WHERE app_id = $1 AND \(condition)
                    """, binds: [appID, responses, notifications, device]))
        let dead = try connection.execute(
            PostgresQuery(
                unsafeSQL: """
                    UPDATE followups_done SET status = 'cancelled', updated_at = now()
                    WHERE app_id = $1 AND status = 'dead' AND \(condition)
                    """, binds: [appID, responses, notifications, device]))
        return (try queued.first?.decode("n", as: Int?.self) ?? 0) + dead
    }

    // The cursor keeps the database's own microsecond text of received_at, so no row is skipped or
    // repeated by rounding.
    static let columns: StaticString = """
        id, action_identifier, user_text, category_identifier, notification_identifier, user_info, device_token,
        client_response_id, responded_at, received_at, to_char(received_at AT TIME ZONE 'UTC',
        'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS received_at_text, outcome, rule_id, subject, user_id, user_verified,
        signature, signature_key
        """

    static func decode(_ row: PostgresRow) throws -> StoredResponseView {
        let userInfo = try JSONParser.parse(try row.decode("user_info", as: PostgresJSON.self).text).objectValue ?? [:]
        var response = NotificationResponse(
            actionIdentifier: try row.decode("action_identifier"), userText: try row.decode("user_text"),
            categoryIdentifier: try row.decode("category_identifier"),
            notificationIdentifier: try row.decode("notification_identifier"), userInfo: userInfo,
            deviceToken: try row.decode("device_token"), responseId: try row.decode("client_response_id"),
            respondedAt: try row.decode("responded_at"))
        let user: String? = try row.decode("user_id")
        let verified: Bool = try row.decode("user_verified")
        if verified { response.user = user }
        response.signature = SignatureCheck(status: try row.decode("signature"), key: try row.decode("signature_key"))
        return StoredResponseView(
            id: try row.decode("id"), response: response, receivedAt: try row.decode("received_at"),
            outcome: Outcome(rawValue: try row.decode("outcome")) ?? .unmatched, ruleId: try row.decode("rule_id"),
            subject: try row.decode("subject"), deviceUser: verified ? nil : user)
    }
}
