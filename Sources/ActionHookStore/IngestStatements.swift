import ActionHookCore
import Foundation
import Postgres

/// The statements of an ingest transaction: its guards and reads (below) and the writes of its planned
/// responses, a fixed number of statements however many there are.
///
/// Every write is limited to the batch positions whose guards held: the guard statement records them
/// in the transaction's setting `actionhook.ingest_guards` (one character per position, `1` when the
/// key's and the app's locks were both taken), so the writes can go out in the same round trip as the
/// guards, before their results are read.
struct IngestStatements {
    /// A planned response, with its position in the guard statement (1-based).
    typealias Entry = (position: Int, item: IngestItem, plan: IngestPlan)
    /// The planned responses.
    let entries: [Entry]
    /// The idempotency window, in seconds: a key stored longer ago is not looked for.
    let windowSeconds: Int

    /// Adds the statements that write every row to `pipeline`, in order; returns where the positions
    /// written will be (nil when there is nothing to write).
    @discardableResult
    func add(to pipeline: inout PipelinedReads) -> PipelinedReads.Read? {
        guard !entries.isEmpty else { return nil }
        // Snooze re-deliveries queued before this batch for the notifications it answers otherwise are
        // cancelled, found where they are (the snoozes of this batch are inserted after this, and those
        // a later answer of the same batch cancels are written as cancelled below).
        // Only the replying device's snoozes: another device's answer to the same notification leaves them.
        let cancelling = entries.compactMap { entry in
            entry.plan.cancelsSnoozes ? SnoozeScope(entry.item).map { (entry.position, $0) } : nil
        }
        if !cancelling.isEmpty {
            // Under the scopes' locks, which the guards took.
            pipeline.add(Self.cancelPendingSnoozes(cancelling.map(\.1), positions: cancelling.map(\.0)))
        }
        let written = pipeline.add(write)

        // Sent notifications answered by this batch: marked with their answer (under the lock the read
        // took), and their no-reply steps and expiry cancelled.
        let answering = entries.filter { $0.plan.answersNotification && $0.plan.notification != nil }
        if !answering.isEmpty {
            var k = PostgresColumns(answering)
            k.add("app_id", .text) { $0.append($1.item.appID) }
            k.add("id", .uuid) { $0.append($1.plan.notification?.id) }
            k.add("response_id", .uuid) { $0.append($1.plan.responseID) }
            pipeline.add(
                ("""
                UPDATE notifications n SET answered_at = now(), answered_response_id = k.response_id
                FROM \(unnest: k, as: "k")
                WHERE n.app_id = k.app_id AND n.id = k.id AND n.answered_at IS NULL
                """ as PostgresQuery).prepared)
            pipeline.add(
                ("""
                SELECT actionhook_cancel_followups(array_agg(f.app_id), array_agg(f.id), '{pending,retrying}')
                FROM \(unnest: k, as: "k")
                JOIN followups_queue f ON f.app_id = k.app_id AND f.notification_id = k.id
                WHERE f.kind IN ('step', 'expiry')
                """ as PostgresQuery).prepared)
        }
        return written
    }

