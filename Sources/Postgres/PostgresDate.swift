import Foundation

extension Date: PostgresEncodable, PostgresDecodable {
    /// The `timestamptz` text in UTC with microseconds, such as `2026-11-22 03:02:57.123456+00`.
    ///
    /// The value is rounded to the nearest microsecond, PostgreSQL's resolution.
    public var postgresText: String {
        TimestampText.encode(microsecondsSinceEpoch: TimestampText.microseconds(of: self))
    }

    /// Decodes the server's ISO `timestamptz` output, with or without a fraction, with an offset such
    /// as `+00`, `+00:00` or `-08:00`, and with or without a trailing ` BC`.
    public init(postgresText: String) throws {
        self = TimestampText.date(microsecondsSinceEpoch: try TimestampText.decode(postgresText))
    }
}
