import Foundation
import Testing

@testable import ActionHookStore

@Suite("The database's clock as the writer last read it")
struct DatabaseClockTests {
    /// A clock and a time line: `instant(s)` is `s` seconds after the start on this machine's monotonic clock,
    /// and `database(s, ahead:)` the database's time then, `ahead` seconds ahead of that clock.
    struct Line {
        let clock = DatabaseClock()
        let start = ContinuousClock.now

        func instant(_ seconds: Double) -> ContinuousClock.Instant { start + .milliseconds(Int(seconds * 1000)) }
        func database(_ seconds: Double, ahead: TimeInterval) -> Date {
            Date(timeIntervalSince1970: DatabaseClock.seconds(instant(seconds)) + ahead)
        }
        func micros(_ date: Date?) -> Int64? { date.map { Int64(($0.timeIntervalSince1970 * 1_000_000).rounded()) } }
        /// Whether two times in microseconds agree, within the microsecond a floating-point sum may round to.
        func same(_ lhs: Int64?, _ rhs: Int64?) -> Bool {
            guard let lhs, let rhs else { return lhs == nil && rhs == nil }
            return abs(lhs - rhs) <= 1
        }
        func now(_ seconds: Double) -> Int64? { micros(clock.now(instant: instant(seconds))) }
        func expected(_ seconds: Double, ahead: TimeInterval) -> Int64? { micros(database(seconds, ahead: ahead)) }
        /// A transaction sent at `seconds` read the database's clock `ahead` seconds ahead.
        func record(_ seconds: Double, ahead: TimeInterval) {
            clock.record(database(seconds, ahead: ahead), sentAt: instant(seconds), instant: instant(seconds))
        }
    }

    @Test(
        "the smallest offset of this window and the last is used; a clock stepped is followed; a stale reading is none")
    func offsets() {
        let line = Line()
        #expect(line.now(0) == nil)
        // The database is 5 s ahead; transactions start 2 ms, then 0.5 ms, then 3 ms after they are sent.
        line.record(0, ahead: 5.002)
        #expect(line.same(line.now(0), line.expected(0, ahead: 5.002)))
        line.record(1, ahead: 5.0005)
        line.record(2, ahead: 5.003)
        #expect(line.same(line.now(2), line.expected(2, ahead: 5.0005)))
        // The database's clock is stepped 1 s forward: the old windows' offset goes with them.
        line.record(11, ahead: 6.001)
        #expect(line.same(line.now(11), line.expected(11, ahead: 5.0005)))
        line.record(22, ahead: 6.001)
        #expect(line.same(line.now(22), line.expected(22, ahead: 6.001)))
        // Ten seconds without a reading: none, and the next reading starts afresh.
        #expect(line.now(32) == nil)
        line.record(40, ahead: 7)
        #expect(line.same(line.now(40), line.expected(40, ahead: 7)))
    }

    @Test("the receipt times given out keep their order, a microsecond apart at least, estimated or read")
    func ordered() throws {
        let line = Line()
        // A first reading 3 ms late, then a better one: the estimate moves back by 2.5 ms.
        line.record(0, ahead: 5.003)
        let first = try #require(line.now(0))
        line.record(0, ahead: 5.0005)
        let second = try #require(line.now(0.001))
        #expect(line.same(first, line.expected(0, ahead: 5.003)))
        #expect(second == first + 1)
        // A time read from the database before the last one given out comes after it.
        let read = try #require(line.micros(line.clock.issue(line.database(0, ahead: 5.001))))
        #expect(read == second + 1)
        // Later times pass through.
        #expect(line.same(line.micros(line.clock.issue(line.database(1, ahead: 5))), line.expected(1, ahead: 5)))
    }

    @Test("the database's clock stepped back 120 s: receipt times follow it at once instead of freezing")
    func steppedBack() throws {
        let line = Line()
        line.record(0, ahead: 0.001)
        #expect(line.same(line.now(0.5), line.expected(0.5, ahead: 0.001)))
        // The step: the next transaction reads a clock 120 s behind.
        line.record(1, ahead: -120)
        var times: [Int64] = []
        for tenth in 10...30 { times.append(try #require(line.now(Double(tenth) / 10))) }
        // Each time is the database's own, 120 s back, and time goes on (not the last one plus a microsecond).
        #expect(line.same(times.first, line.expected(1, ahead: -120)))
        #expect(line.same(times.last, line.expected(3, ahead: -120)))
        #expect(zip(times, times.dropFirst()).allSatisfy { abs($1 - $0 - 100_000) <= 1 })
    }

    @Test("the database's clock stepped forward 120 s: followed within two windows, never frozen, never ahead of it")
    func steppedForward() throws {
        let line = Line()
        line.record(0, ahead: 0.001)
        line.record(1, ahead: 120)
        var last = try #require(line.now(1))
        for second in 2...25 {
            line.record(Double(second), ahead: 120)
            let time = try #require(line.now(Double(second)))
            // Never past the database's clock, and moving on with time (by a second a reading).
            #expect(time <= line.expected(Double(second), ahead: 120)! + 1)
            #expect(time - last >= 1_000_000 - 1)
            last = time
        }
        #expect(line.same(last, line.expected(25, ahead: 120)))
    }
}