    /// The responses, their keys and follow-ups in one statement of binary arrays (each column of the
    /// batch one parameter, which the server reads without parsing text), returning the positions
    /// written: those whose guards held and whose app is still there (read after the locks).
    ///
    /// A key stored within the window before (which only a lookup would have found) fails the statement
    /// like a unique violation, so the transaction rolls back with nothing of the batch written. The keys
    /// have a table of their own, partitioned by when they were stored (sql/migrations/014): a key is
    /// looked for among the keys of the window, under its advisory lock (the guards), and stored in the
    /// same statement. A reply without a key of its client's stores none: the key the server made for it
    /// can never come again. The workers of every instance are told which apps have new follow-ups
    /// (delivered at commit).
    private var write: PostgresQuery {
        let r = responseColumns
        let f = followUpColumns
        var apps = PostgresBinaryArray(.text, capacity: entries.count * 16)
        for app in Set(entries.map(\.item.appID)) { apps.append(app) }
        return
            ("""
        WITH r AS MATERIALIZED (
            SELECT r.* FROM \(unnest: r, as: "r")
            WHERE substr((SELECT current_setting('actionhook.ingest_guards', true)), r.position, 1) = '1'
                AND r.app_id = ANY (ARRAY(SELECT a.id FROM apps a WHERE a.id = ANY (\(apps)::text[])))
        ),
        keys AS (
            INSERT INTO idempotency_keys (app_id, key, response_id, request_hash, stored_at)
            SELECT r.app_id, r.idempotency_key, r.id, r.request_hash, now() FROM r
            WHERE r.idempotency_key IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM idempotency_keys i WHERE i.app_id = r.app_id AND i.key = r.idempotency_key
                    AND i.stored_at >= now() - make_interval(secs => \(windowSeconds)))
            RETURNING 1
        ),
        inserted AS (
            INSERT INTO responses (\(columns: r, except: ["position"]))
            SELECT \(columns: r, except: ["position"], of: "r") FROM r
        ),
        followups_inserted AS (
            INSERT INTO followups (app_id, notification_identifier, status, finished_at,
                \(columns: f, except: ["cancelled"]))
            SELECT r.app_id, r.notification_identifier, CASE WHEN f.cancelled THEN 'cancelled' ELSE 'pending' END,
                CASE WHEN f.cancelled THEN now() END, \(columns: f, except: ["cancelled"], of: "f")
            FROM \(unnest: f, as: "f")
            JOIN r ON r.id = f.response_id
            RETURNING app_id, status
        ),
        notified AS (
            SELECT count(pg_notify(\(Channels.followUps), a.app_id)) AS apps
            FROM (SELECT DISTINCT app_id FROM followups_inserted WHERE status = 'pending') AS a
        ),
        checked AS (
            SELECT actionhook_idempotency_key_stored()
            WHERE (SELECT count(*) FROM keys) < (SELECT count(*) FROM r WHERE r.idempotency_key IS NOT NULL)
        )
        SELECT r.position FROM r
        WHERE (SELECT count(*) FROM checked) = 0 AND (SELECT apps FROM notified) >= 0
        """ as PostgresQuery).prepared
    }

    /// The batch's responses, a row each: its position in the guards, then the columns of `responses`.
    private var responseColumns: PostgresColumns<[Entry]> {
        var r = PostgresColumns(entries)
        r.add("position", .int4) { $0.append(Int32($1.position)) }
        r.add("app_id", .text) { $0.append($1.item.appID) }
        r.add("id", .uuid) { $0.append($1.plan.responseID) }
        // The responses row records the key only when the client sent it.
        r.add("idempotency_key", .text, bytesPerRow: 48) {
            $0.append($1.item.keyFromClient ? $1.item.idempotencyKey : nil)
        }
        r.add("request_hash", .bytea, bytesPerRow: 36) { $0.append(bytes: $1.item.requestHash) }
        r.add("action_identifier", .text) { $0.append($1.item.response.actionIdentifier) }
        r.add("category_identifier", .text, bytesPerRow: 24) { $0.append($1.item.response.categoryIdentifier) }
        r.add("notification_identifier", .text, bytesPerRow: 48) { $0.append($1.item.response.notificationIdentifier) }
        r.add("user_text", .text) { $0.append($1.item.response.userText) }
        r.add("user_info", .jsonb, bytesPerRow: 256) { $0.append(utf8: $1.plan.userInfoJSON) }
        r.add("device_token", .text, bytesPerRow: 72) { $0.append($1.item.response.deviceToken) }
        r.add("client_response_id", .text, bytesPerRow: 40) { $0.append($1.item.response.responseId) }
        r.add("responded_at", .timestamptz) { $0.append(milliseconds: $1.item.response.respondedAt) }
        r.add("received_at", .timestamptz) { $0.append($1.plan.receivedAt) }
        r.add("outcome", .text) { $0.append($1.plan.outcome.rawValue) }
        r.add("rule_id", .text, bytesPerRow: 24) { $0.append($1.item.decision.rule?.id) }
        r.add("subject", .text, bytesPerRow: 24) { $0.append($1.item.decision.subject) }
        // As json, not jsonb: the stored answer keeps its member order.
        r.add("answer", .json, bytesPerRow: 256) { $0.append(utf8: $1.plan.answer.json) }
        r.add("notification_id", .uuid) { $0.append($1.plan.notification?.id) }
        r.add("recipient", .text) { $0.append($1.plan.notification?.recipient) }
        // The verified user, else the user the send reached the replying device as (not verified).
        r.add("user_id", .text) { $0.append($1.item.response.user ?? $1.plan.notification?.deviceUser) }
        r.add("user_verified", .bool) { $0.append($1.item.response.user != nil) }
        r.add("signature", .text) { $0.append($1.item.response.signature.status) }
        r.add("signature_key", .text) { $0.append($1.item.response.signature.key) }
        return r
    }

