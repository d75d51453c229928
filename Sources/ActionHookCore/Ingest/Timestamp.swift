import Basics
import Foundation

/// RFC 3339 times: formatted in UTC with milliseconds, parsed with any offset.
///
/// Written by hand rather than with `ISO8601DateFormatter` so that formatting is exact to the
/// millisecond, round-trips, and needs no shared formatter state.
///
/// A time is reported truncated to the millisecond, never rounded up: a row stored at `…07.787583` is
/// `…07.787Z`, so a client that asks for what came at or after a time it was shown gets that row too
/// (``filterBound(_:)`` makes the filters agree).
public enum Timestamp {
    /// Formats `date` as RFC 3339 in UTC with milliseconds (truncated): `2026-11-20T10:00:00.000Z`.
    public static func format(_ date: Date) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(24)
        append(date, to: &out)
        return String(decoding: out, as: UTF8.self)
    }

    /// `date` as ``format(_:)``'s text reads back with ``parse(_:)``: truncated to the millisecond.
    /// Nil when that text would not parse: a UTC year outside 0000–9999.
    public static func toTheMillisecond(_ date: Date) -> Date? {
        let (seconds, millisecond) = secondsAndMillisecond(date)
        guard (0...9999).contains(CivilDate.date(days: CivilDate.floorDivide(seconds, 86_400).0).0) else { return nil }
        // What parse computes from the text: whole seconds plus the fraction "0.mmm" read as a Double
        // (an integer over 1000 is the same correctly rounded value).
        return Date(timeIntervalSince1970: Double(seconds) + Double(millisecond) / 1000)
    }

    /// Appends ``format(_:)``'s text as UTF-8.
    public static func append(_ date: Date, to out: inout [UInt8]) {
        let (seconds, millisecond) = secondsAndMillisecond(date)
        let (days, secondOfDay) = CivilDate.floorDivide(seconds, 86_400)
        let (year, month, day) = CivilDate.date(days: days)
        if (0...9999).contains(year) {
            appendDigits(year, 4, to: &out)
        } else {
            out.append(contentsOf: CivilDate.pad(year, 4).utf8)
        }
        out.append(UInt8(ascii: "-"))
        appendDigits(month, 2, to: &out)
        out.append(UInt8(ascii: "-"))
        appendDigits(day, 2, to: &out)
        out.append(UInt8(ascii: "T"))
        appendDigits(secondOfDay / 3600, 2, to: &out)
        out.append(UInt8(ascii: ":"))
        appendDigits(secondOfDay % 3600 / 60, 2, to: &out)
        out.append(UInt8(ascii: ":"))
        appendDigits(secondOfDay % 60, 2, to: &out)
        out.append(UInt8(ascii: "."))
        appendDigits(millisecond, 3, to: &out)
        out.append(UInt8(ascii: "Z"))
    }

    /// Appends a non-negative `value` below 10^`width` as exactly `width` digits.
    private static func appendDigits(_ value: Int64, _ width: Int, to out: inout [UInt8]) {
        var divisor: Int64 = 1
        for _ in 1..<width { divisor *= 10 }
        var rest = value
        while divisor > 0 {
            out.append(UInt8(ascii: "0") + UInt8(rest / divisor))
            rest %= divisor
            divisor /= 10
        }
    }

    /// Parses an RFC 3339 date-time with an offset (`Z` or `±hh:mm`) and optional fractional seconds;
    /// nil for anything else.
    public static func parse(_ text: String) -> Date? {
        var text = text
        return text.withUTF8(parse)
    }

    private static func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> Date? {
        var index = 0
        func number(_ width: Int) -> Int64? {
            guard index + width <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[index..<index + width] {
                guard (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) else { return nil }
                value = value * 10 + Int64(byte - UInt8(ascii: "0"))
            }
            index += width
            return value
        }
        func literal(_ characters: String) -> Bool {
            guard index < bytes.count, characters.utf8.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = number(4), literal("-"), let month = number(2), literal("-"), let day = number(2),
            literal("Tt"), let hour = number(2), literal(":"), let minute = number(2), literal(":"),
            let second = number(2)
        else { return nil }
        guard (1...12).contains(month), (1...CivilDate.daysInMonth(year: year, month: month)).contains(day),
            hour <= 23, minute <= 59, second <= 60
        else { return nil }
        var fraction = 0.0
        if index < bytes.count && bytes[index] == UInt8(ascii: ".") {
            index += 1
            let start = index
            while index < bytes.count && (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
            guard index > start, let value = Double("0." + String(decoding: bytes[start..<index], as: UTF8.self))
            else { return nil }
            fraction = value
        }
        var offset: Int64 = 0
        if literal("Zz") {
            offset = 0
        } else {
            guard index < bytes.count else { return nil }
            let sign: Int64 = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            guard literal("+-"), let offsetHour = number(2), literal(":"), let offsetMinute = number(2),
                offsetHour <= 23, offsetMinute <= 59
            else { return nil }
            offset = sign * (offsetHour * 3600 + offsetMinute * 60)
        }
        guard index == bytes.count else { return nil }
        let days = CivilDate.days(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offset
        return Date(timeIntervalSince1970: Double(seconds) + fraction)
    }

    /// The bound a time filter compares stored times with, so that it agrees with their reported text:
    /// `date` rounded up to the millisecond. A stored time is reported truncated to the millisecond, and
    /// that text is at or after `date` exactly when the stored time is at or after the bound (and before
    /// `date` exactly when the stored time is before the bound); a `date` that is a reported time is its
    /// own bound.
    public static func filterBound(_ date: Date) -> Date {
        let microseconds = microseconds(date)
        let (milliseconds, rest) = CivilDate.floorDivide(microseconds, 1000)
        let bound = rest == 0 ? milliseconds : milliseconds + 1
        return Date(timeIntervalSince1970: Double(bound) / 1000)
    }

    /// `date` to the microsecond, PostgreSQL's precision: a time read from the database is a whole
    /// number of microseconds, up to the error of the `Double` that holds it.
    private static func microseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1_000_000).rounded())
    }

    /// `date` truncated to the millisecond (taken to the microsecond first, so that a stored
    /// `…07.788000` held as `…07.787999999` is still `.788`), as whole seconds since 1970 (rounded down)
    /// and the millisecond.
    private static func secondsAndMillisecond(_ date: Date) -> (Int64, Int64) {
        CivilDate.floorDivide(CivilDate.floorDivide(microseconds(date), 1000).0, 1000)
    }
}
