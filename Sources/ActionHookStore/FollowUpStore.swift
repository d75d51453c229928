import ActionHookCore
import Foundation
import Postgres

/// Follow-up statuses.
public enum FollowUpStatus: String, Sendable, CaseIterable {
    case pending, running, retrying, delivered, dead, cancelled, skipped
}

/// Follow-ups (the outbox) as the admin API reads and changes them.
public struct FollowUpStore: Sendable {
    let pool: Database

    /// Creates the store over a pool.
    public init(pool: PostgresPool) {
        self.pool = Database(pool)
    }

    /// The app's follow-ups, newest first, optionally of one status.
    ///
    /// Read per status through the (app, status, time) index, each status's newest page merged: a
    /// page costs the same however many follow-ups the app has (one scan in time order over all
    /// statuses would need an index of its own, which every ingest would pay for).
    public func list(appID: String, status: FollowUpStatus?, _ page: PageRequest) throws -> Page<JSONValue> {
        let after = try page.cursor.map(Cursor.timeAndID)
        let statuses = status.map { [$0] } ?? FollowUpStatus.allCases
        let rows = try pool.withConnection { connection in
            try connection.query(
                Self.listQuery(appID: appID, statuses: statuses, after: after, limit: page.limit + 1))
        }
        let items = try rows.prefix(page.limit).map { try Self.decode($0, attempts: nil) }
        var next: String?
        if rows.count > page.limit {
            let last = rows[page.limit - 1]
            next =
                Cursor([
                    try last.decode("created_at_text", as: String.self),
                    try last.decode("id", as: UUID.self).lowercasedString,
                ]).encoded
        }
        return Page(items: items, nextCursor: next)
    }

    /// A response's follow-ups in order, each with its delivery attempts.
    public func forResponse(appID: String, responseID: UUID) throws -> [JSONValue] {
        try pool.withConnection { connection in
            let followUps = try connection.query(
                """
                SELECT \(unsafeSQL: Self.columns) FROM followups
                WHERE app_id = \(appID) AND response_id = \(responseID) ORDER BY ordinal >= 0 DESC, ordinal
                """)
            let attempts = try connection.query(
                """
                SELECT a.followup_id, a.attempt, a.due_at, a.started_at, a.finished_at, a.result, a.http_status,
                    a.error_class, a.duration_ms
                FROM delivery_attempts a JOIN followups f ON f.app_id = a.app_id AND f.id = a.followup_id
                WHERE a.app_id = \(appID) AND f.response_id = \(responseID)
                ORDER BY a.attempt
                """)
            var byFollowUp: [UUID: [JSONValue]] = [:]
            for row in attempts {
                let attempt: JSONValue = .object([
                    "attempt": .integer(try row.decode("attempt")),
                    "dueAt": (try row.decode("due_at", as: Date?.self)).map { .string(Timestamp.format($0)) } ?? .null,
                    "startedAt": .string(Timestamp.format(try row.decode("started_at"))),
                    "finishedAt": .string(Timestamp.format(try row.decode("finished_at"))),
                    "result": .string(try row.decode("result")),
                    "httpStatus": (try row.decode("http_status", as: Int?.self)).map { .integer($0) } ?? .null,
                    "errorClass": (try row.decode("error_class", as: String?.self)).map(JSONValue.string) ?? .null,
                    "durationMs": .integer(try row.decode("duration_ms")),
                ])
                byFollowUp[try row.decode("followup_id"), default: []].append(attempt)
            }
            return try followUps.map { row in
                try Self.decode(row, attempts: byFollowUp[try row.decode("id", as: UUID.self)] ?? [])
            }
        }
    }

    /// Cancels a follow-up that has not been sent yet: it leaves the queue, cancelled.
    public func cancel(appID: String, id: UUID) throws -> JSONValue {
        try transition(
            appID: appID, id: id, from: ["pending", "retrying"],
            move: "SELECT actionhook_cancel_followups(ARRAY[\(appID)::text], ARRAY[\(id)::uuid], '{pending,retrying}')",
            refusal: "Only a pending or retrying follow-up can be cancelled.")
    }

