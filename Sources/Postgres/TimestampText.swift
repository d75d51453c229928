import Basics
import Foundation

/// Conversions between `Date`, microseconds since 1970 and PostgreSQL's ISO timestamp text.
///
/// They are written out because `ISO8601DateFormatter` stops at milliseconds and `DateFormatter`
/// depends on the process's locale and calendar.
enum TimestampText {
    private static let microsecondsPerSecond: Int64 = 1_000_000
    private static let microsecondsPerDay: Int64 = 86_400 * microsecondsPerSecond
    // Whole seconds from 1970 to 2001, so the conversion stays exact in integers.
    private static let referenceDateOffsetMicroseconds: Int64 = 978_307_200 * microsecondsPerSecond

    static func microseconds(of date: Date) -> Int64 {
        // timeIntervalSinceReferenceDate is what Date stores; using it avoids one rounding step.
        let sinceReference = (date.timeIntervalSinceReferenceDate * 1_000_000).rounded()
        return Int64(sinceReference) + referenceDateOffsetMicroseconds
    }

    static func date(microsecondsSinceEpoch: Int64) -> Date {
        Date(
            timeIntervalSinceReferenceDate: Double(microsecondsSinceEpoch - referenceDateOffsetMicroseconds) / 1_000_000
        )
    }

    static func encode(microsecondsSinceEpoch total: Int64) -> String {
        let (days, microsecondOfDay) = CivilDate.floorDivide(total, microsecondsPerDay)
        var (year, month, day) = CivilDate.date(days: days)
        let secondOfDay = microsecondOfDay / microsecondsPerSecond
        let fraction = microsecondOfDay % microsecondsPerSecond
        // PostgreSQL has no year 0: year 0 of the proleptic calendar is 1 BC.
        let isBC = year <= 0
        if isBC { year = 1 - year }
        var text = CivilDate.pad(year, 4) + "-" + CivilDate.pad(month, 2) + "-" + CivilDate.pad(day, 2) + " "
        text +=
            CivilDate.pad(secondOfDay / 3600, 2) + ":" + CivilDate.pad(secondOfDay / 60 % 60, 2) + ":"
            + CivilDate.pad(secondOfDay % 60, 2)
        text += "." + CivilDate.pad(fraction, 6) + "+00"
        if isBC { text += " BC" }
        return text
    }

    static func decode(_ text: String) throws -> Int64 {
        var scanner = Scanner(Array(text.utf8))
        guard let year = scanner.digits(minimum: 4, maximum: 7), scanner.skip("-"),
            let month = scanner.digits(exactly: 2), scanner.skip("-"),
            let day = scanner.digits(exactly: 2), scanner.skip(" ") || scanner.skip("T"),
            let hour = scanner.digits(exactly: 2), scanner.skip(":"),
            let minute = scanner.digits(exactly: 2), scanner.skip(":"),
            let second = scanner.digits(exactly: 2),
            (1...12).contains(month), (1...31).contains(day), hour < 24, minute < 60, second < 60
        else {
            throw invalid
        }
        var fraction: Int64 = 0
        if scanner.skip(".") {
            let start = scanner.position
            guard let digits = scanner.digits(minimum: 1, maximum: 6) else { throw invalid }
            var scale = scanner.position - start
            fraction = digits
            while scale < 6 {
                fraction *= 10
                scale += 1
            }
        }
        var offsetSeconds: Int64 = 0
        if scanner.skip("Z") {
            offsetSeconds = 0
        } else {
            let sign: Int64
            if scanner.skip("+") {
                sign = 1
            } else if scanner.skip("-") {
                sign = -1
            } else {
                throw invalid
            }
            guard let hours = scanner.digits(exactly: 2) else { throw invalid }
            var minutes: Int64 = 0
            var seconds: Int64 = 0
            if scanner.skip(":") {
                guard let value = scanner.digits(exactly: 2) else { throw invalid }
                minutes = value
                if scanner.skip(":") {
                    guard let value = scanner.digits(exactly: 2) else { throw invalid }
                    seconds = value
                }
            }
            offsetSeconds = sign * (hours * 3600 + minutes * 60 + seconds)
        }
        var civilYear = year
        if scanner.skip(" BC") {
            civilYear = 1 - year
        }
        guard scanner.isAtEnd else { throw invalid }
        let days = CivilDate.days(year: civilYear, month: month, day: day)
        let localSeconds = days * 86_400 + hour * 3600 + minute * 60 + second
        return (localSeconds - offsetSeconds) * microsecondsPerSecond + fraction
    }

    private static var invalid: PostgresError {
        PostgresError(kind: .decoding, message: "not an ISO timestamp with a time zone offset")
    }

    private struct Scanner {
        let bytes: [UInt8]
        var position = 0

        init(_ bytes: [UInt8]) { self.bytes = bytes }

        var isAtEnd: Bool { position == bytes.count }

        mutating func skip(_ literal: StaticString) -> Bool {
            let count = literal.utf8CodeUnitCount
            guard position + count <= bytes.count else { return false }
            let matches = literal.withUTF8Buffer { buffer in
                buffer.elementsEqual(bytes[position..<position + count])
            }
            if matches { position += count }
            return matches
        }

        mutating func digits(exactly count: Int) -> Int64? {
            digits(minimum: count, maximum: count)
        }

        mutating func digits(minimum: Int, maximum: Int) -> Int64? {
            var value: Int64 = 0
            var count = 0
            while position < bytes.count, count < maximum,
                bytes[position] >= UInt8(ascii: "0"), bytes[position] <= UInt8(ascii: "9")
            {
                value = value * 10 + Int64(bytes[position] - UInt8(ascii: "0"))
                position += 1
                count += 1
            }
            guard count >= minimum else { return nil }
            return value
        }
    }
}
