import ActionHookCore
import Foundation
import Synchronization

/// The outbox port in memory, for the worker's own tests: follow-ups due at a time, claimed under a lease
/// and fenced by attempt number as the store fences them, with what the worker asked of it kept for the
/// tests to read. The store's own behaviour is tested against PostgreSQL (ActionHookStoreTests).
final class MemoryOutbox: Outbox {
    enum Status: Equatable {
        case queued, running, delivered, dead, skipped
    }

    struct Row {
        var claim: ClaimedFollowUp
        var status = Status.queued
        var leaseUntil: Date?
    }

    struct State {
        var rows: [UUID: Row] = [:]
        var settings: [String: DeliverySettings] = [:]
        /// Every attempt recorded, in order.
        var finished: [FinishedAttempt] = []
        /// Every claim given back, and those of them given back as never sent.
        var released: [UUID] = []
        var releasedUnsent: [UUID] = []
        var deadDevices: [String] = []
        var disabledWebhooks: [String] = []
        /// Calls of `finish` to fail with ``StoreError/unavailable`` (the database away) before one succeeds.
        var unavailableFinishes = 0
        var finishCalls = 0
        /// Reads of delivery settings to fail with ``StoreError/unavailable`` before one succeeds.
        var unavailableSettings = 0
        var settingsReads = 0
    }

    let state = Mutex(State())

    /// Adds a follow-up due at `dueAt`; returns its id.
    @discardableResult
    func add(appID: String, channel: FollowUpChannel = .webhook, payload: JSONValue, dueAt: Date = Date()) -> UUID {
        let id = UUID()
        state.withLock {
            $0.rows[id] = Row(
                claim: ClaimedFollowUp(
                    appID: appID, id: id, attempt: 0, channel: channel, payload: payload, lateness: 0, dueAt: dueAt))
        }
        return id
    }

    func row(_ id: UUID) -> Row? { state.withLock { $0.rows[id] } }
    var finished: [FinishedAttempt] { state.withLock { $0.finished } }
    var released: [UUID] { state.withLock { $0.released } }

    func claim(limit: Int, leaseSeconds: Int) throws -> [ClaimedFollowUp] {
        let now = Date()
        return state.withLock { state in
            let due = state.rows.values.filter { $0.status == .queued && $0.claim.dueAt <= now }
                .sorted { $0.claim.dueAt < $1.claim.dueAt }.prefix(limit)
            return due.map { row in
                var claimed = row
                claimed.status = .running
                claimed.claim.attempt += 1
                claimed.claim.lateness = now.timeIntervalSince(row.claim.dueAt)
                claimed.leaseUntil = now.addingTimeInterval(TimeInterval(leaseSeconds))
                state.rows[row.claim.id] = claimed
                return claimed.claim
            }
        }
    }

    func finish(_ attempts: [FinishedAttempt]) throws -> Set<UUID> {
        try state.withLock { state in
            state.finishCalls += 1
            if state.unavailableFinishes > 0 {
                state.unavailableFinishes -= 1
                throw StoreError.unavailable
            }
            var recorded: Set<UUID> = []
            for attempt in attempts {
                let id = attempt.claim.id
                guard var row = state.rows[id], row.status == .running, row.claim.attempt == attempt.claim.attempt
                else { continue }
                switch attempt.result {
                case .delivered:
                    row.status = .delivered
                case .failed(_, _, let retryAfter?):
                    row.status = .queued
                    row.claim.dueAt = attempt.startedAt.addingTimeInterval(Double(retryAfter) / 1000)
                case .failed:
                    row.status = .dead
                case .skipped:
                    row.status = .skipped
                }
                row.leaseUntil = nil
                state.rows[id] = row
                state.finished.append(attempt)
                recorded.insert(id)
            }
            return recorded
        }
    }

    func release(_ claims: [ClaimedFollowUp], unsent: [ClaimedFollowUp]) throws {
        state.withLock { state in
            for (claim, uncounted) in claims.map({ ($0, 0) }) + unsent.map({ ($0, 1) }) {
                guard var row = state.rows[claim.id], row.status == .running, row.claim.attempt == claim.attempt
                else { continue }
                row.status = .queued
                row.claim.attempt -= uncounted
                row.leaseUntil = nil
                state.rows[claim.id] = row
                state.released.append(claim.id)
                if uncounted == 1 { state.releasedUnsent.append(claim.id) }
            }
        }
    }

    func sweepExpiredLeases() throws -> Int {
        let now = Date()
        return state.withLock { state in
            var swept = 0
            for (id, row) in state.rows where row.status == .running && (row.leaseUntil ?? now) < now {
                state.rows[id]?.status = .queued
                state.rows[id]?.leaseUntil = nil
                swept += 1
            }
            return swept
        }
    }

    func secondsUntilNextDue() throws -> Double? {
        let now = Date()
        return state.withLock { state in
            state.rows.values.filter { $0.status == .queued }.map { max(0, $0.claim.dueAt.timeIntervalSince(now)) }
                .min()
        }
    }

    func queueStatistics() throws -> (due: Int, oldestDueAge: Double) {
        let now = Date()
        return state.withLock { state in
            let due = state.rows.values.filter { $0.status == .queued && $0.claim.dueAt <= now }
            return (due.count, due.map { now.timeIntervalSince($0.claim.dueAt) }.max() ?? 0)
        }
    }

    func markDeviceDead(appID: String, token: String, reason: String) throws {
        state.withLock { $0.deadDevices.append(token) }
    }

    func disableWebhook(appID: String) throws {
        state.withLock { state in
            state.disabledWebhooks.append(appID)
            state.settings[appID]?.webhookDisabled = true
        }
    }

    func deliverySettings(appID: String) throws -> DeliverySettings? {
        try state.withLock { state in
            state.settingsReads += 1
            if state.unavailableSettings > 0 {
                state.unavailableSettings -= 1
                throw StoreError.unavailable
            }
            return state.settings[appID]
        }
    }
}
