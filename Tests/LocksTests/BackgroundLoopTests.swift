import Foundation
import Locks
import Testing

@Suite("A background loop's threads, and the order things stop in")
struct BackgroundLoopTests {
    struct Shared: Sendable {
        var loop = LoopState()
        var woken = 0
        var ended: [Int] = []
    }

    /// A body that counts the wake-ups it takes until it is asked to stop, then records its index.
    static func body(_ background: BackgroundLoop<Shared>) -> @Sendable (Int) -> Void {
        { index in
            while background.state.wait(
                for: \.loop.mustWake,
                then: { $0.loop.takeWakeUp() })
            {
                background.state.withLockWakingAll { $0.woken += 1 }
            }
            background.state.withLock { $0.ended.append(index) }
        }
    }

    @Test("stop returns once every thread has ended, and the loop is then stopped")
    func stopJoins() {
        let background = BackgroundLoop("test-loop", Shared(), loop: \.loop)
        background.start(threads: 3, Self.body(background))
        #expect(background.state.withLock { $0.loop.phase } == .running)
        background.stop(gracePeriod: .seconds(2))
        let (phase, ended, grace) = background.state.withLock {
            ($0.loop.phase, $0.ended.sorted(), $0.loop.gracePeriod)
        }
        #expect(phase == .stopped)
        #expect(ended == [0, 1, 2])
        #expect(grace == .seconds(2))
    }

    @Test("a wake-up gets a sleeping thread up to look")
    func wakeUp() {
        let background = BackgroundLoop("test-loop", Shared(), loop: \.loop)
        background.start(Self.body(background))
        background.wake()
        background.state.wait(for: { $0.woken == 1 }, then: { _ in })
        background.stop()
        #expect(background.state.withLock { $0.woken } == 1)
    }

    @Test("a loop never started is stopped at once")
    func neverStarted() {
        let background = BackgroundLoop("test-loop", Shared(), loop: \.loop)
        background.stop()
        #expect(background.state.withLock { $0.loop.phase } == .stopped)
    }

    @Test("a stop asked on the loop's own thread only asks; `asking` runs either way")
    func stopFromOwnThread() {
        let background = BackgroundLoop("test-loop", LoopState(), loop: \.self)
        let asked = Locked(0)
        background.start { _ in background.stop(asking: { asked.withLock { $0 += 1 } }) }
        background.stop(asking: { asked.withLock { $0 += 1 } })
        #expect(background.state.withLock { $0.phase } == .stopped)
        #expect(asked.withLock { $0 } == 2)
    }

    @Test("what started last stops first; what failed to start is not stopped")
    func reverseOrder() {
        struct Refused: Error {}
        let order = StartOrder()
        let events = Locked<[String]>([])
        for name in ["listener", "writers", "worker", "server"] {
            order.start(
                { events.withLock { $0.append("start \(name)") } },
                stop: { events.withLock { $0.append("stop \(name)") } })
        }
        #expect(throws: Refused.self) {
            try order.start({ throw Refused() }, stop: { events.withLock { $0.append("stop refused") } })
        }
        order.stopAll()
        order.stopAll()
        #expect(
            events.withLock { $0 } == [
                "start listener", "start writers", "start worker", "start server", "stop server", "stop worker",
                "stop writers", "stop listener",
            ])
    }
}
