import ActionHookCore
import Foundation
import Postgres

/// An app as stored, with its timestamps.
public struct StoredApp: Sendable {
    /// The app's settings.
    public var definition: AppDefinition
    /// When the app was created.
    public var createdAt: Date
    /// When the app was last changed.
    public var updatedAt: Date
    /// When the webhook endpoint answered 410 Gone, disabling it until the webhook is updated.
    public var webhookDisabledAt: Date?

    /// The app as the API shows it: secrets are never included, only whether they are set.
    public var json: JSONValue {
        var object: JSONObject = [
            "id": .string(definition.id), "name": .string(definition.name),
        ]
        if let apns = definition.apns {
            object["apns"] = .object([
                "teamId": .string(apns.teamId), "keyId": .string(apns.keyId), "topic": .string(apns.topic),
                "environment": .string(apns.environment), "privateKeyConfigured": .bool(true),
            ])
        } else {
            object["apns"] = .null
        }
        if let webhook = definition.webhook {
            object["webhook"] = .object([
                "url": .string(webhook.url), "secretConfigured": .bool(true),
                "disabled": .bool(webhookDisabledAt != nil),
            ])
        } else {
            object["webhook"] = .null
        }
        object["rateLimitPerSecond"] = definition.rateLimitPerSecond.map { .integer($0) } ?? .null
        object["retentionDays"] = definition.retentionDays.map { .integer($0) } ?? .null
        object["identity"] = definition.identity.json
        object["createdAt"] = .string(Timestamp.format(createdAt))
        object["updatedAt"] = .string(Timestamp.format(updatedAt))
        return .object(object)
    }
}

/// What a key of an app may do.
public enum KeyScope: String, Sendable, Equatable {
    /// The phone's key (`ahk_…`): forward replies, read the categories.
    case ingest
    /// The app's backend's server key (`ahs_…`): send notifications and read their receipts.
    case send

    /// The prefix of this scope's secrets.
    public var prefix: String { self == .ingest ? SecretToken.ingestKeyPrefix : SecretToken.serverKeyPrefix }
}

/// A newly created ingest or server key; the secret exists only in this value.
public struct IngestKey: Sendable {
    /// The key's id.
    public var id: UUID
    /// What it may do.
    public var scope: KeyScope = .ingest
    /// The bearer secret, shown once.
    public var secret: String
    /// When it was created.
    public var createdAt: Date

    /// The key as the API shows it on creation.
    public var json: JSONValue {
        .object([
            "id": .string(id.lowercasedString), "scope": .string(scope.rawValue), "secret": .string(secret),
            "createdAt": .string(Timestamp.format(createdAt)),
        ])
    }
}

/// What an ingest key authenticates: the app and its rate limit.
public struct IngestPrincipal: Sendable, Equatable {
    /// The app the key belongs to.
    public var appID: String
    /// The app's own rate limit, if set.
    public var rateLimitPerSecond: Int?
    /// What the key may do.
    public var scope: KeyScope = .ingest
    /// The app's identity verification.
    public var identity: IdentitySettings = .off
}

/// Apps, their ingest keys, and admin tokens.
public struct AppStore: Sendable {
    let pool: Database

    /// Creates the store over a pool.
    public init(pool: PostgresPool) {
        self.pool = Database(pool)
    }

    /// Creates an app and its first ingest key. An id whose deleted app's rows are still being purged is
    /// ``StoreError/wrongState(_:)``: the purge would take the new app's rows too.
    public func create(_ app: AppDefinition) throws -> (StoredApp, IngestKey) {
        do {
            return try pool.transaction { connection in
                // The app's lock, as its deletion takes it: a deletion of this id commits before or after.
                try connection.execute("SELECT pg_advisory_xact_lock(1, actionhook_app_lock_key(\(app.id)))")
                let purging = try connection.query("SELECT 1 AS one FROM app_deletions WHERE app_id = \(app.id)")
                if !purging.isEmpty {
                    throw StoreError.wrongState(
                        "An app with this id was deleted and its history is still being removed; create it again shortly."
                    )
                }
                let rows = try connection.query(
                    """
                    INSERT INTO apps (id, name, apns_team_id, apns_key_id, apns_private_key, apns_topic,
                        apns_environment, webhook_url, webhook_secret, rate_limit_per_second, retention_days, identity)
                    VALUES (\(app.id), \(app.name), \(app.apns?.teamId), \(app.apns?.keyId), \(app.apns?.privateKey),
                        \(app.apns?.topic), \(app.apns?.environment), \(app.webhook?.url), \(app.webhook?.secret),
                        \(app.rateLimitPerSecond), \(app.retentionDays), \(Self.identityColumn(app.identity))::jsonb)
                    RETURNING \(unsafeSQL: Self.columns)
                    """)
                let key = try Self.insertKey(appID: app.id, connection: connection)
                return (try Self.decodeApp(rows[0]), key)
            }
        } catch let error as PostgresError where error.isUniqueViolation {
            throw StoreError.alreadyExists
        }
    }

