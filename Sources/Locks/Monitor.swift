#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value behind a pthread mutex with a condition variable: a monitor. Threads wait inside it for the
/// value to reach a state (work queued, a stop asked for) and are woken by whoever changed it.
///
/// The background loops (ingest writers, the outbox worker, the maintainer, the purger, the listener)
/// keep their shared state in one of these, so that each is `Sendable` without `@unchecked` of its own.
public final class Monitor<Value: Sendable>: @unchecked Sendable {
    // @unchecked: a handle box over a pthread mutex and condition variable; `value` is only read or
    // written with `mutex` held, and the two pthread objects live exactly as long as the box.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>
    private let condition: UnsafeMutablePointer<pthread_cond_t>
    private var value: Value

    /// Wraps `value`.
    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        precondition(pthread_mutex_init(mutex, nil) == 0, "pthread_mutex_init failed")
        condition = .allocate(capacity: 1)
        condition.initialize(to: pthread_cond_t())
        var attributes = pthread_condattr_t()
        pthread_condattr_init(&attributes)
        #if canImport(Glibc)
            // Deadlines on the monotonic clock, so a wall-clock step never shortens or stretches a wait.
            pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
        #endif
        precondition(pthread_cond_init(condition, &attributes) == 0, "pthread_cond_init failed")
        pthread_condattr_destroy(&attributes)
    }

    deinit {
        pthread_cond_destroy(condition)
        condition.deallocate()
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the lock held, waking no one.
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }

    /// Runs `body` with the lock held, then wakes every waiter: they look at the value again.
    public func withLockWakingAll<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try withLock(thenWaking: pthread_cond_broadcast, body)
    }

    /// Runs `body` with the lock held, then wakes one waiter.
    public func withLockWakingOne<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        try withLock(thenWaking: pthread_cond_signal, body)
    }

    private func withLock<Result>(
        thenWaking wake: (UnsafeMutablePointer<pthread_cond_t>) -> Int32, _ body: (inout Value) throws -> Result
    ) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer {
            _ = wake(condition)
            pthread_mutex_unlock(mutex)
        }
        return try body(&value)
    }

    /// Wakes one waiter: it looks at the value again.
    public func wakeOne() {
        pthread_mutex_lock(mutex)
        pthread_cond_signal(condition)
        pthread_mutex_unlock(mutex)
    }

    /// With the lock held, waits until `isReady` holds for the value or `deadline` (if any) passes,
    /// then runs `body`, still under the lock. `isReady` is evaluated before any wait, so nothing that
    /// happened before the call is missed.
    public func wait<Result>(
        until deadline: ContinuousClock.Instant? = nil, for isReady: (Value) -> Bool,
        then body: (inout Value) throws -> Result
    ) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        while !isReady(value) {
            guard let deadline else {
                pthread_cond_wait(condition, mutex)
                continue
            }
            let remaining = deadline - .now
            if remaining <= .zero { break }
            var time = timespec()
            #if canImport(Glibc)
                clock_gettime(CLOCK_MONOTONIC, &time)
            #else
                clock_gettime(CLOCK_REALTIME, &time)
            #endif
            let (seconds, attoseconds) = remaining.components
            var nanoseconds = Int(time.tv_nsec) + Int(attoseconds / 1_000_000_000)
            var wholeSeconds = Int(time.tv_sec) + Int(seconds)
            if nanoseconds >= 1_000_000_000 {
                wholeSeconds += 1
                nanoseconds -= 1_000_000_000
            }
            time.tv_sec = wholeSeconds
            time.tv_nsec = nanoseconds
            _ = pthread_cond_timedwait(condition, mutex, &time)
        }
        return try body(&value)
    }
}
