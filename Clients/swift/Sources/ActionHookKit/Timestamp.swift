import Foundation

/// RFC 3339 times as ActionHook reads and writes them.
enum Timestamp {
    /// `2026-11-25T10:00:00.123Z`: UTC with milliseconds.
    static func string(from date: Date) -> String {
        // From whole milliseconds: the format style truncates, and a time such as …514.304 (held as
        // …514.30399…) would be written .303 and read back a millisecond early.
        let millis = milliseconds(date)
        let seconds = millis >= 0 ? millis / 1_000 : (millis - 999) / 1_000
        let fraction = millis - seconds * 1_000
        let whole = Date(timeIntervalSince1970: TimeInterval(seconds)).formatted(Date.ISO8601FormatStyle())
        return whole.dropLast() + "." + String(fraction + 1_000).dropFirst() + "Z"
    }

    /// The time an RFC 3339 string with or without fractional seconds stands for, to the millisecond: digits
    /// past the millisecond are cut (truncated, as the server does), so a time read here is the one it stores and
    /// a reply's signature covers.
    static func date(from string: String) -> Date? {
        let string = truncatingFraction(string)
        let parsed =
            (try? Date.ISO8601FormatStyle(includingFractionalSeconds: true).parse(string))
            ?? (try? Date.ISO8601FormatStyle().parse(string))
        return parsed.map { milliseconds(milliseconds($0)) }
    }

    /// `string` with its fractional seconds cut to three digits.
    static func truncatingFraction(_ string: String) -> String {
        let utf8 = Array(string.utf8)
        guard let time = utf8.firstIndex(where: { $0 == UInt8(ascii: "T") || $0 == UInt8(ascii: "t") }),
            let dot = utf8[time...].firstIndex(of: UInt8(ascii: "."))
        else { return string }
        let digits = dot + 1
        let end = utf8[digits...].firstIndex { !(UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) } ?? utf8.endIndex
        guard end - digits > 3 else { return string }
        return String(decoding: utf8[..<(digits + 3)] + utf8[end...], as: UTF8.self)
    }

    /// Whole milliseconds since 1970: how the queue keeps times, so a time read back equals the one written.
    static func milliseconds(_ date: Date) -> Int64 {
        Int64((date.timeIntervalSince1970 * 1_000).rounded())
    }

    /// The time `milliseconds` after 1970.
    static func milliseconds(_ milliseconds: Int64) -> Date {
        Date(timeIntervalSince1970: Double(milliseconds) / 1_000)
    }

    /// A JSON encoder that writes times as whole milliseconds.
    static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(milliseconds(date))
        }
        return encoder
    }

    /// A JSON decoder that reads times written by `encoder`.
    static var decoder: JSONDecoder {
        let decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            milliseconds(try decoder.singleValueContainer().decode(Int64.self))
        }
        return decoder
    }

    /// The seconds to wait from a `Retry-After` header: delay-seconds or an HTTP date (RFC 9110 §10.2.3).
    static func retryAfter(_ header: String?, now: Date) -> TimeInterval? {
        guard let header = header?.trimmingCharacters(in: .whitespaces), !header.isEmpty else { return nil }
        if let seconds = Int(header) { return seconds >= 0 ? TimeInterval(seconds) : nil }
        let formatter = DateFormatter()
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "GMT")
        formatter.dateFormat = "EEE, dd MMM yyyy HH:mm:ss zzz"
        guard let date = formatter.date(from: header) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }
}
