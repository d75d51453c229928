import ActionHookCore
import Foundation
import Postgres

/// An admin token as listed: never its secret.
public struct AdminTokenInfo: Sendable {
    /// The token's id.
    public var id: UUID
    /// A name saying what it is for.
    public var name: String
    /// When it was created.
    public var createdAt: Date
    /// When it was revoked, if it was.
    public var revokedAt: Date?

    /// The token as the API lists it.
    public var json: JSONValue {
        .object([
            "id": .string(id.lowercasedString), "name": .string(name),
            "createdAt": .string(Timestamp.format(createdAt)),
            "revokedAt": revokedAt.map { .string(Timestamp.format($0)) } ?? .null,
        ])
    }
}

/// Admin tokens created through the API (the bootstrap token lives in the environment only).
public struct AdminTokenStore: Sendable {
    let pool: Database

    /// Creates the store over a pool.
    public init(pool: PostgresPool) {
        self.pool = Database(pool)
    }

    /// Creates a token; the secret exists only in the returned value.
    public func create(name: String) throws -> (AdminTokenInfo, secret: String) {
        let id = UUID()
        let secret = SecretToken.generate(prefix: SecretToken.adminTokenPrefix)
        let rows = try pool.withConnection { connection in
            try connection.query(
                """
                INSERT INTO admin_tokens (id, name, token_hash) VALUES (\(id), \(name), \(SecretToken.digest(secret)))
                RETURNING id, name, created_at, revoked_at
                """)
        }
        return (try Self.decode(rows[0]), secret)
    }

    /// Every token, newest first.
    public func list() throws -> [AdminTokenInfo] {
        try pool.withConnection { connection in
            try connection.query(
                "SELECT id, name, created_at, revoked_at FROM admin_tokens ORDER BY created_at DESC, id"
            )
            .map(Self.decode)
        }
    }

    /// Revokes a token. Returns whether it existed and was active.
    public func revoke(id: UUID) throws -> Bool {
        try pool.withConnection { connection in
            try connection.execute(
                "UPDATE admin_tokens SET revoked_at = now() WHERE id = \(id) AND revoked_at IS NULL") > 0
        }
    }

    /// Whether an active token has this SHA-256 digest.
    public func isActive(digest: [UInt8]) throws -> Bool {
        try pool.withConnection { connection in
            try !connection.query(
                "SELECT 1 AS one FROM admin_tokens WHERE token_hash = \(digest) AND revoked_at IS NULL"
            ).isEmpty
        }
    }

    static func decode(_ row: PostgresRow) throws -> AdminTokenInfo {
        AdminTokenInfo(
            id: try row.decode("id"), name: try row.decode("name"), createdAt: try row.decode("created_at"),
            revokedAt: try row.decode("revoked_at"))
    }
}
