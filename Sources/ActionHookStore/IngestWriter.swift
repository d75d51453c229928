import ActionHookCore
import Foundation
import Postgres

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
            return try pool.pipelinedTransaction { send in
                try IngestTransaction(items: items, lookingUp: false, window: idempotencyWindow).run(send: send)
            }
        } catch let error as PostgresError
            where error.isUniqueViolation && error.constraint == Self.idempotencyConstraint
        {
            return try pool.pipelinedTransaction { send in
                try IngestTransaction(items: items, lookingUp: true, window: idempotencyWindow).run(send: send)
            }
        }
    }

    /// The primary key of `idempotency_keys`, named by the error that says a key is stored.
    static let idempotencyConstraint = "idempotency_keys_pkey"
}

/// One ingest transaction of two round trips: the first takes the idempotency and app locks and reads
/// what they guard; the statements it returns write every row, with the commit.
///
/// Reads, in order: the per-key advisory locks (and the database's clock), the apps' shared locks, the
/// apps still present, the responses stored under the keys (only when `lookingUp`), how often each
/// snoozed notification was snoozed before, and the snooze re-deliveries pending for each notification
/// the batch answers otherwise; between the stored responses and the snooze counts, the sent
/// notifications whose keys its replies carry, locked.
struct IngestTransaction {
    let items: [IngestItem]
    let lookingUp: Bool
    let window: Duration

    /// The item's advisory lock and in-batch identity: app and idempotency key.
    static func key(_ item: IngestItem) -> AppScoped { AppScoped(appID: item.appID, name: item.idempotencyKey) }

    /// App and notification, for counting and cancelling snoozes; `nil` without a `notificationIdentifier`.
    static func notification(_ item: IngestItem) -> AppScoped? {
        item.response.notificationIdentifier.map { AppScoped(appID: item.appID, name: $0) }
    }

