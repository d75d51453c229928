import Locks

/// Delivery tasks run on Dispatch threads (``DispatchTaskExecutor``), so that a caller blocking Swift's
/// cooperative pool never stalls the sends in flight; they need only Dispatch and the HTTP client's event loops.
enum DeliveryExecutor {
    static let shared = DispatchTaskExecutor(label: "actionhook.delivery")
}
