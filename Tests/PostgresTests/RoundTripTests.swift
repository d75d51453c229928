import Foundation
import Postgres
import TestSupport
import Testing

@Suite("Values round-trip through a live server")
struct RoundTripTests {
    @Test("NULL and non-ASCII text round-trip as binds")
    func textAndNull() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        try connection.execute("CREATE TABLE notes (id int PRIMARY KEY, body text)")
        let texts = [
            "emoji 😀👩‍👩‍👧‍👦", "CJK 漢字かなカナ한국어", "combining e\u{301} vs \u{e9}", "quote ' and \" and \\ and $1",
            "",
        ]
        for (index, text) in texts.enumerated() {
            #expect(try connection.execute("INSERT INTO notes VALUES (\(index), \(text))") == 1)
        }
        let missing: String? = nil
        try connection.execute("INSERT INTO notes VALUES (\(texts.count), \(missing))")

        let rows = try connection.query("SELECT id, body, octet_length(body) AS bytes FROM notes ORDER BY id")
        #expect(rows.count == texts.count + 1)
        #expect(rows.columns == ["id", "body", "bytes"])
        for (index, text) in texts.enumerated() {
            let body: String = try rows[index].decode("body")
            // Compare the scalars: Swift's == treats "e\u{301}" and "\u{e9}" as equal, the server does not.
            #expect(Array(body.unicodeScalars) == Array(text.unicodeScalars))
            #expect(try rows[index].decode("bytes", as: Int.self) == text.utf8.count)
        }
        let last = rows[texts.count]
        #expect(last.isNull("body"))
        #expect(!rows[0].isNull("body"))
        let absent: String? = try last.decode("body")
        #expect(absent == nil)
        #expect(try last.decode("body", as: String?.self) == nil)
        #expect(try last.decode(1, as: String?.self) == nil)
        let error = #expect(throws: PostgresError.self) { try last.decode("body", as: String.self) }
        #expect(error?.kind == .decoding)
        #expect(error?.description.contains("body") == true)
        #expect(throws: PostgresError.self) { try last.decode("no_such_column", as: String?.self) }
        #expect(throws: PostgresError.self) { try last.decode(9, as: String?.self) }
    }

    @Test("every encodable type round-trips through a typed column")
    func allTypes() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        try connection.execute(
            """
            CREATE TABLE everything (
                s text, sub text, i bigint, i32 integer, i64 bigint, yes boolean, no boolean, d float8,
                u uuid, ts timestamptz, bytes bytea, blob bytea, jb jsonb, js json,
                strings text[], uuids uuid[], ints bigint[]
            )
            """
        )
        let allBytes = (0...255).map { UInt8($0) }
        let date = Date(timeIntervalSinceReferenceDate: 816_836_577.123456)
        let beforeEpoch = Date(timeIntervalSince1970: -1.000001)
        let id = UUID()
        let strings = [
            "plain", "with \"quotes\"", "back\\slash", "comma,here", "NULL", "null", "", " padded ", "{brace}", "😀",
        ]
        let uuids = [UUID(), UUID()]
        let ints = [Int.min, 0, Int.max]
        let jsonb = PostgresJSON(#"{"a": [1, 2.5, null], "k": "é😀"}"#)
        let json = PostgresJSON(#"{ "kept":  "as written" }"#)
        try connection.execute(
            """
            INSERT INTO everything VALUES (
                \("text ✓"), \(Substring("sub-string")), \(Int.max), \(Int32.min), \(Int64.min), \(true), \(false),
                \(0.1), \(id), \(date), \(allBytes), \(Data(allBytes.reversed())), \(jsonb), \(json),
                \(strings), \(uuids), \(ints)
            )
            """
        )
        let rows = try connection.query("SELECT * FROM everything")
        #expect(rows.count == 1)
        let row = rows[0]
        #expect(try row.decode("s", as: String.self) == "text ✓")
        #expect(try row.decode("sub", as: Substring.self) == "sub-string")
        #expect(try row.decode("i", as: Int.self) == Int.max)
        #expect(try row.decode("i32", as: Int32.self) == Int32.min)
        #expect(try row.decode("i64", as: Int64.self) == Int64.min)
        #expect(try row.decode("yes", as: Bool.self) == true)
        #expect(try row.decode("no", as: Bool.self) == false)
        #expect(try row.decode("d", as: Double.self) == 0.1)
        #expect(try row.decode("u", as: UUID.self) == id)
        #expect(try row.decode("ts", as: Date.self) == date)
        #expect(try row.decode("bytes", as: [UInt8].self) == allBytes)
        #expect(try row.decode("blob", as: Data.self) == Data(allBytes.reversed()))
        #expect(try row.decode("jb", as: PostgresJSON.self) == jsonb)
        #expect(try row.decode("js", as: PostgresJSON.self) == json)
        #expect(try row.decode("strings", as: [String].self) == strings)
        #expect(try row.decode("uuids", as: [UUID].self) == uuids)
        #expect(try row.decode("ints", as: [Int].self) == ints)

        // The server's own view of what was stored, so a symmetric encode/decode bug cannot hide.
        let check = try connection.query(
            """
            SELECT ts = '2026-11-20 03:02:57.123456+00' AS ts_ok, octet_length(bytes) AS n,
                   get_byte(bytes, 0) AS first, get_byte(bytes, 255) AS last, array_length(strings, 1) AS count,
                   strings[5] IS NOT NULL AND strings[5] = 'NULL' AS null_word_ok, jb -> 'a' ->> 1 AS element
            FROM everything
            """
        )[0]
        #expect(try check.decode("ts_ok", as: Bool.self))
        #expect(try check.decode("n", as: Int.self) == 256)
        #expect(try check.decode("first", as: Int.self) == 0)
        #expect(try check.decode("last", as: Int.self) == 255)
        #expect(try check.decode("count", as: Int.self) == strings.count)
        #expect(try check.decode("null_word_ok", as: Bool.self))
        #expect(try check.decode("element", as: String.self) == "2.5")

        let special = try connection.query(
            """
            SELECT \(Double.nan)::float8 AS nan, \(-Double.infinity)::float8 AS ninf,
                   \(Double.leastNonzeroMagnitude)::float8 AS tiny, \(beforeEpoch)::timestamptz AS old,
                   \([UInt8]())::bytea AS empty, \([String]())::text[] AS none
            """
        )[0]
        #expect(try special.decode("nan", as: Double.self).isNaN)
        #expect(try special.decode("ninf", as: Double.self) == -.infinity)
        #expect(try special.decode("tiny", as: Double.self) == Double.leastNonzeroMagnitude)
        #expect(try special.decode("old", as: Date.self) == beforeEpoch)
        #expect(try special.decode("empty", as: [UInt8].self) == [])
        #expect(try special.decode("none", as: [String].self) == [])
    }

    @Test("timestamps without a fraction and in another session time zone decode")
    func serverTimestampForms() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        let utc = try connection.query("SELECT '2026-11-20 03:02:57+00'::timestamptz AS t")[0]
        #expect(try utc.decode("t", as: Date.self) == Date(timeIntervalSince1970: 1_795_143_777))
        #expect(try connection.query("SHOW TimeZone")[0].decode(0, as: String.self) == "UTC")
        try connection.execute("SET TimeZone = 'Asia/Kolkata'")
        let shifted = try connection.query("SELECT '2026-11-20 03:02:57.25+00'::timestamptz AS t")[0]
        #expect(try shifted.decode("t", as: String.self) == "2026-11-20 08:32:57.25+05:30")
        #expect(try shifted.decode("t", as: Date.self) == Date(timeIntervalSince1970: 1_795_143_777.25))
    }

    @Test("affected rows are counted; statements without a count report 0")
    func affectedRows() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        #expect(try connection.execute("CREATE TABLE t (n int)") == 0)
        #expect(try connection.execute("INSERT INTO t SELECT generate_series(1, 5)") == 5)
        #expect(try connection.execute("UPDATE t SET n = n + 1 WHERE n > \(2)") == 3)
        let deleted = try connection.query("DELETE FROM t WHERE n > \(4) RETURNING n")
        #expect(deleted.affectedRows == 2)
        #expect(deleted.count == 2)
        #expect(
            try connection.query("SELECT n FROM t ORDER BY n").map { try $0.decode("n", as: Int.self) } == [1, 2, 4])
    }

    @Test("a script runs several statements; parameters refuse NUL")
    func scriptAndNul() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        try connection.executeScript(
            unsafeSQL: "CREATE TABLE a (n int); INSERT INTO a VALUES (1); INSERT INTO a VALUES (2);")
        #expect(try connection.query("SELECT count(*) AS n FROM a")[0].decode("n", as: Int.self) == 2)
        let error = #expect(throws: PostgresError.self) { try connection.query("SELECT \("nul\u{0}byte")") }
        #expect(error?.kind == .misuse)
        #expect(connection.isHealthy)
    }
}