    /// The app, or `nil`.
    public func app(_ id: String) throws -> StoredApp? {
        try pool.withConnection { connection in
            try connection.query("SELECT \(unsafeSQL: Self.columns) FROM apps WHERE id = \(id)")
                .first.map(Self.decodeApp)
        }
    }

    /// Every app, ordered by id, one page at a time.
    public func list(_ page: PageRequest) throws -> Page<StoredApp> {
        let after: String? = try page.cursor.map { encoded in
            guard let cursor = Cursor(encoded: encoded, count: 1) else { throw InvalidCursor() }
            return cursor.parts[0]
        }
        let rows = try pool.withConnection { connection in
            try connection.query(
                """
                SELECT \(unsafeSQL: Self.columns) FROM apps
                WHERE (\(after)::text IS NULL OR id > \(after)) ORDER BY id LIMIT \(page.limit + 1)
                """)
        }
        let apps = try rows.prefix(page.limit).map(Self.decodeApp)
        let next = rows.count > page.limit ? apps.last.map { Cursor([$0.definition.id]).encoded } : nil
        return Page(items: apps, nextCursor: next)
    }

    /// Changes an app under a row lock. `change` returns the new settings; a changed webhook
    /// re-enables a disabled endpoint.
    public func update(_ id: String, _ change: (AppDefinition) throws -> AppDefinition) throws -> StoredApp {
        try pool.transaction { connection in
            let rows = try connection.query("SELECT \(unsafeSQL: Self.columns) FROM apps WHERE id = \(id) FOR UPDATE")
            guard let row = rows.first else { throw StoreError.notFound }
            let current = try Self.decodeApp(row)
            let app = try change(current.definition)
            let webhookChanged = app.webhook != current.definition.webhook
            let updated = try connection.query(
                """
                UPDATE apps SET name = \(app.name), apns_team_id = \(app.apns?.teamId),
                    apns_key_id = \(app.apns?.keyId), apns_private_key = \(app.apns?.privateKey),
                    apns_topic = \(app.apns?.topic), apns_environment = \(app.apns?.environment),
                    webhook_url = \(app.webhook?.url), webhook_secret = \(app.webhook?.secret),
                    webhook_disabled_at = CASE WHEN \(webhookChanged) THEN NULL ELSE webhook_disabled_at END,
                    rate_limit_per_second = \(app.rateLimitPerSecond), retention_days = \(app.retentionDays),
                    identity = \(Self.identityColumn(app.identity))::jsonb, updated_at = now()
                WHERE id = \(id)
                RETURNING \(unsafeSQL: Self.columns)
                """)
            try connection.notify(channel: Channels.invalidate, payload: id)
            return try Self.decodeApp(updated[0])
        }
    }

    /// Deletes an app: at once its settings, keys, categories and rules (every route and key of the app
    /// stops), and records the deletion; the rows it owns in the tables that grow with traffic are removed
    /// in the background (``AppPurger``, woken by ``Channels/appDeleted``). Returns whether it existed.
    public func delete(_ id: String) throws -> Bool {
        try pool.transaction { connection in
            // The app's lock, shared by ingest transactions (class 1, see `IngestWriter`) and sends: waits for
            // those in progress to finish; later ones find the app gone.
            try connection.execute("SELECT pg_advisory_xact_lock(1, actionhook_app_lock_key(\(id)))")
            let deleted = try connection.execute("DELETE FROM apps WHERE id = \(id)")
            guard deleted > 0 else { return false }
            try connection.execute(
                "INSERT INTO app_deletions (app_id) VALUES (\(id)) ON CONFLICT (app_id) DO NOTHING")
            try connection.notify(channel: Channels.invalidate, payload: id)
            try connection.notify(channel: Channels.appDeleted, payload: id)
            return true
        }
    }

