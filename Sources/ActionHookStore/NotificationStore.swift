import ActionHookCore
import Basics
import Foundation
import Postgres

/// The result of a send: the stored answer, new or replayed.
public enum SendResult: Sendable, Equatable {
    /// The notification was stored now, with its pushes and no-reply steps.
    case created(JSONValue, devices: Int)
    /// The same key and body were sent before; the answer is the one given then.
    case replayed(JSONValue)
}

/// A notification's state, derived from what is stored and the database's clock.
public enum NotificationStatus: String, Sendable, CaseIterable {
    /// Sent; no reply yet, no step due yet, not expired.
    case pending
    /// A reply answered it.
    case answered
    /// No reply, and its first no-reply step came due.
    case unanswered
    /// No reply before `expiresAt`.
    case expired
}

/// Filters of the notification list.
public struct NotificationFilter: Sendable {
    /// Only notifications in this state.
    public var status: NotificationStatus?
    /// Only those about this subject.
    public var subject: String?
    /// Only those of this category.
    public var category: String?
    /// Only those sent at or after this time.
    public var since: Date?

    /// Creates a filter.
    public init(status: NotificationStatus? = nil, subject: String? = nil, category: String? = nil, since: Date? = nil)
    {
        self.status = status
        self.subject = subject
        self.category = category
        self.since = since
    }
}

/// Sent notifications: the send's transaction, receipts and the list.
///
/// A send writes the notification, one push per device and every row of its no-reply steps and expiry in
/// one transaction, so a reply can never arrive before the steps it must cancel exist. Idempotent per
/// (app, `Idempotency-Key`): the same key and body answer the stored answer again; the same key with
/// another body is ``StoreError/idempotencyKeyReused``; the same key while the first send is still in
/// its transaction is ``StoreError/idempotencyKeyInFlight``.
public struct NotificationStore: Sendable {
    let pool: Database
    let limits: SendLimits

    /// Creates the store over a pool.
    public init(pool: PostgresPool, limits: SendLimits = SendLimits()) {
        self.pool = Database(pool)
        self.limits = limits
    }

    /// Sends `request` for `appID`: stores it and its outbox rows, and wakes the workers at commit.
    /// Without `to`, it goes to its subject's devices: those earlier sends with that subject named in `to`
    /// (the newest send's label wins; never a device that merely claimed the subject in a reply); with
    /// none, a 422 at `/subject`. A send with `to` and a subject adds its devices to the subject's.
    ///
    /// A send without a key whose commit is in doubt (the database deadline passed after the commit was
    /// sent) is not answered "unavailable" while it may still be stored: its retry would send it again.
    /// The store waits until the transaction is decided, then answers what it finds.
    public func send(appID: String, idempotencyKey: String?, request: SendRequest) throws -> SendResult {
        var sent: (id: UUID, result: SendResult)?
        let write = {
            try self.pool.uncheckedPipelinedTransaction { send in
                let planned = try self.plan(
                    appID: appID, idempotencyKey: idempotencyKey, request: request, send: send)
                sent = planned.sent
                return (planned.value, planned.writes)
            }
        }
        guard idempotencyKey == nil else { return try StoreError.translatingUnavailable(write) }
        return try pool.settlingInDoubt(write) {
            guard let sent else { throw StoreError.unavailable }
            let found = try pool.uncheckedPipelinedTransaction([
                "SELECT 1 FROM notifications WHERE app_id = \(appID) AND id = \(sent.id)", Database.confirmReplicated,
            ])
            guard !found[0].isEmpty else { throw StoreError.unavailable }
            return sent.result
        }
    }

