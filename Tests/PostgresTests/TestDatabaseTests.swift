import Foundation
import Postgres
import TestSupport
import Testing

@Suite("TestDatabase gives each test its own schema")
struct TestDatabaseTests {
    @Test("the schema is fresh, is the search path, and drop is idempotent")
    func schemaLifecycle() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        #expect(database.schema.wholeMatch(of: /t_[0-9a-f]{16}/) != nil)
        let connection = try PostgresConnection(configuration: database.configuration)
        #expect(try connection.query("SELECT current_schema() AS s")[0].decode("s", as: String.self) == database.schema)
        try connection.execute("CREATE TABLE here (n int)")
        let located = try connection.query(
            "SELECT count(*) AS n FROM pg_tables WHERE schemaname = \(database.schema) AND tablename = 'here'"
        )
        #expect(try located[0].decode("n", as: Int.self) == 1)

        database.drop()
        database.drop()
        let remaining = try connection.query(
            "SELECT count(*) AS n FROM pg_namespace WHERE nspname = \(database.schema)"
        )
        #expect(try remaining[0].decode("n", as: Int.self) == 0)
    }

    @Test("a key=value base string works as well as a URI")
    func conninfoForm() throws {
        let database = try TestDatabase.create()
        defer { database.drop() }
        let probe = try PostgresConnection(configuration: database.configuration)
        let (host, port) = try serverAddress(probe)
        let user: String = try probe.query("SELECT current_user AS u")[0].decode("u")
        let name: String = try probe.query("SELECT current_database() AS d")[0].decode("d")
        let other = try TestDatabase.create(
            baseConnectionString: "host='\(host)' port=\(port) user='\(user)' dbname='\(name)'"
        )
        defer { other.drop() }
        #expect(other.connectionString.hasSuffix("options='-csearch_path=\(other.schema)'"))
        let connection = try PostgresConnection(configuration: other.configuration)
        #expect(try connection.query("SELECT current_schema() AS s")[0].decode("s", as: String.self) == other.schema)
        #expect(other.schema != database.schema)
    }
}
