import ActionHookCore
import Foundation
import Testing

@Suite("Timestamp")
struct TimestampTests {
    @Test(arguments: [
        (0.0, "1970-01-01T00:00:00.000Z"),
        (-1.0, "1969-12-31T23:59:59.000Z"),
        (1_700_000_000.123, "2023-11-14T22:13:20.123Z"),
        (1_709_251_199.0, "2024-02-29T23:59:59.000Z"),
        (946_684_800.0, "2000-01-01T00:00:00.000Z"),
        (1_795_168_799.9996, "2026-11-20T09:59:59.999Z"),
        (1_795_168_807.787583, "2026-11-20T10:00:07.787Z"),
        (1_795_168_807.788, "2026-11-20T10:00:07.788Z"),
        (-0.0004, "1969-12-31T23:59:59.999Z"),
    ])
    func formatsUTCWithMilliseconds(seconds: Double, text: String) {
        #expect(Timestamp.format(Date(timeIntervalSince1970: seconds)) == text)
    }

    /// A time is reported truncated, never rounded up, also when the `Double` holding a stored time sits
    /// just below its millisecond (a time read from the database is whole microseconds).
    @Test func truncatesStoredMicroseconds() {
        for microsecond: Int64 in [787_000, 787_583, 787_999, 788_000, 999_999, 0, 1] {
            let stored = 1_795_168_807_000_000 + microsecond
            let date = Date(timeIntervalSinceReferenceDate: Double(stored - 978_307_200_000_000) / 1_000_000)
            let millisecond = microsecond / 1000
            #expect(
                Timestamp.format(date) == "2026-11-20T10:00:07.\(String(millisecond + 1000).dropFirst())Z",
                "\(microsecond) µs")
        }
    }

    /// A filter's bound agrees with the reported text: a stored time's text is at or after a time exactly
    /// when the stored time is at or after the bound, whatever the time's precision; a reported time is
    /// its own bound.
    @Test func filterBoundAgreesWithTheReportedText() throws {
        var generator = SystemRandomNumberGenerator()
        func microseconds(_ date: Date) -> Int64 { Int64((date.timeIntervalSince1970 * 1_000_000).rounded()) }
        let base: Int64 = 1_795_168_807_000_000
        for _ in 0..<20_000 {
            let stored = base + Int64.random(in: 0..<10_000, using: &generator)
            let storedDate = Date(timeIntervalSince1970: Double(stored) / 1_000_000)
            let reported = try #require(Timestamp.parse(Timestamp.format(storedDate)))
            // The filter's time: a reported millisecond, or any microsecond.
            let filterMicroseconds =
                Bool.random(using: &generator)
                ? base + 1000 * Int64.random(in: 0..<10, using: &generator)
                : base + Int64.random(in: 0..<10_000, using: &generator)
            let filter = Date(timeIntervalSince1970: Double(filterMicroseconds) / 1_000_000)
            let bound = microseconds(Timestamp.filterBound(filter))
            #expect(bound % 1000 == 0)
            #expect(
                (microseconds(reported) >= filterMicroseconds) == (stored >= bound),
                "stored \(stored), filter \(filterMicroseconds)")
        }
        let shown = try #require(Timestamp.parse("2026-11-20T10:00:07.787Z"))
        #expect(Timestamp.format(Timestamp.filterBound(shown)) == "2026-11-20T10:00:07.787Z")
        let finer = try #require(Timestamp.parse("2026-11-20T10:00:07.7871Z"))
        #expect(Timestamp.format(Timestamp.filterBound(finer)) == "2026-11-20T10:00:07.788Z")
    }

    @Test(arguments: [
        ("2026-11-20T10:00:00Z", 1_795_168_800.0),
        ("2026-11-20T10:00:00z", 1_795_168_800.0),
        ("2026-11-20t10:00:00Z", 1_795_168_800.0),
        ("2026-11-20T11:00:00+01:00", 1_795_168_800.0),
        ("2026-11-20T04:30:00-05:30", 1_795_168_800.0),
        ("2026-11-20T10:00:00.250Z", 1_795_168_800.25),
        ("2024-02-29T23:59:59.000Z", 1_709_251_199.0),
        ("1969-12-31T23:59:59Z", -1.0),
    ])
    func parsesWithOffsets(text: String, seconds: Double) throws {
        let date = try #require(Timestamp.parse(text))
        #expect(abs(date.timeIntervalSince1970 - seconds) < 0.000_5)
    }

    @Test(arguments: [
        "", "2026-11-20", "2026-11-20T10:00:00", "2026-11-20 10:00:00Z", "2026-13-01T00:00:00Z",
        "2026-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-11-20T24:00:00Z", "2026-11-20T10:60:00Z",
        "2026-11-20T10:00:00.Z", "2026-11-20T10:00:00+0100", "2026-11-20T10:00:00+01", "2026-11-20T10:00:00Z ",
        "26-11-20T10:00:00Z", "2026-11-20T10:00:00+24:00", "１９７０-01-01T00:00:00Z",
    ])
    func refusesAnythingElse(text: String) {
        #expect(Timestamp.parse(text) == nil)
    }

    /// The shortcut the ingest path takes equals formatting and parsing back, bit for bit; and it
    /// refuses what the text form cannot carry.
    @Test func toTheMillisecondIsTheFormattedTextReadBack() throws {
        var generator = SystemRandomNumberGenerator()
        var seconds: [Double] = [
            0, -0.0004, -0.0005, -0.0006, -1.0005, 0.0005, 0.9995, 1_795_168_799.9996, -62_167_219_200,
            -62_167_219_200.0006, 253_402_300_799.999, 253_402_300_799.9996, 253_402_300_800,
        ]
        for _ in 0..<20_000 { seconds.append(Double.random(in: -62_167_219_200...253_402_300_799, using: &generator)) }
        for _ in 0..<5_000 { seconds.append(Double(Int.random(in: -1_000_000...1_000_000)) / 1000 + 0.0005) }
        for value in seconds {
            let date = Date(timeIntervalSince1970: value)
            let expected = Timestamp.parse(Timestamp.format(date))
            #expect(Timestamp.toTheMillisecond(date) == expected, "\(value)")
        }
        #expect(Timestamp.toTheMillisecond(Date(timeIntervalSince1970: -62_167_219_200.001)) == nil)
        #expect(Timestamp.toTheMillisecond(Date(timeIntervalSince1970: 253_402_300_800)) == nil)
    }

    @Test(arguments: [0.0, 1_700_000_000.123, 1_795_168_800.999, 4_102_444_800.001])
    func roundTrips(seconds: Double) throws {
        let text = Timestamp.format(Date(timeIntervalSince1970: seconds))
        let parsed = try #require(Timestamp.parse(text))
        #expect(Timestamp.format(parsed) == text)
    }
}