    /// Reads what a send needs, plans it and returns its answer and writes (when it is replayed, only
    /// ``Database/confirmReplicated``).
    private func plan(
        appID: String, idempotencyKey: String?, request: SendRequest,
        send: ([PostgresQuery]) throws -> [PostgresRows]
    ) throws -> (value: SendResult, sent: (id: UUID, result: SendResult)?, writes: [PostgresQuery]) {
        let reads = SendReads(appID: appID, idempotencyKey: idempotencyKey, request: request, limits: limits)
        let read = PipelinedReads.Results(rows: try send(reads.pipeline.queries))
        guard try read[reads.appLock][0].decode("shared", as: Bool.self) else { throw StoreError.appBeingDeleted }
        guard try read[reads.appLock][0].decode("present", as: Bool.self) else { throw StoreError.notFound }
        if let keyReads = reads.key {
            guard try read[keyReads.lock][0].decode("locked", as: Bool.self) else {
                throw StoreError.idempotencyKeyInFlight
            }
            if let row = read[keyReads.stored].first {
                guard SecretToken.constantTimeEquals(try row.decode("request_hash"), request.requestHash) else {
                    throw StoreError.idempotencyKeyReused
                }
                let answer = try JSONParser.parse(try row.decode("answer", as: PostgresJSON.self).text)
                // A replay confirms the stored send only once it is on the synchronous standby.
                return (.replayed(answer), nil, [Database.confirmReplicated])
            }
        }
        let now: Date = try read[reads.appLock][0].decode("now")
        var devices = request.to ?? []
        if let subjectDevices = reads.subjectDevices {
            devices = try read[subjectDevices].map {
                SendDevice(deviceToken: try $0.decode("device_token"), recipient: try $0.decode("recipient"))
            }
        }
        var resolved = request
        if let userDevices = reads.userDevices {
            let byUser = try Self.devicesByUser(read[userDevices])
            devices = try Self.adding(byUser, of: request.users, to: devices)
            resolved = try request.resolvingEscalationUsers(byUser)
        }
        // A subject's or the users' devices are known only now: none, or the limits that depend on them, are
        // checked here.
        if request.to == nil || reads.userDevices != nil { try resolved.check(devices: devices, limits: limits) }
        let plan = SendPlan(resolved, devices: devices, id: UUID.timeOrdered(at: now), now: now, limits: limits)
        let result = SendResult.created(plan.answer, devices: plan.devices.count)
        return (result, (plan.notificationID, result), Self.writes(appID, idempotencyKey, resolved, plan))
    }

    /// The reads of a send, each statement named: the key's lock and the send stored under it, the app's
    /// lock and presence (and the database's clock), the subject's devices for a send without `to`, and the
    /// active registered devices of the users it names.
    private struct SendReads {
        var pipeline = PipelinedReads()
        var key: (lock: PipelinedReads.Read, stored: PipelinedReads.Read)?
        var appLock: PipelinedReads.Read
        var subjectDevices: PipelinedReads.Read?
        var userDevices: PipelinedReads.Read?

        init(appID: String, idempotencyKey: String?, request: SendRequest, limits: SendLimits) {
            // The key's lock first, so that the lookup after it sees what a previous holder committed.
            if let idempotencyKey {
                let lock = AppScoped(appID: appID, name: UnitSeparated.join("notifications", idempotencyKey)).lockText
                key = (
                    pipeline.add("SELECT pg_try_advisory_xact_lock(hashtextextended(\(lock), 0)) AS locked"),
                    pipeline.add(
                        """
                        SELECT request_hash, answer FROM notifications
                        WHERE app_id = \(appID) AND idempotency_key = \(idempotencyKey)
                        """)
                )
            }
            appLock = pipeline.add(
                """
                SELECT pg_try_advisory_xact_lock_shared(1, actionhook_app_lock_key(\(appID))) AS shared,
                    EXISTS (SELECT 1 FROM apps WHERE id = \(appID)) AS present, now() AS now
                """)
            if request.to == nil {
                subjectDevices = pipeline.add(
                    """
                    SELECT device_token, recipient FROM subject_devices
                    WHERE app_id = \(appID) AND subject = \(request.subject)
                    ORDER BY named_at DESC, device_token
                    LIMIT \(limits.maxDevices)
                    """)
            }
            // The users' active registered devices, newest first, each pushed in its own environment.
            if !request.allUsers.isEmpty {
                userDevices = pipeline.add(
                    """
                    SELECT user_id, token, environment FROM devices
                    WHERE app_id = \(appID) AND user_id = ANY(\(Array(Set(request.allUsers.map(\.id))))::text[])
                        AND status = 'active'
                    ORDER BY user_id, registered_at DESC, token
                    """)
            }
        }
    }

    /// The users' active devices as read, by user, newest first; each device with its user (also its
    /// recipient) and APNs environment.
    static func devicesByUser(_ rows: PostgresRows) throws -> [String: [SendDevice]] {
        var byUser: [String: [SendDevice]] = [:]
        for row in rows {
            let user: String = try row.decode("user_id")
            byUser[user, default: []].append(
                SendDevice(
                    deviceToken: try row.decode("token"), recipient: user, environment: try row.decode("environment"),
                    user: user))
        }
        return byUser
    }

