import ActionHookCore
import ActionHookDelivery
import ActionHookStore
import CoreMetrics
import Foundation
import Locks
import MicroHTTPD
import Prometheus

/// The service's metrics, on a registry of its own so that several services (tests) can run in
/// one process, exported in Prometheus text format.
public final class ServiceMetrics: HTTPServerObserver, Sendable {
    /// The registry the `/metrics` route renders.
    public let registry: PrometheusCollectorRegistry
    let factory: PrometheusMetricsFactory
    private let ingestBatchSize: CoreMetrics.Recorder
    private let ingestBatchDuration: CoreMetrics.Timer

    /// The request counter and timer for each method, route and status seen, found with one lookup.
    private let requestMetrics = Locked([RequestKey: RequestMetrics]())

    private struct RequestKey: Hashable {
        var method: HTTPMethod
        var route: String
        var status: Int
    }

    private struct RequestMetrics {
        var counter: CoreMetrics.Counter
        var timer: CoreMetrics.Timer
    }

    /// Creates the metrics with a fresh registry.
    public init() {
        registry = PrometheusCollectorRegistry()
        var factory = PrometheusMetricsFactory(registry: registry)
        factory.defaultDurationHistogramBuckets = [
            .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2), .milliseconds(5),
            .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250),
            .milliseconds(500), .seconds(1), .seconds(2.5), .seconds(5),
        ]
        factory.valueHistogramBuckets["actionhook_ingest_batch_size"] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512]
        // Time to answer a sent notification: seconds to a day.
        factory.valueHistogramBuckets["actionhook_notification_answer_seconds"] = [
            1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400,
        ]
        self.factory = factory
        ingestBatchSize = CoreMetrics.Recorder(
            label: "actionhook_ingest_batch_size", dimensions: [], aggregate: true, factory: factory)
        ingestBatchDuration = CoreMetrics.Timer(label: "actionhook_ingest_batch_duration_seconds", factory: factory)
    }

    /// Records one group-commit batch: its size and how long writing it took.
    @Sendable public func ingestBatchWritten(size: Int, duration: Duration) {
        ingestBatchSize.record(size)
        ingestBatchDuration.recordNanoseconds(duration.nanoseconds)
    }

    /// Counts a request by route and status, and times it by route.
    public func requestFinished(method: HTTPMethod, route: String, status: Int, duration: Duration) {
        let key = RequestKey(method: method, route: route, status: status)
        let metrics = requestMetrics.withLock { all in
            if let existing = all[key] { return existing }
            // The timer is per method and route; the registry hands back the one already made.
            let created = RequestMetrics(
                counter: CoreMetrics.Counter(
                    label: "actionhook_http_requests_total",
                    dimensions: [("method", method.rawValue), ("route", route), ("status", String(status))],
                    factory: factory),
                timer: CoreMetrics.Timer(
                    label: "actionhook_http_request_duration_seconds",
                    dimensions: [("method", method.rawValue), ("route", route)], factory: factory))
            all[key] = created
            return created
        }
        metrics.counter.increment()
        metrics.timer.recordNanoseconds(duration.nanoseconds)
    }

    /// A gauge on this registry.
    public func gauge(_ label: String, dimensions: [(String, String)] = []) -> CoreMetrics.Gauge {
        CoreMetrics.Gauge(label: label, dimensions: dimensions, factory: factory)
    }

    /// A counter on this registry.
    public func counter(_ label: String, dimensions: [(String, String)] = []) -> CoreMetrics.Counter {
        CoreMetrics.Counter(label: label, dimensions: dimensions, factory: factory)
    }

    /// The Prometheus text exposition of every metric.
    public func render() -> [UInt8] {
        var buffer: [UInt8] = []
        buffer.reserveCapacity(16 * 1024)
        registry.emit(into: &buffer)
        return buffer
    }
}

extension ServiceMetrics {
    /// Counts a reply stored as `expired` (older than its age limit), by app and category.
    public func replyExpired(appID: String, category: String) {
        counter("actionhook_replies_expired_total", dimensions: [("app", appID), ("category", category)])
            .increment()
    }
}

