#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A value behind a plain pthread mutex.
///
/// The request path uses this rather than `Synchronization.Mutex`: on Linux, `Mutex` is a
/// priority-inheritance futex that spins in user space when contended, and with more request
/// threads than cores a spinning waiter burns the time slice the holder needs (a third of the
/// CPU under load, measured with `perf`). A pthread mutex sleeps instead.
public final class Locked<Value: Sendable>: @unchecked Sendable {
    // @unchecked: `value` is only read or written with `mutex` held.
    @usableFromInline let mutex: UnsafeMutablePointer<pthread_mutex_t>
    @usableFromInline var value: Value

    /// Wraps `value`.
    public init(_ value: Value) {
        self.value = value
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deallocate()
    }

    /// Runs `body` with the lock held.
    @inlinable
    public func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body(&value)
    }
}