    /// `devices` and then each user's devices (in the order `to` named the users), each token once; a user
    /// without an active device is a 422 at its place in `to`.
    static func adding(_ byUser: [String: [SendDevice]], of users: [SendUser], to devices: [SendDevice]) throws
        -> [SendDevice]
    {
        let missing = users.filter { byUser[$0.id] == nil }
        guard missing.isEmpty else {
            throw ValidationFailure.invalid(
                missing.map { FieldError(pointer: $0.pointer, detail: "names a user with no active registered device") }
            )
        }
        var all = devices
        var seen = Set(devices.map(\.deviceToken))
        for user in users {
            for device in byUser[user.id] ?? [] where seen.insert(device.deviceToken).inserted { all.append(device) }
        }
        return all
    }

    /// The statements that write a planned send: the notification, its outbox rows, the subject's devices
    /// it names, and the wake-up.
    ///
    /// The rows go in one statement of binary arrays (each column one parameter, named once; see
    /// ``PostgresColumns``), as ingest writes. A reminder repeats its device's push: it travels as its id,
    /// step, ordinal, due time and the push's position, and the statement copies the push's token and
    /// payload, so the largest send (1,000 devices, 19 reminders each) carries each payload once, not
    /// twenty times.
    static func writes(_ appID: String, _ key: String?, _ request: SendRequest, _ plan: SendPlan) -> [PostgresQuery] {
        var statements = [notificationInsert(appID, key, request, plan), followUpsInsert(appID, plan)]
        // The backend named these devices for the subject: later sends to the subject reach them.
        let named = Array(plan.devices.prefix(plan.sentDeviceCount))
        if let subject = request.subject, request.to != nil, !named.isEmpty {
            var d = PostgresColumns(named)
            d.add("token", .text, bytesPerRow: 72) { $0.append($1.deviceToken) }
            d.add("recipient", .text) { $0.append($1.recipient) }
            statements.append(
                """
                INSERT INTO subject_devices AS s (app_id, subject, device_token, recipient, named_at)
                SELECT DISTINCT ON (d.token) \(appID)::text, \(subject)::text, d.token, d.recipient, now()
                FROM \(unnest: d, as: "d", ordinality: "position")
                WHERE d.token <> ''
                ORDER BY d.token, d.position DESC
                ON CONFLICT (app_id, subject, device_token)
                    DO UPDATE SET recipient = EXCLUDED.recipient, named_at = EXCLUDED.named_at
                """)
        }
        return statements
    }

    /// The notification's row.
    private static func notificationInsert(
        _ appID: String, _ key: String?, _ request: SendRequest, _ plan: SendPlan
    ) -> PostgresQuery {
        let replacement = request.replaceOnAnswer.map { PostgresJSON(JSONValue.object($0).jsonText) }
        return """
            INSERT INTO notifications (app_id, id, idempotency_key, request_hash, category, subject, answers,
                collapse_id, replace_on_answer, events, devices, steps, silence_at, expires_at, created_at, answer,
                signed_replies)
            VALUES (\(appID), \(plan.notificationID), \(key), \(request.requestHash), \(request.category),
                \(request.subject), \(request.answers.rawValue), \(plan.collapseId), \(replacement)::jsonb,
                \(request.events)::text[], \(PostgresJSON(plan.devicesJSON.jsonText))::jsonb,
                \(PostgresJSON(plan.stepsJSON.jsonText))::jsonb, \(plan.silenceAt), \(plan.expiresAt), now(),
                \(PostgresJSON(plan.answer.jsonText))::json, \(request.requireSignedReplies))
            """
    }

