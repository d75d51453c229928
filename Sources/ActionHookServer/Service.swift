import ActionHookConsole
import ActionHookCore
import ActionHookDelivery
import ActionHookStore
import Foundation
import Locks
import Logging
import MicroHTTPD
import Postgres

/// The whole service in one process: the HTTP server and its routes over one database pool.
public final class ActionHookService: Sendable {
    /// The configuration the service runs with.
    public let configuration: Configuration
    /// The service's metrics.
    public let metrics: ServiceMetrics
    let logger: Logger
    let pool: PostgresPool
    let longPool: PostgresPool
    let server: HTTPServer
    let listener: PostgresListener
    /// The channels ``listener`` listens on: new follow-ups only when this instance runs a worker to wake.
    let listenedChannels: [String]
    let worker: OutboxWorker?
    let batcher: IngestBatcher
    let maintainer: PartitionMaintainer
    let purger: AppPurger
    let webhooks: WebhookSender
    let apns: APNsSender
    /// What ``start()`` started, for ``stop()`` to stop in the reverse order.
    let started = StartOrder()
    /// Every route as `METHOD pattern`, for checking the OpenAPI document against the router.
    public let routes: [String]

    /// Creates the service; nothing listens or connects until ``start()``.
    public init(configuration: Configuration, logger: Logger) {
        self.configuration = configuration
        self.logger = logger
        let metrics = ServiceMetrics()
        self.metrics = metrics
        // With a response deadline, a caller waits for a free connection no longer than for an answer.
        let pool = PostgresPool(
            configuration: configuration.database, size: configuration.poolSize,
            acquireTimeoutMilliseconds: configuration.database.responseDeadlineMilliseconds ?? 2000, logger: logger)
        self.pool = pool
        // Statements that may rightly run long (an erasure or export over a large app, the removal of a
        // deleted app's rows, partition maintenance) get up to the statement timeout and a second, instead
        // of the request paths' short deadline.
        var longRunning = configuration.database
        longRunning.responseDeadlineMilliseconds =
            configuration.database.responseDeadlineMilliseconds.map {
                max($0, (configuration.database.statementTimeoutMilliseconds ?? 5000) + 1000)
            }
        let longPool = PostgresPool(configuration: longRunning, size: 2, logger: logger)
        self.longPool = longPool

        let cache = AppCache()
        let deviceKeys = DeviceKeys()
        let purger = AppPurger(pool: longPool, logger: logger)
        self.purger = purger
        webhooks = WebhookSender(
            timeoutSeconds: configuration.webhookTimeoutSeconds, allowPrivate: configuration.allowPrivateWebhooks,
            connectionsPerHost: configuration.worker.concurrency)
        // One provider token per signing key for every instance: APNs refuses a new token for a key more
        // often than every 20 minutes.
        apns = APNsSender(
            endpoints: .init(
                overrideURL: configuration.apnsURL, sandboxURL: configuration.apnsSandboxURL,
                caFile: configuration.apnsCAFile),
            tokens: APNsTokenStore(pool: pool), connections: configuration.apnsConnections)
        let worker =
            configuration.workerEnabled
            ? OutboxWorker(
                outbox: OutboxStore(pool: pool), webhooks: webhooks, apns: apns,
                configuration: configuration.worker, observer: metrics, logger: logger) : nil
        self.worker = worker
        // Every batch of replies with follow-ups notifies; an instance without a worker would be woken by each
        // for nothing (and the database would send each to it).
        let channels =
            [Channels.invalidate, Channels.appDeleted, Channels.deviceKeys]
            + (worker == nil ? [] : [Channels.followUps])
        listenedChannels = channels
        listener = PostgresListener(
            configuration: configuration.database,
            channels: channels,
            logger: logger,
            onNotification: { notification in
                if notification.channel == Channels.followUps {
                    worker?.wake()
                } else if notification.channel == Channels.appDeleted {
                    purger.wake()
                } else if notification.channel == Channels.deviceKeys {
                    deviceKeys.invalidate(announcement: notification.payload)
                } else {
                    cache.invalidate(appID: notification.payload)
                    worker?.invalidate(appID: notification.payload)
                }
            },
            onReconnect: {
                cache.invalidateAll()
                deviceKeys.invalidate(announcement: nil)
                worker?.invalidate(appID: nil)
                worker?.wake()
                purger.wake()
            })

        var router = Router()
        OperationsRoutes(pool: pool, metrics: metrics, logger: logger).register(in: &router)
        let idempotencyWindow = Duration.seconds(configuration.idempotencyTTLHours * 3600)
        var retention = configuration.retention
        retention.idempotencyWindowSeconds = configuration.idempotencyTTLHours * 3600
        maintainer = PartitionMaintainer(
            pool: longPool, policy: retention, logger: logger, onReport: metrics.maintenanceRan)
        let batcher = IngestBatcher(
            writer: IngestWriter(pool: pool, idempotencyWindow: idempotencyWindow),
            writers: configuration.ingestWriters,
            maxBatch: configuration.ingestBatchMax,
            answerDeadline: configuration.ingestDeadlineMilliseconds.map { .milliseconds($0) },
            observer: metrics.ingestBatchWritten)
        self.batcher = batcher
        let api = APIContext(
            pool: pool, longPool: longPool, configuration: configuration, cache: cache, deviceKeys: deviceKeys,
            batcher: batcher,
            metrics: metrics, logger: logger)
        api.registerIngestRoutes(in: &router)
        api.registerAppRoutes(in: &router)
        api.registerCategoryRoutes(in: &router)
        api.registerRuleRoutes(in: &router)
        api.registerConfigurationRoutes(in: &router)
        api.registerHistoryRoutes(in: &router)
        api.registerNotificationRoutes(in: &router)
        api.registerStatsRoutes(in: &router)
        Console().register(in: &router)
        routes = router.routes.map { "\($0.method.rawValue) \($0.pattern)" }
        server = HTTPServer(configuration: configuration.http, router: router, logger: logger, observer: metrics)
    }

