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
        // Ingest keys never authenticate admin routes, and need no database round trip to be refused.
        guard !token.hasPrefix(SecretToken.ingestKeyPrefix), try adminTokens.isActive(digest: digest) else {
            throw APIError.unauthorized
        }
    }

    /// The app an ingest key belongs to; 401 when the key is missing, unknown or revoked.
    func requireIngestKey(_ request: HTTPRequest) throws -> IngestPrincipal {
        guard let token = SecretToken.bearer(request.headers["authorization"]),
            token.hasPrefix(SecretToken.ingestKeyPrefix)
        else { throw APIError.unauthorized }
        let digest = SecretToken.digest(token)
        guard let principal = try cache.principal(digest: digest, load: { try apps.principal(forKeyDigest: digest) })
        else { throw APIError.unauthorized }
        return principal
    }
}
