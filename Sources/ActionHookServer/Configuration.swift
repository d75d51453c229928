import ActionHookCore
import ActionHookDelivery
import ActionHookStore
import Foundation
import Logging
import MicroHTTPD
import Postgres

/// Everything the service reads from its environment, validated at start-up.
public struct Configuration: Sendable {
    /// How the HTTP server listens.
    public var http: HTTPServerConfiguration
    /// How to reach PostgreSQL.
    public var database: PostgresConfiguration
    /// Database connections in the pool; defaults to ``defaultPoolSize(httpThreads:ingestWriters:)``.
    public var poolSize: Int
    /// The bootstrap admin token, if configured.
    public var adminToken: String?
    /// The log level.
    public var logLevel: Logger.Level
    /// The log format.
    public var logFormat: LogFormat
    /// Seconds a graceful stop waits for in-flight requests.
    public var shutdownGraceSeconds: Int
    /// Ingest requests per second per app (per instance) unless the app sets its own.
    public var rateLimitPerSecond: Int
    /// Ingest requests per second per device token (per instance).
    public var deviceRateLimitPerSecond: Int
    /// Threads writing ingested responses (each commits one batch at a time).
    public var ingestWriters: Int
    /// The most responses one ingest transaction holds.
    public var ingestBatchMax: Int
    /// How far a reply's `respondedAt` may lie ahead of the server's clock (the device's clock runs
    /// fast) before it is refused with 422, in seconds.
    public var clockSkewSeconds: Int = 300
    /// How long an idempotency key is kept, in hours; after that the same key is a new request.
    public var idempotencyTTLHours: Int = 24
    /// How history is partitioned and how long it is kept.
    public var retention = RetentionPolicy()
    /// The longest an ingest request waits for its transaction before it is answered 503 with
    /// `Retry-After` (the database is stopped or unreachable), in milliseconds; `nil`: no bound.
    public var ingestDeadlineMilliseconds: Int?
    /// Whether this instance runs the delivery worker.
    public var workerEnabled: Bool
    /// How the delivery worker paces itself and retries.
    public var worker: WorkerConfiguration
    /// Seconds a webhook delivery may take.
    public var webhookTimeoutSeconds: Int
    /// Whether webhooks may target loopback, private and link-local addresses (local development).
    public var allowPrivateWebhooks: Bool
    /// APNs base URL override (both environments).
    public var apnsURL: String?
    /// APNs base URL override for the sandbox environment alone (`ACTIONHOOK_APNS_SANDBOX_URL`).
    public var apnsSandboxURL: String?
    /// An extra CA (PEM file) trusted for APNs connections.
    public var apnsCAFile: String?
    /// The HTTP/2 connections kept to APNs per app and environment (``APNsSender/defaultConnections``).
    public var apnsConnections = APNsSender.defaultConnections

    /// How log lines are written.
    public enum LogFormat: String, Sendable {
        case text
        case json
    }

    /// Creates a configuration from explicit values (tests use this).
    public init(
        http: HTTPServerConfiguration = HTTPServerConfiguration(), database: PostgresConfiguration,
        poolSize: Int? = nil, adminToken: String? = nil, logLevel: Logger.Level = .info, logFormat: LogFormat = .text,
        shutdownGraceSeconds: Int = 10, rateLimitPerSecond: Int = 1000, deviceRateLimitPerSecond: Int = 10,
        ingestWriters: Int = 2, ingestBatchMax: Int = 128, workerEnabled: Bool = true,
        worker: WorkerConfiguration = WorkerConfiguration(), webhookTimeoutSeconds: Int = 10,
        allowPrivateWebhooks: Bool = false, apnsURL: String? = nil, apnsCAFile: String? = nil,
        ingestDeadlineMilliseconds: Int? = nil
    ) {
        self.ingestDeadlineMilliseconds = ingestDeadlineMilliseconds
        self.workerEnabled = workerEnabled
        self.ingestWriters = ingestWriters
        self.ingestBatchMax = ingestBatchMax
        self.worker = worker
        self.webhookTimeoutSeconds = webhookTimeoutSeconds
        self.allowPrivateWebhooks = allowPrivateWebhooks
        self.apnsURL = apnsURL
        self.apnsCAFile = apnsCAFile
        self.rateLimitPerSecond = rateLimitPerSecond
        self.deviceRateLimitPerSecond = deviceRateLimitPerSecond
        self.http = http
        self.database = database
        self.poolSize = poolSize ?? Self.defaultPoolSize(httpThreads: http.threads, ingestWriters: ingestWriters)
        self.adminToken = adminToken
        self.logLevel = logLevel
        self.logFormat = logFormat
        self.shutdownGraceSeconds = shutdownGraceSeconds
    }

