import Foundation
import Synchronization

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
///
/// With an answer deadline, no request waits longer: one that has waited that long (the database is
/// stopped or unreachable) is answered ``IngestDeadlinePassed`` at once, taken out of the queue if no
/// writer has it yet. One a writer already sent may still commit; the client's retry with the same
/// key then finds it stored, so nothing is lost or doubled.
public final class IngestBatcher: @unchecked Sendable {
    // @unchecked: `queue`, `writing`, `stopping`, `running` and `busy` are only touched with `condition` locked.
    public typealias Completion = @Sendable (Result<IngestResult, any Error>) -> Void
    /// Told of every batch written: how many responses it held and how long writing it took.
    public typealias BatchObserver = @Sendable (_ size: Int, _ duration: Duration) -> Void

    let writer: IngestWriter
    let writers: Int
    let maxBatch: Int
    let observer: BatchObserver?
    private let condition = NSCondition()
    private var queue: [Waiting] = []
    /// The batches writers are writing, by writer.
    private var writing: [Int: [Waiting]] = [:]
    /// How long a request may wait for its answer; nil: as long as its transaction takes.
    let answerDeadline: Duration?
    private var stopping = false
    private var running = 0
    private var busy = 0
    /// The responses that must be waiting for a writer to start while another is busy.
    let concurrentBatchMinimum: Int
    private let stopped = DispatchSemaphore(value: 0)
    /// Whether the deadline reaper sleeps with no deadline to wait for (a submit must wake it).
    private var reaperIdle = false
    /// The reaper's own wake-up: a `signal()` on `condition` meant for a writer must never be taken by
    /// the reaper, or the writer would sleep on with the request unwritten.
    private let reaperWake = NSCondition()
    private var reaperWoken = false

    /// Creates a batcher with `writers` threads and batches of at most `maxBatch` responses; a
    /// writer starts beside a busy one for `concurrentBatchMinimum` waiting responses (at most `maxBatch`).
    public init(
        writer: IngestWriter, writers: Int, maxBatch: Int, concurrentBatchMinimum: Int = 8,
        answerDeadline: Duration? = nil, observer: BatchObserver? = nil
    ) {
        self.answerDeadline = answerDeadline
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
                writeLoop(index)
                condition.lock()
                running -= 1
                let last = running == 0
                condition.unlock()
                if last { stopped.signal() }
            }
            thread.name = "actionhook-ingest-\(index)"
            thread.start()
        }
        if answerDeadline != nil {
            let thread = Thread { [self] in reapLoop() }
            thread.name = "actionhook-ingest-deadline"
            thread.start()
        }
    }

    /// Queues a response; `completion` runs on a writer thread once it is stored (or failed).
    public func submit(_ item: IngestItem, completion: @escaping Completion) {
        let waiting = Waiting(item, completion, deadline: answerDeadline.map { .now + $0 })
        condition.lock()
        let accepting = !stopping
        var wakeReaper = false
        if accepting {
            queue.append(waiting)
            condition.signal()
            wakeReaper = reaperIdle && waiting.deadline != nil
            if wakeReaper { reaperIdle = false }
        }
        condition.unlock()
        if wakeReaper { self.wakeReaper() }
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
        wakeReaper()
    }

    private func wakeReaper() {
        reaperWake.lock()
        reaperWoken = true
        reaperWake.signal()
        reaperWake.unlock()
    }

    private func writeLoop(_ index: Int) {
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
            writing[index] = batch
            busy += 1
            // Enough others may have arrived meanwhile: let another writer take them.
            if queue.count >= concurrentBatchMinimum { condition.signal() }
            condition.unlock()

            // What was answered while it waited (its deadline passed) is not written.
            let items = batch.filter { !$0.isAnswered }
            if !items.isEmpty {
                let started = ContinuousClock.now
                let results = writer.ingest(batch: items.map(\.item))
                observer?(items.count, ContinuousClock.now - started)
                for (waiting, result) in zip(items, results) { waiting.answer(result) }
            }

            condition.lock()
            writing[index] = nil
            busy -= 1
            continuing = true
            condition.unlock()
        }
    }

    /// Answers every request whose deadline passed, queued or being written, until the batcher stops.
    ///
    /// Sleeps until the earliest deadline of a request it may have to answer; with none, until a
    /// request with a deadline is submitted or the batcher stops. An idle service wakes it never.
    private func reapLoop() {
        while true {
            condition.lock()
            if stopping && running == 0 {
                condition.unlock()
                return
            }
            let now = ContinuousClock.now
            // Deadlines are submission time plus one fixed duration, so the queue is in deadline order.
            var late = queue.prefix { $0.deadline.map { $0 <= now } ?? false }
            queue.removeFirst(late.count)
            var next = queue.lazy.compactMap(\.deadline).first
            // One a writer has may still commit: only a client's own key lets its retry find it, so a
            // request without one waits for its transaction instead of risking a second copy.
            for batch in writing.values {
                for waiting in batch where !waiting.isAnswered && waiting.item.keyFromClient {
                    guard let due = waiting.deadline else { continue }
                    if due <= now { late.append(waiting) } else { next = min(next ?? due, due) }
                }
            }
            reaperIdle = next == nil
            condition.unlock()
            for waiting in late { waiting.answer(.failure(IngestDeadlinePassed())) }

            reaperWake.lock()
            if !reaperWoken {
                if let next {
                    let seconds = Double((next - now).components.seconds) + Double((next - now).components.attoseconds) / 1e18
                    _ = reaperWake.wait(until: Date().addingTimeInterval(seconds))
                } else {
                    reaperWake.wait()
                }
            }
            reaperWoken = false
            reaperWake.unlock()
        }
    }
}

/// A queued request and its answer, given once: by its writer or, past its deadline, by the reaper.
private final class Waiting: Sendable {
    let item: IngestItem
    let deadline: ContinuousClock.Instant?
    private let completion: IngestBatcher.Completion
    private let answered = Atomic<Bool>(false)

    init(_ item: IngestItem, _ completion: @escaping IngestBatcher.Completion, deadline: ContinuousClock.Instant?) {
        self.item = item
        self.completion = completion
        self.deadline = deadline
    }

    var isAnswered: Bool { answered.load(ordering: .acquiring) }

    func answer(_ result: Result<IngestResult, any Error>) {
        if !answered.exchange(true, ordering: .acquiringAndReleasing) { completion(result) }
    }
}

/// The request waited its whole answer deadline: the database did not answer in time. The response
/// may still be stored; a retry with the same idempotency key finds out.
public struct IngestDeadlinePassed: Error, Sendable {}

/// The batcher is stopping and takes no more responses.
public struct IngestBatcherStopped: Error, Sendable {}