    /// A follow-up of the batch, with its response's id and whether a later answer of the batch cancels it.
    private struct FollowUpRow {
        var planned: IngestPlan.FollowUp
        var responseID: UUID
        var notificationID: UUID?
        var cancelled: Bool
    }

    /// The batch's follow-ups, a row each. Snoozes that a later answer in the same batch cancels are
    /// written as cancelled.
    private var followUpColumns: PostgresColumns<[FollowUpRow]> {
        var cancelledInBatch = Set<UUID>()
        var snoozesByNotification: [SnoozeScope: [UUID]] = [:]
        for (_, item, plan) in entries {
            guard let key = SnoozeScope(item) else { continue }
            if plan.cancelsSnoozes {
                cancelledInBatch.formUnion(snoozesByNotification.removeValue(forKey: key) ?? [])
            }
            snoozesByNotification[key, default: []] += plan.followUps.filter(\.isSnooze).map(\.id)
        }
        let rows = entries.flatMap { entry in
            entry.plan.followUps.map {
                FollowUpRow(
                    planned: $0, responseID: entry.plan.responseID, notificationID: entry.plan.notification?.id,
                    cancelled: cancelledInBatch.contains($0.id))
            }
        }
        var f = PostgresColumns(rows)
        f.add("id", .uuid) { $0.append($1.planned.id) }
        f.add("response_id", .uuid) { $0.append($1.responseID) }
        f.add("ordinal", .int4) { $0.append(Int32($1.planned.planned.ordinal)) }
        f.add("channel", .text) { $0.append($1.planned.planned.channel.rawValue) }
        f.add("is_snooze", .bool) { $0.append($1.planned.planned.kind == .snooze) }
        f.add("device_token", .text) {
            let followUp = $1.planned.planned
            $0.append(followUp.channel == .apns ? followUp.payload.value(atPath: "deviceToken")?.stringValue : nil)
        }
        f.add("payload", .jsonb, bytesPerRow: 512) { $0.append(utf8: $1.planned.payloadJSON) }
        f.add("due_at", .timestamptz) { $0.append(milliseconds: $1.planned.dueAt) }
        f.add("cancelled", .bool) { $0.append($1.cancelled) }
        f.add("kind", .text) { $0.append($1.planned.planned.kind.rawValue) }
        // Only a send's follow-ups (its steps, its expiry, the answer's replacing pushes) name it.
        f.add("notification_id", .uuid) {
            let kind = $1.planned.planned.kind
            $0.append(kind == .rule || kind == .snooze ? nil : $1.notificationID)
        }
        return f
    }