    /// The send's outbox rows: those written in full (`f`, numbered by `position`), then the reminders
    /// (`r`), each copying the token and payload of the row at its `source`; and the workers' wake-up.
    private static func followUpsInsert(_ appID: String, _ plan: SendPlan) -> PostgresQuery {
        var full: [SendPlan.Row] = []
        var repeated: [(row: SendPlan.Row, source: Int)] = []
        // A row's position among those written in full (1-based), by its position in the plan.
        var written: [Int: Int] = [:]
        for (index, row) in plan.rows.enumerated() {
            if let source = row.repeats, let position = written[source] {
                repeated.append((row, position))
            } else {
                full.append(row)
                written[index] = full.count
            }
        }
        var f = PostgresColumns(full)
        f.add("id", .uuid) { $0.append($1.id) }
        f.add("kind", .text) { $0.append($1.kind.rawValue) }
        f.add("ordinal", .int4) { $0.append(Int32($1.ordinal)) }
        f.add("step", .int4) { $0.append($1.step.map(Int32.init)) }
        f.add("channel", .text) { $0.append($1.channel.rawValue) }
        f.add("device_token", .text, bytesPerRow: 72) { $0.append($1.deviceToken) }
        f.add("payload", .jsonb, bytesPerRow: 256) { $0.append(utf8: $1.payload.jsonBytes) }
        f.add("due_at", .timestamptz) { $0.append($1.dueAt) }
        var r = PostgresColumns(repeated)
        r.add("id", .uuid) { $0.append($1.row.id) }
        r.add("ordinal", .int4) { $0.append(Int32($1.row.ordinal)) }
        r.add("step", .int4) { $0.append($1.row.step.map(Int32.init)) }
        r.add("due_at", .timestamptz) { $0.append($1.row.dueAt) }
        r.add("source", .int4) { $0.append(Int32($1.source)) }
        return """
            WITH f AS (
                SELECT * FROM \(unnest: f, as: "f", ordinality: "position")
            ), inserted AS (
                INSERT INTO followups (app_id, notification_id, status, \(columns: f))
                SELECT \(appID)::text, \(plan.notificationID)::uuid, 'pending', \(columns: f, of: "f")
                FROM f
                UNION ALL
                -- In f's column order: a reminder is a step's push.
                SELECT \(appID)::text, \(plan.notificationID)::uuid, 'pending', r.id, 'step', r.ordinal, r.step, 'apns',
                    f.device_token, f.payload, r.due_at
                FROM \(unnest: r, as: "r")
                JOIN f ON f.position = r.source
                RETURNING 1
            )
            SELECT pg_notify(\(Channels.followUps), \(appID)) WHERE EXISTS (SELECT 1 FROM inserted)
            """
    }

    /// A notification's receipt, or `nil`: what was sent to each device and what APNs said, the reply
    /// that won and its latency, the replies it superseded, and each no-reply step's follow-ups.
    public func receipt(appID: String, id: UUID) throws -> JSONValue? {
        try pool.withConnection { connection -> JSONValue? in
            let found = try connection.query(
                """
                SELECT \(unsafeSQL: Self.columns) FROM notifications n WHERE app_id = \(appID) AND id = \(id)
                """)
            guard let row = found.first else { return nil }
            guard case .object(var receipt) = try Self.summary(row) else { return nil }
            let since = Self.historySince(try row.decode("created_at", as: Date.self))
            let followUps = try connection.query(Self.receiptFollowUps(appID: appID, id: id, since: since))
            var byID: [UUID: JSONValue] = [:]
            var steps: [Int: [JSONValue]] = [:]
            var others: [JSONValue] = []
            for followUp in followUps {
                let view = try Self.followUpView(followUp)
                let followUpID: UUID = try followUp.decode("id")
                byID[followUpID] = view
                let kind: String = try followUp.decode("kind")
                if kind == "step", let step: Int = try followUp.decode("step") {
                    steps[step, default: []].append(view)
                } else if kind != "push" {
                    others.append(view)
                }
            }
            let deviceList = try JSONParser.parse(try row.decode("devices", as: PostgresJSON.self).text)
            receipt["devices"] = .array(
                (deviceList.arrayValue ?? []).map { device in
                    guard case .object(var object) = device else { return device }
                    if let text = object["followUpId"]?.stringValue, let followUpID = UUID(uuidString: text) {
                        object["push"] = byID[followUpID] ?? .null
                    }
                    return .object(object)
                })
            let stepList = try JSONParser.parse(try row.decode("steps", as: PostgresJSON.self).text)
            receipt["steps"] = .array(
                (stepList.arrayValue ?? []).enumerated().map { index, step in
                    guard case .object(var object) = step else { return step }
                    let views = steps[index] ?? []
                    object["followUps"] = .array(views)
                    object["fired"] = .bool(
                        views.contains {
                            ["delivered", "running", "retrying", "dead", "skipped"].contains(
                                $0.value(atPath: "status")?.stringValue ?? "")
                        })
                    return .object(object)
                })
            receipt["otherFollowUps"] = .array(others)
            let replies = try connection.query(
                Self.receiptReplies(
                    appID: appID, id: id, createdAt: try row.decode("created_at", as: Date.self), since: since))
            let winner: UUID? = try row.decode("answered_response_id")
            var superseded: [JSONValue] = []
            var other: [JSONValue] = []
            receipt["answer"] = .null
            for reply in replies {
                let replyID: UUID = try reply.decode("id")
                let view: JSONValue = .object([
                    "responseId": .string(replyID.lowercasedString),
                    "actionIdentifier": .string(try reply.decode("action_identifier")),
                    "outcome": .string(try reply.decode("outcome")),
                    "ruleId": (try reply.decode("rule_id", as: String?.self)).map(JSONValue.string) ?? .null,
                    "deviceToken": (try reply.decode("device_token", as: String?.self)).map(JSONValue.string) ?? .null,
                    "recipient": (try reply.decode("recipient", as: String?.self)).map(JSONValue.string) ?? .null,
                    "user": try Self.replyUser(reply),
                    // The key that signed it (`key`: the device key's fingerprint), when it was signed.
                    "signature": SignatureCheck(
                        status: try reply.decode("signature"), key: try reply.decode("signature_key")
                    ).json,
                    "receivedAt": .string(Timestamp.format(try reply.decode("received_at"))),
                    "latencyMs": .integer(try reply.decode("latency_ms")),
                ])
                if replyID == winner {
                    receipt["answer"] = view
                } else if try reply.decode("outcome", as: String.self) == Outcome.superseded.rawValue {
                    superseded.append(view)
                } else {
                    other.append(view)
                }
            }
            receipt["superseded"] = .array(superseded)
            receipt["otherReplies"] = .array(other)
            return .object(receipt)
        }
    }

