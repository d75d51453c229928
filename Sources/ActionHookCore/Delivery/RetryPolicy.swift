/// When a failed delivery is tried again: a schedule of waits, each with ±`jitter` spread, then dead.
public struct RetryPolicy: Sendable, Equatable {
    /// Seconds to wait before each retry: the first entry after the first failure, and so on.
    public var schedule: [Int]
    /// The relative spread applied to each wait, e.g. 0.1 for ±10%.
    public var jitter: Double

    /// Standard Webhooks' schedule after the immediate first attempt: 5 s, 5 min, 30 min, 2 h, 5 h,
    /// 10 h, 14 h, 20 h, 24 h.
    public static let standard = RetryPolicy(
        schedule: [5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400], jitter: 0.1)

    /// Creates a policy.
    public init(schedule: [Int], jitter: Double = 0.1) {
        precondition(schedule.allSatisfy { $0 >= 0 } && (0..<1).contains(jitter), "invalid retry policy")
        self.schedule = schedule
        self.jitter = jitter
    }

    /// Parses `ACTIONHOOK_RETRY_SCHEDULE`: comma-separated non-negative seconds, at most 50 entries.
    public static func parse(_ text: String) -> RetryPolicy? {
        let parts = text.split(separator: ",", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
        let values = parts.compactMap { Int($0) }
        guard !parts.isEmpty, parts.count <= 50, values.count == parts.count,
            values.allSatisfy({ $0 >= 0 && $0 <= 604_800 })
        else { return nil }
        return RetryPolicy(schedule: values)
    }

    /// The wait before the next attempt after `attempt` attempts failed (1 = the first one), in
    /// milliseconds, or `nil` when no attempt is left. `unit` is a random number in 0..<1.
    public func delayMilliseconds(afterFailedAttempt attempt: Int, unit: Double) -> Int? {
        guard attempt >= 1, attempt <= schedule.count else { return nil }
        let base = Double(schedule[attempt - 1]) * 1000
        let factor = 1 - jitter + 2 * jitter * unit
        return Int((base * factor).rounded())
    }

    /// The most attempts a follow-up gets: the first plus one per schedule entry.
    public var maxAttempts: Int { schedule.count + 1 }
}
