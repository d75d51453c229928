import ActionHookCore
import Foundation
import Postgres

/// The statements of an ingest transaction: the reads it starts with (below) and the writes of its
/// planned responses, a fixed number of statements however many there are.
struct IngestStatements {
    let entries: [(item: IngestItem, plan: IngestPlan)]
    /// Snooze re-deliveries pending before this batch, by app and notification.
    let pendingSnoozes: [AppScoped: [UUID]]

    /// The statements that write every row, in order.
    var statements: [PostgresQuery] {
        guard !entries.isEmpty else { return [] }
        var statements: [PostgresQuery] = []
        // Pending snoozes written before this batch are cancelled here; snoozes of this batch that a
        // later answer in the same batch cancels are written as cancelled below. Rare, so planned
        // each time (one statement per app).
        var cancellations: [String: Set<UUID>] = [:]
        var cancellingApps: [String] = []
        for (item, plan) in entries {
            guard plan.cancelsSnoozes, let key = IngestTransaction.notification(item), let ids = pendingSnoozes[key]
            else { continue }
            if cancellations[item.appID] == nil { cancellingApps.append(item.appID) }
            cancellations[item.appID, default: []].formUnion(ids)
        }
        for app in cancellingApps {
            let ids = Array(cancellations[app] ?? [])
            statements.append(
                """
                SELECT actionhook_cancel_followups(array_agg(\(app)::text), array_agg(k.id), '{pending,retrying}')
                FROM unnest(\(ids)::uuid[]) AS k(id)
                """)
        }

        var responses = JSONRecords(capacity: entries.count * 1024)
        for (item, plan) in entries {
            let response = item.response
            responses.beginRecord()
            responses.add("app_id", item.appID)
            responses.add("id", plan.responseID)
            responses.add("idempotency_key", item.idempotencyKey)
            responses.addHex("request_hash", item.requestHash)
            responses.add("action_identifier", response.actionIdentifier)
            responses.add("category_identifier", response.categoryIdentifier)
            responses.add("notification_identifier", response.notificationIdentifier)
            responses.add("user_text", response.userText)
            responses.add("user_info", JSONValue.object(response.userInfo))
            responses.add("device_token", response.deviceToken)
            responses.add("client_response_id", response.responseId)
            responses.add("responded_at", response.respondedAt)
            responses.add("outcome", plan.outcome.rawValue)
            responses.add("rule_id", item.decision.rule?.id)
            responses.add("subject", item.decision.subject)
            // As text: the stored answer keeps its member order (jsonb would sort it).
            responses.add("answer", plan.answer.body.jsonText)
            responses.add("notification_id", plan.notification?.id.lowercasedString)
            responses.add("recipient", plan.notification?.recipient)
            responses.endRecord()
        }
        // A key stored before (which only a lookup would have found) fails the statement like a
        // unique violation, so the transaction rolls back with nothing of the batch written. The keys
        // have a table of their own (responses are partitioned by time; a key is unique in any of them).
        statements.append(
            ("""
            WITH r AS MATERIALIZED (
                SELECT * FROM jsonb_to_recordset(\(PostgresJSON(responses.text))::jsonb) AS r(
                    app_id text, id uuid, idempotency_key text, request_hash text, action_identifier text,
                    category_identifier text, notification_identifier text, user_text text, user_info jsonb,
                    device_token text, client_response_id text, responded_at timestamptz, outcome text,
                    rule_id text, subject text, answer text, notification_id uuid, recipient text)
            ),
            keys AS (
                INSERT INTO idempotency_keys (app_id, key, response_id, request_hash, stored_at)
                SELECT r.app_id, r.idempotency_key, r.id, decode(r.request_hash, 'hex'), now() FROM r
                ON CONFLICT (app_id, key) DO NOTHING
                RETURNING 1
            ),
            inserted AS (
                INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier,
                    category_identifier, notification_identifier, user_text, user_info, device_token,
                    client_response_id, responded_at, received_at, outcome, rule_id, subject, answer, notification_id,
                    recipient)
                SELECT r.app_id, r.id, r.idempotency_key, decode(r.request_hash, 'hex'), r.action_identifier,
                    r.category_identifier, r.notification_identifier, r.user_text, r.user_info, r.device_token, r.client_response_id,
                    r.responded_at, now(), r.outcome, r.rule_id, r.subject, r.answer::json, r.notification_id,
                    r.recipient
                FROM r
            )
            SELECT actionhook_idempotency_key_stored() WHERE (SELECT count(*) FROM keys) < \(entries.count)::bigint
            """ as PostgresQuery).prepared)

        // Sent notifications answered by this batch: marked with their answer (under the lock the read
        // took), and their no-reply steps and expiry cancelled.
        let answering = entries.filter(\.plan.answersNotification)
        if !answering.isEmpty {
            let apps = answering.map(\.item.appID)
            let ids = answering.compactMap { $0.plan.notification?.id }
            let responseIDs = answering.map(\.plan.responseID)
            statements.append(
                ("""
                UPDATE notifications n SET answered_at = now(), answered_response_id = k.response_id
                FROM unnest(\(apps)::text[], \(ids)::uuid[], \(responseIDs)::uuid[]) AS k(app_id, id, response_id)
                WHERE n.app_id = k.app_id AND n.id = k.id AND n.answered_at IS NULL
                """ as PostgresQuery).prepared)
            statements.append(
                ("""
                SELECT actionhook_cancel_followups(array_agg(f.app_id), array_agg(f.id), '{pending,retrying}')
                FROM unnest(\(apps)::text[], \(ids)::uuid[]) AS k(app_id, notification_id)
                JOIN followups_queue f ON f.app_id = k.app_id AND f.notification_id = k.notification_id
                WHERE f.kind IN ('step', 'expiry')
                """ as PostgresQuery).prepared)
        }

        var cancelledInBatch = Set<UUID>()
        var snoozesByNotification: [AppScoped: [UUID]] = [:]
        for (item, plan) in entries {
            guard let key = IngestTransaction.notification(item) else { continue }
            if plan.cancelsSnoozes {
                cancelledInBatch.formUnion(snoozesByNotification.removeValue(forKey: key) ?? [])
            }
            snoozesByNotification[key, default: []] += plan.followUps.filter(\.isSnooze).map(\.id)
        }
        var followUps = JSONRecords(capacity: entries.count * 1024)
        for (item, plan) in entries {
            for planned in plan.followUps {
                let (id, followUp, dueAt) = (planned.id, planned.planned, planned.dueAt)
                followUps.beginRecord()
                followUps.add("app_id", item.appID)
                followUps.add("id", id)
                followUps.add("response_id", plan.responseID)
                followUps.add("ordinal", followUp.ordinal)
                followUps.add("channel", followUp.channel.rawValue)
                followUps.add("is_snooze", followUp.kind == .snooze)
                followUps.add("notification_identifier", item.response.notificationIdentifier)
                followUps.add(
                    "device_token",
                    followUp.channel == .apns ? followUp.payload.value(atPath: "deviceToken")?.stringValue : nil)
                followUps.add("payload", followUp.payload)
                followUps.add("due_at", dueAt)
                followUps.add("status", cancelledInBatch.contains(id) ? "cancelled" : "pending")
                followUps.add("kind", followUp.kind.rawValue)
                followUps.add(
                    "notification_id",
                    followUp.kind == .rule || followUp.kind == .snooze ? nil : plan.notification?.id.lowercasedString)
                followUps.endRecord()
            }
        }
        // The workers of every instance are told which apps have new follow-ups (delivered at commit).
        if followUps.count > 0 {
            statements.append(
                ("""
                WITH inserted AS (
                    INSERT INTO followups (app_id, id, response_id, ordinal, channel, is_snooze,
                        notification_identifier, device_token, payload, due_at, status, kind, notification_id,
                        finished_at)
                    SELECT f.app_id, f.id, f.response_id, f.ordinal, f.channel, f.is_snooze, f.notification_identifier,
                        f.device_token, f.payload, f.due_at, f.status, f.kind, f.notification_id,
                        CASE WHEN f.status = 'cancelled' THEN now() END
                    FROM jsonb_to_recordset(\(PostgresJSON(followUps.text))::jsonb) AS f(
                        app_id text, id uuid, response_id uuid, ordinal integer, channel text, is_snooze boolean,
                        notification_identifier text, device_token text, payload jsonb, due_at timestamptz,
                        status text, kind text, notification_id uuid)
                    RETURNING app_id, status
                )
                SELECT pg_notify(\(Channels.followUps), app_id)
                FROM (SELECT DISTINCT app_id FROM inserted WHERE status = 'pending') AS apps
                """ as PostgresQuery).prepared)
        }
        return statements
    }