    deinit {
        // A service dropped without stop() (one made only to list its routes, say) still owns HTTP
        // clients, and AsyncHTTPClient traps in debug builds when one is released without being shut
        // down. After stop() the clients are shut down already and these calls only find that out.
        webhooks.syncShutdown()
        apns.syncShutdown()
    }

    /// The port the HTTP server listens on.
    public var port: Int { server.port }

    /// Applies pending migrations.
    @discardableResult
    public func migrate() throws -> [Int] {
        // A migration may rightly run for minutes (building an index, validating a constraint): it
        // gets a connection without the response deadline that request paths have.
        var database = configuration.database
        database.responseDeadlineMilliseconds = nil
        let migrationPool = PostgresPool(configuration: database, size: 1, logger: logger)
        defer { migrationPool.close() }
        return try Migrator(pool: migrationPool, logger: logger).migrate()
    }

    /// Starts serving HTTP.
    public func start() throws {
        let grace = Duration.seconds(configuration.shutdownGraceSeconds)
        started.start(listener.start, stop: listener.stop)
        started.start(batcher.start, stop: batcher.stop)
        if let worker { started.start(worker.start, stop: { worker.stop(gracePeriod: grace) }) }
        started.start(maintainer.start, stop: maintainer.stop)
        started.start(purger.start, stop: purger.stop)
        try started.start(server.start, stop: { [server] in server.stop(gracePeriod: grace) })
    }

    /// Stops gracefully, in the reverse order of the start: no new connections and in-flight requests
    /// finish first, then each loop; then the pools close.
    public func stop() {
        started.stopAll()
        // Blocking here on a Task would deadlock when the callers of stop() occupy every thread of the
        // concurrency pool (parallel tests on a 2-core machine); the synchronous shutdowns need none of them.
        webhooks.syncShutdown()
        apns.syncShutdown()
        pool.close()
        longPool.close()
        logger.info("stopped")
    }
}
