import ActionHookCore
import Foundation
import Postgres
import Synchronization

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
/// Times come from the database's clock: read by the transaction (`now()`, its start) when the batch
/// reads first, otherwise as the writer last read it (``DatabaseClock``), carried forward to the reply's
/// receipt; the time planned is the time stored.
public struct IngestWriter: Sendable {
    let pool: Database
    /// How long an idempotency key is kept: a key first stored longer ago than this is a new request.
    let idempotencyWindow: Duration
    /// The database's clock as this writer last read it.
    let clock = DatabaseClock()

    /// The default idempotency window, 24 hours (as Stripe keeps keys).
    public static let defaultIdempotencyWindow = Duration.seconds(24 * 3600)

    /// Creates the writer over a pool.
    public init(pool: PostgresPool, idempotencyWindow: Duration = IngestWriter.defaultIdempotencyWindow) {
        self.pool = Database(pool)
        self.idempotencyWindow = idempotencyWindow
    }

    /// The item planned now, on receipt, when its write needs nothing read first and the database's
    /// clock was read lately (see ``DatabaseClock``); otherwise the item unchanged, planned by the write.
    /// Planning on the receiving thread keeps that work off the writer's path between two transactions.
    public func planned(_ item: IngestItem) -> IngestItem {
        guard item.plan == nil, !IngestTransaction.needsReads(item), let receivedAt = clock.now() else { return item }
        var item = item
        item.plan = IngestPlan(item, receivedAt: receivedAt, previousSnoozes: 0)
        return item
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
    /// write looks for each within the window as the rows go in); if one is, the transaction rolls back
    /// and the items are written again with every key looked up first. A key is stored before only when
    /// a client sends a request again, so the common write reads nothing per key.
    private func write(_ items: [IngestItem]) throws -> [Result<IngestResult, any Error>] {
        do {
            return try IngestTransaction(items: items, lookingUp: false, window: idempotencyWindow, clock: clock)
                .run(on: pool)
        } catch let error as PostgresError
            where error.isUniqueViolation && error.constraint == Self.idempotencyConstraint
        {
            return try IngestTransaction(items: items, lookingUp: true, window: idempotencyWindow, clock: clock)
                .run(on: pool)
        }
    }

    /// The primary key of `idempotency_keys`, named by the error that says a key is stored (raised by the
    /// write, `actionhook_idempotency_key_stored`).
    static let idempotencyConstraint = "idempotency_keys_pkey"
}

/// The database's clock as the writer last read it, carried forward by this machine's monotonic clock: a
/// batch that needs nothing read before it is planned (the common one) is planned with this time and
/// written in one round trip.
///
/// Every transaction reads the database's clock (`now()`, its start) and this machine's monotonic clock
/// just before it was sent. Each reading's offset between the two is the true offset plus however long the
/// transaction took to start (a wait for a pooled connection, the network), so the smallest offset read
/// lately is the closest: the offset used is the smallest of this window of ``freshFor`` and the one
/// before (a database clock that was stepped is followed within two windows). Without a reading for
/// ``freshFor`` there is no estimate, and the next batch reads first. This machine's wall clock plays no
/// part: stepping it (a VM resumed, `chronyc makestep`) changes nothing.
///
/// The receipt times it gives out (``now(instant:)``, ``issue(_:)``) keep their order: each is at least a
/// microsecond after the one before, when it would otherwise be earlier by less than a second (an
/// estimate late by a transaction's start, a better reading). A time further back than that is a clock
/// that was stepped back, and is given out as it is: holding every receipt at the last time plus a
/// microsecond would freeze received times (and late follow-ups, expired replies) for the whole step.
final class DatabaseClock: Sendable {
    private struct Readings {
        /// When the last reading came.
        var readAt: ContinuousClock.Instant
        /// When the current window started, and its smallest offset.
        var windowStart: ContinuousClock.Instant
        var windowOffset: TimeInterval
        /// The previous window's smallest offset.
        var previousOffset: TimeInterval?

