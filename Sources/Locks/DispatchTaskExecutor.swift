import Dispatch

/// Runs tasks on Dispatch threads rather than Swift's cooperative pool.
///
/// The cooperative pool has one thread per core (two on small machines). Anything in the same process
/// that blocks those threads (a synchronous caller, a test) would otherwise stall every task that needs
/// them; a task preferring this executor needs only Dispatch (and default actors it calls run here too).
public final class DispatchTaskExecutor: TaskExecutor {
    private let queue: DispatchQueue

    /// An executor over a concurrent queue named `label`.
    public init(label: String) {
        queue = DispatchQueue(label: label, attributes: .concurrent)
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }

    /// Runs `operation` as a task on this executor and blocks the calling thread until it ends: how a plain
    /// thread (a request thread, a command) uses an asynchronous library. The task never needs the
    /// cooperative pool, so a caller holding one of its threads cannot starve it.
    public func wait<T: Sendable>(for operation: @escaping @Sendable () async throws -> T) throws -> T {
        let outcome = Locked<Result<T, any Error>?>(nil)
        let done = DispatchSemaphore(value: 0)
        Task.detached(executorPreference: self) {
            let result: Result<T, any Error>
            do {
                result = .success(try await operation())
            } catch {
                result = .failure(error)
            }
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0! }.get()
    }
}