    /// Reads the configuration from environment variables; see the table in docs/configuration.md.
    ///
    /// A bad value throws an error that names the variable and never repeats its value.
    public static func fromEnvironment(_ environment: [String: String]) throws(ConfigurationError) -> Configuration {
        let reader = EnvironmentReader(environment: environment)
        var http = HTTPServerConfiguration()
        http.host = try reader.string("ACTIONHOOK_HOST", default: http.host) { address in
            address.contains(":") || address.split(separator: ".").count == 4
        }
        http.port = try reader.integer("ACTIONHOOK_PORT", default: http.port, in: 0...65535)
        http.threads = try reader.integer("ACTIONHOOK_HTTP_THREADS", default: http.threads, in: 2...256)
        http.connectionTimeoutSeconds = try reader.integer(
            "ACTIONHOOK_HTTP_CONNECTION_TIMEOUT", default: http.connectionTimeoutSeconds, in: 1...3600)
        http.connectionLimit = try reader.integer(
            "ACTIONHOOK_HTTP_MAX_CONNECTIONS", default: http.connectionLimit, in: 1...100_000)
        http.perIPConnectionLimit = try reader.integer(
            "ACTIONHOOK_HTTP_MAX_CONNECTIONS_PER_IP", default: http.perIPConnectionLimit, in: 0...100_000)
        http.connectionMemoryLimit = try reader.integer(
            "ACTIONHOOK_HTTP_CONNECTION_MEMORY", default: http.connectionMemoryLimit, in: 8192...16_777_216)
        http.defaultBodyLimit = try reader.integer(
            "ACTIONHOOK_MAX_BODY_BYTES", default: http.defaultBodyLimit, in: 1024...16_777_216)

        var database = PostgresConfiguration(connectionString: environment["DATABASE_URL"] ?? "")
        database.connectTimeoutSeconds = try reader.integer(
            "ACTIONHOOK_DB_CONNECT_TIMEOUT", default: database.connectTimeoutSeconds, in: 1...300)
        database.statementTimeoutMilliseconds = try reader.integer(
            "ACTIONHOOK_DB_STATEMENT_TIMEOUT_MS", default: database.statementTimeoutMilliseconds ?? 5000,
            in: 1...3_600_000)
        database.responseDeadlineMilliseconds = try reader.integer(
            "ACTIONHOOK_DB_DEADLINE_MS", default: 1000, in: 100...3_600_000)
        let ingestDeadline = try reader.integer("ACTIONHOOK_INGEST_DEADLINE_MS", default: 1500, in: 100...3_600_000)
        let ingestWriters = try reader.integer("ACTIONHOOK_INGEST_WRITERS", default: 2, in: 1...64)
        let poolSize = try reader.integer(
            "ACTIONHOOK_DB_POOL_SIZE",
            default: Self.defaultPoolSize(httpThreads: http.threads, ingestWriters: ingestWriters),
            in: 1...1000)

        let token = environment["ACTIONHOOK_ADMIN_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
        if let token, token.utf8.count < 16 {
            throw ConfigurationError(variable: "ACTIONHOOK_ADMIN_TOKEN", problem: "must be at least 16 characters")
        }
        let level = try reader.choice(
            "ACTIONHOOK_LOG_LEVEL", default: Logger.Level.info,
            choices: Dictionary(uniqueKeysWithValues: Logger.Level.allCases.map { ($0.rawValue, $0) }))
        let format = try reader.choice(
            "ACTIONHOOK_LOG_FORMAT", default: LogFormat.text, choices: ["text": .text, "json": .json])
        let grace = try reader.integer("ACTIONHOOK_SHUTDOWN_GRACE_SECONDS", default: 10, in: 0...600)
        let rate = try reader.integer("ACTIONHOOK_RATE_LIMIT_PER_SECOND", default: 1000, in: 1...10_000_000)
        let deviceRate = try reader.integer("ACTIONHOOK_DEVICE_RATE_LIMIT_PER_SECOND", default: 10, in: 1...10_000_000)
        let ingestBatchMax = try reader.integer("ACTIONHOOK_INGEST_BATCH_MAX", default: 128, in: 1...10_000)
        let clockSkew = try reader.integer("ACTIONHOOK_CLOCK_SKEW_SECONDS", default: 300, in: 0...86_400)
        let idempotencyTTL = try reader.integer("ACTIONHOOK_IDEMPOTENCY_TTL_HOURS", default: 24, in: 1...8760)
        let retentionDays = try reader.integer("ACTIONHOOK_RETENTION_DAYS", default: 30, in: 1...36_500)
        let partitionSeconds = try reader.partitionInterval("ACTIONHOOK_PARTITION_INTERVAL", default: 86_400)
        if idempotencyTTL > retentionDays * 24 {
            // A key kept longer than its reply could not replay it: the retry would be stored again.
            throw ConfigurationError(
                variable: "ACTIONHOOK_IDEMPOTENCY_TTL_HOURS",
                problem: "must not exceed ACTIONHOOK_RETENTION_DAYS in hours")
        }
        let workerEnabled = try reader.choice("ACTIONHOOK_WORKER", default: true, choices: ["1": true, "0": false])
        var worker = WorkerConfiguration()
        worker.concurrency = try reader.integer(
            "ACTIONHOOK_WORKER_CONCURRENCY", default: worker.concurrency, in: 1...10_000)
        worker.leaseSeconds = try reader.integer(
            "ACTIONHOOK_WORKER_LEASE_SECONDS", default: worker.leaseSeconds, in: 5...3600)
        worker.pollInterval = .milliseconds(
            try reader.integer("ACTIONHOOK_WORKER_POLL_MS", default: 1000, in: 10...60_000))
        if let text = environment["ACTIONHOOK_RETRY_SCHEDULE"], !text.isEmpty {
            guard let policy = RetryPolicy.parse(text) else {
                throw ConfigurationError(
                    variable: "ACTIONHOOK_RETRY_SCHEDULE", problem: "must be comma-separated seconds (at most 50)")
            }
            worker.retryPolicy = policy
        }
        let webhookTimeout = try reader.integer("ACTIONHOOK_WEBHOOK_TIMEOUT_SECONDS", default: 10, in: 1...120)
        let allowPrivate = try reader.choice(
            "ACTIONHOOK_ALLOW_PRIVATE_WEBHOOKS", default: false, choices: ["1": true, "0": false])
        func apnsBase(_ variable: String) throws(ConfigurationError) -> String? {
            guard let url = environment[variable].flatMap({ $0.isEmpty ? nil : $0 }) else { return nil }
            guard let scheme = URLComponents(string: url)?.scheme?.lowercased(), ["https", "http"].contains(scheme)
            else {
                throw ConfigurationError(variable: variable, problem: "must be an https URL")
            }
            return url.hasSuffix("/") ? String(url.dropLast()) : url
        }
        let apnsURL = try apnsBase("ACTIONHOOK_APNS_URL")
        let apnsSandboxURL = try apnsBase("ACTIONHOOK_APNS_SANDBOX_URL")
        let apnsCAFile = try environment["ACTIONHOOK_APNS_CA_FILE"].flatMap { $0.isEmpty ? nil : $0 }.map {
            path throws(ConfigurationError) in
            guard FileManager.default.isReadableFile(atPath: path) else {
                throw ConfigurationError(variable: "ACTIONHOOK_APNS_CA_FILE", problem: "must name a readable PEM file")
            }
            return path
        }

        var configuration = Configuration(
            http: http, database: database, poolSize: poolSize, adminToken: token, logLevel: level, logFormat: format,
            shutdownGraceSeconds: grace, rateLimitPerSecond: rate, deviceRateLimitPerSecond: deviceRate,
            ingestWriters: ingestWriters, ingestBatchMax: ingestBatchMax, workerEnabled: workerEnabled, worker: worker,
            webhookTimeoutSeconds: webhookTimeout,
            allowPrivateWebhooks: allowPrivate, apnsURL: apnsURL, apnsCAFile: apnsCAFile,
            ingestDeadlineMilliseconds: ingestDeadline)
        configuration.apnsSandboxURL = apnsSandboxURL
        configuration.apnsConnections = try reader.integer(
            "ACTIONHOOK_APNS_CONNECTIONS", default: APNsSender.defaultConnections, in: 1...64)
        configuration.clockSkewSeconds = clockSkew
        configuration.idempotencyTTLHours = idempotencyTTL
        configuration.retention = RetentionPolicy(partitionSeconds: partitionSeconds, retentionDays: retentionDays)
        return configuration
    }
}

/// A configuration variable with a bad value. The value itself is never repeated.
public struct ConfigurationError: Error, CustomStringConvertible, Equatable {
    /// The variable's name.
    public let variable: String
    /// What is wrong with it.
    public let problem: String