    /// Cancels the snooze re-deliveries queued for each (app, notification) at a position whose guards
    /// held. The lateral subquery keeps the batch's keys outside and the snooze index inside, whatever
    /// the plan. The status is tested outside it (`OFFSET 0` keeps it there): inside, it would make the
    /// due index (partial on that status) a candidate, and a plan made on a truncated table, where every
    /// index looks as cheap, took it and read every pending follow-up of the app per key.
    static func cancelPendingSnoozes(_ scopes: [SnoozeScope], positions: [Int]) -> PostgresQuery {
        var k = PostgresColumns(Array(zip(scopes, positions)))
        k.add("app_id", .text) { $0.append($1.0.appID) }
        k.add("notification", .text, bytesPerRow: 48) { $0.append($1.0.notification) }
        k.add("token", .text, bytesPerRow: 72) { $0.append($1.0.deviceToken) }
        k.add("position", .int4) { $0.append(Int32($1.1)) }
        return
            ("""
        SELECT actionhook_cancel_followups(s.apps, s.ids, '{pending,retrying}')
        FROM (
            SELECT array_agg(q.app_id) AS apps, array_agg(q.id) AS ids
            FROM \(unnest: k, as: "k")
            CROSS JOIN LATERAL (
                SELECT f.app_id, f.id, f.status FROM followups_queue f
                WHERE f.app_id = k.app_id AND f.notification_identifier = k.notification AND f.is_snooze
                    AND f.device_token = k.token
                OFFSET 0
            ) AS q
            WHERE q.status IN ('pending', 'retrying')
                AND substr((SELECT current_setting('actionhook.ingest_guards', true)), k.position, 1) = '1'
        ) AS s
        WHERE s.apps IS NOT NULL
        """ as PostgresQuery).prepared
    }

    /// Settings for the rest of the ingest transaction, so that its lookups can stay prepared with
    /// one plan, made once per connection: keyed lookups through their indexes, joins as nested loops
    /// over the batch's few keys. Left to statistics, a plan made while a table is empty (after a
    /// TRUNCATE, on a new install) scans the table whole once it is not; planning each batch's
    /// lookups anew costs more than running them at low load. Each prepared lookup has one index
    /// that matches all its keys (the test `plansSurviveGrowth` checks which); the idempotency lookup,
    /// which has two candidates and runs only after a replay, is planned each time.
    /// The guards statement makes them (``guards(locks:apps:scopes:)``), so a batch spends no statement on them.
    private static let planSettingsExpression: StaticString = """
        set_config('plan_cache_mode', 'force_generic_plan', true) || set_config('enable_seqscan', 'off', true)
            || set_config('enable_hashjoin', 'off', true) || set_config('enable_mergejoin', 'off', true)
        """

    /// Each item's guards, tried and never waited for: its key's advisory lock and its app's lock,
    /// shared (class 1, which the app's deletion takes exclusively), with its position and the
    /// transaction's clock. Records the positions where both held in the setting
    /// `actionhook.ingest_guards`, which the writes read (see ``IngestStatements``), and makes the
    /// plan settings (``planSettingsExpression``) for the statements after it (its own plan needs none).
    static func guards(locks: [String], apps: [String], scopes: [SnoozeScope] = []) -> PostgresQuery {
        var k = PostgresColumns(Array(zip(locks, apps)))
        k.add("lock", .text, bytesPerRow: 64) { $0.append($1.0) }
        k.add("app_id", .text) { $0.append($1.1) }
        var l = PostgresColumns(scopes)
        l.add("lock", .text, bytesPerRow: 128) { $0.append($1.lockText) }
        // The snooze scopes' locks are waited for (in one order, so two batches never wait for each other)
        // and held to the commit: a snooze's count and the answer that cancels the scope's pending
        // re-deliveries take their turns, and the statements after this one see what the other committed.
        return
            ("""
        WITH g AS MATERIALIZED (
            SELECT k.position::int AS position, pg_try_advisory_xact_lock(hashtextextended(k.lock, 0)) AS key_locked,
                pg_try_advisory_xact_lock_shared(1, actionhook_app_lock_key(k.app_id)) AS app_locked
            FROM \(unnest: k, as: "k", ordinality: "position")
        ), s AS MATERIALIZED (
            SELECT count(pg_advisory_xact_lock(hashtextextended(l.lock, 0))) AS scopes
            FROM (SELECT DISTINCT l.lock FROM \(unnest: l, as: "l") ORDER BY l.lock) AS l
        )
        SELECT g.position, g.key_locked, g.app_locked, now() AS now, (SELECT scopes FROM s) AS scopes,
            (SELECT set_config('actionhook.ingest_guards',
                string_agg(CASE WHEN key_locked AND app_locked THEN '1' ELSE '0' END, '' ORDER BY position), true)
            FROM g) AS guards,
            (SELECT \(unsafeSQL: planSettingsExpression)) AS settings
        FROM g ORDER BY g.position
        """ as PostgresQuery).prepared
    }

