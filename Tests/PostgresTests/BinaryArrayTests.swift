import Foundation
import Postgres
import TestSupport
import Testing

@Suite("Arrays bound in binary form")
struct BinaryArrayTests {
    @Test("every element type reads back as the server's own value, NULLs included, prepared and not")
    func everyElementType() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        let texts: [String?] = ["emoji 😀👩‍👩‍👧‍👦", nil, "quote ' \" \\ {a,b} NULL", ""]
        var text = PostgresBinaryArray(.text)
        for value in texts { text.append(value) }
        let uuids: [UUID?] = [UUID(), nil, UUID(uuidString: "00000000-0000-0000-0000-0000000000ff")!]
        var uuid = PostgresBinaryArray(.uuid)
        for value in uuids { uuid.append(value) }
        var int4 = PostgresBinaryArray(.int4)
        for value: Int32? in [0, -1, nil, .max, .min] { int4.append(value) }
        var bool = PostgresBinaryArray(.bool)
        for value: Bool? in [true, false, nil] { bool.append(value) }
        // Before and after 2000-01-01 (PostgreSQL's epoch) and 1970, to the millisecond.
        let dates: [Date?] = [
            Date(timeIntervalSince1970: 1_795_000_000.123), nil, Date(timeIntervalSince1970: -86_400.5),
            Date(timeIntervalSince1970: 946_684_799.999),
        ]
        var timestamp = PostgresBinaryArray(.timestamptz)
        for value in dates { timestamp.append(value) }
        // To the microsecond, or truncated to the millisecond (a time held just below a millisecond stays on it).
        var precise = PostgresBinaryArray(.timestamptz)
        precise.append(Date(timeIntervalSince1970: 1_795_000_000.123456))
        precise.append(milliseconds: Date(timeIntervalSince1970: 1_795_000_000.123456))
        precise.append(milliseconds: Date(timeIntervalSince1970: -0.0004))
        precise.append(milliseconds: Date(timeIntervalSince1970: 1_795_000_000.788))
        precise.append(milliseconds: Date(timeIntervalSince1970: 1_795_000_000.787_999_9))
        var bytea = PostgresBinaryArray(.bytea)
        for value: [UInt8]? in [[0, 1, 255], nil, []] { bytea.append(bytes: value) }
        var jsonb = PostgresBinaryArray(.jsonb)
        jsonb.append(#"{"b": 1, "a": [true, null, "x"]}"#)
        jsonb.append(nil as String?)
        var json = PostgresBinaryArray(.json)
        json.append(utf8: Array(#"{"b": 1, "a": 2}"#.utf8))

        for prepared in [false, true] {
            var query: PostgresQuery = """
                SELECT \(text)::text[]::text AS text, \(uuid)::uuid[]::text AS uuid, \(int4)::int4[]::text AS int4,
                    \(bool)::bool[]::text AS bool,
                    (SELECT array_agg(to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') ORDER BY o)
                     FROM unnest(\(timestamp)::timestamptz[]) WITH ORDINALITY AS x(t, o))::text AS timestamptz,
                    \(bytea)::bytea[]::text AS bytea, \(jsonb)::jsonb[]::text AS jsonb, \(json)::json[]::text AS json,
                    cardinality(\(text)::text[]) AS count,
                    (SELECT array_agg(to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') ORDER BY o)
                     FROM unnest(\(precise)::timestamptz[]) WITH ORDINALITY AS x(t, o))::text AS precise
                """
            if prepared { query = query.prepared }
            let row = try connection.pipeline([query])[0][0]
            let textArray: String = try row.decode("text")
            #expect(textArray == #"{"emoji 😀👩‍👩‍👧‍👦",NULL,"quote ' \" \\ {a,b} NULL",""}"#)
            #expect(
                try row.decode("uuid", as: String.self)
                    == "{\(uuids[0]!.uuidString.lowercased()),NULL,00000000-0000-0000-0000-0000000000ff}")
            #expect(try row.decode("int4", as: String.self) == "{0,-1,NULL,2147483647,-2147483648}")
            #expect(try row.decode("bool", as: String.self) == "{t,f,NULL}")
            #expect(
                try row.decode("timestamptz", as: String.self)
                    == #"{"2026-11-18 11:06:40.123000",NULL,"1969-12-30 23:59:59.500000","1999-12-31 23:59:59.999000"}"#
            )
            #expect(try row.decode("bytea", as: String.self) == #"{"\\x0001ff",NULL,"\\x"}"#)
            #expect(try row.decode("jsonb", as: String.self) == #"{"{\"a\": [true, null, \"x\"], \"b\": 1}",NULL}"#)
            #expect(try row.decode("json", as: String.self) == #"{"{\"b\": 1, \"a\": 2}"}"#)
            #expect(try row.decode("count", as: Int.self) == 4)
            #expect(
                try row.decode("precise", as: String.self)
                    == #"{"2026-11-18 11:06:40.123456","2026-11-18 11:06:40.123000","1969-12-31 23:59:59.999000","#
                    + #""2026-11-18 11:06:40.788000","2026-11-18 11:06:40.788000"}"#)
        }
    }

    @Test("an empty array has no elements; text and binary parameters mix in one statement")
    func emptyAndMixed() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        let empty = PostgresBinaryArray(.uuid)
        let names = ["a", "b"]
        var ids = PostgresBinaryArray(.int4)
        ids.append(Int32(7))
        ids.append(Int32(8))
        let row = try connection.query(
            """
            SELECT cardinality(\(empty)::uuid[]) AS empty, \(names)::text[]::text AS names,
                \(ids)::int4[]::text AS ids, \("x") AS x
            """)[0]
        #expect(try row.decode("empty", as: Int.self) == 0)
        #expect(try row.decode("names", as: String.self) == "{a,b}")
        #expect(try row.decode("ids", as: String.self) == "{7,8}")
        #expect(try row.decode("x", as: String.self) == "x")
    }

    @Test("a value the server refuses (a NUL in text) fails the statement with the server's error")
    func refusedValue() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        var text = PostgresBinaryArray(.text)
        text.append("a\u{0}b")
        let error = #expect(throws: PostgresError.self) {
            try connection.query("SELECT \(text)::text[] AS t")
        }
        #expect(error?.kind == .server)
        #expect(try connection.query("SELECT 1 AS one")[0].decode("one", as: Int.self) == 1)
    }
}
