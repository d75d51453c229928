import ActionHookCore
import ActionHookStore
import Basics
import Foundation
import Locks
import Logging
import MicroHTTPD
import Postgres

/// What every API route needs: the stores, authentication, caches, limits and error mapping.
struct APIContext: Sendable {
    let apps: AppStore
    let categories: CategoryStore
    let rules: RuleStore
    let configurations: ConfigurationStore
    let responses: ResponseStore
    /// The same store over the pool for statements that may rightly run long (erasure, export).
    let longResponses: ResponseStore
    let followUps: FollowUpStore
    let notifications: NotificationStore
    let devices: DeviceStore
    let sendLimits = SendLimits()
    let adminTokens: AdminTokenStore
    let stats: StatsStore
    let auth: Authenticator
    /// The users phones prove with their user tokens.
    let identities = UserIdentities()
    /// The devices' reply-signing keys.
    let deviceKeys: DeviceKeys
    let cache: AppCache
    let limits: IngestLimits
    let rateLimits: IngestRateLimits
    let errors: ErrorMapper
    let allowPrivateWebhooks: Bool
    let batcher: IngestBatcher
    /// How far `respondedAt` may lie ahead of the server's clock.
    let clockSkewSeconds: Int
    /// How long an idempotency key is kept: no app may keep its replies for less.
    let idempotencyTTLHours: Int
    let metrics: ServiceMetrics
    let logger: Logger

    init(
        pool: PostgresPool, longPool: PostgresPool, configuration: Configuration, cache: AppCache,
        deviceKeys: DeviceKeys, batcher: IngestBatcher,
        metrics: ServiceMetrics, logger: Logger
    ) {
        self.batcher = batcher
        self.metrics = metrics
        self.logger = logger
        clockSkewSeconds = configuration.clockSkewSeconds
        idempotencyTTLHours = configuration.idempotencyTTLHours
        apps = AppStore(pool: pool)
        categories = CategoryStore(pool: pool)
        rules = RuleStore(pool: pool)
        configurations = ConfigurationStore(pool: pool)
        responses = ResponseStore(pool: pool)
        longResponses = ResponseStore(pool: longPool)
        followUps = FollowUpStore(pool: pool)
        notifications = NotificationStore(pool: pool)
        devices = DeviceStore(pool: pool)
        adminTokens = AdminTokenStore(pool: pool)
        stats = StatsStore(pool: pool)
        self.cache = cache
        self.deviceKeys = deviceKeys
        auth = Authenticator(
            bootstrapToken: configuration.adminToken, adminTokens: adminTokens, apps: apps, cache: cache)
        limits = IngestLimits()
        rateLimits = IngestRateLimits(
            appPerSecond: configuration.rateLimitPerSecond, devicePerSecond: configuration.deviceRateLimitPerSecond)
        errors = ErrorMapper(logger: logger)
        allowPrivateWebhooks = configuration.allowPrivateWebhooks
    }

    /// Refuses webhook URLs aimed at this machine or a private network (422), unless allowed.
    func checkWebhookTargets(_ urls: [(pointer: String, url: String?)]) throws {
        let refused = urls.compactMap { entry -> FieldError? in
            guard let url = entry.url, !WebhookURL.isAllowedTarget(url, allowPrivate: allowPrivateWebhooks) else {
                return nil
            }
            return FieldError(pointer: entry.pointer, detail: WebhookURL.refusedTargetDetail)
        }
        if !refused.isEmpty { throw ValidationFailure.invalid(refused) }
    }

    /// A handler whose thrown errors become problem responses.
    func endpoint(_ body: @escaping @Sendable (HTTPRequest) throws -> HTTPResponse)
        -> @Sendable (HTTPRequest)
        -> HTTPResponse
    {
        { request in
            do {
                return try body(request)
            } catch {
                return errors.response(for: error, request: request)
            }
        }
    }

    /// A handler for admin routes: the admin token is checked first.
    func admin(_ body: @escaping @Sendable (HTTPRequest) throws -> HTTPResponse)
        -> @Sendable (HTTPRequest)
        -> HTTPResponse
    {
        endpoint { request in
            try auth.requireAdmin(request)
            return try body(request)
        }
    }

    /// A handler for routes under `/v1/apps/{app}`: admin token, then the app must exist (404 otherwise).
    func appAdmin(_ body: @escaping @Sendable (HTTPRequest, String) throws -> HTTPResponse)
        -> @Sendable (HTTPRequest)
        -> HTTPResponse
    {
        admin { request in
            let appID = request.parameter("app")
            guard Slug.isValid(appID), try apps.app(appID) != nil else { throw APIError.notFound("app") }
            return try body(request, appID)
        }
    }

    /// The app's rules and categories, from the cache.
    func ruleSet(appID: String) throws -> AppCache.Rules {
        try cache.rules(appID: appID) {
            AppCache.Rules(
                rules: try rules.all(appID: appID).sorted(by: RuleEngine.precedes),
                categories: try categories.all(appID: appID))
        }
    }
}

/// Per-app and per-device token buckets for ingest, on this instance.
final class IngestRateLimits: Sendable {
    let appPerSecond: Int
    let devicePerSecond: Int
    /// An app's bucket, or one device's within an app.
    private enum Key: Hashable, Sendable {
        case app(String)
        case device(app: String, token: String)
    }

    private let limiter = Locked(RateLimiter<Key>())
    private let start = ContinuousClock.now

    init(appPerSecond: Int, devicePerSecond: Int) {
        self.appPerSecond = appPerSecond
        self.devicePerSecond = devicePerSecond
    }

    /// Throws 429 with `Retry-After` when the app or the device is over its rate.
    func check(appID: String, appRate: Int?, deviceToken: String?) throws {
        let elapsed = ContinuousClock.now - start
        let now = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
        let rate = Double(appRate ?? appPerSecond)
        let wait = limiter.withLock { limiter -> Double? in
            if let wait = limiter.acquire(.app(appID), rate: rate, burst: max(1, rate * 2), now: now) {
                return wait
            }
            guard let deviceToken else { return nil }
            let deviceRate = Double(devicePerSecond)
            return limiter.acquire(
                .device(app: appID, token: deviceToken), rate: deviceRate, burst: max(1, deviceRate * 2), now: now)
        }
        if let wait { throw APIError.tooManyRequests(retryAfter: max(1, Int(wait.rounded(.up)))) }
    }
}