    /// Settings for the rest of the ingest transaction, so that its lookups can stay prepared with
    /// one plan, made once per connection: keyed lookups through their indexes, joins as nested loops
    /// over the batch's few keys. Left to statistics, a plan made while a table is empty (after a
    /// TRUNCATE, on a new install) scans the table whole once it is not; planning each batch's
    /// lookups anew costs more than running them at low load. Each prepared lookup has one index
    /// that matches all its keys (the test `plansSurviveGrowth` checks which); the idempotency lookup,
    /// which has two candidates and runs only after a replay, is planned each time.
    static let planSettings =
        ("""
    SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
        set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)
    """ as PostgresQuery).prepared

    /// Each key's advisory lock (tried, never waited for), with its position and the transaction's clock.
    static func keyLocks(_ lockTexts: [String]) -> PostgresQuery {
        ("""
        SELECT k.ordinality::int AS position, pg_try_advisory_xact_lock(hashtextextended(k.key, 0)) AS locked,
            now() AS now
        FROM unnest(\(lockTexts)::text[]) WITH ORDINALITY AS k(key, ordinality)
        ORDER BY k.ordinality
        """ as PostgresQuery).prepared
    }

    /// Each app's lock, shared (class 1): the apps returned are not being deleted.
    static func appLocks(_ apps: [String]) -> PostgresQuery {
        ("""
        SELECT a.app_id FROM unnest(\(apps)::text[]) AS a(app_id)
        WHERE pg_try_advisory_xact_lock_shared(1, actionhook_app_lock_key(a.app_id))
        """ as PostgresQuery).prepared
    }

