import ActionHookCore
import ActionHookStore
import MicroHTTPD

/// Checks bearer credentials: admin tokens for the admin API, ingest keys for the app routes.
struct Authenticator: Sendable {
    let bootstrapDigest: [UInt8]?
    let adminTokens: AdminTokenStore
    let apps: AppStore
    let cache: AppCache

    init(bootstrapToken: String?, adminTokens: AdminTokenStore, apps: AppStore, cache: AppCache) {
        bootstrapDigest = bootstrapToken.map(SecretToken.digest)
        self.adminTokens = adminTokens
        self.apps = apps
        self.cache = cache
    }

    /// Throws 401 unless the request carries the bootstrap token or an active admin token.
    func requireAdmin(_ request: HTTPRequest) throws {
        guard let token = SecretToken.bearer(request.headers["authorization"]) else { throw APIError.unauthorized }
        let digest = SecretToken.digest(token)
        if let bootstrapDigest, SecretToken.constantTimeEquals(digest, bootstrapDigest) { return }
        // App keys never authenticate admin routes, and need no database round trip to be refused.
        guard !token.hasPrefix(SecretToken.ingestKeyPrefix), !token.hasPrefix(SecretToken.serverKeyPrefix),
            try adminTokens.isActive(digest: digest)
        else {
            throw APIError.unauthorized
        }
    }

    /// The app an ingest key belongs to; 401 when the key is missing, unknown or revoked, 403 for a
    /// server key (it sends; the phone's key forwards replies).
    func requireIngestKey(_ request: HTTPRequest) throws -> IngestPrincipal {
        guard let token = SecretToken.bearer(request.headers["authorization"]) else { throw APIError.unauthorized }
        if token.hasPrefix(SecretToken.serverKeyPrefix), try appKey(token) != nil {
            throw APIError.forbidden("A server key cannot forward replies; use the app's ingest key.")
        }
        guard token.hasPrefix(SecretToken.ingestKeyPrefix), let principal = try appKey(token),
            principal.scope == .ingest
        else { throw APIError.unauthorized }
        return principal
    }

    /// Who may send for and read the notifications of `appID`: the admin token, or a server key of
    /// that app. A valid ingest key is 403 (the phone's key never sends); a server key of another app is
    /// 404, as any object of another app; anything else 401.
    func requireSender(_ request: HTTPRequest, appID: String) throws {
        guard let token = SecretToken.bearer(request.headers["authorization"]) else { throw APIError.unauthorized }
        if token.hasPrefix(SecretToken.serverKeyPrefix) || token.hasPrefix(SecretToken.ingestKeyPrefix) {
            guard let principal = try appKey(token) else { throw APIError.unauthorized }
            guard principal.scope == .send else {
                throw APIError.forbidden("An ingest key cannot send notifications; use a server key (scope send).")
            }
            guard principal.appID == appID else { throw APIError.notFound("app") }
            return
        }
        try requireAdmin(request)
    }

    /// The active app key (ingest or server) with this secret, from the cache.
    private func appKey(_ token: String) throws -> IngestPrincipal? {
        let digest = SecretToken.digest(token)
        return try cache.principal(digest: digest, load: { try apps.principal(forKeyDigest: digest) })
    }
}