    /// A reply's `user` (``StoredResponseView/userJSON(verified:deviceUser:)``) from its `user_id` and
    /// `user_verified` columns.
    static func replyUser(_ row: PostgresRow) throws -> JSONValue {
        let user: String? = try row.decode("user_id")
        let verified: Bool = try row.decode("user_verified")
        return StoredResponseView.userJSON(verified: verified ? user : nil, deviceUser: verified ? nil : user)
    }

    /// Where a notification's history starts: its follow-ups finish, their attempts end and its replies
    /// arrive after it was sent, by the same database clock; the hour before allows for that clock being
    /// stepped back. A bound on each history table's partition key, so a receipt reads the partitions
    /// from the send on, not every one kept.
    static func historySince(_ createdAt: Date) -> Date { createdAt.addingTimeInterval(-3600) }

    /// A receipt's follow-ups, each with its latest attempt and whether its device is dead; `since`
    /// (``historySince(_:)``) prunes the partitions of `followups_done` and `delivery_attempts` before it.
    static func receiptFollowUps(appID: String, id: UUID, since: Date) -> PostgresQuery {
        """
        SELECT f.id, f.kind, f.ordinal, f.step, f.channel, f.status, f.attempt, f.due_at, f.last_error,
            f.device_token, a.http_status, a.error_class, a.finished_at,
            EXISTS (SELECT 1 FROM devices d WHERE d.app_id = f.app_id AND d.token = f.device_token
                AND d.status = 'dead') AS device_dead
        FROM followups f
        LEFT JOIN LATERAL (
            SELECT http_status, error_class, finished_at FROM delivery_attempts a
            WHERE a.app_id = f.app_id AND a.followup_id = f.id AND a.finished_at >= \(since)
            ORDER BY a.attempt DESC LIMIT 1
        ) AS a ON true
        WHERE f.app_id = \(appID) AND f.notification_id = \(id) AND (f.finished_at IS NULL OR f.finished_at >= \(since))
        ORDER BY f.kind, f.step NULLS FIRST, f.ordinal
        """
    }

    /// A receipt's replies, with their latency from the send; `since` (``historySince(_:)``) prunes the
    /// partitions of `responses` (by id, a UUIDv7 of the receipt time) before it.
    static func receiptReplies(appID: String, id: UUID, createdAt: Date, since: Date) -> PostgresQuery {
        """
        SELECT r.id, r.action_identifier, r.outcome, r.device_token, r.recipient, r.received_at, r.rule_id,
            r.user_id, r.user_verified, r.signature, r.signature_key, (extract(epoch FROM r.received_at - \(createdAt)) * 1000)::bigint AS latency_ms
        FROM responses r
        WHERE r.app_id = \(appID) AND r.notification_id = \(id) AND r.id >= actionhook_uuid_at(\(since))
        ORDER BY r.received_at, r.id
        """
    }