    func run(send: ([PostgresQuery]) throws -> [PostgresRows]) throws
        -> (value: [Result<IngestResult, any Error>], commitWith: [PostgresQuery])
    {
        var results = [Result<IngestResult, any Error>?](repeating: nil, count: items.count)
        // A key twice in one batch: the later ones are concurrent with the first.
        var seen = Set<AppScoped>()
        for (index, item) in items.enumerated() where !seen.insert(Self.key(item)).inserted {
            results[index] = .failure(StoreError.idempotencyKeyInFlight)
        }
        let candidates = items.indices.filter { results[$0] == nil }
        let apps = Array(Set(candidates.map { items[$0].appID })).sorted()
        // The notifications this batch snoozes (their earlier snoozes are counted) and those it answers
        // otherwise (their pending snoozes are cancelled).
        var snoozing: [AppScoped] = []
        var answering: [AppScoped] = []
        var snoozingSeen = Set<AppScoped>()
        var answeringSeen = Set<AppScoped>()
        for index in candidates {
            let item = items[index]
            guard let notification = Self.notification(item) else { continue }
            if item.decision.snoozes {
                if snoozingSeen.insert(notification).inserted { snoozing.append(notification) }
            } else if answeringSeen.insert(notification).inserted {
                answering.append(notification)
            }
        }

        // The locks come first, in statements of their own: each later statement reads with a
        // snapshot taken after them, so it sees whatever a previous holder committed. Each app's lock
        // (class 1) is shared by ingest transactions and taken exclusively by the app's deletion.
        var reads = PipelinedReads()
        _ = reads.add(IngestStatements.planSettings)
        let keyLocks = reads.add(IngestStatements.keyLocks(candidates.map { Self.key(items[$0]).lockText }))
        let appLocks = reads.add(IngestStatements.appLocks(apps))
        let appsPresent = reads.add(IngestStatements.existingApps(apps))
        let storedResponses =
            lookingUp
            ? reads.add(
                IngestStatements.storedResponses(
                    apps: candidates.map { items[$0].appID }, keys: candidates.map { items[$0].idempotencyKey }))
            : nil
        // Replies that carry a sent notification's key: the notification is read under its row lock, so
        // of two replies in flight at once the second reads what the first wrote (first answer wins).
        var keyed: [(index: Int, notification: AppScoped, device: Int)] = []
        for index in candidates {
            guard let key = NotificationKey.read(from: items[index].response.userInfo) else { continue }
            keyed.append(
                (index, AppScoped(appID: items[index].appID, name: key.notificationID.lowercasedString), key.device))
        }
        let boundNotifications =
            keyed.isEmpty
            ? nil
            : reads.add(
                IngestStatements.boundNotifications(
                    apps: keyed.map(\.notification.appID), ids: keyed.map(\.notification.name),
                    devices: keyed.map(\.device), tokens: keyed.map { items[$0.index].response.deviceToken ?? "" }))
        let snoozeCounts = snoozing.isEmpty ? nil : reads.add(IngestStatements.snoozeCounts(snoozing))
        let pendingSnoozes = answering.isEmpty ? nil : reads.add(IngestStatements.pendingSnoozes(answering))
        let read = PipelinedReads.Results(rows: try send(reads.queries))

        guard let receivedAt = try read[keyLocks].first?.decode("now", as: Date.self) else {
            return (results.map { $0! }, [])
        }
        // An app whose lock is held exclusively is being deleted; one no longer there was deleted.
        let appsLocked = Set(try read[appLocks].map { try $0.decode("app_id", as: String.self) })
        let present = Set(try read[appsPresent].map { try $0.decode("id", as: String.self) })
        var locked: [Int] = []
        for row in read[keyLocks] {
            let index = candidates[try row.decode("position", as: Int.self) - 1]
            let appID = items[index].appID
            if !appsLocked.contains(appID) {
                results[index] = .failure(StoreError.appBeingDeleted)
            } else if !present.contains(appID) {
                results[index] = .failure(StoreError.appDeleted)
            } else if try row.decode("locked", as: Bool.self) {
                locked.append(index)
            } else {
                results[index] = .failure(StoreError.idempotencyKeyInFlight)
            }
        }
        var stored: [AppScoped: PostgresRow] = [:]
        if let storedResponses {
            for row in read[storedResponses] {
                stored[AppScoped(appID: try row.decode("app_id"), name: try row.decode("idempotency_key"))] = row
            }
        }
        var snoozesBefore: [AppScoped: Int] = [:]
        if let snoozeCounts {
            for row in read[snoozeCounts] {
                snoozesBefore[AppScoped(appID: try row.decode("app_id"), name: try row.decode("notification"))] =
                    try row.decode("snoozes")
            }
        }
        var pending: [AppScoped: [UUID]] = [:]
        if let pendingSnoozes {
            for row in read[pendingSnoozes] {
                let notification = AppScoped(
                    appID: try row.decode("app_id"), name: try row.decode("notification_identifier"))
                pending[notification, default: []].append(try row.decode("id", as: UUID.self))
            }
        }

        // What each keyed reply is bound to, by its position in the batch.
        var bound: [Int: BoundNotification] = [:]
        if let boundNotifications {
            for row in read[boundNotifications] {
                let position: Int = try row.decode("position")
                let entry = keyed[position - 1]
                bound[entry.index] = try IngestStatements.boundNotification(row, device: entry.device)
            }
        }

        var entries: [(item: IngestItem, plan: IngestPlan)] = []
        // Notifications answered earlier in this batch.
        var answeredInBatch = Set<UUID>()
        var snoozesInBatch: [AppScoped: Int] = [:]
        // Keys stored before the window: their old responses give the key up, and the request is new.
        var expiredKeys: [AppScoped] = []
        let windowStart = receivedAt.addingTimeInterval(-Double(window.components.seconds))
        for index in locked {
            let item = items[index]
            if let row = stored[Self.key(item)] {
                if try row.decode("received_at", as: Date.self) >= windowStart, try row.decode("kept", as: Bool.self) {
                    results[index] = Result { try Self.replay(item, row: row) }
                    continue
                }
                expiredKeys.append(Self.key(item))
            }
            var previous = 0
            let notification = Self.notification(item)
            if item.decision.snoozes, let notification {
                previous = snoozesBefore[notification, default: 0] + snoozesInBatch[notification, default: 0]
            }
            var sent = bound[index]
            if let id = sent?.id, answeredInBatch.contains(id) { sent?.answered = true }
            let plan = IngestPlan(item, receivedAt: receivedAt, previousSnoozes: previous, notification: sent)
            if plan.answersNotification, let id = sent?.id { answeredInBatch.insert(id) }
            if plan.outcome == .snoozed, let notification { snoozesInBatch[notification, default: 0] += 1 }
            entries.append((item, plan))
            results[index] = .success(.created(plan.answer))
        }
        var statements = IngestStatements(entries: entries, pendingSnoozes: pending).statements
        if !expiredKeys.isEmpty {
            // Before the insert that reuses them; the key's advisory lock keeps other writers out.
            statements.insert(IngestStatements.releaseKeys(expiredKeys), at: 0)
        }
        return (results.map { $0! }, statements)
    }

    static func replay(_ item: IngestItem, row: PostgresRow) throws -> IngestResult {
        guard SecretToken.constantTimeEquals(try row.decode("request_hash", as: [UInt8].self), item.requestHash) else {
            throw StoreError.idempotencyKeyReused
        }
        guard let outcome = Outcome(rawValue: try row.decode("outcome", as: String.self)) else {
            throw StoreError.wrongState("a stored response has an outcome this version does not know")
        }
        let body = try JSONParser.parse(try row.decode("answer", as: PostgresJSON.self).text)
        return .replayed(StoredAnswer(outcome: outcome, body: body))
    }
}