        var offset: TimeInterval { min(windowOffset, previousOffset ?? windowOffset) }
    }

    private struct State {
        var readings: Readings?
        /// The last time given out, in microseconds since 1970.
        var issued: Int64 = .min

        mutating func issue(_ time: Date) -> Date {
            let micros = Int64((time.timeIntervalSince1970 * 1_000_000).rounded())
            issued = micros > issued || issued &- micros > DatabaseClock.maxHoldMicroseconds ? micros : issued + 1
            return Date(timeIntervalSince1970: Double(issued) / 1_000_000)
        }
    }

    private let state = Mutex(State())

    /// How long a reading is used, and the length of a window.
    static let freshFor = Duration.seconds(10)
    /// How far back (in microseconds, one second) a time may be and still be given out just after the last
    /// one instead.
    static let maxHoldMicroseconds: Int64 = 1_000_000

    /// An instant as seconds on one fixed scale, for offsets between it and the database's clock.
    static func seconds(_ instant: ContinuousClock.Instant) -> TimeInterval {
        let (seconds, attoseconds) = (instant - epoch).components
        return TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18
    }

    private static let epoch = ContinuousClock.now

    /// A receipt time: the database's time at `instant` of this machine's monotonic clock, or nil without
    /// a fresh reading.
    func now(instant: ContinuousClock.Instant = .now) -> Date? {
        state.withLock { state in
            guard let readings = state.readings, readings.readAt.duration(to: instant) < Self.freshFor else {
                return nil
            }
            return state.issue(Date(timeIntervalSince1970: Self.seconds(instant) + readings.offset))
        }
    }

    /// A receipt time read from the database (a transaction's `now()`): `time`, or just after the last
    /// time given out.
    func issue(_ time: Date) -> Date {
        state.withLock { $0.issue(time) }
    }

    /// Records the database's time `databaseNow`, read by a transaction sent at `sentAt` (this machine's
    /// monotonic clock).
    func record(_ databaseNow: Date, sentAt: ContinuousClock.Instant, instant: ContinuousClock.Instant = .now) {
        let offset = databaseNow.timeIntervalSince1970 - Self.seconds(sentAt)
        state.withLock { state in
            guard var current = state.readings, current.readAt.duration(to: instant) < Self.freshFor else {
                state.readings = Readings(readAt: instant, windowStart: instant, windowOffset: offset)
                return
            }
            if current.windowStart.duration(to: instant) >= Self.freshFor {
                current.previousOffset = current.windowOffset
                current.windowStart = instant
                current.windowOffset = offset
            } else {
                current.windowOffset = min(current.windowOffset, offset)
            }
            current.readAt = instant
            state.readings = current
        }
    }
}

/// One ingest transaction.
///
/// A batch that needs nothing read to be planned (no replies to sent notifications, no snoozes of a
/// notification, no keys to look up) takes one round trip: it is planned with the database's clock as
/// last read (``DatabaseClock``), and its guards (each key's advisory lock and each app's lock), the
/// cancellation of pending snoozes and its writes go out together with the commit; the writes keep
/// only the positions whose guards held and whose app is there. Any other batch takes two: the first
/// takes the guards and reads what they guard, the statements it returns write every row, with the
/// commit.
///
/// The reads of two round trips, in order: the guards (and the database's clock), the apps still
/// present, the responses stored under the keys (only when `lookingUp`), the sent notifications whose
/// keys its replies carry (locked), and how often each snoozed notification was snoozed before.
struct IngestTransaction {
    let items: [IngestItem]
    let lookingUp: Bool
    let window: Duration
    let clock: DatabaseClock

    /// The idempotency window in whole seconds, as the statements take it.
    var windowSeconds: Int { Int(window.components.seconds) }

    /// The item's advisory lock and in-batch identity: app and idempotency key.
    static func key(_ item: IngestItem) -> AppScoped { AppScoped(appID: item.appID, name: item.idempotencyKey) }

