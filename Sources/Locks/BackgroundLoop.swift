import Foundation

/// A background loop's threads and the state they share: the one place where a loop's threads are made,
/// started, asked to stop and waited for. The state is a ``Monitor`` of the loop's own value, with the
/// loop's ``LoopState`` at `loop`; the threads sleep on that monitor and are woken through it.
///
/// ``start(threads:_:)`` makes the threads and starts the loop; the loop is finished (``LoopState/finish()``)
/// when the last of its threads has returned from its body. ``stop(gracePeriod:asking:)`` asks the loop to
/// stop and returns once it is finished: every thread has ended.
public final class BackgroundLoop<Value: Sendable>: Sendable {
    /// What the loop's threads share, its ``LoopState`` among it.
    public let state: Monitor<Value>
    private let loop: WritableKeyPath<Value, LoopState> & Sendable
    private let name: String
    private let threads = Locked(Threads())

    private struct Threads {
        /// Threads started and not yet ended.
        var running = 0
        /// The loop's own threads, so that a stop asked on one of them does not wait for itself.
        var ids: Set<ObjectIdentifier> = []
    }

    /// A loop named `name` (its threads' name) whose threads share `value`, with its lifecycle at `loop`.
    public init(_ name: String, _ value: Value, loop: WritableKeyPath<Value, LoopState> & Sendable) {
        self.name = name
        self.loop = loop
        state = Monitor(value)
    }

    /// Starts the loop: one thread named `name`, or `threads` threads named `name-0`, `name-1`, …, each
    /// running `body` with its index. Starting a loop twice is a programming error.
    public func start(threads: Int? = nil, _ body: @escaping @Sendable (Int) -> Void) {
        let count = threads ?? 1
        precondition(count >= 1, "a loop needs a thread")
        state.withLock { $0[keyPath: loop].start() }
        self.threads.withLock { $0.running = count }
        for index in 0..<count {
            let thread = Thread { [self] in
                let me = ObjectIdentifier(Thread.current)
                self.threads.withLock { _ = $0.ids.insert(me) }
                body(index)
                let last = self.threads.withLock { threads -> Bool in
                    // Forgotten as it ends: a thread made later (the one calling stop) may get the ended
                    // thread's object address, and with it the same identifier.
                    threads.ids.remove(me)
                    threads.running -= 1
                    return threads.running == 0
                }
                if last { state.withLockWakingAll { $0[keyPath: loop].finish() } }
            }
            thread.name = threads == nil ? name : "\(name)-\(index)"
            thread.start()
        }
    }

    /// Tells the running loop that work arrived: a sleeping thread gets up to look.
    public func wake() {
        state.withLockWakingAll { $0[keyPath: loop].wake() }
    }

    /// Asks the loop to stop, finishing what it holds within `gracePeriod`, runs `asking` (to wake a thread
    /// that sleeps elsewhere than on the monitor), then waits until every thread has ended. A loop never
    /// started is stopped at once; asked on one of the loop's own threads, the stop only asks.
    public func stop(gracePeriod: Duration = .zero, asking: () -> Void = {}) {
        let running = state.withLockWakingAll { $0[keyPath: loop].stop(gracePeriod: gracePeriod) }
        asking()
        guard running, !threads.withLock({ $0.ids.contains(ObjectIdentifier(Thread.current)) }) else { return }
        state.wait(for: { [loop] in $0[keyPath: loop].phase == .stopped }, then: { _ in })
    }
}

/// The parts of a service that run in the background (loops, a server), started one after the other and
/// stopped in the reverse order: what started last, and may use what started before it, stops first.
public final class StartOrder: Sendable {
    private let stops = Locked<[@Sendable () -> Void]>([])

    /// An empty order.
    public init() {}

    /// Runs `start`; when it returns, `stop` is the first to run at the next ``stopAll()``.
    public func start(_ start: () throws -> Void, stop: @escaping @Sendable () -> Void) rethrows {
        try start()
        stops.withLock { $0.append(stop) }
    }

    /// Stops what was started, the last started first, and forgets it.
    public func stopAll() {
        while let stop = stops.withLock({ $0.popLast() }) { stop() }
    }
}