    /// Puts a dead follow-up back in the queue, due now.
    public func retry(appID: String, id: UUID) throws -> JSONValue {
        let result = try transition(
            appID: appID, id: id, from: ["dead"], move: "SELECT actionhook_requeue_followup(\(appID), \(id))",
            refusal: "Only a dead follow-up can be retried.")
        try pool.withConnection { try $0.notify(channel: Channels.followUps, payload: appID) }
        return result
    }

    /// Moves a follow-up between the queue and the finished ones (see sql/migrations/011) when its
    /// status, read under its row lock, is one of `statuses`; returns it as it is then.
    private func transition(
        appID: String, id: UUID, from statuses: [String], move: PostgresQuery, refusal: String
    ) throws -> JSONValue {
        try pool.transaction { connection in
            let current = try connection.query(
                "SELECT status FROM followups WHERE app_id = \(appID) AND id = \(id) FOR UPDATE")
            guard let row = current.first else { throw StoreError.notFound }
            guard statuses.contains(try row.decode("status", as: String.self)) else {
                throw StoreError.wrongState(refusal)
            }
            try connection.execute(move)
            let rows = try connection.query(
                "SELECT \(unsafeSQL: Self.columns) FROM followups WHERE app_id = \(appID) AND id = \(id)")
            return try Self.decode(rows[0], attempts: nil)
        }
    }

    static let columns: StaticString = """
        id, response_id, notification_id, kind, channel, status, due_at, attempt, last_error, payload, created_at,
        updated_at,
        to_char(created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at_text
        """

    /// The newest `limit` follow-ups of the app in `statuses`, after the cursor position `after`.
    static func listQuery(
        appID: String, statuses: [FollowUpStatus], after: (time: String, id: UUID)?, limit: Int
    ) -> PostgresQuery {
        let afterTime = after?.time
        let afterID = after?.id
        return """
            SELECT f.* FROM unnest(\(statuses.map(\.rawValue))::text[]) AS s(status)
            CROSS JOIN LATERAL (
                SELECT \(unsafeSQL: Self.columns) FROM followups
                WHERE app_id = \(appID) AND status = s.status
                    AND (\(afterTime)::timestamptz IS NULL
                        OR (created_at, id) < (\(afterTime)::timestamptz, \(afterID)::uuid))
                ORDER BY created_at DESC, id DESC
                LIMIT \(limit)
            ) AS f
            ORDER BY f.created_at DESC, f.id DESC
            LIMIT \(limit)
            """
    }

    static func decode(_ row: PostgresRow, attempts: [JSONValue]?) throws -> JSONValue {
        var object: JSONObject = [
            "id": .string(try row.decode("id", as: UUID.self).lowercasedString),
            // A send's pushes and no-reply steps have a notification and no response.
            "responseId": (try row.decode("response_id", as: UUID?.self)).map { .string($0.lowercasedString) } ?? .null,
            "notificationId": (try row.decode("notification_id", as: UUID?.self)).map { .string($0.lowercasedString) }
                ?? .null,
            "kind": .string(try row.decode("kind")),
            "channel": .string(try row.decode("channel")),
            "status": .string(try row.decode("status")),
            "dueAt": .string(Timestamp.format(try row.decode("due_at"))),
            "attempt": .integer(try row.decode("attempt")),
            "lastError": (try row.decode("last_error", as: String?.self)).map(JSONValue.string) ?? .null,
            "payload": try JSONParser.parse(try row.decode("payload", as: PostgresJSON.self).text),
            "createdAt": .string(Timestamp.format(try row.decode("created_at"))),
            "updatedAt": .string(Timestamp.format(try row.decode("updated_at"))),
        ]
        if let attempts { object["attempts"] = .array(attempts) }
        return .object(object)
    }
}
