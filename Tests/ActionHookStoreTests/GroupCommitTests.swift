import ActionHookCore
import Foundation
import Postgres
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

@testable import ActionHookStore

@Suite("Group commit")
struct GroupCommitTests {
    static let snoozeRule = """
        {"id": "snooze", "match": {"category": "TIMER_EXPIRED", "action": "SNOOZE_ACTION"},
         "handler": {"type": "snooze", "delaySeconds": 60, "maxSnoozes": 5}}
        """
    static let stopRule = """
        {"id": "stop", "match": {"category": "TIMER_EXPIRED", "action": "STOP_ACTION"}, "handler": {"type": "record"}}
        """

    static let token = "00112233445566778899aabbccddeeff"

    /// A notification sent through ActionHook to the items' device: a snooze re-sends only such a push.
    func sent(_ api: TestAPI, app: String) throws -> UUID {
        let request = try SendRequest.decode(
            JSONParser.parse(#"{"to": ["\#(Self.token)"], "aps": {"alert": "Tea"}, "ttlSeconds": 3600}"#), now: Date())
        guard
            case .created(let answer, _) = try NotificationStore(pool: api.pool).send(
                appID: app, idempotencyKey: nil, request: request),
            let id = answer.value(atPath: "id")?.stringValue.flatMap(UUID.init(uuidString:))
        else { throw TestClientError(description: "the notification was not sent") }
        return id
    }

    /// A reply from the device; `bound` names the notification sent to it whose key the reply carries.
    func item(
        app: String, key: String, action: String = "STOP_ACTION", text: String? = nil, rule: String? = nil,
        bound: UUID? = nil, notification: String = "timer-1"
    ) throws -> IngestItem {
        var userInfo: JSONObject = ["aps": .object(["category": .string("TIMER_EXPIRED")])]
        if let bound {
            userInfo["actionhook"] = .object(["n": .string(bound.uuidString.lowercased()), "d": .integer(0)])
        }
        var body: JSONObject = [
            "actionIdentifier": .string(action), "notificationIdentifier": .string(notification),
            "deviceToken": .string(Self.token), "userInfo": .object(userInfo),
        ]
        if let text { body["userText"] = .string(text) }
        let response = try NotificationResponse.decode(.object(body))
        let decision = IngestDecision(
            rule: try rule.map { try Rule.decode(JSONParser.parse($0), id: nil) }, subject: nil)
        return IngestItem(appID: app, idempotencyKey: key, response: response, decision: decision)
    }

    /// Each snooze re-delivery as "idempotency key of its response=status", by key.
    func snoozeStatuses(_ api: TestAPI) throws -> [String] {
        try api.query(
            """
            SELECT r.idempotency_key AS key, f.status FROM followups f
            JOIN responses r ON r.app_id = f.app_id AND r.id = f.response_id
            WHERE f.is_snooze ORDER BY r.idempotency_key
            """
        ).map { "\(try $0.decode("key", as: String.self))=\(try $0.decode("status", as: String.self))" }
    }

    @Test("64 concurrent ingests through HTTP: every one acknowledged and stored exactly once")
    func concurrentIngests() throws {
        let api = try TestAPI()
        let key = try api.createApp("batch-app")
        let statuses = Mutex([Int]())
        let ids = Mutex(Set<String>())
        DispatchQueue.concurrentPerform(iterations: 64) { index in
            let body =
                #"{"actionIdentifier":"MARK_DONE","responseId":"r-\#(index)","userInfo":{"aps":{"category":"TODO_CATEGORY"}}}"#
            guard let response = try? api.ingest(key: key, json: body) else { return }
            statuses.withLock { $0.append(response.status) }
            if let id = response.json["id"] as? String { _ = ids.withLock { $0.insert(id) } }
        }
        #expect(statuses.withLock { $0 } == Array(repeating: 202, count: 64))
        #expect(ids.withLock { $0.count } == 64)
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE app_id = 'batch-app'") == 64)
        let stored = try api.query("SELECT id FROM responses WHERE app_id = 'batch-app'").map {
            try $0.decode("id", as: UUID.self).uuidString.lowercased()
        }
        #expect(Set(stored) == ids.withLock { $0 })
        // Every response went through a batch: the batch-size histogram counts 64 responses in all.
        let metrics = try HTTPTestClient(port: api.port).request("GET", "/metrics").text
        #expect(metrics.contains("actionhook_ingest_batch_size_sum 64.0"))
        #expect(metrics.contains(#"actionhook_ingest_batch_size_bucket{le="128.0"}"#))
        #expect(metrics.contains("actionhook_ingest_batch_duration_seconds_count"))
    }

    /// A writer; when `warm`, one that has written a batch, so that its next batch that needs nothing
    /// read is planned with the database's clock as read then and written in one round trip.
    func writer(_ api: TestAPI, warm: Bool) throws -> IngestWriter {
        let writer = IngestWriter(pool: api.pool)
        #expect(writer.clock.now() == nil)
        if warm {
            _ = try api.createApp("warm-app")
            // A key of its own: tests run side by side, and advisory locks are the database's, not the schema's.
            let key = "warm-\(UUID())"
            guard case .success(.created) = writer.ingest(batch: [try item(app: "warm-app", key: key)])[0] else {
                Issue.record("the warming batch was not stored")
                return writer
            }
            #expect(writer.clock.now() != nil)
        }
        return writer
    }

    @Test(
        "a key twice in one batch: the first is stored, the later one is 409; a stored key replays or is 422",
        arguments: [false, true])
    func idempotencyWithinABatch(warm: Bool) throws {
        let api = try TestAPI()
        let dupApp = "dup-app-\(warm)"
        _ = try api.createApp(dupApp)
        let writer = try writer(api, warm: warm)
        let results = writer.ingest(batch: [
            try item(app: "dup-app-\(warm)", key: "a"), try item(app: "dup-app-\(warm)", key: "a"),
            try item(app: "dup-app-\(warm)", key: "b"), try item(app: "dup-app-\(warm)", key: "a", text: "other"),
        ])
        #expect(results.count == 4)
        guard case .success(.created(let first)) = results[0] else {
            Issue.record("the first item was not created: \(results)")
            return
        }
        for index in [1, 3] {
            guard case .failure(let error) = results[index] else {
                Issue.record("item \(index) succeeded")
                continue
            }
            #expect(error as? StoreError == .idempotencyKeyInFlight)
        }
        guard case .success(.created) = results[2] else {
            Issue.record("item b was not created")
            return
        }
        let again = writer.ingest(batch: [
            try item(app: "dup-app-\(warm)", key: "a"), try item(app: "dup-app-\(warm)", key: "c"),
        ])
        guard case .success(.replayed(let replayed)) = again[0] else {
            Issue.record("a stored key was not replayed")
            return
        }
        #expect(replayed == first)
        let reused = writer.ingest(batch: [
            try item(app: "dup-app-\(warm)", key: "a", text: "changed"), try item(app: "dup-app-\(warm)", key: "d"),
        ])
        guard case .failure(let error) = reused[0] else {
            Issue.record("a reused key with another body succeeded")
            return
        }
        #expect(error as? StoreError == .idempotencyKeyReused)
        guard case .success(.created) = reused[1] else {
            Issue.record("the batch-mate of a reused key was not created")
            return
        }
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE app_id = \(dupApp)") == 4)
    }

    @Test("a row the database refuses does not fail its batch-mates")
    func badRowIsolated() throws {
        let api = try TestAPI()
        _ = try api.createApp("good-app")
        let writer = IngestWriter(pool: api.pool)
        // A key far over the b-tree entry limit: the insert of the second item fails in the server.
        let oversized = (0..<400).map { _ in UUID().uuidString }.joined()
        let results = writer.ingest(batch: [
            try item(app: "good-app", key: "1"), try item(app: "good-app", key: oversized),
            try item(app: "good-app", key: "3"),
        ])
        guard case .success(.created) = results[0], case .success(.created) = results[2] else {
            Issue.record("good items failed with a bad batch-mate: \(results)")
            return
        }
        guard case .failure(let error) = results[1] else {
            Issue.record("the bad item was stored")
            return
        }
        #expect((error as? PostgresError)?.kind == .server)
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 2)
    }

    @Test(
        "an app deleted after its key was checked: its items fail, batch-mates of other apps are stored",
        arguments: [false, true])
    func appGoneMidBatch(warm: Bool) throws {
        let api = try TestAPI()
        let (stayingApp, leavingApp) = ("staying-app-\(warm)", "leaving-app-\(warm)")
        _ = try api.createApp(stayingApp)
        _ = try api.createApp(leavingApp)
        let writer = try writer(api, warm: warm)
        // While the app's deletion holds its lock, the app's items are refused for a retry.
        let deletion = try PostgresConnection(configuration: api.database.configuration)
        try deletion.execute("BEGIN")
        try deletion.execute("SELECT pg_advisory_xact_lock(1, actionhook_app_lock_key(\(leavingApp)))")
        let during = writer.ingest(batch: [
            try item(app: "leaving-app-\(warm)", key: "1"), try item(app: "staying-app-\(warm)", key: "1"),
        ])
        guard case .failure(let refused) = during[0], case .success(.created) = during[1] else {
            Issue.record("unexpected results while deleting: \(during)")
            return
        }
        #expect(refused as? StoreError == .appBeingDeleted)
        try deletion.execute("ROLLBACK")

        #expect(try AppStore(pool: api.pool).delete("leaving-app-\(warm)"))
        let after = writer.ingest(batch: [
            try item(app: "leaving-app-\(warm)", key: "2"), try item(app: "staying-app-\(warm)", key: "2"),
        ])
        guard case .failure(let gone) = after[0], case .success(.created) = after[1] else {
            Issue.record("unexpected results after deleting: \(after)")
            return
        }
        #expect(gone as? StoreError == .appDeleted)
        // The service's purger removes the deleted app's rows in the background.
        #expect(
            try eventually(within: 30) {
                try api.count("SELECT count(*) AS n FROM responses WHERE app_id = \(leavingApp)") == 0
            })
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE app_id = \(stayingApp)") == 2)
    }

