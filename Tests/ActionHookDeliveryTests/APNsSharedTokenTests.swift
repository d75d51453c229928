import ActionHookCore
import ActionHookDelivery
import ActionHookStore
import Foundation
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

/// One provider token per signing key for every instance, through the database: senders that stand
/// for separate instances (each with its own pool) push through one APNs stand-in, which refuses a
/// second new token for a key within 20 minutes (429 TooManyProviderTokenUpdates).
@Suite("APNs provider token shared by instances", .serialized)
struct APNsSharedTokenTests {
    /// Three instances' senders over one schema, each with a pool of its own, and a clock they share.
    final class Instances {
        let standIn: APNsStandIn
        let api: TestAPI
        let writes: APNsTokenWrites
        let pools: [PostgresPool]
        let senders: [APNsSender]
        let clock: APNsDeliveryTests.TestClock

        init(count: Int = 3, clockBase: Int = Int(Date().timeIntervalSince1970)) throws {
            let standIn = try APNsStandIn()
            let api = try TestAPI()
            self.standIn = standIn
            self.api = api
            writes = try APNsTokenWrites(api)
            let clock = APNsDeliveryTests.TestClock(base: clockBase)
            self.clock = clock
            let pools = (0..<count).map { _ in PostgresPool(configuration: api.database.configuration, size: 2) }
            self.pools = pools
            senders = pools.map { pool in
                APNsSender(
                    endpoints: .init(overrideURL: standIn.baseURL, caFile: standIn.caFile),
                    tokens: APNsTokenStore(pool: pool), clock: { clock.now })
            }
        }

        /// Sends `perSender` pushes from every sender at once, to `device` (a new plain one each when nil).
        func sendAtOnce(perSender: Int, device: String? = nil) async -> [SendOutcome] {
            let credentials = standIn.credentials
            return await withTaskGroup(of: SendOutcome.self) { group in
                for (index, sender) in senders.enumerated() {
                    for push in 0..<perSender {
                        group.addTask {
                            await sender.send(
                                id: UUID().uuidString.lowercased(), appID: "app-\(index)", credentials: credentials,
                                payload: APNsDeliveryTests.apnsPayload(
                                    device ?? APNsStandIn.deviceToken(), "\(index).\(push)"))
                        }
                    }
                }
                return await group.reduce(into: []) { $0.append($1) }
            }
        }

        /// Tokens signed by all senders together.
        var issued: Int { senders.map(\.providerTokensIssued).reduce(0, +) }

        func shutdown() async {
            for sender in senders { await sender.shutdown() }
            for pool in pools { pool.close() }
        }
    }

    @Test("three instances pushing at once sign one token between them: one row write, every push accepted")
    func oneTokenForThreeInstances() async throws {
        let instances = try Instances()
        let outcomes = await instances.sendAtOnce(perSender: 10)
        #expect(outcomes.count == 30)
        #expect(outcomes.allSatisfy { $0 == .delivered(httpStatus: 200) }, "\(outcomes)")

        let requests = try instances.standIn.requests()
        #expect(requests.count == 30)
        #expect(requests.allSatisfy { $0.status == 200 }, "\(requests.map(\.reason))")
        let jwts = Set(requests.compactMap(\.jwt))
        #expect(jwts.count == 1)
        #expect(instances.issued == 1)
        let writes = try instances.writes.all()
        #expect(writes.map(\.op) == ["INSERT"])
        #expect(Set(writes.map(\.token)) == jwts)
        #expect(writes.first?.issuedAt == instances.clock.base)
        let rows = try instances.writes.rows()
        #expect(rows.map(\.teamID) == [APNsStandIn.teamID] && rows.map(\.keyID) == [APNsStandIn.keyID])
        await instances.shutdown()
    }

    @Test("a token 41 minutes old is replaced once, by one of three instances; the others read the new one")
    func staleTokenRefreshedOnce() async throws {
        // The clock starts 45 minutes back, so that both tokens are within APNs' hour when they arrive.
        let instances = try Instances(clockBase: Int(Date().timeIntervalSince1970) - 45 * 60)
        for sender in instances.senders {
            let outcome = await sender.send(
                id: UUID().uuidString.lowercased(), appID: "app", credentials: instances.standIn.credentials,
                payload: APNsDeliveryTests.apnsPayload(APNsStandIn.deviceToken(), "warm-up"))
            #expect(outcome == .delivered(httpStatus: 200))
        }
        #expect(instances.issued == 1)
        // 39 minutes: still the first token, with no database round trip needed.
        instances.clock.set(minutes: 39)
        #expect(await instances.sendAtOnce(perSender: 3).allSatisfy { $0 == .delivered(httpStatus: 200) })
        #expect(instances.issued == 1)

        instances.clock.set(minutes: 41)
        let outcomes = await instances.sendAtOnce(perSender: 10)
        #expect(outcomes.count == 30)
        #expect(outcomes.allSatisfy { $0 == .delivered(httpStatus: 200) }, "\(outcomes)")
        #expect(instances.issued == 2)

        let requests = try instances.standIn.requests()
        #expect(requests.count == 3 + 9 + 30)
        #expect(requests.filter { $0.status != 200 }.isEmpty, "\(requests.compactMap(\.reason))")
        let base = instances.clock.base
        #expect(Set(requests.compactMap(\.iat)) == [base, base + 41 * 60])
        #expect(Set(requests.suffix(30).compactMap(\.iat)) == [base + 41 * 60])
        let writes = try instances.writes.all()
        #expect(writes.map(\.op) == ["INSERT", "UPDATE"])
        #expect(writes.map(\.issuedAt) == [base, base + 41 * 60])
        #expect(Set(requests.compactMap(\.jwt)) == Set(writes.map(\.token)))
        await instances.shutdown()
    }

