import Basics
import Testing

@Suite("Calendar arithmetic and JSON string literals shared by the wrappers and the domain")
struct CivilDateTests {
    @Test(
        "days since 1970 and back",
        arguments: [
            (1970, 1, 1, 0), (1969, 12, 31, -1), (2000, 2, 29, 11_016), (2026, 11, 25, 20_782), (1, 1, 1, -719_162),
            (9999, 12, 31, 2_932_896),
        ] as [(Int64, Int64, Int64, Int64)])
    func roundTrip(year: Int64, month: Int64, day: Int64, days: Int64) {
        #expect(CivilDate.days(year: year, month: month, day: day) == days)
        let date = CivilDate.date(days: days)
        #expect(date.year == year && date.month == month && date.day == day)
    }

    @Test("leap years, month lengths, floor division and padding")
    func helpers() {
        #expect(CivilDate.isLeap(2000) && CivilDate.isLeap(2024) && !CivilDate.isLeap(1900) && !CivilDate.isLeap(2026))
        #expect(CivilDate.daysInMonth(year: 2024, month: 2) == 29)
        #expect(CivilDate.daysInMonth(year: 2026, month: 2) == 28)
        #expect(CivilDate.daysInMonth(year: 2026, month: 11) == 30)
        #expect(CivilDate.floorDivide(-1, 86_400) == (-1, 86_399))
        #expect(CivilDate.floorDivide(86_401, 86_400) == (1, 1))
        #expect(CivilDate.pad(7, 4) == "0007" && CivilDate.pad(12_345, 4) == "12345")
    }

    @Test(
        "JSON string literals",
        arguments: [
            ("plain", #""plain""#), ("quote \" and \\", #""quote \" and \\""#),
            ("line\nbreak\ttab", #""line\nbreak\ttab""#),
            ("\u{1}\u{1F}", #""\u0001\u001f""#), ("js \u{2028}\u{2029}", #""js \u2028\u2029""#), ("é🎉", "\"é🎉\""),
        ])
    func jsonStrings(text: String, expected: String) {
        var out: [UInt8] = []
        JSONString.append(text, to: &out)
        #expect(String(decoding: out, as: UTF8.self) == expected)
        #expect(JSONString.quotedByteCount(text) == out.count)
    }
}