    /// The apps of the batch that still exist.
    static func existingApps(_ apps: [String]) -> PostgresQuery {
        ("SELECT id FROM apps WHERE id = ANY(\(apps)::text[])" as PostgresQuery).prepared
    }

    /// Which of the planned responses are stored, by id: read after a commit whose answer never came.
    static func storedIDs(apps: [String], ids: [UUID]) -> PostgresQuery {
        """
        SELECT r.id FROM unnest(\(apps)::text[], \(ids)::uuid[]) AS k(app_id, id)
        JOIN responses r ON r.app_id = k.app_id AND r.id = k.id
        """
    }

    /// Responses stored within the window under the batch's (app, idempotency key) pairs; read only
    /// when a write found one of its keys stored. A key whose response is gone reads as stored without an
    /// answer, and is given up.
    static func storedResponses(apps: [String], keys: [String], windowSeconds: Int) -> PostgresQuery {
        """
        SELECT i.app_id, i.key AS idempotency_key, i.request_hash, r.outcome, r.answer, i.stored_at AS received_at,
            r.id IS NOT NULL AS kept
        FROM unnest(\(apps)::text[], \(keys)::text[]) AS k(app_id, key)
        JOIN idempotency_keys i ON i.app_id = k.app_id AND i.key = k.key
            AND i.stored_at >= now() - make_interval(secs => \(windowSeconds))
        LEFT JOIN responses r ON r.app_id = i.app_id AND r.id = i.response_id
        """
    }

    /// The sent notifications the batch's keyed replies name, each with the replying device's recipient,
    /// locked `FOR UPDATE` in (app, id) order (so two batches never wait on each other in a cycle). A
    /// notification of another app is not found: the reply stays unbound. The key's device position is
    /// believed only when the send put the reply's own device token there: a reply from another device
    /// (or without a token) is bound to the notification, with no position and no recipient.
    static func boundNotifications(
        apps: [String], ids: [String], devices: [Int], tokens: [String], snoozing: [Bool]
    ) -> PostgresQuery {
        var k = PostgresColumns(Array(apps.indices))
        k.add("app_id", .text) { $0.append(apps[$1]) }
        // The ids come from notifications' keys (``NotificationKey``), which hold UUIDs.
        k.add("id", .uuid) { $0.append(UUID(uuidString: ids[$1])) }
        k.add("device", .int4) { $0.append(Int32(clamping: devices[$1])) }
        k.add("token", .text, bytesPerRow: 72) { $0.append(tokens[$1]) }
        // A snooze re-delivers the push the device was sent: read (from the queue, or a finished-rows
        // partition of the send's time or later) only for a snooze from the device it was sent to.
        k.add("snoozing", .bool) { $0.append(snoozing[$1]) }
        return
            ("""
        SELECT k.position::int AS position, n.id, n.answers, n.expires_at, n.answered_at IS NOT NULL AS answered,
            n.collapse_id, n.category, n.subject, n.created_at, n.events, n.replace_on_answer::text AS replacement,
            n.signed_replies,
            CASE WHEN n.devices -> k.device ->> 'deviceToken' = k.token THEN n.devices -> k.device ->> 'recipient'
                END AS recipient,
            CASE WHEN n.devices -> k.device ->> 'deviceToken' = k.token THEN n.devices -> k.device ->> 'user'
                END AS device_user,
            coalesce(n.devices -> k.device ->> 'deviceToken' = k.token, false) AS known_device,
            CASE WHEN n.replace_on_answer IS NOT NULL THEN n.devices::text END AS devices,
            CASE WHEN k.snoozing AND n.devices -> k.device ->> 'deviceToken' = k.token
                AND NOT coalesce((n.devices -> k.device ->> 'escalation')::boolean, false) THEN
                coalesce(
                    (SELECT f.payload::text FROM followups_queue f WHERE f.app_id = n.app_id
                        AND f.id = (n.devices -> k.device ->> 'followUpId')::uuid),
                    (SELECT f.payload::text FROM followups_done f WHERE f.app_id = n.app_id
                        AND f.id = (n.devices -> k.device ->> 'followUpId')::uuid AND f.finished_at >= n.created_at))
                END AS push
        FROM \(unnest: k, as: "k", ordinality: "position")
        JOIN notifications n ON n.app_id = k.app_id AND n.id = k.id
        ORDER BY n.app_id, n.id
        FOR UPDATE OF n
        """ as PostgresQuery).prepared
    }

