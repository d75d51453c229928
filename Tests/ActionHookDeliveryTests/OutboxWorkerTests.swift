import ActionHookCore
import ActionHookDelivery
import ActionHookStore
import Foundation
import Logging
import Postgres
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

/// The worker between an outbox and a webhook receiver: what it sends and what it records, over an outbox
/// in memory (``MemoryOutbox``), so that these run without a database or the service.
@Suite("Outbox worker over an outbox in memory", .serialized)
struct OutboxWorkerTests {
    static let secret = "whsec_" + Data(repeating: 7, count: 32).base64EncodedString()

    /// A worker over `outbox`, started, with one retry a minute after a first failure.
    static func worker(
        _ outbox: MemoryOutbox, apns: APNsSender = APNsSender(endpoints: .init(overrideURL: "https://127.0.0.1:9"))
    ) -> (OutboxWorker, stop: @Sendable (Duration) -> Void) {
        let webhooks = WebhookSender(timeoutSeconds: 5, allowPrivate: true)
        let worker = OutboxWorker(
            outbox: outbox, webhooks: webhooks, apns: apns,
            configuration: WorkerConfiguration(
                concurrency: 4, pollInterval: .milliseconds(50), retryPolicy: RetryPolicy(schedule: [60], jitter: 0)),
            observer: nil, logger: Logger(label: "outbox-worker-test"))
        worker.start()
        return (
            worker,
            { grace in
                worker.stop(gracePeriod: grace)
                webhooks.syncShutdown()
                apns.syncShutdown()
            }
        )
    }

    static func outbox(endpoint: String?) -> MemoryOutbox {
        let outbox = MemoryOutbox()
        outbox.state.withLock {
            $0.settings["app"] = DeliverySettings(
                webhook: endpoint.map { WebhookEndpoint(url: $0, secret: secret) }, apns: nil, webhookDisabled: false)
        }
        return outbox
    }