    /// Whether the item's plan depends on what only a read finds: the sent notification its reply
    /// carries the key of, or how often its device snoozed its notification before.
    static func needsReads(_ item: IngestItem) -> Bool {
        (item.decision.snoozes && SnoozeScope(item) != nil)
            || NotificationKey.read(from: item.response.userInfo) != nil
    }

    func run(on database: Database) throws -> [Result<IngestResult, any Error>] {
        var results = [Result<IngestResult, any Error>?](repeating: nil, count: items.count)
        // A key twice in one batch: the later ones are concurrent with the first.
        var seen = Set<AppScoped>()
        for (index, item) in items.enumerated() where !seen.insert(Self.key(item)).inserted {
            results[index] = .failure(StoreError.idempotencyKeyInFlight)
        }
        let candidates = items.indices.filter { results[$0] == nil }
        guard !candidates.isEmpty else { return results.map { $0! } }
        // Replies that carry a sent notification's key: the notification is read under its row lock, so
        // of two replies in flight at once the second reads what the first wrote (first answer wins).
        var keyed: [(index: Int, notification: AppScoped, device: Int)] = []
        for index in candidates {
            guard let key = NotificationKey.read(from: items[index].response.userInfo) else { continue }
            keyed.append(
                (index, AppScoped(appID: items[index].appID, name: key.notificationID.lowercasedString), key.device))
        }
        let snoozing = candidates.contains { items[$0].decision.snoozes && SnoozeScope(items[$0]) != nil }
        if !lookingUp, keyed.isEmpty, !snoozing {
            // Planned on receipt, or now with the clock as last read.
            var plans: [IngestPlan] = []
            for index in candidates {
                guard
                    let plan = items[index].plan
                        ?? clock.now().map({ IngestPlan(items[index], receivedAt: $0, previousSnoozes: 0) })
                else { break }
                plans.append(plan)
            }
            if plans.count == candidates.count {
                let sent = zip(candidates, plans).map { (index: $0, plan: $1) }
                return try settling(sent, results: results, on: database) {
                    try runInOneRoundTrip(candidates, plans: plans, results: results, on: database)
                }
            }
        }
        var sent: [(index: Int, plan: IngestPlan)] = []
        return try settling(sent, results: results, on: database) {
            try database.uncheckedPipelinedTransaction { send in
                let run = try runAfterReads(candidates, keyed: keyed, results: results, send: send)
                sent = run.planned
                return (run.value, run.commitWith)
            }
        }
    }

    /// Runs `write`; when its commit is in doubt and the batch holds a reply without a client's key (whose
    /// retry could not find it), finds out which of `sent` were stored rather than failing them all (see
    /// ``Database/settlingInDoubt(_:found:)``). A batch of keyed replies fails at once: their retries find them.
    private func settling(
        _ sent: @autoclosure () -> [(index: Int, plan: IngestPlan)], results: [Result<IngestResult, any Error>?],
        on database: Database, _ write: () throws -> [Result<IngestResult, any Error>]
    ) throws -> [Result<IngestResult, any Error>] {
        guard items.contains(where: { !$0.keyFromClient }) else {
            return try StoreError.translatingUnavailable(write)
        }
        return try database.settlingInDoubt(write) {
            let sent = sent()
            // What it finds is confirmed only once it is replicated (``Database/confirmReplicated``).
            let rows = try database.uncheckedPipelinedTransaction([
                IngestStatements.storedIDs(
                    apps: sent.map { items[$0.index].appID }, ids: sent.map(\.plan.responseID)),
                Database.confirmReplicated,
            ])
            let stored = Set(try rows[0].map { try $0.decode("id", as: UUID.self) })
            var results = results
            for (index, plan) in sent {
                results[index] =
                    stored.contains(plan.responseID)
                    ? .success(.created(plan.answer)) : .failure(StoreError.unavailable)
            }
            // Items answered before the write (in flight, a key twice) keep their answers; any other was
            // not written.
            return results.map { $0 ?? .failure(StoreError.unavailable) }
        }
    }

