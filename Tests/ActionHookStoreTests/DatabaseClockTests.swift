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
        let origin = Date(timeIntervalSince1970: 1_795_000_000)
        // This machine's clock and the instants advance together.
        func local(_ seconds: Int) -> Date { origin.addingTimeInterval(TimeInterval(seconds)) }
        func now(_ seconds: Int) -> Int64? {
            clock.now(at: local(seconds), instant: start + .seconds(seconds)).map {
                Int64(($0.timeIntervalSince1970 * 1_000_000).rounded())
            }
        }
        func expected(_ seconds: Int, ahead: TimeInterval) -> Int64 {
            Int64(((local(seconds).timeIntervalSince1970 + ahead) * 1_000_000).rounded())
        }
        func record(_ seconds: Int, ahead: TimeInterval) {
            clock.record(
                local(seconds).addingTimeInterval(ahead), sentAt: local(seconds), instant: start + .seconds(seconds))
        }
        #expect(now(0) == nil)
        // The database is 5 s ahead; transactions start 2 ms, then 0.5 ms, then 3 ms after they are sent.
        record(0, ahead: 5.002)
        #expect(now(0) == expected(0, ahead: 5.002))
        record(1, ahead: 5.0005)
        record(2, ahead: 5.003)
        #expect(now(2) == expected(2, ahead: 5.0005))
        // The database's clock is stepped 1 s forward: the old windows' offset goes with them.
        record(11, ahead: 6.001)
        #expect(now(11) == expected(11, ahead: 5.0005))
        record(22, ahead: 6.001)
        #expect(now(22) == expected(22, ahead: 6.001))
        // Ten seconds without a reading: none, and the next reading starts afresh.
        #expect(now(32) == nil)
        record(40, ahead: 7)
        #expect(now(40) == expected(40, ahead: 7))
    }

    @Test("the receipt times given out only go forward, a microsecond apart at least, estimated or read")
    func monotonic() {
        let clock = DatabaseClock()
        let start = ContinuousClock.now
        let local = Date(timeIntervalSince1970: 1_795_000_000)
        func micros(_ date: Date?) -> Int64 { Int64(((date?.timeIntervalSince1970 ?? 0) * 1_000_000).rounded()) }
        // A first reading 3 ms late, then a better one: the estimate moves back by 2.5 ms.
        clock.record(local.addingTimeInterval(5.003), sentAt: local, instant: start)
        let first = clock.now(at: local, instant: start)
        clock.record(local.addingTimeInterval(5.0005), sentAt: local, instant: start)
        let second = clock.now(at: local.addingTimeInterval(0.001), instant: start)
        #expect(micros(first) == micros(local.addingTimeInterval(5.003)))
        #expect(micros(second) == micros(first) + 1)
        // A time read from the database before the last one given out comes after it.
        let read = clock.issue(local.addingTimeInterval(5.001))
        #expect(micros(read) == micros(second) + 1)
        // Later times pass through.
        let later = clock.issue(local.addingTimeInterval(6))
        #expect(micros(later) == micros(local.addingTimeInterval(6)))
    }
}
