import Foundation
import Testing

@testable import ActionHookStore

@Suite("The database's clock as the writer last read it")
struct DatabaseClockTests {
    @Test(
        "the smallest offset of this window and the last is used; a clock stepped is followed; a stale reading is none")
    func offsets() {
        let clock = DatabaseClock()
        let start = ContinuousClock.now
        let local = Date(timeIntervalSince1970: 1_795_000_000)
        #expect(clock.now(at: local, instant: start) == nil)
        // The database is 5 s ahead; transactions start 2 ms, then 0.5 ms, then 3 ms after they are sent.
        clock.record(local.addingTimeInterval(5.002), sentAt: local, instant: start)
        #expect(clock.now(at: local, instant: start) == local.addingTimeInterval(5.002))
        clock.record(local.addingTimeInterval(5.0005), sentAt: local, instant: start + .seconds(1))
        clock.record(local.addingTimeInterval(5.003), sentAt: local, instant: start + .seconds(2))
        #expect(clock.now(at: local, instant: start + .seconds(2)) == local.addingTimeInterval(5.0005))
        // The database's clock is stepped 1 s forward: the old windows' offset goes with them.
        clock.record(local.addingTimeInterval(6.001), sentAt: local, instant: start + .seconds(11))
        #expect(clock.now(at: local, instant: start + .seconds(11)) == local.addingTimeInterval(5.0005))
        clock.record(local.addingTimeInterval(6.001), sentAt: local, instant: start + .seconds(22))
        #expect(clock.now(at: local, instant: start + .seconds(22)) == local.addingTimeInterval(6.001))
        // Ten seconds without a reading: none, and the next reading starts afresh.
        #expect(clock.now(at: local, instant: start + .seconds(32)) == nil)
        clock.record(local.addingTimeInterval(7), sentAt: local, instant: start + .seconds(40))
        #expect(clock.now(at: local, instant: start + .seconds(40)) == local.addingTimeInterval(7))
    }
}