    /// The notifications of an app, newest first, one page at a time.
    public func list(appID: String, filter: NotificationFilter, _ page: PageRequest) throws -> Page<JSONValue> {
        let after = try page.cursor.map(Cursor.timeAndID)
        let afterTime = after?.time
        let afterID = after?.id
        let rows = try pool.withConnection { connection in
            try connection.query(
                """
                SELECT \(unsafeSQL: Self.columns) FROM notifications n
                WHERE app_id = \(appID)
                    AND (\(filter.subject)::text IS NULL OR subject = \(filter.subject))
                    AND (\(filter.category)::text IS NULL OR category = \(filter.category))
                    AND (\(filter.since)::timestamptz IS NULL OR created_at >= \(filter.since))
                    AND (\(filter.status?.rawValue)::text IS NULL
                        OR actionhook_notification_status(answered_at, expires_at, silence_at) = \(filter.status?.rawValue))
                    AND (\(afterTime)::timestamptz IS NULL OR (created_at, id) < (\(afterTime)::timestamptz, \(afterID)::uuid))
                ORDER BY created_at DESC, id DESC
                LIMIT \(page.limit + 1)
                """)
        }
        let items = try rows.prefix(page.limit).map(Self.summary)
        var next: String?
        if rows.count > page.limit {
            let last = rows[page.limit - 1]
            next =
                Cursor([try last.decode("created_at_text"), (try last.decode("id", as: UUID.self)).lowercasedString])
                .encoded
        }
        return Page(items: items, nextCursor: next)
    }

    static let columns: StaticString = """
        n.id, n.category, n.subject, n.answers, n.collapse_id, n.events, n.devices, n.steps, n.expires_at,
        n.created_at, n.answered_at, n.answered_response_id, n.replace_on_answer IS NOT NULL AS replaces,
        n.signed_replies,
        to_char(n.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS created_at_text,
        jsonb_array_length(n.devices) AS device_count,
        actionhook_notification_status(n.answered_at, n.expires_at, n.silence_at) AS status
        """

    static func summary(_ row: PostgresRow) throws -> JSONValue {
        let answeredAt: Date? = try row.decode("answered_at")
        let answeredBy: UUID? = try row.decode("answered_response_id")
        return .object([
            "id": .string((try row.decode("id", as: UUID.self)).lowercasedString),
            "status": .string(try row.decode("status")),
            "category": (try row.decode("category", as: String?.self)).map(JSONValue.string) ?? .null,
            "subject": (try row.decode("subject", as: String?.self)).map(JSONValue.string) ?? .null,
            "answers": .string(try row.decode("answers")),
            "requireSignedReplies": .bool(try row.decode("signed_replies")),
            "collapseId": .string(try row.decode("collapse_id")),
            "replaceOnAnswer": .bool(try row.decode("replaces")),
            "webhookEvents": .array((try row.decode("events", as: [String].self)).map(JSONValue.string)),
            "devices": .integer(try row.decode("device_count")),
            "createdAt": .string(Timestamp.format(try row.decode("created_at"))),
            "expiresAt": (try row.decode("expires_at", as: Date?.self)).map { .string(Timestamp.format($0)) } ?? .null,
            "answeredAt": answeredAt.map { .string(Timestamp.format($0)) } ?? .null,
            "answeredBy": answeredBy.map { .string($0.lowercasedString) } ?? .null,
        ])
    }

    static func followUpView(_ row: PostgresRow) throws -> JSONValue {
        var object: JSONObject = [
            "id": .string((try row.decode("id", as: UUID.self)).lowercasedString),
            "kind": .string(try row.decode("kind")),
            "channel": .string(try row.decode("channel")),
            "status": .string(try row.decode("status")),
            "attempts": .integer(try row.decode("attempt")),
            "dueAt": .string(Timestamp.format(try row.decode("due_at"))),
        ]
        if let token: String = try row.decode("device_token") {
            object["deviceToken"] = .string(token)
            object["deviceDead"] = .bool(try row.decode("device_dead"))
        }
        object["httpStatus"] = (try row.decode("http_status", as: Int?.self)).map(JSONValue.integer) ?? .null
        object["reason"] =
            (try row.decode("error_class", as: String?.self) ?? row.decode("last_error", as: String?.self))
            .map(JSONValue.string) ?? .null
        object["finishedAt"] =
            (try row.decode("finished_at", as: Date?.self)).map { .string(Timestamp.format($0)) } ?? .null
        return .object(object)
    }
}
