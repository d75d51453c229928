import Foundation

/// Group commit for ingest: concurrent responses share one transaction.
///
/// Writer threads each take everything queued (up to `maxBatch`) and store it with
/// ``IngestWriter/ingest(batch:)``; each request is answered only after its own rows committed.
/// A batch never waits for company: a request is written as soon as a writer takes it (at once when
/// none is busy), and batches form only from requests that arrived while writers were busy, so
/// latency stays bounded at low load (at most the batch in progress, then its own).
///
/// While one writer is busy, an idle one starts only for ``concurrentBatchMinimum`` or more waiting
/// responses: a transaction costs the database about as much for three responses as for thirty, so
/// at moderate load the waiting responses go together into the next batch rather than each writer
/// committing a few (which took a quarter more CPU per response). A writer that has just finished a
/// batch takes whatever waits, so a slow commit of one writer never holds up the other; under heavy
/// load the writers work side by side.
public final class IngestBatcher: @unchecked Sendable {
    // @unchecked: `queue`, `stopping`, `running` and `busy` are only touched with `condition` locked.
    public typealias Completion = @Sendable (Result<IngestResult, any Error>) -> Void
    /// Told of every batch written: how many responses it held and how long writing it took.
    public typealias BatchObserver = @Sendable (_ size: Int, _ duration: Duration) -> Void

    let writer: IngestWriter
    let writers: Int
    let maxBatch: Int
    let observer: BatchObserver?
    private let condition = NSCondition()
    private var queue: [(IngestItem, Completion)] = []
    private var stopping = false
    private var running = 0
    private var busy = 0
    /// The responses that must be waiting for a writer to start while another is busy.
    let concurrentBatchMinimum: Int
    private let stopped = DispatchSemaphore(value: 0)

    /// Creates a batcher with `writers` threads and batches of at most `maxBatch` responses; a
    /// writer starts beside a busy one for `concurrentBatchMinimum` waiting responses (at most `maxBatch`).
    public init(
        writer: IngestWriter, writers: Int, maxBatch: Int, concurrentBatchMinimum: Int = 8,
        observer: BatchObserver? = nil
    ) {
        precondition(writers >= 1 && maxBatch >= 1, "a batcher needs a writer and room for one response")
        self.writer = writer
        self.writers = writers
        self.maxBatch = maxBatch
        self.concurrentBatchMinimum = max(1, min(concurrentBatchMinimum, maxBatch))
        self.observer = observer
    }

    /// Starts the writer threads.
    public func start() {
        condition.lock()
        running = writers
        condition.unlock()
        for index in 0..<writers {
            let thread = Thread { [self] in
                writeLoop()
                condition.lock()
                running -= 1
                let last = running == 0
                condition.unlock()
                if last { stopped.signal() }
            }
            thread.name = "actionhook-ingest-\(index)"
            thread.start()
        }
    }

    /// Queues a response; `completion` runs on a writer thread once it is stored (or failed).
    public func submit(_ item: IngestItem, completion: @escaping Completion) {
        condition.lock()
        let accepting = !stopping
        if accepting {
            queue.append((item, completion))
            condition.signal()
        }
        condition.unlock()
        if !accepting { completion(.failure(IngestBatcherStopped())) }
    }

    /// Writes what is queued, then stops the writer threads.
    public func stop() {
        condition.lock()
        let wasRunning = running > 0 && !stopping
        stopping = true
        condition.broadcast()
        condition.unlock()
        if wasRunning { stopped.wait() }
    }

    private func writeLoop() {
        // A writer that has just written a batch goes on with whatever waits; one that was idle joins
        // a busy writer only for enough responses.
        var continuing = false
        while true {
            condition.lock()
            while !stopping && (queue.isEmpty || (!continuing && busy > 0 && queue.count < concurrentBatchMinimum)) {
                continuing = false
                condition.wait()
            }
            if queue.isEmpty && stopping {
                condition.unlock()
                return
            }
            let batch = Array(queue.prefix(maxBatch))
            queue.removeFirst(batch.count)
            busy += 1
            // Enough others may have arrived meanwhile: let another writer take them.
            if queue.count >= concurrentBatchMinimum { condition.signal() }
            condition.unlock()

            let started = ContinuousClock.now
            let results = writer.ingest(batch: batch.map(\.0))
            observer?(batch.count, ContinuousClock.now - started)
            for ((_, completion), result) in zip(batch, results) { completion(result) }

            condition.lock()
            busy -= 1
            continuing = true
            condition.unlock()
        }
    }
}

/// The batcher is stopping and takes no more responses.
public struct IngestBatcherStopped: Error, Sendable {}