    /// `ACTIONHOOK_PORT: must be an integer in 0...65535`
    public var description: String { "\(variable): \(problem)" }
}

/// Reads typed values out of the environment.
struct EnvironmentReader {
    let environment: [String: String]

    func integer(_ name: String, default value: Int, in range: ClosedRange<Int>) throws(ConfigurationError) -> Int {
        guard let text = environment[name], !text.isEmpty else { return value }
        guard let parsed = Int(text.trimmingCharacters(in: .whitespaces)), range.contains(parsed) else {
            throw ConfigurationError(
                variable: name, problem: "must be an integer in \(range.lowerBound)...\(range.upperBound)")
        }
        return parsed
    }

    /// A partition width: whole hours (`6h`) or days (`1d`), from an hour to 31 days; in seconds.
    func partitionInterval(_ name: String, default value: Int) throws(ConfigurationError) -> Int {
        guard let text = environment[name]?.trimmingCharacters(in: .whitespaces).lowercased(), !text.isEmpty else {
            return value
        }
        let unit = text.last.flatMap { ["h": 3600, "d": 86_400][$0] }
        guard let unit, let count = Int(text.dropLast()), count > 0, count * unit <= 31 * 86_400 else {
            throw ConfigurationError(variable: name, problem: "must be whole hours or days, e.g. 1d or 6h, up to 31d")
        }
        return count * unit
    }

    func string(_ name: String, default value: String, valid: (String) -> Bool) throws(ConfigurationError) -> String {
        guard let text = environment[name], !text.isEmpty else { return value }
        guard valid(text) else { throw ConfigurationError(variable: name, problem: "is not a valid value") }
        return text
    }

    func choice<T>(_ name: String, default value: T, choices: [String: T]) throws(ConfigurationError) -> T {
        guard let text = environment[name], !text.isEmpty else { return value }
        guard let chosen = choices[text.lowercased()] else {
            throw ConfigurationError(
                variable: name, problem: "must be one of \(choices.keys.sorted().joined(separator: ", "))")
        }
        return chosen
    }
}

extension Configuration {
    /// The pool size when none is configured: every HTTP thread, every ingest writer and the delivery
    /// worker can hold a connection at once.
    public static func defaultPoolSize(httpThreads: Int, ingestWriters: Int) -> Int {
        httpThreads + ingestWriters + 1
    }
}
