import ActionHookCore
import Foundation
import Locks
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
public final class IngestBatcher: Sendable {
    public typealias Completion = @Sendable (Result<IngestResult, any Error>) -> Void
    /// Told of every batch written: how many responses it held and how long writing it took.
    public typealias BatchObserver = @Sendable (_ size: Int, _ duration: Duration) -> Void

    let writer: IngestWriter
    let writers: Int
    let maxBatch: Int
    let observer: BatchObserver?
    /// How long a request may wait for its answer; nil: as long as its transaction takes.
    let answerDeadline: Duration?
    /// The responses that must be waiting for a writer to start while another is busy.
    let concurrentBatchMinimum: Int
    /// What the writers share; only writers (and `stop()`, once stopping) wait on it, so a wake-up meant
    /// for a writer is never taken by another thread.
    private let writerThreads = BackgroundLoop("actionhook-ingest", State(), loop: \.loop)
    private var state: Monitor<State> { writerThreads.state }
    /// The deadline reaper, with its own wake-up.
    private let reaper = BackgroundLoop("actionhook-ingest-deadline", LoopState(), loop: \.self)

    private struct State {
        var loop = LoopState()
        var queue: [QueuedRequest] = []
        /// The batches writers are writing, by writer.
        var writing: [Int: [QueuedRequest]] = [:]
        /// Writers writing a batch.
        var busy = 0
        /// Whether the deadline reaper sleeps with no deadline to wait for (a submit must wake it).
        var reaperIdle = false
    }

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
        writerThreads.start(threads: writers) { [self] index in writeLoop(index) }
        if answerDeadline != nil {
            reaper.start { [self] _ in reapLoop() }
        }
    }

    /// Queues a response, planned on this thread when it can be (``IngestWriter/planned(_:)``);
    /// `completion` runs on a writer thread once it is stored (or failed).
    public func submit(_ item: IngestItem, completion: @escaping Completion) {
        let request = QueuedRequest(writer.planned(item), completion, deadline: answerDeadline.map { .now + $0 })
        let (accepting, wakeReaper) = state.withLockWakingOne { state -> (Bool, Bool) in
            guard state.loop.isRunning else { return (false, false) }
            state.queue.append(request)
            let wakeReaper = state.reaperIdle && request.deadline != nil
            if wakeReaper { state.reaperIdle = false }
            return (true, wakeReaper)
        }
        if wakeReaper { reaper.wake() }
        if !accepting { completion(.failure(IngestBatcherStopped())) }
    }

    /// Writes what is queued, then stops the writer threads (and the reaper).
    public func stop() {
        writerThreads.stop()
        reaper.stop()
    }

    private func writeLoop(_ index: Int) {
        // A writer that has just written a batch goes on with whatever waits; one that was idle joins
        // a busy writer only for enough responses.
        var continuing = false
        while true {
            let taken = state.wait(
                for: { state in
                    let ready =
                        !state.loop.isRunning
                        || (!state.queue.isEmpty
                            && (continuing || state.busy == 0 || state.queue.count >= concurrentBatchMinimum))
                    continuing = false
                    return ready
                },
                then: { state -> (batch: [QueuedRequest], more: Bool)? in
                    // Stopping: what is queued is still written, then the writer ends.
                    if state.queue.isEmpty { return nil }
                    let batch = Array(state.queue.prefix(maxBatch))
                    state.queue.removeFirst(batch.count)
                    state.writing[index] = batch
                    state.busy += 1
                    return (batch, state.queue.count >= concurrentBatchMinimum)
                })
            guard let (batch, more) = taken else { return }
            // Enough others may have arrived meanwhile: let another writer take them.
            if more { state.wakeOne() }

            // What was answered while it waited (its deadline passed) is not written.
            let items = batch.filter { !$0.isAnswered }
            if !items.isEmpty {
                let started = ContinuousClock.now
                let results = writer.ingest(batch: items.map(\.item))
                observer?(items.count, ContinuousClock.now - started)
                for (waiting, result) in zip(items, results) { waiting.answer(result) }
            }

            state.withLock { state in
                state.writing[index] = nil
                state.busy -= 1
            }
            continuing = true
        }
    }

    /// Answers every request whose deadline passed, queued or being written, until the batcher stops.
    ///
    /// Sleeps until the earliest deadline of a request it may have to answer; with none, until a
    /// request with a deadline is submitted or the batcher stops. An idle service wakes it never.
    private func reapLoop() {
        while true {
            let now = ContinuousClock.now
            let (late, next) = state.withLock { state -> ([QueuedRequest], ContinuousClock.Instant?) in
                // Deadlines are submission time plus one fixed duration, so the queue is in deadline order.
                var late = Array(state.queue.prefix { $0.deadline.map { $0 <= now } ?? false })
                state.queue.removeFirst(late.count)
                var next = state.queue.lazy.compactMap(\.deadline).first
                // One a writer has may still commit: only a client's own key lets its retry find it, so a
                // request without one waits for its transaction instead of risking a second copy.
                for batch in state.writing.values {
                    for waiting in batch where !waiting.isAnswered && waiting.item.keyFromClient {
                        guard let due = waiting.deadline else { continue }
                        if due <= now { late.append(waiting) } else { next = min(next ?? due, due) }
                    }
                }
                state.reaperIdle = next == nil
                return (late, next)
            }
            for waiting in late { waiting.answer(.failure(IngestDeadlinePassed())) }
            let running = reaper.state.wait(until: next, for: \.mustWake, then: { $0.takeWakeUp() })
            if !running { break }
        }
    }
}

/// A queued request and its answer, given once: by its writer or, past its deadline, by the reaper.
private final class QueuedRequest: Sendable {
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