    @Test("deleting an app removes its responses, follow-ups and delivery attempts, and nothing of another app")
    func deletionRemovesEverything() throws {
        let api = try TestAPI()
        _ = try api.createApp("doomed-app")
        _ = try api.createApp("other-app")
        let writer = IngestWriter(pool: api.pool)
        for app in ["doomed-app", "other-app"] {
            let notification = try sent(api, app: app)
            let results = writer.ingest(batch: [
                try item(app: app, key: "s", action: "SNOOZE_ACTION", rule: Self.snoozeRule, bound: notification),
                try item(app: app, key: "r", action: "STOP_ACTION", rule: Self.stopRule),
            ])
            #expect(results.allSatisfy { if case .success(.created) = $0 { true } else { false } })
            _ = try api.pool.withConnection { connection in
                try connection.execute(
                    """
                    INSERT INTO delivery_attempts (app_id, followup_id, attempt, started_at, finished_at, result, duration_ms)
                    SELECT app_id, id, 1, now(), now(), 'failed', 1 FROM followups WHERE app_id = \(app)
                    """)
            }
        }
        let tables = ["responses", "followups", "delivery_attempts"]
        for table in tables {
            #expect(
                try api.count(
                    PostgresQuery(unsafeSQL: "SELECT count(*) AS n FROM \(table) WHERE app_id = 'doomed-app'")) > 0)
        }
        #expect(try AppStore(pool: api.pool).delete("doomed-app"))
        // In the background: the service's purger, woken by the deletion's NOTIFY.
        #expect(
            try eventually(within: 30) {
                try api.count("SELECT count(*) AS n FROM app_deletions WHERE app_id = 'doomed-app'") == 0
            })
        for table in tables {
            #expect(
                try api.count(
                    PostgresQuery(unsafeSQL: "SELECT count(*) AS n FROM \(table) WHERE app_id = 'doomed-app'")) == 0)
            #expect(
                try api.count(PostgresQuery(unsafeSQL: "SELECT count(*) AS n FROM \(table) WHERE app_id = 'other-app'"))
                    > 0)
        }
    }

    @Test(
        "the prepared ingest lookups keep plans made on empty tables (new, or truncated after an analyze) that go through their own index once the tables are large",
        arguments: [false, true])
    func plansSurviveGrowth(truncated: Bool) throws {
        let api = try TestAPI()
        _ = try api.createApp("plan-app")
        let scope = try #require(
            SnoozeScope(try item(app: "plan-app", key: "k", action: "SNOOZE_ACTION", rule: Self.snoozeRule)).map {
                var scope = $0
                scope.notification = "n-7"
                return scope
            })
        let lookups: [(query: PostgresQuery, arguments: String, index: String)] = [
            (IngestStatements.existingApps(["plan-app"]), "'{plan-app}'", "apps_pkey"),
            (
                // Each partition's copy of responses_snoozes.
                IngestStatements.snoozeCounts([scope]), "'{plan-app}', '{n-7}', '{\(Self.token)}'",
                "_app_id_notification_identifier_idx"
            ),
            (
                IngestStatements.cancelPendingSnoozes([scope], positions: [1]),
                "'{plan-app}', '{n-7}', '{\(Self.token)}', '{1}'", "followups_snoozes"
            ),
        ]
        for lookup in lookups { #expect(lookup.query.isPrepared) }
        /// Fills the tables without an ANALYZE: responses, each with one pending follow-up.
        func fill(snoozes: Bool) throws {
            _ = try api.pool.withConnection { filler in
                try filler.execute(
                    """
                    INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier,
                        notification_identifier, outcome, answer)
                    SELECT 'plan-app', actionhook_uuid_v7(now()), 'fill-' || g, '\\x00', 'snooze', 'n-' || g, 'snoozed',
                        '{}'
                    FROM generate_series(1, 20000) AS g
                    """)
                try filler.execute(
                    PostgresQuery(
                        unsafeSQL: """
                            INSERT INTO followups (app_id, id, response_id, ordinal, channel, is_snooze,
                                notification_identifier, payload, due_at)
                            SELECT app_id, gen_random_uuid(), id, -1, 'apns', \(snoozes), notification_identifier, '{}',
                                now() + interval '1 hour'
                            FROM responses WHERE app_id = 'plan-app'
                            """))
            }
        }
        if truncated {
            // A deployment whose statistics were taken with rows and no snooze, then emptied (the
            // benchmark does this between runs), where every index of a table looks as cheap.
            try fill(snoozes: false)
            _ = try api.pool.withConnection { connection in
                try connection.execute("ANALYZE responses")
                try connection.execute("ANALYZE followups")
                try connection.execute("TRUNCATE responses, followups, delivery_attempts")
                // Vacuumed while empty (autovacuum does this after a TRUNCATE): known to hold no rows.
                try connection.execute("VACUUM responses")
                try connection.execute("VACUUM followups")
            }
        }
        func plan(_ connection: PostgresConnection, _ index: Int) throws -> String {
            try connection.query(
                PostgresQuery(unsafeSQL: "EXPLAIN EXECUTE lookup_\(index)(\(lookups[index].arguments))")
            )
            .map { try $0.decode("QUERY PLAN", as: String.self) }.joined(separator: "\n")
        }
        // Each lookup's plan is made and cached while the tables are empty.
        let connection = try PostgresConnection(configuration: api.database.configuration)
        try connection.execute("BEGIN")
        // The settings, as an ingest transaction makes them: with its guards.
        _ = try connection.query(IngestStatements.guards(locks: ["plan-app\u{1F}k"], apps: ["plan-app"]))
        for (index, lookup) in lookups.enumerated() {
            try connection.execute(PostgresQuery(unsafeSQL: "PREPARE lookup_\(index) AS \(lookup.query.sql)"))
            _ = try plan(connection, index)
        }
        // The tables grow without an ANALYZE, so nothing tells the cached plans to change.
        try fill(snoozes: true)
        for index in lookups.indices {
            let text = try plan(connection, index)
            #expect(!text.contains("Seq Scan"), "lookup \(index) scans a table whole:\n\(text)")
            #expect(text.contains("\(lookups[index].index) "), "lookup \(index) is not through its index:\n\(text)")
        }
        try connection.execute("ROLLBACK")
    }

    @Test("two decisions on one subject in a batch: the one decided last wins, whatever the batch order")
    func newestDecisionWins() throws {
        let api = try TestAPI()
        _ = try api.createApp("decide-app")
        let writer = IngestWriter(pool: api.pool)
        let accept = try Rule.decode(
            JSONParser.parse(#"{"id": "accept", "match": {"action": "ACCEPT"}, "handler": {"type": "accept"}}"#),
            id: nil)
        let decline = try Rule.decode(
            JSONParser.parse(#"{"id": "decline", "match": {"action": "DECLINE"}, "handler": {"type": "decline"}}"#),
            id: nil)
        func decision(_ key: String, _ rule: Rule, respondedAt: String) throws -> IngestItem {
            let body = try JSONParser.parse(
                #"{"actionIdentifier": "\#(rule.id.uppercased())", "respondedAt": "\#(respondedAt)", "deviceToken": "00112233445566778899aabbccddeeff"}"#
            )
            return IngestItem(
                appID: "decide-app", idempotencyKey: key, response: try NotificationResponse.decode(body),
                decision: IngestDecision(rule: rule, subject: "event-42"))
        }
        // The decline was made later on the device but arrives first in the batch.
        let results = writer.ingest(batch: [
            try decision("late", decline, respondedAt: "2026-11-20T10:05:00Z"),
            try decision("early", accept, respondedAt: "2026-11-20T10:00:00Z"),
        ])
        #expect(results.allSatisfy { if case .success(.created) = $0 { true } else { false } })
        let decisions = try ResponseStore(pool: api.pool).decisions(appID: "decide-app", subject: "event-42")
        #expect(decisions.count == 1)
        #expect(decisions.first?.value(atPath: "outcome")?.stringValue == "declined")
    }

    @Test("a snooze and a later stop for the same notification in one batch: the new snooze is cancelled")
    func snoozeCancelledWithinABatch() throws {
        let api = try TestAPI()
        _ = try api.createApp("timer-app")
        let notification = try sent(api, app: "timer-app")
        let writer = IngestWriter(pool: api.pool)
        let results = writer.ingest(batch: [
            try item(app: "timer-app", key: "s1", action: "SNOOZE_ACTION", rule: Self.snoozeRule, bound: notification),
            try item(app: "timer-app", key: "stop", action: "STOP_ACTION", rule: Self.stopRule),
            try item(app: "timer-app", key: "s2", action: "SNOOZE_ACTION", rule: Self.snoozeRule, bound: notification),
        ])
        #expect(results.allSatisfy { if case .success(.created) = $0 { true } else { false } })
        let statuses = try snoozeStatuses(api)
        #expect(statuses == ["s1=cancelled", "s2=pending"])
    }

    @Test(
        "an answer after a snooze cancels its pending re-delivery; one in flight elsewhere is 409, its batch-mate stored",
        arguments: [false, true])
    func answerCancelsSnooze(warm: Bool) throws {
        let api = try TestAPI()
        _ = try api.createApp("timer-app-\(warm)")
        let notification = try sent(api, app: "timer-app-\(warm)")
        let snoozed = IngestWriter(pool: api.pool).ingest(batch: [
            try item(
                app: "timer-app-\(warm)", key: "s1", action: "SNOOZE_ACTION", rule: Self.snoozeRule, bound: notification
            )
        ])
        guard case .success(.created) = snoozed[0] else {
            Issue.record("the snooze was not stored: \(snoozed)")
            return
        }
        #expect(try snoozeStatuses(api) == ["s1=pending"])
        let writer = try writer(api, warm: warm)
        // Another transaction holds the key "busy" (the same request on another connection).
        let other = try PostgresConnection(configuration: api.database.configuration)
        try other.execute("BEGIN")
        let lock = AppScoped(appID: "timer-app-\(warm)", name: "busy").lockText
        try other.execute("SELECT pg_advisory_xact_lock(hashtextextended(\(lock), 0))")
        let results = writer.ingest(batch: [
            try item(app: "timer-app-\(warm)", key: "busy", rule: Self.stopRule),
            try item(app: "timer-app-\(warm)", key: "r1", rule: Self.stopRule),
        ])
        try other.execute("ROLLBACK")
        guard case .failure(let error) = results[0], case .success(.created(let answer)) = results[1] else {
            Issue.record("unexpected results: \(results)")
            return
        }
        #expect(error as? StoreError == .idempotencyKeyInFlight)
        #expect(try snoozeStatuses(api) == ["s1=cancelled"])
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE idempotency_key = 'busy'") == 0)
        // The time planned is the time stored, and it is the database's: not before the snooze's.
        let stored = try api.query(
            """
            SELECT r.received_at, s.received_at AS snoozed_at, r.id::text AS id FROM responses r, responses s
            WHERE r.idempotency_key = 'r1' AND s.idempotency_key = 's1'
            """)[0]
        #expect(try stored.decode("id", as: String.self) == answer.body.value(atPath: "id")?.stringValue)
        let receivedAt: Date = try stored.decode("received_at")
        #expect(receivedAt >= (try stored.decode("snoozed_at", as: Date.self)))
        #expect(writer.clock.now() != nil)
    }

    @Test(
        "an item planned on receipt is stored as planned (its id and time) beside one planned by the write; a snooze of a notification is not planned on receipt"
    )
    func plannedOnReceipt() throws {
        let api = try TestAPI()
        _ = try api.createApp("receipt-app")
        let writer = IngestWriter(pool: api.pool)
        // Nothing is planned before the writer has read the database's clock.
        #expect(writer.planned(try item(app: "receipt-app", key: "cold")).plan == nil)
        guard case .success(.created) = writer.ingest(batch: [try item(app: "receipt-app", key: "cold")])[0] else {
            Issue.record("the first item was not stored")
            return
        }
        let planned = writer.planned(try item(app: "receipt-app", key: "stop", rule: Self.stopRule))
        let snooze = writer.planned(
            try item(app: "receipt-app", key: "snooze", action: "SNOOZE_ACTION", rule: Self.snoozeRule))
        #expect(snooze.plan == nil)
        guard let plan = planned.plan else {
            Issue.record("the item was not planned on receipt")
            return
        }
        let results = writer.ingest(batch: [planned, try item(app: "receipt-app", key: "new")])
        guard case .success(.created(let answer)) = results[0], case .success(.created) = results[1],
            case .success(.created) = writer.ingest(batch: [snooze])[0]
        else {
            Issue.record("unexpected results: \(results)")
            return
        }
        #expect(answer == plan.answer)
        let row = try api.query(
            "SELECT id::text AS id, received_at FROM responses WHERE idempotency_key = 'stop'")[0]
        #expect(try row.decode("id", as: String.self) == plan.responseID.lowercasedString)
        #expect(
            Timestamp.format(try row.decode("received_at", as: Date.self)) == Timestamp.format(plan.receivedAt))
    }

    @Test("while a writer is busy, a second one starts only once enough responses wait; every one is answered")
    func secondWriterWaitsForEnough() throws {
        let api = try TestAPI()
        _ = try api.createApp("queue-app")
        let pool = PostgresPool(configuration: api.database.configuration, size: 2)
        defer { pool.close() }
        let sizes = Mutex([Int]())
        let batcher = IngestBatcher(
            writer: IngestWriter(pool: pool), writers: 2, maxBatch: 64, concurrentBatchMinimum: 4,
            observer: { size, _ in sizes.withLock { $0.append(size) } })
        batcher.start()
        defer { batcher.stop() }
        let answered = DispatchGroup()
        let created = Mutex(0)
        func submit(_ key: String) throws {
            answered.enter()
            // Each its own notification: replies to one notification from one device take turns (the
            // snooze scope's lock), which would hold the second writer back for another reason.
            batcher.submit(try item(app: "queue-app", key: key, notification: "timer-\(key)")) { result in
                if case .success(.created) = result { created.withLock { $0 += 1 } }
                answered.leave()
            }
        }
        // The table is locked, so a writer that reaches its insert stays busy until it is released.
        let blocker = try PostgresConnection(configuration: api.database.configuration)
        try blocker.execute("BEGIN")
        try blocker.execute("LOCK TABLE responses IN EXCLUSIVE MODE")
        // Watched from another session: within a transaction, pg_locks keeps its first reading. A writer
        // waits for the lock its insert needs on responses.
        let watcher = try PostgresConnection(configuration: api.database.configuration)
        func writersWaiting() throws -> Int {
            try watcher.query(
                """
                SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
                WHERE NOT l.granted AND l.mode = 'RowExclusiveLock' AND c.relname = 'responses'
                    AND c.relnamespace = current_schema()::regnamespace
                """
            ).first?.decode("n", as: Int.self) ?? 0
        }
        try submit("first")
        // Each wait stays well within the sessions' statement timeout, which would end the writers' wait.
        #expect(try eventually(within: 3) { try writersWaiting() == 1 })
        // Three waiting are below the minimum and start no batch (the sizes at the end show it); a
        // fourth starts the second writer.
        for key in ["a", "b", "c"] { try submit(key) }
        try submit("d")
        #expect(
            try eventually(within: 3) { try writersWaiting() == 2 },
            "four waiting responses did not start the second writer")
        try blocker.execute("ROLLBACK")
        #expect(answered.wait(timeout: .now() + 20) == .success)
        #expect(created.withLock { $0 } == 5)
        #expect(sizes.withLock { $0.sorted() } == [1, 4])
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE app_id = 'queue-app'") == 5)
    }

    @Test("a batch tells the workers of every instance which of its apps have new follow-ups, at commit")
    func batchNotifiesAppsWithFollowUps() throws {
        let api = try TestAPI()
        // NOTIFY is per database, which parallel tests share: the apps' names are this test's own.
        let suffix = UUID().uuidString.prefix(8).lowercased()
        let (snoozing, alsoSnoozing, recording) = ("notify-a-\(suffix)", "notify-b-\(suffix)", "notify-c-\(suffix)")
        for app in [snoozing, alsoSnoozing, recording] { _ = try api.createApp(app) }
        let snoozingNotification = try sent(api, app: snoozing)
        let alsoSnoozingNotification = try sent(api, app: alsoSnoozing)
        let received = Mutex([String]())
        let ready = "ready-\(suffix)"
        let listener = PostgresListener(
            configuration: api.database.configuration, channels: [Channels.followUps],
            onNotification: { notification in received.withLock { $0.append(notification.payload) } })
        listener.start()
        defer { listener.stop() }
        let admin = try PostgresConnection(configuration: api.database.configuration)
        #expect(
            try eventually(within: 5) {
                try admin.notify(channel: Channels.followUps, payload: ready)
                return received.withLock { $0.contains(ready) }
            })

        let results = IngestWriter(pool: api.pool).ingest(batch: [
            try item(
                app: snoozing, key: "1", action: "SNOOZE_ACTION", rule: Self.snoozeRule, bound: snoozingNotification),
            try item(
                app: snoozing, key: "2", action: "SNOOZE_ACTION", rule: Self.snoozeRule, bound: snoozingNotification),
            try item(
                app: alsoSnoozing, key: "1", action: "SNOOZE_ACTION", rule: Self.snoozeRule,
                bound: alsoSnoozingNotification),
            try item(app: recording, key: "1", action: "STOP_ACTION", rule: Self.stopRule),
        ])
        #expect(results.allSatisfy { if case .success(.created) = $0 { true } else { false } })
        let mine = { received.withLock { $0.filter { $0.hasSuffix(suffix) && $0 != ready } } }
        #expect(eventually(within: 5) { mine().count >= 2 })
        // Anything else would have come with the same commit; give it a moment to arrive.
        Thread.sleep(forTimeInterval: 0.2)
        #expect(mine().sorted() == [snoozing, alsoSnoozing])
    }

    @Test("a request sent again inside a batch is replayed and changes nothing: a snooze made since stays pending")
    func replayInABatchWritesNothing() throws {
        let api = try TestAPI()
        _ = try api.createApp("retry-app")
        let notification = try sent(api, app: "retry-app")
        let writer = IngestWriter(pool: api.pool)
        guard
            case .created(let stopAnswer) = try writer.ingest(
                try item(app: "retry-app", key: "stop", rule: Self.stopRule)),
            case .created = try writer.ingest(
                try item(
                    app: "retry-app", key: "s1", action: "SNOOZE_ACTION", rule: Self.snoozeRule, bound: notification))
        else {
            Issue.record("the first answers were not created")
            return
        }
        // The stop is sent again with a new snooze: written as if new, the stop would cancel s1's
        // re-delivery and s2's; the batch is written again with the stop replayed instead.
        let results = writer.ingest(batch: [
            try item(app: "retry-app", key: "stop", rule: Self.stopRule),
            try item(app: "retry-app", key: "s2", action: "SNOOZE_ACTION", rule: Self.snoozeRule, bound: notification),
        ])
        guard case .success(.replayed(let replayed)) = results[0], case .success(.created(let snooze)) = results[1]
        else {
            Issue.record("unexpected results: \(results)")
            return
        }
        #expect(replayed == stopAnswer)
        #expect(snooze.outcome == .snoozed)
        let statuses = try snoozeStatuses(api)
        #expect(statuses == ["s1=pending", "s2=pending"])
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE app_id = 'retry-app'") == 3)
        #expect(try api.count("SELECT count(*) AS n FROM followups WHERE app_id = 'retry-app' AND is_snooze") == 2)
    }
}