    /// The guards of the candidates (positions 1...).
    private func guards(_ candidates: [Int]) -> PostgresQuery {
        IngestStatements.guards(
            locks: candidates.map { Self.key(items[$0]).lockText }, apps: candidates.map { items[$0].appID },
            scopes: candidates.compactMap { SnoozeScope(items[$0]) })
    }

    /// What a candidate's guards say: its app's lock and its key's lock were both taken, or which was not.
    private enum Guarded: Equatable {
        case held, appBeingDeleted, keyInFlight

        init(_ row: PostgresRow) throws {
            if !(try row.decode("app_locked", as: Bool.self)) {
                self = .appBeingDeleted
            } else if !(try row.decode("key_locked", as: Bool.self)) {
                self = .keyInFlight
            } else {
                self = .held
            }
        }
    }

    /// Each guard row's position (1-based, in the order of `candidates`), its candidate (the item's index)
    /// and what its guards say.
    private func guarded(_ rows: PostgresRows, _ candidates: [Int]) throws -> [(
        position: Int, index: Int, guarded: Guarded
    )] {
        try rows.map { row in
            let position: Int = try row.decode("position")
            return (position, candidates[position - 1], try Guarded(row))
        }
    }

    private func runInOneRoundTrip(
        _ candidates: [Int], plans: [IngestPlan], results: [Result<IngestResult, any Error>?], on database: Database
    ) throws -> [Result<IngestResult, any Error>] {
        var results = results
        let entries = candidates.indices.map { offset in
            (position: offset + 1, item: items[candidates[offset]], plan: plans[offset])
        }
        var pipeline = PipelinedReads()
        let guardRows = pipeline.add(guards(candidates))
        let writes = IngestStatements(entries: entries, windowSeconds: windowSeconds).add(to: &pipeline)
        let sentAt = ContinuousClock.now
        let read = PipelinedReads.Results(rows: try database.uncheckedPipelinedTransaction(pipeline.queries))
        if let now = try read[guardRows].first?.decode("now", as: Date.self) { clock.record(now, sentAt: sentAt) }
        let written = Set(try writes.map { try read[$0].map { try $0.decode("position", as: Int.self) } } ?? [])
        for (position, index, guarded) in try guarded(read[guardRows], candidates) {
            switch guarded {
            case .appBeingDeleted: results[index] = .failure(StoreError.appBeingDeleted)
            case .keyInFlight: results[index] = .failure(StoreError.idempotencyKeyInFlight)
            case .held:
                results[index] =
                    written.contains(position)
                    ? .success(.created(entries[position - 1].plan.answer)) : .failure(StoreError.appDeleted)
            }
        }
        return results.map { $0! }
    }

    /// The reads of a batch that reads before it writes, each statement named.
    private struct Reads {
        var pipeline = PipelinedReads()
        let guards: PipelinedReads.Read
        let appsPresent: PipelinedReads.Read
        /// The responses stored under the batch's keys (only when looking keys up).
        let storedResponses: PipelinedReads.Read?
        /// The sent notifications the keyed replies name, locked.
        let boundNotifications: PipelinedReads.Read?
        /// The notifications the batch snoozes, each for its device, and the statement counting their snoozes.
        let snoozing: [SnoozeScope]
        let snoozeCounts: PipelinedReads.Read?
    }

