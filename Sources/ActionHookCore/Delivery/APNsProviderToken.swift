import Crypto
import Foundation
import Locks

/// An APNs provider authentication token: an ES256 JWT with `kid` in the header and `iss` (team
/// id) and `iat` in the claims. APNs accepts a token for an hour and refuses new ones for a key more
/// often than every 20 minutes, so a token is reused for `refreshAfter`.
///
/// The JWT is a credential: the token's description shows only when it was issued.
public struct APNsProviderToken: Sendable, Equatable, CustomStringConvertible {
    /// The compact JWT.
    public let jwt: String
    /// When it was issued (seconds since 1970, whole).
    public let issuedAt: Int

    /// Tokens are refreshed after 40 minutes: inside Apple's 20–60 minute window.
    public static let refreshAfter = 40 * 60

    /// A token as it was signed (or stored).
    public init(jwt: String, issuedAt: Int) {
        self.jwt = jwt
        self.issuedAt = issuedAt
    }

    /// Signs a token for `credentials` issued at `issuedAt`.
    public static func make(credentials: APNsCredentials, issuedAt: Int) throws -> APNsProviderToken {
        try APNsSigningKey(credentials: credentials).sign(issuedAt: issuedAt)
    }

    /// Whether the token should be replaced at `now`.
    public func isStale(at now: Int) -> Bool {
        now - issuedAt >= Self.refreshAfter
    }

    /// The issue time only, never the JWT.
    public var description: String { "APNsProviderToken(issuedAt: \(issuedAt))" }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}

/// The key that signs provider tokens: the team, the key id and the .p8 key itself. Two apps with
/// equal signing keys may use one token; APNs counts token updates per key, not per app.
///
/// Equal when the team, the key id and ``keyDigest`` are: an app that names another team's key id
/// with a private key of its own has another signing key, and never gets that team's token.
public struct APNsSigningKey: Sendable, Hashable, CustomStringConvertible {
    /// The team id (`iss`).
    public let teamId: String
    /// The key id (`kid`).
    public let keyId: String
    /// SHA-256 of the public key (its X9.63 form): names the private key without revealing it.
    public let keyDigest: [UInt8]
    // The PEM text: swift-crypto's key is not Sendable on Linux, and a key signs once in 40 minutes.
    private let privateKeyPEM: String

    /// Reads a signing key; throws when `privateKey` is not a P-256 key in PEM.
    public init(teamId: String, keyId: String, privateKey: String) throws {
        let key = try P256.Signing.PrivateKey(pemRepresentation: privateKey)
        self.teamId = teamId
        self.keyId = keyId
        keyDigest = Array(SHA256.hash(data: key.publicKey.x963Representation))
        privateKeyPEM = privateKey
    }

    /// The signing key of `credentials`.
    public init(credentials: APNsCredentials) throws {
        try self.init(teamId: credentials.teamId, keyId: credentials.keyId, privateKey: credentials.privateKey)
    }

    /// Signs a token issued at `issuedAt`.
    public func sign(issuedAt: Int) throws -> APNsProviderToken {
        let header = APNsProviderToken.base64URL(Array(#"{"alg":"ES256","kid":"\#(keyId)"}"#.utf8))
        let claims = APNsProviderToken.base64URL(Array(#"{"iss":"\#(teamId)","iat":\#(issuedAt)}"#.utf8))
        let signingInput = header + "." + claims
        let key = try P256.Signing.PrivateKey(pemRepresentation: privateKeyPEM)
        let signature = try key.signature(for: Array(signingInput.utf8))
        // JWS ES256 wants the raw r || s form, not DER.
        return APNsProviderToken(
            jwt: signingInput + "." + APNsProviderToken.base64URL(Array(signature.rawRepresentation)),
            issuedAt: issuedAt)
    }

    /// Equal team, key id and key digest.
    public static func == (lhs: APNsSigningKey, rhs: APNsSigningKey) -> Bool {
        lhs.teamId == rhs.teamId && lhs.keyId == rhs.keyId && lhs.keyDigest == rhs.keyDigest
    }

    /// Hashes what ``==`` compares.
    public func hash(into hasher: inout Hasher) {
        hasher.combine(teamId)
        hasher.combine(keyId)
        hasher.combine(keyDigest)
    }

    /// The team and key id only, never the key.
    public var description: String { "APNsSigningKey(team: \(teamId), key: \(keyId))" }
}

/// Provider tokens shared by every sender that signs with the same key: the port the store implements
/// (one token per key for every instance, through the database), or ``LocalProviderTokens`` within
/// one process.
///
/// APNs answers `429 TooManyProviderTokenUpdates` to a new token for a key within 20 minutes of the
/// previous one, so senders must not each sign their own. Calls may block (a database round trip):
/// callers make them off Swift's cooperative pool and event loops.
public protocol SharedProviderTokens: Sendable {
    /// The token to send with `key` at `now` (seconds since 1970): the shared one while it is younger
    /// than ``APNsProviderToken/refreshAfter`` and is not `refused` (the JWT APNs just refused as
    /// expired or invalid); otherwise a new one issued at `now`, which becomes the shared one.
    ///
    /// Callers for one key are served one at a time, each reading what the one before it left: a stale
    /// or refused token is replaced once, however many callers noticed, and a refused token only while
    /// it is still the shared one. `signed` says whether this call signed the token it returns.
    func token(for key: APNsSigningKey, at now: Int, refused: String?) throws -> (
        token: APNsProviderToken, signed: Bool
    )
}

/// Provider tokens shared within one process: for a sender without a database (tests, tools).
public final class LocalProviderTokens: SharedProviderTokens {
    private let tokens = Locked<[APNsSigningKey: APNsProviderToken]>([:])

    /// Creates an empty store.
    public init() {}

    /// See ``SharedProviderTokens/token(for:at:refused:)``; one caller at a time, under a lock.
    public func token(for key: APNsSigningKey, at now: Int, refused: String?) throws -> (
        token: APNsProviderToken, signed: Bool
    ) {
        try tokens.withLock { tokens in
            if let current = tokens[key], current.jwt != refused, !current.isStale(at: now) {
                return (current, false)
            }
            let token = try key.sign(issuedAt: now)
            tokens[key] = token
            return (token, true)
        }
    }
}
