import ActionHookServer
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

/// An idle service costs nothing (quality P8): with nothing due, its loops sleep until the next due
/// time, the poll interval or a notification. Asserted as counts the service recorded over a stretch
/// of idleness, bounded by that stretch's length (however long a busy machine makes it), never as
/// wall-clock gaps. Each runs in a database of its own: notifications are per database, and other
/// tests' new follow-ups would wake its worker in the shared one.
@Suite("An idle service sleeps (P8)", .serialized)
struct IdleTests {
    /// The worker's looks at the queue, as counted in its metrics.
    static func claims(_ api: TestAPI) -> Double {
        Hooks.metric(api.service, "actionhook_outbox_claims_total", [:])
    }

    /// Waits `idle`, and returns how many claims the worker made and the bound the poll interval allows
    /// over the time that really passed (one claim per interval, plus one for each end of the stretch).
    static func claimsWhileIdle(_ api: TestAPI, for idle: Duration) async throws -> (claims: Double, bound: Double) {
        let poll = api.service.configuration.worker.pollInterval
        let clock = ContinuousClock()
        let before = claims(api)
        let started = clock.now
        try await Task.sleep(for: idle)
        let after = claims(api)
        let elapsed = clock.now - started
        return (after - before, (elapsed / poll).rounded(.up) + 2)
    }

    @Test("with an empty outbox the worker claims at most once per poll interval")
    func emptyOutbox() async throws {
        let api = try TestAPI(ownDatabase: true, configure: Hooks.worker)
        _ = try Hooks.createApp(api, "idle", url: "http://127.0.0.1:9/", secret: Hooks.newSecret())
        // The worker has started and looked at least once.
        #expect(try await Hooks.poll(timeout: .seconds(30)) { Self.claims(api) >= 1 })
        let (count, bound) = try await Self.claimsWhileIdle(api, for: .seconds(2))
        #expect(count <= bound, "\(count) claims while idle; the poll interval allows \(bound)")
        #expect(count >= 1, "the worker stopped looking at the queue")
    }

    @Test("with a follow-up due in an hour the worker still claims at most once per poll interval")
    func followUpDueLater() async throws {
        let api = try TestAPI(ownDatabase: true, configure: Hooks.worker)
        _ = try Hooks.createApp(api, "later", url: "http://127.0.0.1:9/", secret: Hooks.newSecret())
        let ids = try Hooks.insertDueWebhooks(api, app: "later", count: 1, dueInSeconds: 3600) { _ in nil }
        #expect(try await Hooks.poll(timeout: .seconds(30)) { Self.claims(api) >= 1 })
        let (count, bound) = try await Self.claimsWhileIdle(api, for: .seconds(2))
        #expect(count <= bound, "\(count) claims while idle; the poll interval allows \(bound)")
        #expect(try Hooks.followUp(api, ids[0]).status == "pending")
    }
}