    /// The guards come first, in a statement of their own: each later statement reads with a snapshot
    /// taken after them, so it sees whatever a previous holder committed.
    private func reads(_ candidates: [Int], keyed: [(index: Int, notification: AppScoped, device: Int)]) -> Reads {
        var pipeline = PipelinedReads()
        let guards = pipeline.add(guards(candidates))
        let apps = Array(Set(candidates.map { items[$0].appID })).sorted()
        let appsPresent = pipeline.add(IngestStatements.existingApps(apps))
        let storedResponses =
            lookingUp
            ? pipeline.add(
                IngestStatements.storedResponses(
                    apps: candidates.map { items[$0].appID }, keys: candidates.map { items[$0].idempotencyKey },
                    windowSeconds: windowSeconds))
            : nil
        let boundNotifications =
            keyed.isEmpty
            ? nil
            : pipeline.add(
                IngestStatements.boundNotifications(
                    apps: keyed.map(\.notification.appID), ids: keyed.map(\.notification.name),
                    devices: keyed.map(\.device), tokens: keyed.map { items[$0.index].response.deviceToken ?? "" },
                    snoozing: keyed.map { items[$0.index].decision.snoozes }))
        var snoozing: [SnoozeScope] = []
        var snoozingSeen = Set<SnoozeScope>()
        for index in candidates where items[index].decision.snoozes {
            guard let scope = SnoozeScope(items[index]) else { continue }
            if snoozingSeen.insert(scope).inserted { snoozing.append(scope) }
        }
        // Counted under the scopes' locks (the guards took them), which the answers that cancel snoozes take too.
        let snoozeCounts = snoozing.isEmpty ? nil : pipeline.add(IngestStatements.snoozeCounts(snoozing))
        return Reads(
            pipeline: pipeline, guards: guards, appsPresent: appsPresent, storedResponses: storedResponses,
            boundNotifications: boundNotifications, snoozing: snoozing, snoozeCounts: snoozeCounts)
    }

    /// What the reads found, by item: the stored response under its key, its notification's snoozes before
    /// this batch, the sent notification it is bound to.
    private struct Found {
        var stored: [AppScoped: PostgresRow] = [:]
        var snoozesBefore: [SnoozeScope: Int] = [:]
        var bound: [Int: BoundNotification] = [:]
    }

    private func found(
        _ read: PipelinedReads.Results, _ reads: Reads, keyed: [(index: Int, notification: AppScoped, device: Int)]
    ) throws -> Found {
        var found = Found()
        if let storedResponses = reads.storedResponses {
            for row in read[storedResponses] {
                found.stored[AppScoped(appID: try row.decode("app_id"), name: try row.decode("idempotency_key"))] = row
            }
        }
        if let snoozeCounts = reads.snoozeCounts {
            for row in read[snoozeCounts] {
                let scope = reads.snoozing[try row.decode("position", as: Int.self) - 1]
                found.snoozesBefore[scope] = try row.decode("snoozes")
            }
        }
        if let boundNotifications = reads.boundNotifications {
            for row in read[boundNotifications] {
                let entry = keyed[try row.decode("position", as: Int.self) - 1]
                found.bound[entry.index] = try IngestStatements.boundNotification(row, device: entry.device)
            }
        }
        return found
    }

