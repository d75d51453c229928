import Dispatch

/// Runs delivery tasks on Dispatch threads rather than Swift's cooperative pool.
///
/// The cooperative pool has one thread per core (two on small machines). Anything in the same
/// process that blocks those threads (a synchronous caller, a test) would otherwise stall every
/// delivery in flight; with this executor the sends only need Dispatch and the HTTP client's
/// event loops.
final class DeliveryExecutor: TaskExecutor {
    static let shared = DeliveryExecutor()

    private let queue = DispatchQueue(label: "actionhook.delivery", attributes: .concurrent)

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        let executor = asUnownedTaskExecutor()
        queue.async { job.runSynchronously(on: executor) }
    }
}