@Suite("Bodies with U+0000")
struct NULCharacterTests {
    @Test("a NUL anywhere in a JSON body is a 422 naming its pointer, on ingest and admin routes")
    func nulIsRefused() throws {
        let api = try TestAPI()
        let key = try api.createApp("nul-app")
        let ingest = try api.ingest(key: key, json: #"{"actionIdentifier":"a","userInfo":{"k\u0000":1}}"#)
        #expect(ingest.status == 422)
        let errors = ingest.json["errors"] as? [[String: String]]
        #expect(errors?.first?["pointer"] == "/userInfo/k\u{0}")
        let text = try api.ingest(key: key, json: #"{"actionIdentifier":"a","userText":"x\u0000y"}"#)
        #expect(text.status == 422)
        #expect((text.json["errors"] as? [[String: String]])?.first?["pointer"] == "/userText")
        let nested = try api.ingest(key: key, json: #"{"actionIdentifier":"a","userInfo":{"list":[1,{"v":"\u0000"}]}}"#)
        #expect((nested.json["errors"] as? [[String: String]])?.first?["pointer"] == "/userInfo/list/1/v")
        let rename = try api.admin("PATCH", "/v1/apps/nul-app", json: #"{"name":"a\u0000b"}"#)
        #expect(rename.status == 422)
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 0)
        // An escaped backslash followed by "u0000" is six ordinary characters.
        let literal = try api.ingest(key: key, json: #"{"actionIdentifier":"a","userText":"\\u0000 is text"}"#)
        #expect(literal.status == 202)
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE user_text = '\\u0000 is text'") == 1)
    }
}
