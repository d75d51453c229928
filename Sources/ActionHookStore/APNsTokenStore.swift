import ActionHookCore
import Postgres

/// APNs provider tokens shared by every instance through `apns_provider_tokens`: one per signing key
/// (team, key id and key), replaced by one instance when it is stale or refused, read by the others.
public struct APNsTokenStore: SharedProviderTokens {
    let pool: Database

    /// Creates the store over a pool.
    public init(pool: PostgresPool) {
        self.pool = Database(pool)
    }

    /// The key's token at `now`: the stored one while it is fresh and not `refused`, else a new one
    /// signed here and stored. One transaction under the key's advisory lock (see
    /// `sql/migrations/012_apns_provider_tokens.sql`), so a caller that waited for another reads the
    /// token that one wrote. Blocks: a round trip, or a wait for another instance's refresh.
    public func token(for key: APNsSigningKey, at now: Int, refused: String?) throws -> (
        token: APNsProviderToken, signed: Bool
    ) {
        try pool.transaction { connection in
            try connection.execute(
                """
                SELECT pg_advisory_xact_lock(2, hashtext(current_schema() || chr(31) || \(key.teamId) || chr(31)
                    || \(key.keyId)))
                """)
            let rows = try connection.query(
                """
                SELECT token, issued_at FROM apns_provider_tokens
                WHERE team_id = \(key.teamId) AND key_id = \(key.keyId) AND key_digest = \(key.keyDigest)
                """)
            if let row = rows.first {
                let stored = APNsProviderToken(jwt: try row.decode("token"), issuedAt: try row.decode("issued_at"))
                if stored.jwt != refused && !stored.isStale(at: now) { return (stored, false) }
            }
            let token = try key.sign(issuedAt: now)
            try connection.execute(
                """
                INSERT INTO apns_provider_tokens (team_id, key_id, key_digest, token, issued_at)
                VALUES (\(key.teamId), \(key.keyId), \(key.keyDigest), \(token.jwt), \(token.issuedAt))
                ON CONFLICT (team_id, key_id, key_digest) DO UPDATE
                SET token = EXCLUDED.token, issued_at = EXCLUDED.issued_at, updated_at = now()
                """)
            return (token, true)
        }
    }
}
