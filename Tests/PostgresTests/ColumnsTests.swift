import Foundation
import Postgres
import TestSupport
import Testing

@Suite("Rows bound as named columns")
struct ColumnsTests {
    struct Device {
        var token: String
        var seen: Int32?
    }

    static func insert(_ devices: [Device]) -> PostgresQuery {
        var d = PostgresColumns(devices)
        d.add("token", .text) { $0.append($1.token) }
        d.add("seen", .int4) { $0.append($1.seen) }
        return """
            INSERT INTO devices (\(columns: d)) SELECT \(columns: d, of: "d") FROM \(unnest: d, as: "d")
            RETURNING token, seen
            """
    }

    @Test("the statement's text is written from the columns as added, the same for every batch of that shape")
    func text() {
        let one = Self.insert([Device(token: "a", seen: 1)])
        let three = Self.insert([Device(token: "a", seen: 1), Device(token: "b", seen: nil), Device(token: "c")])
        #expect(
            one.sql == """
                INSERT INTO devices (token, seen) SELECT d.token, d.seen FROM unnest($1::text[], $2::int4[]) AS d(token, seen)
                RETURNING token, seen
                """)
        #expect(three.sql == one.sql)
        #expect(three.bindCount == 2)

        // Another shape at another place in its statement: its own text, numbered after what came before.
        var e = PostgresColumns([1, 2])
        e.add("n", .int4) { $0.append(Int32($1)) }
        e.add("token", .text) { $0.append("t\($1)") }
        let other: PostgresQuery = """
            SELECT \(3), \(columns: e, except: ["n"], of: "e"), e.position \
            FROM \(unnest: e, as: "e", ordinality: "position")
            """
        #expect(
            other.sql
                == "SELECT $1, e.token, e.position FROM unnest($2::int4[], $3::text[]) WITH ORDINALITY AS e(n, token, position)"
        )
        #expect(e.names.map(\.description) == ["n", "token"])
    }

    @Test("the rows go in and come back column by column, NULLs included, prepared and not")
    func roundTrip() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let connection = try PostgresConnection(configuration: database.configuration)
        try connection.execute("CREATE TABLE devices (token text PRIMARY KEY, seen int4)")
        let devices = [Device(token: "a", seen: 1), Device(token: "b", seen: nil), Device(token: "c", seen: -7)]
        let rows = try connection.query(Self.insert(devices))
        #expect(try rows.map { try $0.decode("token", as: String.self) } == ["a", "b", "c"])
        #expect(try rows.map { try $0.decode("seen", as: Int?.self) } == [1, nil, -7])
        let again = try connection.pipeline([Self.insert([Device(token: "d", seen: 4)]).prepared])
        #expect(try again[0].map { try $0.decode("token", as: String.self) } == ["d"])
    }
}
