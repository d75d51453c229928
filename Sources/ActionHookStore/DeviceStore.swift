import ActionHookCore
import Foundation
import Postgres

/// Registered devices and their users: what a send to a user resolves, and what erasing a user removes.
public struct DeviceStore: Sendable {
    let pool: Database

    /// Creates the store over a pool.
    public init(pool: PostgresPool) {
        self.pool = Database(pool)
    }

    /// Registers `token` for `appID` as `registration` says and returns the device as stored.
    ///
    /// The newest registration wins: a token registered by another user moves to this one, and one APNs
    /// declared dead is active again (the app has a token APNs gave it since). A user keeps at most
    /// ``DeviceRegistration/maxDevicesPerUser`` active devices: the ones registered longest ago past it
    /// become `removed`. Registrations of one user take turns (a lock on the user; an anonymous device locks
    /// only its own token), so two at once never keep more than the bound.
    ///
    /// `keepingOwner` (the app registering without a user token): a device registered to a user is left as it
    /// is and nil returned, so an app's public key cannot take a device away from its user.
    public func register(appID: String, token: String, _ registration: DeviceRegistration, keepingOwner: Bool)
        throws -> JSONValue?
    {
        let user = registration.user
        let rows = try pool.pipelinedTransaction([
            """
            SELECT pg_advisory_xact_lock(hashtextextended(\(
                AppScoped(appID: appID, name: UnitSeparated.join("user", user ?? "device:" + token)).lockText), 0))
            """,
            """
            INSERT INTO devices AS d (app_id, token, status, reason, updated_at, user_id, platform, environment, locale,
                time_zone, app_version, os_version, model, registered_at, public_key, key_fingerprint,
                key_registered_at)
            VALUES (\(appID), \(token), 'active', NULL, now(), \(user), \(registration.platform),
                \(registration.environment), \(registration.locale), \(registration.timeZone),
                \(registration.appVersion), \(registration.osVersion), \(registration.model), now(),
                \(registration.publicKey?.x963)::bytea, \(registration.publicKey?.fingerprint),
                CASE WHEN \(registration.publicKey?.fingerprint)::text IS NOT NULL THEN now() END)
            ON CONFLICT (app_id, token) DO UPDATE SET status = 'active', reason = NULL, updated_at = now(),
                user_id = EXCLUDED.user_id, platform = EXCLUDED.platform, environment = EXCLUDED.environment,
                locale = EXCLUDED.locale, time_zone = EXCLUDED.time_zone, app_version = EXCLUDED.app_version,
                os_version = EXCLUDED.os_version, model = EXCLUDED.model, registered_at = now(),
                -- A new key replaces the current one, which stays the previous key for the window; no key keeps it.
                public_key = coalesce(EXCLUDED.public_key, d.public_key),
                key_fingerprint = coalesce(EXCLUDED.key_fingerprint, d.key_fingerprint),
                key_registered_at = CASE WHEN EXCLUDED.key_fingerprint IS DISTINCT FROM d.key_fingerprint
                    AND EXCLUDED.key_fingerprint IS NOT NULL THEN now() ELSE d.key_registered_at END,
                previous_public_key = CASE WHEN EXCLUDED.key_fingerprint <> d.key_fingerprint THEN d.public_key
                    ELSE d.previous_public_key END,
                previous_key_fingerprint = CASE WHEN EXCLUDED.key_fingerprint <> d.key_fingerprint
                    THEN d.key_fingerprint ELSE d.previous_key_fingerprint END,
                previous_key_retired_at = CASE WHEN EXCLUDED.key_fingerprint <> d.key_fingerprint THEN now()
                    ELSE d.previous_key_retired_at END
            WHERE NOT \(keepingOwner) OR d.user_id IS NULL
            """,
            """
            UPDATE devices SET status = 'removed', reason = 'replaced', updated_at = now()
            WHERE app_id = \(appID) AND user_id = \(user) AND status = 'active' AND token IN (
                SELECT token FROM devices WHERE app_id = \(appID) AND user_id = \(user) AND status = 'active'
                ORDER BY registered_at DESC, token OFFSET \(DeviceRegistration.maxDevicesPerUser))
            RETURNING pg_notify(\(Channels.deviceKeys), \(appID) || chr(31) || token)::text AS told
            """,
            "SELECT \(unsafeSQL: Self.columns) FROM devices WHERE app_id = \(appID) AND token = \(token)",
            "SELECT pg_notify(\(Channels.deviceKeys), \(UnitSeparated.join(appID, token)))",
        ])
        let device = try Self.view(rows[3][0])
        if keepingOwner, registration.user == nil, device.objectValue?["user"] != .null { return nil }
        return device
    }