    @Test("a due webhook is sent signed, under its id, and recorded delivered")
    func delivered() async throws {
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        let outbox = Self.outbox(endpoint: receiver.url("/hook"))
        let id = outbox.add(appID: "app", payload: json(#"{"body": {"n": 1}}"#))
        let (_, stop) = Self.worker(outbox)
        #expect(await eventually(within: 10) { outbox.finished.count == 1 })
        stop(.seconds(1))

        #expect(outbox.finished.map(\.result) == [.delivered(httpStatus: 200)])
        #expect(outbox.row(id)?.status == .delivered)
        let request = try #require(receiver.requests.first)
        #expect(receiver.count == 1)
        #expect(request.webhookID == id.lowercasedString)
        #expect(request.bodyText == #"{"n":1}"#)
        #expect(WebhookReceiver.signatureIsValid(request, secret: Self.secret))
    }

    @Test("a failure is recorded with the wait before its retry, and is not sent again before then")
    func retried() async throws {
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        receiver.script(statuses: [500])
        let outbox = Self.outbox(endpoint: receiver.url("/hook"))
        let id = outbox.add(appID: "app", payload: json(#"{"body": {}}"#))
        let (_, stop) = Self.worker(outbox)
        #expect(await eventually(within: 10) { outbox.finished.count == 1 })
        stop(.seconds(1))

        #expect(
            outbox.finished.map(\.result) == [
                .failed(httpStatus: 500, errorClass: "http_500", retryAfterMilliseconds: 60_000)
            ])
        let row = try #require(outbox.row(id))
        #expect(row.status == .queued)
        #expect(row.claim.dueAt == outbox.finished[0].startedAt.addingTimeInterval(60))
        #expect(receiver.count == 1)
    }

    @Test("a follow-up of a deleted app is recorded dead without a request")
    func appDeleted() async throws {
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        let outbox = MemoryOutbox()
        outbox.add(appID: "gone", payload: json(#"{"url": "\#(receiver.url("/hook"))", "body": {}}"#))
        let (_, stop) = Self.worker(outbox)
        #expect(await eventually(within: 10) { outbox.finished.count == 1 })
        stop(.seconds(1))

        #expect(
            outbox.finished.map(\.result) == [
                .failed(httpStatus: nil, errorClass: "app_deleted", retryAfterMilliseconds: nil)
            ])
        #expect(receiver.count == 0)
    }

    @Test("the app's endpoint answering 410 is disabled, and later follow-ups are not sent to it")
    func endpointGone() async throws {
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        receiver.script(statuses: [410])
        let outbox = Self.outbox(endpoint: receiver.url("/hook"))
        outbox.add(appID: "app", payload: json(#"{"body": {}}"#))
        let (worker, stop) = Self.worker(outbox)
        #expect(await eventually(within: 10) { outbox.finished.count == 1 })
        let later = outbox.add(appID: "app", payload: json(#"{"body": {}}"#))
        worker.wake()
        #expect(await eventually(within: 10) { outbox.finished.count == 2 })
        stop(.seconds(1))

        #expect(outbox.state.withLock { $0.disabledWebhooks } == ["app"])
        #expect(
            outbox.finished.map(\.result) == [
                .failed(httpStatus: 410, errorClass: "endpoint_gone", retryAfterMilliseconds: nil),
                .failed(httpStatus: nil, errorClass: "endpoint_disabled", retryAfterMilliseconds: nil),
            ])
        #expect(outbox.finished.last?.claim.id == later)
        #expect(receiver.count == 1)
    }

    @Test("a stop with a send still open gives its claim back instead of recording it")
    func stopReleases() async throws {
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        receiver.script([.held])
        let outbox = Self.outbox(endpoint: receiver.url("/hook"))
        let id = outbox.add(appID: "app", payload: json(#"{"body": {}}"#))
        let (_, stop) = Self.worker(outbox)
        #expect(await eventually(within: 10) { receiver.count == 1 })
        stop(.zero)

        #expect(outbox.released == [id])
        #expect(outbox.finished.isEmpty)
        #expect(outbox.row(id)?.status == .queued)
    }

    @Test("an attempt the database could not record is kept and recorded once it answers, not sent again")
    func recordedLater() async throws {
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        let outbox = Self.outbox(endpoint: receiver.url("/hook"))
        outbox.state.withLock { $0.unavailableFinishes = 2 }
        let id = outbox.add(appID: "app", payload: json(#"{"body": {}}"#))
        let (_, stop) = Self.worker(outbox)
        #expect(await eventually(within: 10) { outbox.finished.count == 1 })
        stop(.seconds(1))

        #expect(outbox.state.withLock { $0.finishCalls } == 3)
        #expect(outbox.finished.map(\.claim.id) == [id])
        #expect(outbox.row(id)?.status == .delivered)
        #expect(receiver.count == 1)
    }

    @Test(
        "a claim whose app's settings the database could not give is held and sent once it answers: no failed attempt, no step of the retry schedule spent"
    )
    func plannedLater() async throws {
        let receiver = try WebhookReceiver()
        defer { receiver.stop() }
        let outbox = Self.outbox(endpoint: receiver.url("/hook"))
        outbox.state.withLock { $0.unavailableSettings = 2 }
        let id = outbox.add(appID: "app", payload: json(#"{"body": {}}"#))
        let (_, stop) = Self.worker(outbox)
        #expect(await eventually(within: 10) { outbox.finished.count == 1 })
        stop(.seconds(1))

        #expect(outbox.state.withLock { $0.settingsReads } == 3)
        #expect(outbox.finished.map(\.claim.id) == [id])
        #expect(outbox.finished.map(\.claim.attempt) == [1])
        #expect(outbox.finished.map(\.result) == [.delivered(httpStatus: 200)])
        #expect(outbox.row(id)?.status == .delivered)
        #expect(receiver.count == 1)
    }
}

extension OutboxWorkerTests {
    /// Provider tokens whose first `awayFor` lookups go to the database's store while the database is away (a
    /// pool on a closed port), and the rest to tokens kept in this process: the database coming back.
    final class TokensBack: SharedProviderTokens {
        let away: APNsTokenStore
        let back = LocalProviderTokens()
        let lookups = Mutex(0)
        let awayFor: Int

        init(awayFor: Int) {
            away = APNsTokenStore(
                pool: PostgresPool(
                    configuration: PostgresConfiguration(connectionString: "postgresql://127.0.0.1:1/nothing"), size: 1,
                    acquireTimeoutMilliseconds: 100))
            self.awayFor = awayFor
        }

        func token(for key: APNsSigningKey, at now: Int, refused: String?) throws -> (
            token: APNsProviderToken, signed: Bool
        ) {
            let lookup = lookups.withLock {
                $0 += 1
                return $0
            }
            let tokens: any SharedProviderTokens = lookup <= awayFor ? away : back
            return try tokens.token(for: key, at: now, refused: refused)
        }
    }

    /// A worker over an outbox holding one push, whose first `tokensAwayFor` provider-token lookups find the
    /// database away; the APNs stand-in, the tokens, the outbox, the push's device and id, and how to stop.
    static func heldPush(tokensAwayFor: Int) throws -> (
        APNsStandIn, TokensBack, MemoryOutbox, device: String, id: UUID, stop: @Sendable (Duration) -> Void
    ) {
        let standIn = try APNsStandIn()
        let tokens = TokensBack(awayFor: tokensAwayFor)
        let apns = APNsSender(endpoints: .init(overrideURL: standIn.baseURL, caFile: standIn.caFile), tokens: tokens)
        let outbox = MemoryOutbox()
        outbox.state.withLock {
            $0.settings["app"] = DeliverySettings(webhook: nil, apns: standIn.credentials, webhookDisabled: false)
        }
        let device = APNsStandIn.deviceToken()
        let id = outbox.add(appID: "app", channel: .apns, payload: APNsDeliveryTests.apnsPayload(device, "held"))
        let (_, stop) = Self.worker(outbox, apns: apns)
        return (standIn, tokens, outbox, device, id, stop)
    }

    @Test(
        "a push whose provider token the database could not give is held and sent once it answers: no failed attempt, no step of the retry schedule spent"
    )
    func pushHeldWhileTokensAway() async throws {
        let (standIn, tokens, outbox, device, id, stop) = try Self.heldPush(tokensAwayFor: 2)
        #expect(await eventually(within: 15) { outbox.finished.count == 1 })
        stop(.seconds(1))

        #expect(tokens.lookups.withLock { $0 } == 3)
        #expect(outbox.finished.map(\.claim.id) == [id])
        #expect(outbox.finished.map(\.claim.attempt) == [1])
        #expect(outbox.finished.map(\.result) == [.delivered(httpStatus: 200)])
        #expect(outbox.row(id)?.status == .delivered)
        #expect(try standIn.requests(token: device).map(\.status) == [200])
    }

    @Test("a stop while a push is held gives it back uncounted: its next claim has the same attempt number")
    func heldPushReleasedUncounted() async throws {
        let (standIn, tokens, outbox, device, id, stop) = try Self.heldPush(tokensAwayFor: .max)
        #expect(await eventually(within: 10) { tokens.lookups.withLock { $0 } >= 2 })
        stop(.seconds(1))

        #expect(outbox.finished.isEmpty)
        #expect(outbox.state.withLock { $0.releasedUnsent } == [id])
        #expect(outbox.row(id)?.status == .queued)
        #expect(outbox.row(id)?.claim.attempt == 0)
        #expect(try standIn.requests(token: device).isEmpty)
    }
}

/// Parses JSON text written in a test.
private func json(_ text: String) -> JSONValue {
    try! JSONParser.parse(text)
}
