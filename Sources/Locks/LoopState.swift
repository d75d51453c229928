/// Where a background loop is in its life, as a value. Every loop of the service (the ingest writers,
/// the outbox worker, the partition maintainer, the app purger, the notification listener) keeps one
/// inside the ``Monitor`` of its ``BackgroundLoop``, so that their transitions are the same and are tested
/// without threads.
///
/// ```
/// created ──start()──▶ running ──stop(gracePeriod:)──▶ stopping ──finish()──▶ stopped
///    └────────────────────────stop(gracePeriod:)─────────────────────────────────▲
/// ```
/// A running loop sleeps until it is woken (``wake()``: work arrived), its next due time passes or it is
/// asked to stop; ``takeWakeUp()`` consumes a wake-up as the loop goes to look for work.
public struct LoopState: Sendable, Equatable {
    /// The loop's phase.
    public enum Phase: Sendable, Equatable {
        /// Made, not started.
        case created
        /// Looking for work, or sleeping until there is some.
        case running
        /// Asked to stop: finishing what it holds within the grace period, taking nothing new.
        case stopping
        /// Ended.
        case stopped
    }

    /// The current phase.
    public private(set) var phase = Phase.created
    /// Whether work arrived since the loop last looked (remembered until it looks).
    public private(set) var isWoken = false
    /// How long a stopping loop may finish what it holds.
    public private(set) var gracePeriod: Duration = .zero

    /// A loop that has not started.
    public init() {}

    /// created → running. Starting a loop twice is a programming error.
    public mutating func start() {
        precondition(phase == .created, "a loop can be started only once")
        phase = .running
    }

    /// Tells a running loop that work arrived; a wake-up while it is busy is kept for its next sleep.
    public mutating func wake() {
        if phase == .running { isWoken = true }
    }

    /// Asks the loop to stop, finishing what it holds within `gracePeriod`. Returns whether a loop was
    /// running (the caller then waits for ``finish()``); a loop never started is stopped at once.
    @discardableResult
    public mutating func stop(gracePeriod: Duration = .zero) -> Bool {
        switch phase {
        case .created:
            phase = .stopped
            return false
        case .running:
            phase = .stopping
            self.gracePeriod = gracePeriod
            return true
        case .stopping:
            return true
        case .stopped:
            return false
        }
    }

    /// Whether a sleeping loop must get up: work arrived, or it was asked to stop.
    public var mustWake: Bool { isWoken || phase != .running }

    /// Whether the loop is to go on taking work.
    public var isRunning: Bool { phase == .running }

    /// Consumes the wake-up as the loop looks for work; returns whether it is to go on (not stopping).
    public mutating func takeWakeUp() -> Bool {
        isWoken = false
        return phase == .running
    }

    /// stopping → stopped, as the loop ends (a loop may also end by itself while running).
    public mutating func finish() {
        precondition(phase != .created, "a loop that never started cannot finish")
        phase = .stopped
        isWoken = false
    }
}