    /// The apps of the batch that still exist.
    static func existingApps(_ apps: [String]) -> PostgresQuery {
        ("SELECT id FROM apps WHERE id = ANY(\(apps)::text[])" as PostgresQuery).prepared
    }

    /// Responses already stored under the batch's (app, idempotency key) pairs; read only when a
    /// write found one of its keys stored. A key whose response is gone (dropped with its partition by
    /// a retention shorter than the key's window) reads as stored without an answer, and is expired.
    static func storedResponses(apps: [String], keys: [String]) -> PostgresQuery {
        """
        SELECT i.app_id, i.key AS idempotency_key, i.request_hash, r.outcome, r.answer, i.stored_at AS received_at,
            r.id IS NOT NULL AS kept
        FROM unnest(\(apps)::text[], \(keys)::text[]) AS k(app_id, key)
        JOIN idempotency_keys i ON i.app_id = k.app_id AND i.key = k.key
        LEFT JOIN responses r ON r.app_id = i.app_id AND r.id = i.response_id
        """
    }

    /// The sent notifications the batch's keyed replies name, each with the replying device's recipient,
    /// locked `FOR UPDATE` in (app, id) order (so two batches never wait on each other in a cycle). A
    /// notification of another app is not found: the reply stays unbound. The key's device position is
    /// believed only when the send put the reply's own device token there: a reply from another device
    /// (or without a token) is bound to the notification, with no position and no recipient.
    static func boundNotifications(apps: [String], ids: [String], devices: [Int], tokens: [String]) -> PostgresQuery {
        ("""
        SELECT k.position::int AS position, n.id, n.answers, n.expires_at, n.answered_at IS NOT NULL AS answered,
            n.collapse_id, n.category, n.subject, n.created_at, n.events, n.replace_on_answer::text AS replacement,
            CASE WHEN n.devices -> k.device ->> 'deviceToken' = k.token THEN n.devices -> k.device ->> 'recipient'
                END AS recipient,
            coalesce(n.devices -> k.device ->> 'deviceToken' = k.token, false) AS known_device,
            CASE WHEN n.replace_on_answer IS NOT NULL THEN n.devices::text END AS devices
        FROM unnest(\(apps)::text[], \(ids)::uuid[], \(devices)::int[], \(tokens)::text[]) WITH ORDINALITY
            AS k(app_id, id, device, token, position)
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
                    SendDevice(deviceToken: $0, recipient: device.value(atPath: "recipient")?.stringValue)
                }
            }
        }
        let replacement: String? = try row.decode("replacement")
        return BoundNotification(
            id: try row.decode("id"), answers: AnswerPolicy(rawValue: try row.decode("answers")) ?? .first,
            expiresAt: try row.decode("expires_at"), answered: try row.decode("answered"),
            collapseId: try row.decode("collapse_id"), category: try row.decode("category"),
            subject: try row.decode("subject"), createdAt: try row.decode("created_at"),
            events: try row.decode("events"),
            replacement: try replacement.flatMap { try JSONParser.parse($0).objectValue },
            device: knownDevice ? device : nil, recipient: try row.decode("recipient"), devices: devices)
    }

    /// Snoozes already given for each (app, notification) the batch snoozes.
    static func snoozeCounts(_ notifications: [AppScoped]) -> PostgresQuery {
        let apps = notifications.map(\.appID)
        let names = notifications.map(\.name)
        return
            ("""
        SELECT k.app_id, k.notification,
            (SELECT count(*) FROM responses r WHERE r.app_id = k.app_id
                AND r.notification_identifier = k.notification AND r.outcome = 'snoozed')::int AS snoozes
        FROM unnest(\(apps)::text[], \(names)::text[]) AS k(app_id, notification)
        """ as PostgresQuery).prepared
    }

    /// Snooze re-deliveries still pending for each (app, notification) the batch answers otherwise.
    /// The lateral subquery keeps the batch's keys outside and the snooze index inside, whatever the
    /// plan. The status is tested outside it (`OFFSET 0` keeps it there): inside, it would make the
    /// due index (partial on that status) a candidate, and a plan made on a truncated table, where
    /// every index looks as cheap, took it and read every pending follow-up of the app per key.
    static func pendingSnoozes(_ notifications: [AppScoped]) -> PostgresQuery {
        let apps = notifications.map(\.appID)
        let names = notifications.map(\.name)
        return
            ("""
        SELECT s.app_id, s.id, s.notification_identifier
        FROM unnest(\(apps)::text[], \(names)::text[]) AS k(app_id, notification)
        CROSS JOIN LATERAL (
            SELECT f.app_id, f.id, f.notification_identifier, f.status FROM followups_queue f
            WHERE f.app_id = k.app_id AND f.notification_identifier = k.notification AND f.is_snooze
            OFFSET 0
        ) AS s
        WHERE s.status IN ('pending', 'retrying')
        """ as PostgresQuery).prepared
    }

    /// Gives up keys stored before the idempotency window, before the insert that reuses them.
    static func releaseKeys(_ keys: [AppScoped]) -> PostgresQuery {
        """
        DELETE FROM idempotency_keys i
        USING unnest(\(keys.map(\.appID))::text[], \(keys.map(\.name))::text[]) AS k(app_id, key)
        WHERE i.app_id = k.app_id AND i.key = k.key
        """
    }
}
