import Foundation
import Postgres

/// Every row write of `apns_provider_tokens` in a test's schema, recorded by a trigger into
/// `token_writes`: to check how often the shared provider token was written, and with what.
package struct APNsTokenWrites {
    /// One write: the statement (`INSERT` or `UPDATE`), the token written and its `iat`.
    package struct Write: Equatable {
        package var op: String
        package var token: String
        package var issuedAt: Int
    }

    let api: TestAPI

    /// Installs the trigger in `api`'s schema (migrated already).
    package init(_ api: TestAPI) throws {
        self.api = api
        _ = try api.query("CREATE TABLE token_writes (seq serial, op text, token text, issued_at bigint)")
        _ = try api.query(
            """
            CREATE FUNCTION record_token_write() RETURNS trigger LANGUAGE plpgsql AS $$
            BEGIN
                INSERT INTO token_writes (op, token, issued_at) VALUES (TG_OP, NEW.token, NEW.issued_at);
                RETURN NEW;
            END $$
            """)
        _ = try api.query(
            """
            CREATE TRIGGER token_written AFTER INSERT OR UPDATE ON apns_provider_tokens
            FOR EACH ROW EXECUTE FUNCTION record_token_write()
            """)
    }

    /// Every write so far, in order.
    package func all() throws -> [Write] {
        try api.query("SELECT op, token, issued_at FROM token_writes ORDER BY seq").map {
            Write(op: try $0.decode("op"), token: try $0.decode("token"), issuedAt: try $0.decode("issued_at"))
        }
    }

    /// The stored rows: team, key id and token.
    package func rows() throws -> [(teamID: String, keyID: String, token: String)] {
        try api.query("SELECT team_id, key_id, token FROM apns_provider_tokens ORDER BY team_id, key_id").map {
            (try $0.decode("team_id"), try $0.decode("key_id"), try $0.decode("token"))
        }
    }
}
