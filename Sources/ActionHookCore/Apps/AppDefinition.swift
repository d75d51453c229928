import Basics
import Crypto
import Foundation

/// An app's APNs provider credentials. The private key is write-only through the API.
public struct APNsCredentials: Sendable, Equatable {
    /// The 10-character Apple Developer team id.
    public var teamId: String
    /// The 10-character id of the .p8 key.
    public var keyId: String
    /// The .p8 key, PEM (`-----BEGIN PRIVATE KEY-----`).
    public var privateKey: String
    /// The app's bundle id (the `apns-topic`).
    public var topic: String
    /// `sandbox` or `production`.
    public var environment: String

    /// Creates credentials.
    public init(teamId: String, keyId: String, privateKey: String, topic: String, environment: String) {
        self.teamId = teamId
        self.keyId = keyId
        self.privateKey = privateKey
        self.topic = topic
        self.environment = environment
    }
}

/// An app's own webhook endpoint and its Standard Webhooks signing secret (write-only).
public struct WebhookEndpoint: Sendable, Equatable {
    /// The `http`/`https` URL.
    public var url: String
    /// The `whsec_` secret.
    public var secret: String

    /// Creates an endpoint.
    public init(url: String, secret: String) {
        self.url = url
        self.secret = secret
    }
}

/// An app (tenant) as configured through the admin API.
public struct AppDefinition: Sendable, Equatable {
    /// The client-chosen slug.
    public var id: String
    /// A display name.
    public var name: String
    /// APNs credentials, when the app sends pushes.
    public var apns: APNsCredentials?
    /// The app's webhook endpoint, when it has one.
    public var webhook: WebhookEndpoint?
    /// Ingest requests per second allowed for this app; `nil` uses the server default.
    public var rateLimitPerSecond: Int?
    /// Days this app's history is kept; `nil` keeps the server's. Only a value shorter than the server's
    /// retention makes a difference.
    public var retentionDays: Int?
    /// How the app's phones prove who their user is (user tokens); off by default.
    public var identity: IdentitySettings

    /// The values `retentionDays` may take: a day to a hundred years.
    public static let retentionDaysRange = 1...36_500

    /// The fewest whole days that keep a reply as long as its idempotency key (`hours`): a key that
    /// outlived its reply could no longer replay it, and its retry would be stored as a new reply.
    public static func minimumRetentionDays(idempotencyWindowHours hours: Int) -> Int { (hours + 23) / 24 }

    /// Refuses a `retentionDays` shorter than the idempotency window of `hours` (422 at `/retentionDays`).
    public func checkRetention(idempotencyWindowHours hours: Int) throws(ValidationFailure) {
        let minimum = Self.minimumRetentionDays(idempotencyWindowHours: hours)
        guard let retentionDays, retentionDays < minimum else { return }
        throw ValidationFailure.invalid([
            FieldError(
                pointer: "/retentionDays",
                detail:
                    "must be at least \(minimum) days: replies are kept as long as their idempotency keys (ACTIONHOOK_IDEMPOTENCY_TTL_HOURS)"
            )
        ])
    }

    /// Creates an app.
    public init(
        id: String, name: String, apns: APNsCredentials? = nil, webhook: WebhookEndpoint? = nil,
        rateLimitPerSecond: Int? = nil, retentionDays: Int? = nil, identity: IdentitySettings = .off
    ) {
        self.id = id
        self.name = name
        self.apns = apns
        self.webhook = webhook
        self.rateLimitPerSecond = rateLimitPerSecond
        self.retentionDays = retentionDays
        self.identity = identity
    }

    /// What decoding an app's definition produced: the app, and the secrets generated for it, which the
    /// answer shows once.
    public struct Decoded: Sendable {
        /// The app.
        public var app: AppDefinition
        /// The webhook signing secret generated for a webhook given without one.
        public var generatedWebhookSecret: String?
        /// The HS256 secrets generated for new identity keys, by `kid`.
        public var generatedIdentitySecrets: [String: String] = [:]

