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
}
