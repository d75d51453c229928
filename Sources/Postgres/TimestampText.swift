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
        let (days, microsecondOfDay) = floorDivision(total, microsecondsPerDay)
        var (year, month, day) = civil(fromDays: days)
        let secondOfDay = microsecondOfDay / microsecondsPerSecond
        let fraction = microsecondOfDay % microsecondsPerSecond
        // PostgreSQL has no year 0: year 0 of the proleptic calendar is 1 BC.
        let isBC = year <= 0
        if isBC { year = 1 - year }
        var text = pad(year, 4) + "-" + pad(month, 2) + "-" + pad(day, 2) + " "
        text += pad(secondOfDay / 3600, 2) + ":" + pad(secondOfDay / 60 % 60, 2) + ":" + pad(secondOfDay % 60, 2)
        text += "." + pad(fraction, 6) + "+00"
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
        let days = days(fromCivil: civilYear, month, day)
        let localSeconds = days * 86_400 + hour * 3600 + minute * 60 + second
        return (localSeconds - offsetSeconds) * microsecondsPerSecond + fraction
    }

    private static var invalid: PostgresError {
        PostgresError(kind: .decoding, message: "not an ISO timestamp with a time zone offset")
    }

    private static func pad(_ value: Int64, _ width: Int) -> String {
        let digits = String(value)
        return digits.count >= width ? digits : String(repeating: "0", count: width - digits.count) + digits
    }

    private static func floorDivision(_ value: Int64, _ divisor: Int64) -> (Int64, Int64) {
        var quotient = value / divisor
        var remainder = value % divisor
        if remainder < 0 {
            quotient -= 1
            remainder += divisor
        }
        return (quotient, remainder)
    }

    // Howard Hinnant's civil_from_days and days_from_civil for the proleptic Gregorian calendar.
    private static func civil(fromDays days: Int64) -> (Int64, Int64, Int64) {
        let shifted = days + 719_468
        let era = (shifted >= 0 ? shifted : shifted - 146_096) / 146_097
        let dayOfEra = shifted - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1460 + dayOfEra / 36524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let shiftedMonth = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * shiftedMonth + 2) / 5 + 1
        let month = shiftedMonth < 10 ? shiftedMonth + 3 : shiftedMonth - 9
        let year = yearOfEra + era * 400 + (month <= 2 ? 1 : 0)
        return (year, month, day)
    }

    private static func days(fromCivil civilYear: Int64, _ month: Int64, _ day: Int64) -> Int64 {
        let year = month <= 2 ? civilYear - 1 : civilYear
        let era = (year >= 0 ? year : year - 399) / 400
        let yearOfEra = year - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
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