    private func runAfterReads(
        _ candidates: [Int], keyed: [(index: Int, notification: AppScoped, device: Int)],
        results: [Result<IngestResult, any Error>?], send: ([PostgresQuery]) throws -> [PostgresRows]
    ) throws -> (
        value: [Result<IngestResult, any Error>], commitWith: [PostgresQuery], planned: [(index: Int, plan: IngestPlan)]
    ) {
        var results = results
        let reads = reads(candidates, keyed: keyed)
        let sentAt = ContinuousClock.now
        let read = PipelinedReads.Results(rows: try send(reads.pipeline.queries))
        guard let receivedAt = try read[reads.guards].first?.decode("now", as: Date.self) else {
            return (results.map { $0! }, [], [])
        }
        clock.record(receivedAt, sentAt: sentAt)
        // An app whose lock is held exclusively is being deleted; one no longer there was deleted.
        let present = Set(try read[reads.appsPresent].map { try $0.decode("id", as: String.self) })
        var locked: [(position: Int, index: Int)] = []
        for (position, index, guarded) in try guarded(read[reads.guards], candidates) {
            if guarded == .appBeingDeleted {
                results[index] = .failure(StoreError.appBeingDeleted)
            } else if !present.contains(items[index].appID) {
                results[index] = .failure(StoreError.appDeleted)
            } else if guarded == .keyInFlight {
                results[index] = .failure(StoreError.idempotencyKeyInFlight)
            } else {
                locked.append((position, index))
            }
        }
        let planned = try plan(locked, found: try found(read, reads, keyed: keyed), receivedAt: receivedAt)
        var writes = PipelinedReads()
        if !planned.expiredKeys.isEmpty {
            // Before the insert that reuses them; the key's advisory lock keeps other writers out.
            writes.add(IngestStatements.releaseKeys(planned.expiredKeys))
        }
        IngestStatements(entries: planned.entries, windowSeconds: windowSeconds).add(to: &writes)
        for (index, result) in planned.results { results[index] = result }
        if planned.results.contains(where: { if case .success(.replayed) = $0.result { true } else { false } }) {
            // A replay confirms the stored reply only once it is on the synchronous standby: read alone,
            // the transaction would commit without waiting for it.
            writes.add(Database.confirmReplicated)
        }
        return (results.map { $0! }, writes.queries, planned.entries.map { (candidates[$0.position - 1], $0.plan) })
    }

    /// The items whose guards held, planned in order (or answered from the response stored under their
    /// key), and the keys of the window whose response is gone: given up, and the request is new.
    private func plan(_ locked: [(position: Int, index: Int)], found: Found, receivedAt: Date) throws -> (
        entries: [IngestStatements.Entry], results: [(index: Int, result: Result<IngestResult, any Error>)],
        expiredKeys: [AppScoped]
    ) {
        var entries: [IngestStatements.Entry] = []
        var results: [(index: Int, result: Result<IngestResult, any Error>)] = []
        var expiredKeys: [AppScoped] = []
        // Notifications answered, and snoozes given, earlier in this batch.
        var answeredInBatch = Set<UUID>()
        var snoozesInBatch: [SnoozeScope: Int] = [:]
        let windowStart = receivedAt.addingTimeInterval(-Double(window.components.seconds))
        for (position, index) in locked {
            let item = items[index]
            if let row = found.stored[Self.key(item)] {
                if try row.decode("received_at", as: Date.self) >= windowStart, try row.decode("kept", as: Bool.self) {
                    results.append((index, Result { try Self.replay(item, row: row) }))
                    continue
                }
                expiredKeys.append(Self.key(item))
            }
            let scope = SnoozeScope(item)
            var previous = 0
            if item.decision.snoozes, let scope {
                previous = found.snoozesBefore[scope, default: 0] + snoozesInBatch[scope, default: 0]
            }
            var sent = found.bound[index]
            if let id = sent?.id, answeredInBatch.contains(id) { sent?.answered = true }
            let plan = IngestPlan(
                item, receivedAt: clock.issue(receivedAt), previousSnoozes: previous, notification: sent)
            if plan.answersNotification, let id = sent?.id { answeredInBatch.insert(id) }
            if plan.outcome == .snoozed, let scope { snoozesInBatch[scope, default: 0] += 1 }
            entries.append((position, item, plan))
            results.append((index, .success(.created(plan.answer))))
        }
        return (entries, results, expiredKeys)
    }

    static func replay(_ item: IngestItem, row: PostgresRow) throws -> IngestResult {
        guard SecretToken.constantTimeEquals(try row.decode("request_hash", as: [UInt8].self), item.requestHash) else {
            throw StoreError.idempotencyKeyReused
        }
        guard let outcome = Outcome(rawValue: try row.decode("outcome", as: String.self)) else {
            throw StoreError.wrongState("a stored response has an outcome this version does not know")
        }
        let text = try row.decode("answer", as: PostgresJSON.self).text
        return .replayed(StoredAnswer(outcome: outcome, body: try JSONParser.parse(text), json: Array(text.utf8)))
    }
}