    /// Creates another ingest key for an existing app.
    public func createKey(appID: String, scope: KeyScope = .ingest) throws -> IngestKey {
        try pool.transaction { connection in
            let exists = try connection.query("SELECT 1 AS one FROM apps WHERE id = \(appID) FOR SHARE")
            guard !exists.isEmpty else { throw StoreError.notFound }
            return try Self.insertKey(appID: appID, scope: scope, connection: connection)
        }
    }

    /// Revokes an ingest key at once, on every instance. Returns whether it existed and was active.
    public func revokeKey(appID: String, keyID: UUID) throws -> Bool {
        try pool.transaction { connection in
            let revoked = try connection.execute(
                """
                UPDATE api_keys SET revoked_at = now()
                WHERE app_id = \(appID) AND id = \(keyID) AND revoked_at IS NULL
                """)
            if revoked > 0 { try connection.notify(channel: Channels.invalidate, payload: appID) }
            return revoked > 0
        }
    }

    /// The app an active ingest key belongs to, by the key's SHA-256 digest.
    public func principal(forKeyDigest digest: [UInt8]) throws -> IngestPrincipal? {
        try pool.withConnection { connection in
            try connection.query(
                """
                SELECT k.app_id, k.scope, a.rate_limit_per_second, a.identity FROM api_keys k JOIN apps a ON a.id = k.app_id
                WHERE k.secret_hash = \(digest) AND k.revoked_at IS NULL
                """
            ).first.map { row in
                IngestPrincipal(
                    appID: try row.decode("app_id"), rateLimitPerSecond: try row.decode("rate_limit_per_second"),
                    scope: KeyScope(rawValue: try row.decode("scope")) ?? .ingest, identity: try Self.identity(row))
            }
        }
    }

    static func insertKey(appID: String, scope: KeyScope = .ingest, connection: PostgresConnection) throws
        -> IngestKey
    {
        let id = UUID()
        let secret = SecretToken.generate(prefix: scope.prefix)
        let rows = try connection.query(
            """
            INSERT INTO api_keys (app_id, id, secret_hash, scope)
            VALUES (\(appID), \(id), \(SecretToken.digest(secret)), \(scope.rawValue))
            RETURNING created_at
            """)
        return IngestKey(id: id, scope: scope, secret: secret, createdAt: try rows[0].decode("created_at"))
    }

    static let columns: StaticString = """
        id, name, apns_team_id, apns_key_id, apns_private_key, apns_topic, apns_environment, webhook_url,
        webhook_secret, webhook_disabled_at, rate_limit_per_second, retention_days, identity, created_at, updated_at
        """

    /// The `identity` column's value: NULL for identity off with no keys.
    static func identityColumn(_ identity: IdentitySettings) -> PostgresJSON? {
        identity == .off ? nil : PostgresJSON(identity.storedJSON.jsonText)
    }

    /// The settings in an `identity` column.
    static func identity(_ row: PostgresRow) throws -> IdentitySettings {
        guard let stored = try row.decode("identity", as: PostgresJSON?.self) else { return .off }
        return IdentitySettings(stored: try JSONParser.parse(stored.text)) ?? .off
    }

    static func decodeApp(_ row: PostgresRow) throws -> StoredApp {
        var apns: APNsCredentials?
        if let teamId: String = try row.decode("apns_team_id") {
            apns = APNsCredentials(
                teamId: teamId, keyId: try row.decode("apns_key_id"), privateKey: try row.decode("apns_private_key"),
                topic: try row.decode("apns_topic"), environment: try row.decode("apns_environment"))
        }
        var webhook: WebhookEndpoint?
        if let url: String = try row.decode("webhook_url") {
            webhook = WebhookEndpoint(url: url, secret: try row.decode("webhook_secret"))
        }
        return StoredApp(
            definition: AppDefinition(
                id: try row.decode("id"), name: try row.decode("name"), apns: apns, webhook: webhook,
                rateLimitPerSecond: try row.decode("rate_limit_per_second"),
                retentionDays: try row.decode("retention_days"), identity: try identity(row)),
            createdAt: try row.decode("created_at"), updatedAt: try row.decode("updated_at"),
            webhookDisabledAt: try row.decode("webhook_disabled_at"))
    }
}
