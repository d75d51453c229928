import ActionHookCore
import ActionHookStore
import MicroHTTPD

/// `GET /v1/apps/{app}/stats`: an app's replies, follow-ups and delivery latency over the last hour or day.
extension APIContext {
    func registerStatsRoutes(in router: inout Router) {
        router.add(
            .get, "/v1/apps/{app}/stats",
            appAdmin { request, appID in
                var window = StatsWindow.hour
                if let text = request.queryValue("window"), !text.isEmpty {
                    guard let value = StatsWindow(rawValue: text) else {
                        throw APIError.badRequest("The window query parameter must be 1h or 24h.")
                    }
                    window = value
                }
                return .json(200, Self.statsJSON(try stats.stats(appID: appID, window: window), appID: appID))
            })
    }

    static func statsJSON(_ stats: AppStats, appID: String) -> JSONValue {
        func counts(_ values: [String: Int]) -> JSONValue {
            .object(
                JSONObject(values.sorted { $0.key < $1.key }.map { (key: $0.key, value: JSONValue.integer($0.value)) }))
        }
        let series: [JSONValue] = stats.series.map { bucket in
            .object([
                "start": .string(Timestamp.format(bucket.start)),
                "replies": counts(bucket.replies),
                "delivered": .integer(bucket.delivered),
                "latencyMsAverage": bucket.latencyMsAverage.map(JSONValue.integer) ?? .null,
                "latencyMsMax": bucket.latencyMsMax.map(JSONValue.integer) ?? .null,
            ])
        }
        return .object([
            "app": .string(appID),
            "window": .string(stats.window.rawValue),
            "since": .string(Timestamp.format(stats.since)),
            "until": .string(Timestamp.format(stats.until)),
            "bucketSeconds": .integer(stats.window.bucketSeconds),
            "replies": counts(stats.replies),
            "followUps": counts(stats.followUps),
            "deadLetters": .integer(stats.deadLetters),
            "series": .array(series),
        ])
    }
}
