import Foundation
import Postgres
import Testing

@Suite("Query building and text forms, without a server")
struct EncodingTests {
    @Test("interpolations become numbered parameters, never SQL text")
    func interpolation() {
        let name = "Robert'); DROP TABLE students;--"
        let missing: Int? = nil
        let present: Int? = 7
        let query: PostgresQuery =
            "SELECT * FROM t WHERE a = \(name) AND b = \(missing) AND c = \(present) AND d = \(3)"
        #expect(query.sql == "SELECT * FROM t WHERE a = $1 AND b = $2 AND c = $3 AND d = $4")
        #expect(query.bindCount == 4)
        #expect(!query.sql.contains("DROP"))
    }

    @Test("a plain literal and unsafeSQL keep their text")
    func literalAndUnsafe() {
        let literal: PostgresQuery = "SELECT 1"
        #expect(literal.sql == "SELECT 1")
        #expect(literal.bindCount == 0)
        let unsafe = PostgresQuery(unsafeSQL: "SELECT $1, $2", binds: [1, nil])
        #expect(unsafe.sql == "SELECT $1, $2")
        #expect(unsafe.bindCount == 2)
    }

    @Test(
        "scalar text forms",
        arguments: [
            ("true", true.postgresText), ("false", false.postgresText),
            ("-9223372036854775808", Int.min.postgresText), ("2147483647", Int32.max.postgresText),
            ("0.1", 0.1.postgresText), ("NaN", Double.nan.postgresText),
            ("Infinity", Double.infinity.postgresText), ("-Infinity", (-Double.infinity).postgresText),
            ("abc", Substring("xabcx").dropFirst().dropLast().postgresText),
            (
                "01234567-89ab-cdef-0123-456789abcdef",
                UUID(uuidString: "01234567-89AB-CDEF-0123-456789ABCDEF")!.postgresText
            ),
            ("\\x00ff10", [UInt8]([0, 255, 16]).postgresText), ("\\x", Data().postgresText),
            ("{\"a\": 1}", PostgresJSON("{\"a\": 1}").postgresText),
        ]
    )
    func scalarText(expected: String, actual: String) {
        #expect(actual == expected)
    }

    @Test("arrays quote every element and escape quotes and backslashes")
    func arrayText() {
        let strings = ["a", "b \"c\"", "back\\slash", "comma,", "NULL", "", "{}"]
        #expect(strings.postgresText == #"{"a","b \"c\"","back\\slash","comma,","NULL","","{}"}"#)
        #expect([String]().postgresText == "{}")
        #expect([1, -2].postgresText == #"{"1","-2"}"#)
        let id = UUID(uuidString: "01234567-89AB-CDEF-0123-456789ABCDEF")!
        #expect([id].postgresText == #"{"01234567-89ab-cdef-0123-456789abcdef"}"#)
    }

    @Test("the server's array output parses back, NULL elements refused")
    func arrayParsing() throws {
        let parsed = try [String](postgresText: #"{plain,"b \"c\"","back\\slash","comma,","NULL","","{}"}"#)
        #expect(parsed == ["plain", "b \"c\"", "back\\slash", "comma,", "NULL", "", "{}"])
        #expect(try [String](postgresText: "{}") == [])
        #expect(try [String](postgresText: "[0:1]={a,b}") == ["a", "b"])
        #expect(try [Int](postgresText: "{1,-2}") == [1, -2])
        #expect(throws: PostgresError.self) { try [String](postgresText: "{a,NULL}") }
        #expect(throws: PostgresError.self) { try [String](postgresText: "{{a},{b}}") }
        #expect(throws: PostgresError.self) { try [String](postgresText: "{a,") }
        #expect(throws: PostgresError.self) { try [String](postgresText: "a") }
    }

    @Test("dates are UTC with six fraction digits, before and after 1970")
    func dateText() throws {
        let date = Date(timeIntervalSince1970: 1_795_143_777.123456)
        #expect(date.postgresText == "2026-11-20 03:02:57.123456+00")
        #expect(Date(timeIntervalSince1970: -0.000001).postgresText == "1969-12-31 23:59:59.999999+00")
        #expect(Date(timeIntervalSince1970: 0).postgresText == "1970-01-01 00:00:00.000000+00")
        #expect(Date(timeIntervalSince1970: 951_782_400).postgresText == "2000-02-29 00:00:00.000000+00")
    }

    @Test(
        "timestamps parse with or without fraction and in several offset forms",
        arguments: [
            ("2026-11-20 03:02:57+00", 1_795_143_777_000_000),
            ("2026-11-20 03:02:57.5+00:00", 1_795_143_777_500_000),
            ("2026-11-20 03:02:57.123456+00", 1_795_143_777_123_456),
            ("2026-11-20T04:02:57.000001+01", 1_795_143_777_000_001),
            ("2026-11-19 19:02:57-08:00", 1_795_143_777_000_000),
            ("2026-11-20 08:32:57+05:30", 1_795_143_777_000_000),
            ("1969-12-31 23:59:59.999999+00", -1),
            ("0001-01-01 00:00:00+00 BC", -62_167_219_200_000_000),
        ] as [(String, Int64)]
    )
    func timestampParsing(text: String, microseconds: Int64) throws {
        let date = try Date(postgresText: text)
        let expected = Date(timeIntervalSinceReferenceDate: Double(microseconds - 978_307_200_000_000) / 1_000_000)
        #expect(date == expected)
    }

    @Test(
        "malformed timestamps are refused",
        arguments: [
            "2026-11-22", "infinity", "2026-11-20 03:02:57", "2026-13-01 00:00:00+00", "2026-11-20 03:02:57+00 junk",
        ])
    func timestampRefused(text: String) {
        #expect(throws: PostgresError.self) { try Date(postgresText: text) }
    }

    @Test("bytea accepts only the hex form")
    func byteaParsing() throws {
        #expect(try [UInt8](postgresText: "\\x00FFa0") == [0, 255, 160])
        #expect(try Data(postgresText: "\\x") == Data())
        #expect(throws: PostgresError.self) { try Data(postgresText: "\\x0") }
        #expect(throws: PostgresError.self) { try Data(postgresText: "\\xzz") }
        #expect(throws: PostgresError.self) { try Data(postgresText: "\\000") }
    }

    @Test("booleans, numbers and UUIDs parse the server's output")
    func scalarParsing() throws {
        #expect(try Bool(postgresText: "t") == true)
        #expect(try Bool(postgresText: "f") == false)
        #expect(throws: PostgresError.self) { try Bool(postgresText: "yes") }
        #expect(try Int(postgresText: "-42") == -42)
        #expect(throws: PostgresError.self) { try Int32(postgresText: "2147483648") }
        #expect(try Double(postgresText: "-Infinity") == -.infinity)
        #expect(try Double(postgresText: "NaN").isNaN)
        #expect(throws: PostgresError.self) { try UUID(postgresText: "not-a-uuid") }
    }

    @Test("PostgresJSON converts to and from Data")
    func json() {
        let json = PostgresJSON(data: Data(#"{"k":"é"}"#.utf8))
        #expect(json.text == #"{"k":"é"}"#)
        #expect(json.data == Data(#"{"k":"é"}"#.utf8))
    }
}