extension ServiceMetrics {
    /// Counts a signed reply's check, by app and result: `valid`, or the reason it is `invalid`
    /// (``SignatureRefusal``: `unknownKey`, `badSignature`, …).
    public func replySignatureChecked(appID: String, result: String) {
        counter("actionhook_reply_signatures_total", dimensions: [("app", appID), ("result", result)]).increment()
    }

    /// Counts a reply stored as `unverified` (a signature was required and it had no valid one), by app and
    /// category.
    public func replyUnverified(appID: String, category: String) {
        counter("actionhook_replies_unverified_total", dimensions: [("app", appID), ("category", category)])
            .increment()
    }
}

extension ServiceMetrics {
    /// Counts a send and the pushes it queued, by app.
    public func notificationSent(appID: String, devices: Int) {
        counter("actionhook_notifications_sent_total", dimensions: [("app", appID)]).increment()
        counter("actionhook_notification_pushes_total", dimensions: [("app", appID)]).increment(by: devices)
    }

    /// Counts the first answer to a sent notification and records the time from the send, by category
    /// (one of the app's, else `other`).
    public func notificationAnswered(appID: String, category: String, seconds: Double) {
        counter("actionhook_notifications_answered_total", dimensions: [("app", appID), ("category", category)])
            .increment()
        CoreMetrics.Recorder(
            label: "actionhook_notification_answer_seconds", dimensions: [("category", category)], aggregate: true,
            factory: factory
        ).record(max(0, seconds))
    }
}

extension ServiceMetrics: DeliveryObserver {
    /// Counts attempts by channel and result and times delivery latency (due → done) by channel.
    public func attemptFinished(channel: FollowUpChannel, result: DeliveryResultLabel, latency: Double) {
        counter(
            "actionhook_deliveries_total", dimensions: [("channel", channel.rawValue), ("result", result.rawValue)]
        )
        .increment()
        CoreMetrics.Timer(
            label: "actionhook_delivery_latency_seconds", dimensions: [("channel", channel.rawValue)], factory: factory
        ).recordNanoseconds(Int64(max(0, latency) * 1e9))
    }

    /// Counts the worker's looks at the queue (claims), with and without work found.
    public func claimed(count: Int) {
        counter("actionhook_outbox_claims_total", dimensions: [("found", count > 0 ? "work" : "none")]).increment()
    }

    /// Records the queue depth and the age of the oldest due follow-up.
    public func queueObserved(due: Int, oldestDueAge: Double) {
        gauge("actionhook_outbox_due").record(due)
        gauge("actionhook_outbox_oldest_due_age_seconds").record(oldestDueAge)
    }
}

extension Duration {
    /// The duration in whole nanoseconds, saturating.
    var nanoseconds: Int64 {
        let (seconds, attoseconds) = components
        let (product, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        return overflow ? Int64.max : product + attoseconds / 1_000_000_000
    }
}

extension ServiceMetrics {
    /// Records a partition maintenance run of this instance: partitions kept and the start of the oldest
    /// by table, partitions dropped and rows deleted for shorter app retention, and when it last ran.
    /// A run another instance held the lock for changes nothing here.
    @Sendable public func maintenanceRan(_ report: MaintenanceReport) {
        guard report.ran else { return }
        for table in PartitionMaintainer.tables {
            gauge("actionhook_partitions", dimensions: [("table", table)]).record(report.partitions[table] ?? 0)
            if let oldest = report.oldest[table] {
                gauge("actionhook_partition_oldest_timestamp_seconds", dimensions: [("table", table)])
                    .record(oldest.timeIntervalSince1970)
            }
        }
        for (table, count) in report.dropped {
            counter("actionhook_partitions_dropped_total", dimensions: [("table", table)]).increment(by: count)
        }
        for (table, count) in report.deleted {
            counter("actionhook_retention_rows_deleted_total", dimensions: [("table", table)]).increment(by: count)
        }
        gauge("actionhook_partition_maintenance_last_run_timestamp_seconds").record(Date().timeIntervalSince1970)
    }
}
