import ActionHookCore
import Foundation
import Postgres

/// What ingest decided before touching the database: the matched rule and the subject.
public struct IngestDecision: Sendable {
    /// The first matching rule, or `nil` (outcome `unmatched`).
    public var rule: Rule?
    /// The subject read from `userInfo` through the category's `subjectKey`.
    public var subject: String?
    /// The reply's age limit (the category's, or the rule's in its place).
    public var ageLimit: ReplyAgeLimit

    /// Creates a decision.
    public init(rule: Rule?, subject: String?, ageLimit: ReplyAgeLimit = ReplyAgeLimit()) {
        self.rule = rule
        self.subject = subject
        self.ageLimit = ageLimit
    }
}

/// The result of an ingest: the stored answer, new or replayed.
public enum IngestResult: Sendable, Equatable {
    /// The response was stored now; the answer is the 202 body.
    case created(JSONValue)
    /// The same key and body were stored before; the answer is the one given then.
    case replayed(JSONValue)
}

/// One response to store.
public struct IngestItem: Sendable {
    /// The app the ingest key belongs to.
    public var appID: String
    /// The idempotency key.
    public var idempotencyKey: String
    /// The normalised response.
    public var response: NotificationResponse
    /// The matched rule and subject.
    public var decision: IngestDecision
    /// Whether the client sent the idempotency key (header or `responseId`); a key the server made up
    /// cannot find a retry's earlier write.
    public var keyFromClient = true
    let requestHash: [UInt8]

    /// Creates an item.
    public init(appID: String, idempotencyKey: String, response: NotificationResponse, decision: IngestDecision) {
        self.appID = appID
        self.idempotencyKey = idempotencyKey
        self.response = response
        self.decision = decision
        requestHash = response.requestHash
    }

    /// The advisory-lock key and in-batch identity: app and key.
    var lockKey: String { Self.appScoped(appID, idempotencyKey) }

    /// App and notification, for counting snoozes; `nil` without a `notificationIdentifier`.
    var snoozeKey: String? { response.notificationIdentifier.map { Self.appScoped(appID, $0) } }

    /// A name within an app, as one string (the separator, U+001F, is in neither).
    static func appScoped(_ appID: String, _ name: String) -> String { appID + "\u{1F}" + name }
}

/// The rows a new response produces, decided before writing.
struct PlannedResponse {
    var responseID: UUID
    var outcome: Outcome
    var followUps: [(id: UUID, followUp: PlannedFollowUp, dueAt: Date)]
    var answer: JSONValue
    /// Whether this answer cancels the pending snoozes of its notification (any answer but a snooze, or
    /// one that came too late to act).
    var cancelsSnoozes: Bool { outcome != .snoozed && outcome != .snoozeLimitReached && outcome != .expired }