        /// The secrets as members of the answer (`webhookSecret`, `identitySecrets`), to merge into it.
        public var answerMembers: JSONObject {
            var members = JSONObject()
            if let generatedWebhookSecret { members["webhookSecret"] = .string(generatedWebhookSecret) }
            if !generatedIdentitySecrets.isEmpty {
                members["identitySecrets"] = .object(
                    JSONObject(generatedIdentitySecrets.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) }))
            }
            return members
        }
    }

    static let serverOwned: Set<String> = [
        "createdAt", "updatedAt", "ingestKey", "ingestKeys", "webhookSecret", "identitySecrets",
    ]

    /// Decodes a `POST /v1/apps` body. A webhook without `secret` gets a generated one, returned
    /// as `generatedWebhookSecret` so the answer can show it once.
    public static func decodeCreate(_ body: JSONValue) throws(ValidationFailure) -> Decoded {
        var diagnostics = Diagnostics()
        guard var reader = ObjectReader.root(body, &diagnostics) else {
            try diagnostics.check()
            preconditionFailure("a non-object body is always a shape error")
        }
        let id = reader.string("id", &diagnostics)
        if let id {
            if !Slug.isValid(id) { diagnostics.invalid("/id", "must be 1 to 64 characters of A-Z a-z 0-9 . _ -") }
        } else if !reader.has("id") {
            diagnostics.invalid("/id", "is required")
        }
        let name = reader.string("name", &diagnostics)
        if let name { diagnostics.checkLength(name, "/name", max: 200) }
        var generated: String?
        let apns = reader.object("apns", &diagnostics).flatMap { decodeAPNs($0, existing: nil, &diagnostics) }
        let webhook = reader.object("webhook", &diagnostics).flatMap { object -> WebhookEndpoint? in
            let endpoint = decodeWebhook(object, existing: nil, &diagnostics)
            if let endpoint, object["secret"] == nil || object["secret"] == .null { generated = endpoint.secret }
            return endpoint
        }
        let rate = reader.integer("rateLimitPerSecond", in: 1...1_000_000, &diagnostics)
        let retention = reader.integer("retentionDays", in: retentionDaysRange, &diagnostics)
        let identity = reader.object("identity", &diagnostics).flatMap {
            IdentitySettings.decode($0, existing: nil, &diagnostics)
        }
        reader.reportUnknown(&diagnostics, serverOwned: serverOwned)
        try diagnostics.check()
        let app = AppDefinition(
            id: id ?? "", name: name ?? id ?? "", apns: apns, webhook: webhook, rateLimitPerSecond: rate,
            retentionDays: retention, identity: identity?.settings ?? .off)
        return Decoded(
            app: app, generatedWebhookSecret: generated, generatedIdentitySecrets: identity?.generated ?? [:])
    }

    /// Applies a `PATCH /v1/apps/{app}` body: members present replace, `null` removes `apns`,
    /// `webhook`, `rateLimitPerSecond` or `retentionDays` (and turns `identity` off); inside `apns`,
    /// `webhook` and `identity` members merge, so a secret need not be sent again (`identity.keys`, when
    /// present, is the whole list; an HS256 key keeps its secret by `kid`). `id` cannot change.
    public func applyingPatch(_ body: JSONValue) throws(ValidationFailure) -> Decoded {
        var diagnostics = Diagnostics()
        guard var reader = ObjectReader.root(body, &diagnostics) else {
            try diagnostics.check()
            preconditionFailure("a non-object body is always a shape error")
        }
        var patched = self
        var generated: String?
        if reader.has("id") {
            _ = reader.raw("id")
            diagnostics.invalid("/id", "cannot be changed")
        }
        if let name = reader.string("name", &diagnostics) {
            diagnostics.checkLength(name, "/name", max: 200)
            patched.name = name
        }
        if let value = reader.raw("apns") {
            if value.isNull {
                patched.apns = nil
            } else if let object = value.objectValue {
                patched.apns = Self.decodeAPNs(object, existing: apns, &diagnostics)
            } else {
                diagnostics.wrongType("/apns", expected: "an object or null")
            }
        }
        if let value = reader.raw("webhook") {
            if value.isNull {
                patched.webhook = nil
            } else if let object = value.objectValue {
                patched.webhook = Self.decodeWebhook(object, existing: webhook, &diagnostics)
                if webhook == nil, let endpoint = patched.webhook, object["secret"] == nil || object["secret"] == .null
                {
                    generated = endpoint.secret
                }
            } else {
                diagnostics.wrongType("/webhook", expected: "an object or null")
            }
        }
        if let value = reader.raw("rateLimitPerSecond") {
            if value.isNull {
                patched.rateLimitPerSecond = nil
            } else {
                patched.rateLimitPerSecond = reader.integer("rateLimitPerSecond", in: 1...1_000_000, &diagnostics)
            }
        }
        if let value = reader.raw("retentionDays") {
            if value.isNull {
                patched.retentionDays = nil
            } else {
                patched.retentionDays = reader.integer("retentionDays", in: Self.retentionDaysRange, &diagnostics)
            }
        }
        var generatedIdentity: [String: String] = [:]
        if let value = reader.raw("identity") {
            if value.isNull {
                patched.identity = .off
            } else if let object = value.objectValue {
                if let decoded = IdentitySettings.decode(object, existing: identity, &diagnostics) {
                    patched.identity = decoded.settings
                    generatedIdentity = decoded.generated
                }
            } else {
                diagnostics.wrongType("/identity", expected: "an object or null")
            }
        }
        reader.reportUnknown(&diagnostics, serverOwned: Self.serverOwned)
        try diagnostics.check()
        return Decoded(app: patched, generatedWebhookSecret: generated, generatedIdentitySecrets: generatedIdentity)
    }

    static func decodeAPNs(
        _ object: JSONObject, existing: APNsCredentials?, _ diagnostics: inout Diagnostics
    ) -> APNsCredentials? {
        var reader = ObjectReader(object, at: "/apns")
        let teamId = reader.string("teamId", &diagnostics) ?? existing?.teamId
        let keyId = reader.string("keyId", &diagnostics) ?? existing?.keyId
        let privateKey = reader.string("privateKey", &diagnostics) ?? existing?.privateKey
        let topic = reader.string("topic", &diagnostics) ?? existing?.topic
        let environment = reader.string("environment", &diagnostics) ?? existing?.environment ?? "production"
        reader.reportUnknown(&diagnostics, serverOwned: ["privateKeyConfigured"])
        let tenCharacters = { (text: String) in
            text.count == 10 && text.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) && $0.isASCII }
        }
        var valid = true
        func require(_ value: String?, _ key: String, _ check: (String) -> Bool, _ detail: String) {
            guard let value else {
                diagnostics.invalid("/apns/\(key)", "is required")
                valid = false
                return
            }
            if !check(value) {
                diagnostics.invalid("/apns/\(key)", detail)
                valid = false
            }
        }
        require(teamId, "teamId", tenCharacters, "must be 10 letters or digits")
        require(keyId, "keyId", tenCharacters, "must be 10 letters or digits")
        require(
            privateKey, "privateKey", { (try? P256.Signing.PrivateKey(pemRepresentation: $0)) != nil },
            "must be an ES256 .p8 key in PEM form")
        require(topic, "topic", { !$0.isEmpty && $0.count <= 255 }, "must be 1 to 255 characters")
        require(
            environment, "environment", { ["sandbox", "production"].contains($0) }, "must be sandbox or production")
        guard valid, let teamId, let keyId, let privateKey, let topic else { return nil }
        return APNsCredentials(
            teamId: teamId, keyId: keyId, privateKey: privateKey, topic: topic, environment: environment)
    }

    static func decodeWebhook(
        _ object: JSONObject, existing: WebhookEndpoint?, _ diagnostics: inout Diagnostics
    ) -> WebhookEndpoint? {
        var reader = ObjectReader(object, at: "/webhook")
        let url = reader.string("url", &diagnostics) ?? existing?.url
        let secret = reader.string("secret", &diagnostics) ?? existing?.secret ?? SecretToken.generateWebhookSecret()
        reader.reportUnknown(&diagnostics, serverOwned: ["secretConfigured", "disabled"])
        guard let url else {
            diagnostics.invalid("/webhook/url", "is required")
            return nil
        }
        var valid = true
        if !WebhookURL.isWellFormed(url) {
            diagnostics.invalid("/webhook/url", "must be an absolute http or https URL of at most 2048 characters")
            valid = false
        }
        if !WebhookSecret.isValid(secret) {
            diagnostics.invalid("/webhook/secret", "must be whsec_ followed by 24 to 64 base64-encoded bytes")
            valid = false
        }
        return valid ? WebhookEndpoint(url: url, secret: secret) : nil
    }
}