    @Test("403 ExpiredProviderToken seen by three instances at once: the token is replaced once, every push retried")
    func refusedTokenReplacedOnce() async throws {
        let instances = try Instances()
        for sender in instances.senders {
            let outcome = await sender.send(
                id: UUID().uuidString.lowercased(), appID: "app", credentials: instances.standIn.credentials,
                payload: APNsDeliveryTests.apnsPayload(APNsStandIn.deviceToken(), "warm-up"))
            #expect(outcome == .delivered(httpStatus: 200))
        }
        let expired = try #require(try instances.writes.all().first?.token)
        // One e403 device: its first request expires the token it carries, the one every instance holds.
        let outcomes = await instances.sendAtOnce(perSender: 10, device: APNsStandIn.deviceToken("e403"))
        #expect(outcomes.count == 30)
        #expect(outcomes.allSatisfy { $0 == .delivered(httpStatus: 200) }, "\(outcomes)")
        #expect(instances.issued == 2)

        let requests = try instances.standIn.requests().dropFirst(3)
        #expect(requests.filter { $0.status == 200 }.count == 30)
        #expect(
            requests.filter { $0.status != 200 }.allSatisfy { $0.reason == "ExpiredProviderToken" && $0.jwt == expired }
        )
        #expect(requests.filter { $0.reason == "TooManyProviderTokenUpdates" }.isEmpty)
        let writes = try instances.writes.all()
        #expect(writes.map(\.op) == ["INSERT", "UPDATE"])
        let fresh = try #require(writes.last?.token)
        #expect(fresh != expired)
        #expect(Set(requests.filter { $0.status == 200 }.compactMap(\.jwt)) == [fresh])
        await instances.shutdown()
    }

    @Test("APNsSender: 429 TooManyProviderTokenUpdates is retryable, and the token kept")
    func tooManyProviderTokenUpdatesIsRetryable() async throws {
        let standIn = try APNsStandIn()
        let base = Int(Date().timeIntervalSince1970) - 30 * 60
        let device = APNsStandIn.deviceToken()
        // Two senders that do not share tokens: the second signs a new one 5 minutes after the first.
        let first = APNsSender(endpoints: .init(overrideURL: standIn.baseURL, caFile: standIn.caFile), clock: { base })
        let second = APNsSender(
            endpoints: .init(overrideURL: standIn.baseURL, caFile: standIn.caFile), clock: { base + 5 * 60 })
        for sender in [first, second] {
            _ = await sender.send(
                id: UUID().uuidString.lowercased(), appID: "app", credentials: standIn.credentials,
                payload: APNsDeliveryTests.apnsPayload(device, "push"))
        }
        let again = await second.send(
            id: UUID().uuidString.lowercased(), appID: "app", credentials: standIn.credentials,
            payload: APNsDeliveryTests.apnsPayload(device, "again"))
        #expect(again == .retryable(httpStatus: 429, errorClass: "TooManyProviderTokenUpdates"))
        let requests = try standIn.requests()
        #expect(requests.map(\.status) == [200, 429, 429])
        #expect(requests.map(\.reason) == [nil, "TooManyProviderTokenUpdates", "TooManyProviderTokenUpdates"])
        // Refused as too soon, not as expired: the same token is sent again, none signed in between.
        #expect(requests[1].jwt == requests[2].jwt)
        #expect(second.providerTokensIssued == 1)
        for sender in [first, second] { await sender.shutdown() }
    }

    @Test("through the service: a push refused with 429 TooManyProviderTokenUpdates is retried on the schedule")
    func tooManyProviderTokenUpdatesRetriedByTheWorker() async throws {
        let standIn = try APNsStandIn()
        // Another sender (not sharing the service's database) took the key's one update for 20 minutes.
        let other = APNsSender(endpoints: .init(overrideURL: standIn.baseURL, caFile: standIn.caFile))
        let taken = await other.send(
            id: UUID().uuidString.lowercased(), appID: "other", credentials: standIn.credentials,
            payload: APNsDeliveryTests.apnsPayload(APNsStandIn.deviceToken(), "first"))
        #expect(taken == .delivered(httpStatus: 200))
        await other.shutdown()

        let bed = try APNsDeliveryTests.bed(standIn: standIn)
        let device = APNsStandIn.deviceToken()
        let push = try await APNsDeliveryTests.push(bed, device: device, until: ["delivered", "dead"])
        // The test bed's schedule: three retries about a second apart, then dead.
        #expect(
            try bed.followUp(push.followUpID)
                == .init(status: "dead", attempt: 4, lastError: "TooManyProviderTokenUpdates"))
        let attempts = try bed.attempts(push.followUpID)
        #expect(attempts.map(\.httpStatus) == [429, 429, 429, 429])
        #expect(attempts.map(\.errorClass) == Array(repeating: "TooManyProviderTokenUpdates", count: 4))
        let requests = try standIn.requests(token: device)
        #expect(requests.count == 4)
        #expect(Set(requests.compactMap(\.jwt)).count == 1)
        for index in 1..<requests.count {
            let gap = requests[index].time - requests[index - 1].time
            #expect(gap >= 0.85 && gap <= 4, "gap \(gap) s before attempt \(index + 1)")
        }
    }
}
