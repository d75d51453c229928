import ActionHookCore
import Foundation
import Postgres

/// What ingest decided before touching the database: the matched rule and the subject.
public struct IngestDecision: Sendable {
    /// The first matching rule, or `nil` (outcome `unmatched`).
    public var rule: Rule?
    /// The subject read from `userInfo` through the category's `subjectKey`.
    public var subject: String?

    /// Creates a decision.
    public init(rule: Rule?, subject: String?) {
        self.rule = rule
        self.subject = subject
    }
}

/// The result of an ingest: the stored answer, new or replayed.
public enum IngestResult: Sendable {
    /// The response was stored now; the answer is the 202 body.
    case created(JSONValue)
    /// The same key and body were stored before; the answer is the one given then.
    case replayed(JSONValue)
}

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

    /// Stores a response and its follow-ups in one transaction, idempotently per (app, key).
    ///
    /// - The same key while another request holds it: ``StoreError/idempotencyKeyInFlight``.
    /// - The same key and the same normalised body: the stored answer, ``IngestResult/replayed(_:)``.
    /// - The same key and another body: ``StoreError/idempotencyKeyReused``.
    ///
    /// A snooze past `maxSnoozes` for the notification becomes `snooze_limit_reached` with no
    /// follow-ups; any other answer to a notification cancels its pending snooze re-deliveries.
    /// Times come from the database clock (`now()` is the transaction's start).
    public func ingest(
        appID: String, idempotencyKey: String, response: NotificationResponse, decision: IngestDecision
    ) throws -> IngestResult {
        let requestHash = response.requestHash
        return try pool.transaction { connection in
            let lock = try connection.query(
                """
                SELECT pg_try_advisory_xact_lock(hashtextextended(\(appID) || chr(31) || \(idempotencyKey), 0)) AS locked,
                    now() AS now
                """)
            guard try lock[0].decode("locked", as: Bool.self) else { throw StoreError.idempotencyKeyInFlight }
            let receivedAt = try lock[0].decode("now", as: Date.self)

            let existing = try connection.query(
                """
                SELECT request_hash, answer FROM responses
                WHERE app_id = \(appID) AND idempotency_key = \(idempotencyKey)
                """)
            if let row = existing.first {
                let storedHash = try row.decode("request_hash", as: [UInt8].self)
                guard SecretToken.constantTimeEquals(storedHash, requestHash) else {
                    throw StoreError.idempotencyKeyReused
                }
                return .replayed(try JSONParser.parse(try row.decode("answer", as: PostgresJSON.self).text))
            }

            let responseID = UUID()
            var outcome = RuleEngine.outcome(of: decision.rule?.handler)
            var planned: [PlannedFollowUp] = []
            if let rule = decision.rule {
                if case .snooze(let delaySeconds, let maxSnoozes) = rule.handler {
                    let previous = try snoozeCount(appID: appID, response: response, connection: connection)
                    if previous >= maxSnoozes {
                        outcome = .snoozeLimitReached
                    } else {
                        planned = RuleEngine.plan(
                            rule, response: response, responseID: responseID, receivedAt: receivedAt,
                            subject: decision.subject, outcome: outcome)
                        if let redelivery = RuleEngine.snoozeRedelivery(of: response, delaySeconds: delaySeconds) {
                            planned.append(redelivery)
                        }
                    }
                } else {
                    planned = RuleEngine.plan(
                        rule, response: response, responseID: responseID, receivedAt: receivedAt,
                        subject: decision.subject, outcome: outcome)
                }
            }
            if outcome != .snoozed && outcome != .snoozeLimitReached, let notification = response.notificationIdentifier {
                try connection.execute(
                    """
                    UPDATE followups SET status = 'cancelled', updated_at = now()
                    WHERE app_id = \(appID) AND notification_identifier = \(notification) AND is_snooze
                        AND status IN ('pending', 'retrying')
                    """)
            }

            var answerFollowUps: [JSONValue] = []
            var followUpRows: [(UUID, PlannedFollowUp, Date)] = []
            for followUp in planned {
                let id = UUID()
                let dueAt = receivedAt.addingTimeInterval(TimeInterval(followUp.delaySeconds))
                followUpRows.append((id, followUp, dueAt))
                answerFollowUps.append(
                    .object([
                        "id": .string(id.uuidString.lowercased()), "channel": .string(followUp.channel.rawValue),
                        "dueAt": .string(Timestamp.format(dueAt)),
                    ]))
            }
            let answer = JSONValue.object([
                "id": .string(responseID.uuidString.lowercased()), "outcome": .string(outcome.rawValue),
                "ruleId": decision.rule.map { .string($0.id) } ?? .null,
                "subject": decision.subject.map(JSONValue.string) ?? .null,
                "followUps": .array(answerFollowUps),
            ])

            try connection.execute(
                """
                INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier, category_identifier,
                    notification_identifier, user_text, user_info, device_token, client_response_id, responded_at,
                    received_at, outcome, rule_id, subject, answer)
                VALUES (\(appID), \(responseID), \(idempotencyKey), \(requestHash), \(response.actionIdentifier),
                    \(response.categoryIdentifier), \(response.notificationIdentifier), \(response.userText),
                    \(PostgresJSON(JSONValue.object(response.userInfo).jsonText)), \(response.deviceToken),
                    \(response.responseId), \(response.respondedAt), \(receivedAt), \(outcome.rawValue), \(decision.rule?.id), \(decision.subject),
                    \(PostgresJSON(answer.jsonText)))
                """)
            for (id, followUp, dueAt) in followUpRows {
                let deviceToken = followUp.channel == .apns ? followUp.payload.value(atPath: "deviceToken")?.stringValue : nil
                try connection.execute(
                    """
                    INSERT INTO followups (app_id, id, response_id, ordinal, channel, is_snooze, notification_identifier,
                        device_token, payload, due_at)
                    VALUES (\(appID), \(id), \(responseID), \(followUp.ordinal), \(followUp.channel.rawValue),
                        \(followUp.ordinal < 0), \(response.notificationIdentifier), \(deviceToken),
                        \(PostgresJSON(followUp.payload.jsonText)), \(dueAt))
                    """)
            }
            if (outcome == .accepted || outcome == .declined), let subject = decision.subject {
                let decidedAt = response.respondedAt ?? receivedAt
                try connection.execute(
                    """
                    INSERT INTO subject_decisions (app_id, subject, device_token, outcome, response_id, decided_at)
                    VALUES (\(appID), \(subject), \(response.deviceToken ?? ""), \(outcome.rawValue), \(responseID), \(decidedAt))
                    ON CONFLICT (app_id, subject, device_token) DO UPDATE
                        SET outcome = EXCLUDED.outcome, response_id = EXCLUDED.response_id, decided_at = EXCLUDED.decided_at
                        WHERE subject_decisions.decided_at <= EXCLUDED.decided_at
                    """)
            }
            if !followUpRows.isEmpty {
                try connection.notify(channel: Channels.followUps, payload: appID)
            }
            return .created(answer)
        }
    }

    /// Snoozes already given for this response's notification (by `notificationIdentifier`; a
    /// response without one has no history to count).
    func snoozeCount(appID: String, response: NotificationResponse, connection: PostgresConnection) throws -> Int {
        guard let notification = response.notificationIdentifier else { return 0 }
        let rows = try connection.query(
            """
            SELECT count(*) AS snoozes FROM responses
            WHERE app_id = \(appID) AND notification_identifier = \(notification) AND outcome = 'snoozed'
            """)
        return try rows[0].decode("snoozes")
    }

    /// The history, newest first, one page at a time.
    public func list(appID: String, filter: ResponseFilter, _ page: PageRequest) throws -> Page<StoredResponseView> {
        var afterTime: String?
        var afterID: UUID?
        if let encoded = page.cursor {
            guard let cursor = Cursor(encoded: encoded, count: 2), Timestamp.parse(cursor.parts[0]) != nil,
                let id = UUID(uuidString: cursor.parts[1])
            else { throw InvalidCursor() }
            afterTime = cursor.parts[0]
            afterID = id
        }
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
            next = Cursor([time, last.id.uuidString.lowercased()]).encoded
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

    /// The current decision per device for a subject (empty when there is none).
    public func decisions(appID: String, subject: String) throws -> [JSONValue] {
        try pool.withConnection { connection in
            try connection.query(
                """
                SELECT device_token, outcome, response_id, decided_at FROM subject_decisions
                WHERE app_id = \(appID) AND subject = \(subject) ORDER BY decided_at DESC, device_token
                """
            ).map { row in
                let token = try row.decode("device_token", as: String.self)
                return .object([
                    "deviceToken": token.isEmpty ? .null : .string(token),
                    "outcome": .string(try row.decode("outcome")),
                    "responseId": .string(try row.decode("response_id", as: UUID.self).uuidString.lowercased()),
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