    /// Signs a device out (`removed`, reason `signedOut`): with `user`, only a device registered to that
    /// user; without, only an anonymous one. False when there is no such device; signing out a removed
    /// device again changes nothing (a retried sign-out succeeds).
    public func signOut(appID: String, token: String, user: String?) throws -> Bool {
        try pool.withConnection { connection in
            try connection.query(
                """
                UPDATE devices SET status = 'removed',
                    reason = CASE WHEN status = 'removed' THEN reason ELSE 'signedOut' END,
                    updated_at = CASE WHEN status = 'removed' THEN updated_at ELSE now() END
                WHERE app_id = \(appID) AND token = \(token) AND user_id IS NOT DISTINCT FROM \(user)
                RETURNING token, pg_notify(\(Channels.deviceKeys), \(UnitSeparated.join(appID, token)))::text AS told
                """)
        }.count == 1
    }

    /// The keys that may verify a reply from `token` now: the current one, and the one it replaced while
    /// that is younger than `windowSeconds` (the idempotency window). Empty for a device without a key, an
    /// unknown one, or a removed one (removal forgets its keys).
    public func verifyingKeys(appID: String, token: String, windowSeconds: Int) throws -> [String: DevicePublicKey] {
        let rows = try pool.withConnection { connection in
            try connection.query(
                """
                SELECT public_key, key_fingerprint,
                    CASE WHEN previous_key_retired_at > now() - make_interval(secs => \(windowSeconds))
                        THEN previous_public_key END AS previous_public_key
                FROM devices WHERE app_id = \(appID) AND token = \(token) AND status <> 'removed'
                """)
        }
        var keys: [String: DevicePublicKey] = [:]
        for row in rows {
            for column in ["public_key", "previous_public_key"] {
                if let bytes = try row.decode(column, as: [UInt8]?.self), let key = DevicePublicKey(bytes: bytes) {
                    keys[key.fingerprint] = key
                }
            }
        }
        return keys
    }

    /// The app's devices (of one user, when given), by token, a page at a time.
    public func list(appID: String, user: String?, _ page: PageRequest) throws -> Page<JSONValue> {
        let after = try page.cursor.map { encoded -> String in
            guard let cursor = Cursor(encoded: encoded, count: 1) else { throw InvalidCursor() }
            return cursor.parts[0]
        }
        let rows = try pool.withConnection { connection in
            try connection.query(
                """
                SELECT \(unsafeSQL: Self.columns) FROM devices
                WHERE app_id = \(appID) AND (\(user)::text IS NULL OR user_id = \(user))
                    AND (\(after)::text IS NULL OR token > \(after))
                ORDER BY token LIMIT \(page.limit + 1)
                """)
        }
        let items = try rows.prefix(page.limit).map(Self.view)
        let next = rows.count > page.limit ? Cursor([try rows[page.limit - 1].decode("token")]).encoded : nil
        return Page(items: items, nextCursor: next)
    }

    /// A user's devices (active first, newest first), or nil when the app has none registered for the user.
    public func user(appID: String, _ user: String) throws -> JSONValue? {
        let rows = try pool.withConnection { connection in
            try connection.query(
                """
                SELECT \(unsafeSQL: Self.columns) FROM devices WHERE app_id = \(appID) AND user_id = \(user)
                ORDER BY status = 'active' DESC, registered_at DESC NULLS LAST, token
                """)
        }
        guard !rows.isEmpty else { return nil }
        return .object(["user": .string(user), "devices": .array(try rows.map(Self.view))])
    }

    /// The tokens of a user's devices, whatever their status (for erasure).
    public func tokens(appID: String, user: String) throws -> [String] {
        try pool.withConnection { connection in
            try connection.query("SELECT token FROM devices WHERE app_id = \(appID) AND user_id = \(user)")
                .map { try $0.decode("token", as: String.self) }
        }
    }

    static let columns: StaticString = """
        token, user_id, platform, environment, status, reason, locale, time_zone, app_version, os_version, model,
        registered_at, updated_at, key_fingerprint, key_registered_at
        """

    /// A device as the API shows it.
    static func view(_ row: PostgresRow) throws -> JSONValue {
        func text(_ column: String) throws -> JSONValue {
            (try row.decode(column, as: String?.self)).map(JSONValue.string) ?? .null
        }
        func time(_ column: String) throws -> JSONValue {
            (try row.decode(column, as: Date?.self)).map { .string(Timestamp.format($0)) } ?? .null
        }
        let status: String = try row.decode("status")
        return .object([
            "deviceToken": try text("token"), "user": try text("user_id"), "platform": try text("platform"),
            "environment": try text("environment"), "status": .string(status),
            "reason": status == "active" ? .null : try text("reason"), "locale": try text("locale"),
            "timeZone": try text("time_zone"), "appVersion": try text("app_version"),
            "osVersion": try text("os_version"), "model": try text("model"), "registeredAt": try time("registered_at"),
            "updatedAt": try time("updated_at"),
            "publicKey": try row.decode("key_fingerprint", as: String?.self) == nil
                ? .null
                : .object(["fingerprint": try text("key_fingerprint"), "registeredAt": try time("key_registered_at")]),
        ])
    }
}