    /// A row of ``boundNotifications(apps:ids:devices:)`` as the plan reads it.
    static func boundNotification(_ row: PostgresRow, device: Int) throws -> BoundNotification {
        let knownDevice: Bool = try row.decode("known_device")
        var devices: [SendDevice] = []
        if let text: String = try row.decode("devices") {
            devices = (try JSONParser.parse(text).arrayValue ?? []).compactMap { device in
                // Devices an escalation added may never have been sent anything; an erased one has no token.
                guard device.value(atPath: "escalation")?.boolValue != true,
                    device.value(atPath: "deviceToken")?.stringValue?.isEmpty == false
                else { return nil }
                return device.value(atPath: "deviceToken")?.stringValue.map {
                    SendDevice(
                        deviceToken: $0, recipient: device.value(atPath: "recipient")?.stringValue,
                        environment: device.value(atPath: "environment")?.stringValue,
                        user: device.value(atPath: "user")?.stringValue)
                }
            }
        }
        let replacement: String? = try row.decode("replacement")
        let push: String? = try row.decode("push")
        var notification = BoundNotification(
            id: try row.decode("id"), answers: AnswerPolicy(rawValue: try row.decode("answers")) ?? .first,
            expiresAt: try row.decode("expires_at"), answered: try row.decode("answered"),
            collapseId: try row.decode("collapse_id"), category: try row.decode("category"),
            subject: try row.decode("subject"), createdAt: try row.decode("created_at"),
            events: try row.decode("events"),
            replacement: try replacement.flatMap { try JSONParser.parse($0).objectValue },
            device: knownDevice ? device : nil, recipient: try row.decode("recipient"), devices: devices,
            push: try push.flatMap { try JSONParser.parse($0).objectValue }, deviceUser: try row.decode("device_user"))
        notification.signedReplies = try row.decode("signed_replies")
        return notification
    }

    /// Snoozes already given for each (app, notification, device) the batch snoozes, in order.
    static func snoozeCounts(_ scopes: [SnoozeScope]) -> PostgresQuery {
        var k = PostgresColumns(scopes)
        k.add("app_id", .text) { $0.append($1.appID) }
        k.add("notification", .text, bytesPerRow: 48) { $0.append($1.notification) }
        k.add("token", .text, bytesPerRow: 72) { $0.append($1.deviceToken) }
        return
            ("""
        SELECT k.position::int AS position,
            (SELECT count(*) FROM responses r WHERE r.app_id = k.app_id AND r.notification_identifier = k.notification
                AND r.outcome = 'snoozed' AND r.device_token = k.token)::int AS snoozes
        FROM \(unnest: k, as: "k", ordinality: "position")
        """ as PostgresQuery).prepared
    }

    /// Gives up keys whose response is gone, before the insert that stores them again.
    static func releaseKeys(_ keys: [AppScoped]) -> PostgresQuery {
        """
        DELETE FROM idempotency_keys i
        USING unnest(\(keys.map(\.appID))::text[], \(keys.map(\.name))::text[]) AS k(app_id, key)
        WHERE i.app_id = k.app_id AND i.key = k.key
        """
    }
}

/// Whose snoozes a reply counts and cancels: one device's, of one notification (its
/// `notificationIdentifier`, the same on every device a send reached), never another device's.
struct SnoozeScope: Hashable {
    var appID: String
    var notification: String
    var deviceToken: String

    /// The reply's scope; nil without a `notificationIdentifier` or a device token.
    init?(_ item: IngestItem) {
        guard let notification = item.response.notificationIdentifier, let token = item.response.deviceToken else {
            return nil
        }
        appID = item.appID
        self.notification = notification
        deviceToken = token
    }

    /// The text whose hash names the scope's advisory lock (see ``IngestStatements/guards(locks:apps:scopes:)``).
    var lockText: String { UnitSeparated.join("snooze", appID, notification, deviceToken) }
}