    /// Plans a response received at `receivedAt`, after `previousSnoozes` snoozes of its notification.
    init(_ item: IngestItem, receivedAt: Date, previousSnoozes: Int) {
        responseID = UUID.timeOrdered()
        let response = item.response
        let decision = item.decision
        var outcome = RuleEngine.outcome(of: decision.rule?.handler)
        var planned: [PlannedFollowUp] = []
        let age = ReplyAgeLimit.age(respondedAt: response.respondedAt, receivedAt: receivedAt)
        let expired = decision.ageLimit.isExpired(age: age)
        if expired {
            outcome = .expired
        } else if let rule = decision.rule {
            if case .snooze(let delaySeconds, let maxSnoozes, _) = rule.handler {
                if previousSnoozes >= maxSnoozes {
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
        self.outcome = outcome
        followUps = planned.map { (UUID.timeOrdered(), $0, receivedAt.addingTimeInterval(TimeInterval($0.delaySeconds))) }
        var answer: JSONObject = [
            "id": .string(responseID.lowercasedString), "outcome": .string(outcome.rawValue),
            "ruleId": decision.rule.map { .string($0.id) } ?? .null,
            "subject": decision.subject.map(JSONValue.string) ?? .null,
            "followUps": .array(
                followUps.map {
                    .object([
                        "id": .string($0.id.lowercasedString), "channel": .string($0.followUp.channel.rawValue),
                        "dueAt": .string(Timestamp.format($0.dueAt)),
                    ])
                }),
        ]
        // What the 410 tells the client, replayed with it.
        if expired, let limit = decision.ageLimit.maxAgeSeconds, let age {
            answer["maxReplyAgeSeconds"] = .integer(limit)
            answer["ageSeconds"] = ReplyAgeLimit.json(age: age)
        }
        self.answer = .object(answer)
    }
}

/// Writes responses: one per transaction, or a whole batch in one transaction (group commit).
///
/// Both keep the same promises, per (app, idempotency key):
/// - the same key while another transaction holds it: ``StoreError/idempotencyKeyInFlight``;
/// - the same key and the same normalised body: the stored answer, ``IngestResult/replayed(_:)``;
/// - the same key and another body: ``StoreError/idempotencyKeyReused``.
/// An item whose app was deleted after its key was checked fails with ``StoreError/appDeleted``, and
/// one whose app is being deleted at that moment with ``StoreError/appBeingDeleted``.
/// A snooze past `maxSnoozes` for the notification becomes `snooze_limit_reached` with no
/// follow-ups; any other answer to a notification cancels its pending snooze re-deliveries.
/// Times come from the database clock (`now()` is the transaction's start).
public struct IngestWriter: Sendable {
    let pool: Database
    /// How long an idempotency key is kept: a key first stored longer ago than this is a new request.
    let idempotencyWindow: Duration

    /// The default idempotency window, 24 hours (as Stripe keeps keys).
    public static let defaultIdempotencyWindow = Duration.seconds(24 * 3600)

    /// Creates the writer over a pool.
    public init(pool: PostgresPool, idempotencyWindow: Duration = IngestWriter.defaultIdempotencyWindow) {
        self.pool = Database(pool)
        self.idempotencyWindow = idempotencyWindow
    }

    /// Stores one response and its follow-ups in one transaction.
    public func ingest(_ item: IngestItem) throws -> IngestResult {
        try write([item])[0].get()
    }

    /// Stores several responses in one transaction and returns one result per item, in order.
    ///
    /// Idempotency outcomes are per item. If the server refuses the batch as a whole (a bad row),
    /// each item is retried on its own, so one item never fails its batch-mates; when the database
    /// cannot be reached, every item fails with that error at once rather than waiting again.
    public func ingest(batch items: [IngestItem]) -> [Result<IngestResult, any Error>] {
        guard items.count > 1 else { return items.map { item in Result { try ingest(item) } } }
        do {
            return try write(items)
        } catch let error as PostgresError where error.kind == .server {
            return items.map { item in Result { try ingest(item) } }
        } catch {
            return items.map { _ in .failure(error) }
        }
    }

    /// Writes the items as one transaction, first assuming that none of their keys is stored yet (the
    /// unique constraint checks that as the rows go in); if one is, the transaction rolls back and
    /// the items are written again with every key looked up first. A key is stored before only when
    /// a client sends a request again, so the common write reads nothing per key.
    private func write(_ items: [IngestItem]) throws -> [Result<IngestResult, any Error>] {
        do {
            return try pool.pipelinedTransaction { send in try ingestTogether(items, lookingUp: false, send: send) }
        } catch let error as PostgresError where error.isUniqueViolation && error.constraint == Self.idempotencyConstraint {
            return try pool.pipelinedTransaction { send in try ingestTogether(items, lookingUp: true, send: send) }
        }
    }

    /// The unique constraint on `(app_id, idempotency_key)`, named by the error that says a key is stored.
    static let idempotencyConstraint = "responses_app_id_idempotency_key_key"

    /// The whole write as one transaction of two round trips: one pipeline takes the idempotency
    /// locks and reads what they guard (with `lookingUp`, the responses stored under the keys); the
    /// statements returned write every row, with the commit.
    private func ingestTogether(
        _ items: [IngestItem], lookingUp: Bool, send: ([PostgresQuery]) throws -> [PostgresRows]
    ) throws -> (value: [Result<IngestResult, any Error>], commitWith: [PostgresQuery]) {
        var results = [Result<IngestResult, any Error>?](repeating: nil, count: items.count)
        // A key twice in one batch: the later ones are concurrent with the first.
        var seen = Set<String>()
        for (index, item) in items.enumerated() where !seen.insert(item.lockKey).inserted {
            results[index] = .failure(StoreError.idempotencyKeyInFlight)
        }
        let candidates = items.indices.filter { results[$0] == nil }
        let apps = Array(Set(candidates.map { items[$0].appID })).sorted()
        // The notifications this batch snoozes (their earlier snoozes are counted) and those it answers
        // otherwise (their pending snoozes are cancelled), as parallel arrays of app and notification.
        var snoozing: (apps: [String], notifications: [String]) = ([], [])
        var answering: (apps: [String], notifications: [String]) = ([], [])
        var notificationKeys = Set<String>()
        for index in candidates {
            let item = items[index]
            guard let key = item.snoozeKey, let notification = item.response.notificationIdentifier else { continue }
            if case .snooze? = item.decision.rule?.handler {
                guard notificationKeys.insert("s" + key).inserted else { continue }
                snoozing.apps.append(item.appID)
                snoozing.notifications.append(notification)
            } else {
                guard notificationKeys.insert("a" + key).inserted else { continue }
                answering.apps.append(item.appID)
                answering.notifications.append(notification)
            }
        }

        // The locks come first, in statements of their own: each later statement reads with a
        // snapshot taken after them, so it sees whatever a previous holder committed. Each app's lock
        // (class 1) is shared by ingest transactions and taken exclusively by the app's deletion.
        var reads: [PostgresQuery] = [
            Self.planSettings,
            (
                """
                SELECT k.ordinality::int AS position, pg_try_advisory_xact_lock(hashtextextended(k.key, 0)) AS locked,
                    now() AS now
                FROM unnest(\(candidates.map { items[$0].lockKey })::text[]) WITH ORDINALITY AS k(key, ordinality)
                ORDER BY k.ordinality
                """ as PostgresQuery
            ).prepared,
            (
                """
                SELECT a.app_id FROM unnest(\(apps)::text[]) AS a(app_id)
                WHERE pg_try_advisory_xact_lock_shared(1, actionhook_app_lock_key(a.app_id))
                """ as PostgresQuery
            ).prepared,
            Self.existingApps(apps),
        ]
        let storedPosition = reads.count
        if lookingUp {
            reads.append(
                Self.storedResponses(
                    apps: candidates.map { items[$0].appID }, keys: candidates.map { items[$0].idempotencyKey }))
        }
        let countsPosition = reads.count
        if !snoozing.apps.isEmpty {
            reads.append(Self.snoozeCounts(apps: snoozing.apps, notifications: snoozing.notifications))
        }
        let pendingPosition = reads.count
        if !answering.apps.isEmpty {
            reads.append(Self.pendingSnoozes(apps: answering.apps, notifications: answering.notifications))
        }
        let read = try send(reads)
        let locks = read[1]
        guard let receivedAt = try locks.first?.decode("now", as: Date.self) else { return (results.map { $0! }, []) }
        // An app whose lock is held exclusively is being deleted; one no longer there was deleted.
        let appsLocked = Set(try read[2].map { try $0.decode("app_id", as: String.self) })
        let appsPresent = Set(try read[3].map { try $0.decode("id", as: String.self) })
        var locked: [Int] = []
        for row in locks {
            let index = candidates[try row.decode("position", as: Int.self) - 1]
            let appID = items[index].appID
            if !appsLocked.contains(appID) {
                results[index] = .failure(StoreError.appBeingDeleted)
            } else if !appsPresent.contains(appID) {
                results[index] = .failure(StoreError.appDeleted)
            } else if try row.decode("locked", as: Bool.self) {
                locked.append(index)
            } else {
                results[index] = .failure(StoreError.idempotencyKeyInFlight)
            }
        }
        var stored: [String: PostgresRow] = [:]
        if lookingUp {
            for row in read[storedPosition] {
                let key = IngestItem.appScoped(
                    try row.decode("app_id", as: String.self), try row.decode("idempotency_key", as: String.self))
                stored[key] = row
            }
        }
        var snoozesBefore: [String: Int] = [:]
        if !snoozing.apps.isEmpty {
            for row in read[countsPosition] {
                snoozesBefore[try row.decode("key", as: String.self)] = try row.decode("snoozes")
            }
        }
        var pendingSnoozes: [String: [UUID]] = [:]
        if !answering.apps.isEmpty {
            for row in read[pendingPosition] {
                let key = IngestItem.appScoped(
                    try row.decode("app_id", as: String.self), try row.decode("notification_identifier", as: String.self))
                pendingSnoozes[key, default: []].append(try row.decode("id", as: UUID.self))
            }
        }

        var entries: [(IngestItem, PlannedResponse)] = []
        var snoozesInBatch: [String: Int] = [:]
        // Keys stored before the window: their old responses give the key up, and the request is new.
        var expiredKeys: (apps: [String], keys: [String]) = ([], [])
        let windowStart = receivedAt.addingTimeInterval(-Double(idempotencyWindow.components.seconds))
        for index in locked {
            let item = items[index]
            if let row = stored[item.lockKey] {
                if try row.decode("received_at", as: Date.self) >= windowStart {
                    results[index] = Result { try Self.replay(item, row: row) }
                    continue
                }
                expiredKeys.apps.append(item.appID)
                expiredKeys.keys.append(item.idempotencyKey)
            }
            var previous = 0
            if case .snooze? = item.decision.rule?.handler, let key = item.snoozeKey {
                previous = snoozesBefore[key, default: 0] + snoozesInBatch[key, default: 0]
            }
            let plan = PlannedResponse(item, receivedAt: receivedAt, previousSnoozes: previous)
            if plan.outcome == .snoozed, let key = item.snoozeKey { snoozesInBatch[key, default: 0] += 1 }
            entries.append((item, plan))
            results[index] = .success(.created(plan.answer))
        }
        var statements = Batch(entries: entries, pendingSnoozes: pendingSnoozes).statements
        if !expiredKeys.apps.isEmpty {
            // Before the insert that reuses them; the key's advisory lock keeps other writers out.
            statements.insert(
                """
                UPDATE responses r SET idempotency_key = NULL
                FROM unnest(\(expiredKeys.apps)::text[], \(expiredKeys.keys)::text[]) AS k(app_id, idempotency_key)
                WHERE r.app_id = k.app_id AND r.idempotency_key = k.idempotency_key
                """, at: 0)
        }
        return (results.map { $0! }, statements)
    }

    /// Settings for the rest of the ingest transaction, so that its lookups can stay prepared with
    /// one plan, made once per connection: keyed lookups through their indexes, joins as nested loops
    /// over the batch's few keys. Left to statistics, a plan made while a table is empty (after a
    /// TRUNCATE, on a new install) scans the table whole once it is not; planning each batch's
    /// lookups anew costs more than running them at low load. Each prepared lookup has one index
    /// that matches all its keys (the test `plansSurviveGrowth` checks which); the idempotency lookup,
    /// which has two candidates and runs only after a replay, is planned each time.
    static let planSettings = (
        """
        SELECT set_config('plan_cache_mode', 'force_generic_plan', true), set_config('enable_seqscan', 'off', true),
            set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)
        """ as PostgresQuery
    ).prepared

    /// The apps of the batch that still exist.
    static func existingApps(_ apps: [String]) -> PostgresQuery {
        ("SELECT id FROM apps WHERE id = ANY(\(apps)::text[])" as PostgresQuery).prepared
    }

    /// Responses already stored under the batch's (app, idempotency key) pairs; read only when a
    /// write found one of its keys stored.
    ///
    /// Planned each time: before `responses` has statistics (a new install), the planner takes the
    /// history index as cheap as the unique one, and a plan kept from then would read every response
    /// of the app for each key.
    static func storedResponses(apps: [String], keys: [String]) -> PostgresQuery {
        """
        SELECT r.app_id, r.idempotency_key, r.request_hash, r.answer, r.received_at
        FROM unnest(\(apps)::text[], \(keys)::text[]) AS k(app_id, idempotency_key)
        JOIN responses r ON r.app_id = k.app_id AND r.idempotency_key = k.idempotency_key
        """
    }

    /// Snoozes already given for each (app, notification) the batch snoozes.
    static func snoozeCounts(apps: [String], notifications: [String]) -> PostgresQuery {
        (
            """
            SELECT k.app_id || chr(31) || k.notification AS key,
                (SELECT count(*) FROM responses r WHERE r.app_id = k.app_id
                    AND r.notification_identifier = k.notification AND r.outcome = 'snoozed')::int AS snoozes
            FROM unnest(\(apps)::text[], \(notifications)::text[]) AS k(app_id, notification)
            """ as PostgresQuery
        ).prepared
    }

    /// Snooze re-deliveries still pending for each (app, notification) the batch answers otherwise.
    /// The lateral subquery keeps the batch's keys outside and the snooze index inside, whatever the
    /// plan. The status is tested outside it (`OFFSET 0` keeps it there): inside, it would make the
    /// due index (partial on that status) a candidate, and a plan made on a truncated table, where
    /// every index looks as cheap, took it and read every pending follow-up of the app per key.
    static func pendingSnoozes(apps: [String], notifications: [String]) -> PostgresQuery {
        (
            """
            SELECT s.app_id, s.id, s.notification_identifier
            FROM unnest(\(apps)::text[], \(notifications)::text[]) AS k(app_id, notification)
            CROSS JOIN LATERAL (
                SELECT f.app_id, f.id, f.notification_identifier, f.status FROM followups f
                WHERE f.app_id = k.app_id AND f.notification_identifier = k.notification AND f.is_snooze
                OFFSET 0
            ) AS s
            WHERE s.status IN ('pending', 'retrying')
            """ as PostgresQuery
        ).prepared
    }

    static func replay(_ item: IngestItem, row: PostgresRow) throws -> IngestResult {
        guard SecretToken.constantTimeEquals(try row.decode("request_hash", as: [UInt8].self), item.requestHash) else {
            throw StoreError.idempotencyKeyReused
        }
        return .replayed(try JSONParser.parse(try row.decode("answer", as: PostgresJSON.self).text))
    }
}

/// The rows of planned responses, written with a fixed number of statements however many there are.
struct Batch {
    let entries: [(IngestItem, PlannedResponse)]
    /// Snooze re-deliveries pending before this batch, by app and notification.
    let pendingSnoozes: [String: [UUID]]

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
            guard plan.cancelsSnoozes, let key = item.snoozeKey, let ids = pendingSnoozes[key] else { continue }
            if cancellations[item.appID] == nil { cancellingApps.append(item.appID) }
            cancellations[item.appID, default: []].formUnion(ids)
        }
        for app in cancellingApps {
            statements.append(
                """
                UPDATE followups SET status = 'cancelled', updated_at = now()
                WHERE app_id = \(app) AND id = ANY(\(Array(cancellations[app] ?? []))::uuid[])
                    AND status IN ('pending', 'retrying')
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
            responses.add("answer", plan.answer.jsonText)
            responses.endRecord()
        }
        // A key stored before (which only a lookup would have found) fails the statement like a
        // unique violation, so the transaction rolls back with nothing of the batch written.
        statements.append((
            """
            WITH inserted AS (
                INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier,
                    category_identifier, notification_identifier, user_text, user_info, device_token,
                    client_response_id, responded_at, received_at, outcome, rule_id, subject, answer)
                SELECT r.app_id, r.id, r.idempotency_key, decode(r.request_hash, 'hex'), r.action_identifier,
                    r.category_identifier, r.notification_identifier, r.user_text, r.user_info, r.device_token,
                    r.client_response_id, r.responded_at, now(), r.outcome, r.rule_id, r.subject, r.answer::json
                FROM jsonb_to_recordset(\(PostgresJSON(responses.text))::jsonb) AS r(
                    app_id text, id uuid, idempotency_key text, request_hash text, action_identifier text,
                    category_identifier text, notification_identifier text, user_text text, user_info jsonb,
                    device_token text, client_response_id text, responded_at timestamptz, outcome text,
                    rule_id text, subject text, answer text)
                ON CONFLICT (app_id, idempotency_key) DO NOTHING
                RETURNING 1
            )
            SELECT actionhook_idempotency_key_stored() WHERE (SELECT count(*) FROM inserted) < \(entries.count)::bigint
            """ as PostgresQuery).prepared)

        var cancelledInBatch = Set<UUID>()
        var snoozesByNotification: [String: [UUID]] = [:]
        for (item, plan) in entries {
            guard let key = item.snoozeKey else { continue }
            if plan.cancelsSnoozes {
                cancelledInBatch.formUnion(snoozesByNotification.removeValue(forKey: key) ?? [])
            }
            snoozesByNotification[key, default: []] += plan.followUps.filter { $0.followUp.ordinal < 0 }.map(\.id)
        }
        var followUps = JSONRecords(capacity: entries.count * 1024)
        for (item, plan) in entries {
            for (id, followUp, dueAt) in plan.followUps {
                followUps.beginRecord()
                followUps.add("app_id", item.appID)
                followUps.add("id", id)
                followUps.add("response_id", plan.responseID)
                followUps.add("ordinal", followUp.ordinal)
                followUps.add("channel", followUp.channel.rawValue)
                followUps.add("is_snooze", followUp.ordinal < 0)
                followUps.add("notification_identifier", item.response.notificationIdentifier)
                followUps.add(
                    "device_token",
                    followUp.channel == .apns ? followUp.payload.value(atPath: "deviceToken")?.stringValue : nil)
                followUps.add("payload", followUp.payload)
                followUps.add("due_at", dueAt)
                followUps.add("status", cancelledInBatch.contains(id) ? "cancelled" : "pending")
                followUps.endRecord()
            }
        }
        // The workers of every instance are told which apps have new follow-ups (delivered at commit).
        if followUps.count > 0 {
            statements.append((
                """
                WITH inserted AS (
                    INSERT INTO followups (app_id, id, response_id, ordinal, channel, is_snooze,
                        notification_identifier, device_token, payload, due_at, status)
                    SELECT f.app_id, f.id, f.response_id, f.ordinal, f.channel, f.is_snooze, f.notification_identifier,
                        f.device_token, f.payload, f.due_at, f.status
                    FROM jsonb_to_recordset(\(PostgresJSON(followUps.text))::jsonb) AS f(
                        app_id text, id uuid, response_id uuid, ordinal integer, channel text, is_snooze boolean,
                        notification_identifier text, device_token text, payload jsonb, due_at timestamptz,
                        status text)
                    RETURNING app_id
                )
                SELECT pg_notify(\(Channels.followUps), app_id) FROM (SELECT DISTINCT app_id FROM inserted) AS apps
                """ as PostgresQuery).prepared)
        }
        return statements
    }
}
