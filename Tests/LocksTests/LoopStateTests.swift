import Foundation
import Locks
import Testing

@Suite("A background loop's lifecycle")
struct LoopStateTests {
    @Test("start, wake, look, stop, finish")
    func happyPath() {
        var state = LoopState()
        #expect(state.phase == .created)
        state.start()
        #expect(state.phase == .running && !state.mustWake)
        state.wake()
        #expect(state.isWoken && state.mustWake)
        let tookFirst = state.takeWakeUp()
        #expect(tookFirst)
        #expect(!state.isWoken && !state.mustWake)
        let wasRunning = state.stop(gracePeriod: .seconds(3))
        #expect(wasRunning)
        #expect(state.phase == .stopping && state.gracePeriod == .seconds(3) && state.mustWake)
        let goesOn = state.takeWakeUp()
        #expect(!goesOn)
        state.finish()
        #expect(state.phase == .stopped)
    }

    @Test("a wake-up while busy is kept for the next sleep; one while stopping is not needed")
    func wakeUps() {
        var state = LoopState()
        state.start()
        state.wake()
        state.wake()
        #expect(state.mustWake)
        let tookWake = state.takeWakeUp()
        #expect(tookWake)
        #expect(!state.mustWake)
        state.stop()
        state.wake()
        #expect(!state.isWoken)
        #expect(state.mustWake)
    }

    @Test("stopping a loop never started ends it at once; stopping twice waits once")
    func stops() {
        var never = LoopState()
        let neverRunning = never.stop()
        #expect(!neverRunning)
        #expect(never.phase == .stopped)
        var twice = LoopState()
        twice.start()
        let first = twice.stop(gracePeriod: .seconds(1))
        let second = twice.stop(gracePeriod: .seconds(9))
        #expect(first && second)
        #expect(twice.gracePeriod == .seconds(1))
        twice.finish()
        let afterFinish = twice.stop()
        #expect(!afterFinish)
    }
}

@Suite("Monitor")
struct MonitorTests {
    @Test("a wait returns at once when the value is ready, and at its deadline when it is not")
    func waits() {
        let monitor = Monitor(0)
        monitor.withLockWakingAll { $0 = 1 }
        #expect(monitor.wait(for: { $0 == 1 }, then: { $0 }) == 1)
        let clock = ContinuousClock()
        let deadline = clock.now + .milliseconds(20)
        #expect(monitor.wait(until: deadline, for: { $0 == 2 }, then: { $0 }) == 1)
        #expect(clock.now >= deadline)
    }

    @Test("a waiter on another thread is woken by a change")
    func wakesAcrossThreads() async {
        let monitor = Monitor(LoopState())
        monitor.withLock { $0.start() }
        await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
            let thread = Thread {
                let woken = monitor.wait(for: \.mustWake, then: { $0.takeWakeUp() })
                #expect(woken)
                done.resume()
            }
            thread.start()
            monitor.withLockWakingAll { $0.wake() }
        }
    }
}
