import ActionHookCore
import Foundation
import Postgres

/// The period an app's statistics cover, and how finely their series is cut.
public enum StatsWindow: String, Sendable, CaseIterable {
    /// The last hour, in one-minute buckets.
    case hour = "1h"
    /// The last day, in fifteen-minute buckets.
    case day = "24h"

    /// The window's length in seconds.
    public var seconds: Int { self == .hour ? 3600 : 86400 }
    /// One bucket of the series, in seconds.
    public var bucketSeconds: Int { self == .hour ? 60 : 900 }
}

/// One bucket of an app's series: replies by outcome and the latency of the follow-ups delivered.
public struct StatsBucket: Sendable, Equatable {
    /// When the bucket starts.
    public var start: Date
    /// Replies received in the bucket, by outcome (outcomes without replies are absent).
    public var replies: [String: Int] = [:]
    /// Follow-ups created in the bucket that were delivered.
    public var delivered = 0
    /// Their mean latency from due to delivered, in milliseconds; `nil` without deliveries.
    public var latencyMsAverage: Int?
    /// Their largest latency from due to delivered, in milliseconds; `nil` without deliveries.
    public var latencyMsMax: Int?
}

/// An app's activity over a window.
public struct AppStats: Sendable {
    /// The window.
    public var window: StatsWindow
    /// The first instant covered.
    public var since: Date
    /// The instant after the last one covered (the end of the current bucket).
    public var until: Date
    /// Replies received in the window, by outcome; every outcome is present.
    public var replies: [String: Int]
    /// Follow-ups created in the window, by their status now; every status is present.
    public var followUps: [String: Int]
    /// The app's dead follow-ups, whenever they were created, counted up to ``StatsStore/deadLetterCountLimit``.
    public var deadLetters: Int
    /// The series, oldest bucket first, every bucket present.
    public var series: [StatsBucket]
}

/// Aggregates over an app's responses and follow-ups for the console's overview.
///
/// Every query reads one app's rows within the window through an index that leads with the app
/// (`responses_history`, `followups_by_status`), so its cost follows the app's traffic in the window,
/// never the table's size; the dead-letter count stops at a fixed limit.
public struct StatsStore: Sendable {
    let pool: Database

    /// Dead follow-ups are counted up to this many; a larger backlog shows as this number.
    public static let deadLetterCountLimit = 10_000

    /// Creates the store over a pool.
    public init(pool: PostgresPool) {
        self.pool = Database(pool)
    }

    /// The app's statistics for the window ending with the bucket that holds `now`.
    public func stats(appID: String, window: StatsWindow, now: Date = Date()) throws -> AppStats {
        let bucket = window.bucketSeconds
        let end = (Int(now.timeIntervalSince1970) / bucket + 1) * bucket
        let until = Date(timeIntervalSince1970: TimeInterval(end))
        let since = Date(timeIntervalSince1970: TimeInterval(end - window.seconds))
        let queries = Self.queries(appID: appID, since: since, until: until, bucketSeconds: bucket)
        let (replyRows, followUpRows, latencyRows, deadRows) = try pool.withConnection { connection in
            (
                try connection.query(queries.replies), try connection.query(queries.followUps),
                try connection.query(queries.latency), try connection.query(queries.deadLetters)
            )
        }

        var series = (0..<(window.seconds / bucket)).map { index in
            StatsBucket(start: since.addingTimeInterval(TimeInterval(index * bucket)))
        }
        var replies = Dictionary(uniqueKeysWithValues: Outcome.allCases.map { ($0.rawValue, 0) })
        for row in replyRows {
            let index: Int = try row.decode("bucket")
            let outcome: String = try row.decode("outcome")
            let count: Int = try row.decode("n")
            replies[outcome, default: 0] += count
            if series.indices.contains(index) { series[index].replies[outcome, default: 0] += count }
        }
        for row in latencyRows {
            let index: Int = try row.decode("bucket")
            guard series.indices.contains(index) else { continue }
            series[index].delivered = try row.decode("n")
            series[index].latencyMsAverage = try row.decode("avg_ms", as: Int?.self)
            series[index].latencyMsMax = try row.decode("max_ms", as: Int?.self)
        }
        var followUps: [String: Int] = [:]
        for row in followUpRows {
            followUps[try row.decode("status")] = try row.decode("n", as: Int.self)
        }
        let dead = try deadRows.first?.decode("n", as: Int.self) ?? 0
        return AppStats(
            window: window, since: since, until: until, replies: replies, followUps: followUps,
            deadLetters: min(dead, Self.deadLetterCountLimit), series: series)
    }

    /// The four statements behind ``stats(appID:window:now:)``, each bound to one app and window.
    static func queries(appID: String, since: Date, until: Date, bucketSeconds bucket: Int) -> (
        replies: PostgresQuery, followUps: PostgresQuery, latency: PostgresQuery, deadLetters: PostgresQuery
    ) {
        let statuses = FollowUpStatus.allCases.map(\.rawValue)
        let deadLimit = Self.deadLetterCountLimit + 1
        let replies: PostgresQuery = """
            SELECT floor(extract(epoch FROM received_at - \(since)::timestamptz) / \(bucket))::bigint AS bucket,
                outcome, count(*)::bigint AS n
            FROM responses
            WHERE app_id = \(appID) AND received_at >= \(since) AND received_at < \(until)
            GROUP BY 1, 2
            """
        // One index range per status: (app_id, status, created_at) serves each count directly.
        let followUps: PostgresQuery = """
            SELECT s.status, (
                SELECT count(*) FROM followups
                WHERE app_id = \(appID) AND status = s.status AND created_at >= \(since) AND created_at < \(until)
            )::bigint AS n
            FROM unnest(\(statuses)::text[]) AS s(status)
            """
        // Latency runs from the time a follow-up was due to the end of the attempt that delivered it.
        let latency: PostgresQuery = """
            SELECT floor(extract(epoch FROM f.created_at - \(since)::timestamptz) / \(bucket))::bigint AS bucket,
                count(*)::bigint AS n,
                round(avg(greatest(0, extract(epoch FROM a.finished_at - f.due_at) * 1000)))::bigint AS avg_ms,
                round(max(greatest(0, extract(epoch FROM a.finished_at - f.due_at) * 1000)))::bigint AS max_ms
            FROM followups f
            JOIN delivery_attempts a ON a.app_id = f.app_id AND a.followup_id = f.id AND a.result = 'delivered'
            WHERE f.app_id = \(appID) AND f.status = 'delivered'
                AND f.created_at >= \(since) AND f.created_at < \(until)
            GROUP BY 1
            """
        let deadLetters: PostgresQuery = """
            SELECT count(*)::bigint AS n FROM (
                SELECT 1 FROM followups WHERE app_id = \(appID) AND status = 'dead' LIMIT \(deadLimit)
            ) AS d
            """
        return (replies, followUps, latency, deadLetters)
    }
}
