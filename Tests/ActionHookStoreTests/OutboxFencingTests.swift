import ActionHookCore
import Foundation
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

@testable import ActionHookStore

/// The outbox's fence (R5): every write after a claim is fenced by its attempt number and status, so a
/// worker whose lease was taken over changes nothing.
@Suite("Outbox fencing (R5)", .serialized)
struct OutboxFencingTests {
    /// Everything a write could change on a follow-up, as text, plus its attempt rows.
    static func snapshot(_ api: TestAPI, _ id: String) throws -> [String] {
        let rows = try api.query(
            """
            SELECT status, attempt::text AS attempt, due_at::text AS due_at, coalesce(last_error, '<null>') AS last_error,
                coalesce(lease_until::text, '<null>') AS lease_until, updated_at::text AS updated_at,
                (SELECT count(*) FROM delivery_attempts a WHERE a.followup_id = f.id)::text AS attempts
            FROM followups f WHERE id = \(UUID(uuidString: id)!)
            """)
        guard let row = rows.first else { throw TestClientError(description: "no follow-up \(id)") }
        return try ["status", "attempt", "due_at", "last_error", "lease_until", "updated_at", "attempts"].map {
            "\($0)=\(try row.decode($0, as: String.self))"
        }
    }

    @Test("R5: a claim whose lease was taken over changes nothing (100 of 100 trials)")
    func fencing() async throws {
        let api = try TestAPI()
        _ = try api.createApp("fence")
        let outbox = OutboxStore(pool: api.pool)
        let results: [AttemptResult] = [
            .delivered(httpStatus: 200),
            .failed(httpStatus: 500, errorClass: "http_500", retryAfterMilliseconds: 1000),
            .failed(httpStatus: nil, errorClass: "timeout", retryAfterMilliseconds: nil),
            .skipped(reason: "device_dead"),
        ]
        func claimOnly(_ id: String) throws -> ClaimedFollowUp {
            let claims = try outbox.claim(limit: 5, leaseSeconds: 60)
            guard claims.count == 1, claims[0].id.uuidString.lowercased() == id else {
                throw TestClientError(description: "expected to claim \(id) alone, got \(claims.map(\.id))")
            }
            return claims[0]
        }
        func expire(_ id: String) throws {
            _ = try api.pool.withConnection {
                try $0.execute(
                    "UPDATE followups SET lease_until = now() - interval '1 second' WHERE id = \(UUID(uuidString: id)!)"
                )
            }
        }

        var unchanged = 0
        for trial in 0..<100 {
            let id = try Hooks.insertDueWebhooks(api, app: "fence", count: 1) { _ in nil }[0]
            var claims = [try claimOnly(id)]
            for takeover in 0..<(1 + trial % 3) {
                try expire(id)
                #expect(try outbox.sweepExpiredLeases() == 1)
                // Between the sweep and the next claim the stale claim's attempt number still matches:
                // only the status fences it.
                let swept = try Self.snapshot(api, id)
                let stale = claims.last!
                #expect(
                    try !outbox.finish(
                        stale, result: results[(trial + takeover) % results.count], startedAt: Date(),
                        duration: .milliseconds(3)))
                try outbox.release([stale], unsent: [])
                #expect(try Self.snapshot(api, id) == swept)
                claims.append(try claimOnly(id))
            }
            #expect(claims.map(\.attempt) == Array(1...claims.count))
            let current = claims.last!
            let before = try Self.snapshot(api, id)
            #expect(before.first == "status=running")
            var trialHeld = true
            for (offset, stale) in claims.dropLast().enumerated() {
                let changed = try outbox.finish(
                    stale, result: results[(trial + offset) % results.count], startedAt: Date(),
                    duration: .milliseconds(7))
                if changed { trialHeld = false }
                try outbox.release([stale], unsent: [])
            }
            let after = try Self.snapshot(api, id)
            #expect(after == before, "trial \(trial)")
            if trialHeld && after == before { unchanged += 1 }

            // The current claim still owns the row.
            #expect(
                try outbox.finish(
                    current, result: .delivered(httpStatus: 200), startedAt: Date(), duration: .milliseconds(1)))
            let attempts = try Hooks.attempts(api, id)
            #expect(attempts.map(\.attempt) == [current.attempt])
            #expect(try Hooks.followUp(api, id).status == "delivered")
        }
        #expect(unchanged == 100)
    }

    @Test(
        "a claim given back unsent keeps the attempt number it had, one that may have been sent counts, and a claim whose answer was lost is given back uncounted"
    )
    func releasedClaimsCountOnlyWhenSent() throws {
        let api = try TestAPI()
        _ = try api.createApp("release")
        let outbox = OutboxStore(pool: api.pool)
        let id = try Hooks.insertDueWebhooks(api, app: "release", count: 1) { _ in nil }[0]
        func claim() throws -> ClaimedFollowUp {
            let claims = try outbox.claim(limit: 5, leaseSeconds: 60)
            try #require(claims.count == 1)
            return claims[0]
        }
        func row() throws -> (status: String, attempt: Int, token: Bool) {
            let rows = try api.query(
                "SELECT status, attempt, lease_token IS NOT NULL AS token FROM followups WHERE id = \(UUID(uuidString: id)!)"
            )
            return (try rows[0].decode("status"), try rows[0].decode("attempt"), try rows[0].decode("token"))
        }

        let first = try claim()
        #expect(first.attempt == 1)
        try outbox.release([], unsent: [first])
        #expect(try row() == ("retrying", 0, false))
        let second = try claim()
        #expect(second.attempt == 1)
        try outbox.release([second], unsent: [])
        #expect(try row() == ("retrying", 1, false))
        // A stale release changes nothing.
        let third = try claim()
        #expect(third.attempt == 2)
        try outbox.release([second], unsent: [second])
        #expect(try row() == ("running", 2, true))

        // The claim's answer lost: its rows, found by the claim's token, go back uncounted.
        let token = try api.query("SELECT lease_token FROM followups WHERE id = \(UUID(uuidString: id)!)")[0]
            .decode("lease_token", as: UUID.self)
        _ = try api.pool.withConnection { try $0.execute(OutboxStore.releaseLostClaims([token])) }
        #expect(try row() == ("retrying", 1, false))
        let fourth = try claim()
        #expect(fourth.attempt == 2)
        #expect(try outbox.finish(fourth, result: .delivered(httpStatus: 200), startedAt: Date(), duration: .zero))
        #expect(try Hooks.attempts(api, id).map(\.attempt) == [2])
    }
}
