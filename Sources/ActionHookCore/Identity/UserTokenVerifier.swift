import Crypto
import Foundation
import JWTKit
import Locks

/// A user the app's backend vouched for: the `sub` of a user token that verified.
public struct VerifiedUser: Sendable, Equatable {
    /// The user id (1 to 64 characters).
    public var id: String
    /// When the token stops being valid.
    public var expiresAt: Date

    /// Creates a verified user.
    public init(id: String, expiresAt: Date) {
        self.id = id
        self.expiresAt = expiresAt
    }
}

/// Why a user token was refused. The descriptions go into the 401 answer: they name the claim or header
/// that failed, never the token or its user.
public enum UserTokenRefusal: Error, Sendable, Equatable, CustomStringConvertible {
    case malformed
    case algorithmNotAllowed
    case unknownKey
    case algorithmMismatch
    case badSignature
    case missingExpiry
    case expired
    case notYetValid
    case wrongAudience
    case invalidSubject

    public var description: String {
        switch self {
        case .malformed: "The user token is not a well-formed JWT."
        case .algorithmNotAllowed: "The user token's alg must be ES256, RS256 or HS256."
        case .unknownKey: "The user token's kid names none of the app's identity keys."
        case .algorithmMismatch: "The user token's alg is not the algorithm of the key its kid names."
        case .badSignature: "The user token's signature does not verify."
        case .missingExpiry: "The user token has no exp claim."
        case .expired: "The user token has expired."
        case .notYetValid: "The user token is not valid yet (nbf)."
        case .wrongAudience: "The user token's aud does not name this app."
        case .invalidSubject: "The user token's sub must be a user id of 1 to 64 characters."
        }
    }
}

/// Verifies an app's user tokens with jwt-kit: the key is the one the header's `kid` names, and the header's
/// `alg` must be that key's own algorithm, so `none` and a token signed with HS256 over an RSA public key
/// (algorithm confusion) are refused before any signature is checked. Verified tokens are remembered by
/// their SHA-256 until they expire, so a phone's every reply costs one hash, not one signature check.
public final class UserTokenVerifier: Sendable {
    /// The claims ActionHook reads; others are ignored.
    struct Claims: JWTPayload {
        var sub: SubjectClaim?
        var aud: AudienceClaim?
        var exp: ExpirationClaim?
        var nbf: NotBeforeClaim?

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    private let appID: String
    private let keys: [String: (algorithm: IdentityAlgorithm, verifier: any JWTAlgorithm)]
    private let verified = Locked([[UInt8]: VerifiedUser]())
    /// The most tokens remembered; past it, expired ones are dropped, and all of them if none had expired.
    static let cacheLimit = 100_000
    /// Clock skew allowed on `exp` and `nbf`, in seconds.
    static let leewaySeconds: TimeInterval = 30

    private init(appID: String, keys: [String: (algorithm: IdentityAlgorithm, verifier: any JWTAlgorithm)]) {
        self.appID = appID
        self.keys = keys
    }

    /// A verifier for `appID`'s tokens with `settings`' keys. jwt-kit hands out a key's verifier only
    /// from its (asynchronous) key collection; verifying afterwards is synchronous.
    public static func make(appID: String, settings: IdentitySettings) async throws -> UserTokenVerifier {
        let collection = JWTKeyCollection()
        for key in settings.keys {
            let kid = JWKIdentifier(string: key.kid)
            switch key.algorithm {
            case .es256: await collection.add(ecdsa: try ES256PublicKey(pem: key.material), kid: kid)
            case .rs256:
                await collection.add(
                    rsa: try Insecure.RSA.PublicKey(pem: key.material), digestAlgorithm: .sha256, kid: kid)
            case .hs256: await collection.add(hmac: HMACKey(from: key.material), digestAlgorithm: .sha256, kid: kid)
            }
        }
        var keys: [String: (algorithm: IdentityAlgorithm, verifier: any JWTAlgorithm)] = [:]
        for key in settings.keys {
            keys[key.kid] = (key.algorithm, try await collection.getKey(for: JWKIdentifier(string: key.kid)))
        }
        return UserTokenVerifier(appID: appID, keys: keys)
    }

    /// The user `token` vouches for at `now`, or why it is refused.
    public func verify(_ token: String, now: Date = Date()) throws(UserTokenRefusal) -> VerifiedUser {
        let digest = Array(SHA256.hash(data: Array(token.utf8)))
        if let known = verified.withLock({ $0[digest] }) {
            guard known.expiresAt.addingTimeInterval(Self.leewaySeconds) > now else { throw .expired }
            return known
        }
        let user = try check(token, now: now)
        verified.withLock { cache in
            if cache.count >= Self.cacheLimit {
                cache = cache.filter { $0.value.expiresAt > now }
                if cache.count >= Self.cacheLimit { cache.removeAll() }
            }
            cache[digest] = user
        }
        return user
    }

    private func check(_ token: String, now: Date) throws(UserTokenRefusal) -> VerifiedUser {
        let bytes = Array(token.utf8)
        // The header is read first, on its own: what it names decides whether the rest is worth parsing.
        guard bytes.count <= 8_192, let parts = try? DefaultJWTParser().getTokenParts(bytes),
            let header = Self.header(parts.header)
        else { throw .malformed }
        guard let alg = header["alg"]?.stringValue, let algorithm = IdentityAlgorithm(rawValue: alg) else {
            throw .algorithmNotAllowed
        }
        guard let kid = header["kid"]?.stringValue, let key = keys[kid] else { throw .unknownKey }
        guard key.algorithm == algorithm else { throw .algorithmMismatch }
        guard let parsed = try? DefaultJWTParser().parse(bytes, as: Claims.self) else { throw .malformed }
        let signingInput = Array(bytes[..<parts.payload.endIndex])
        guard (try? key.verifier.verify(Array(parsed.signature), signs: signingInput)) == true else {
            throw .badSignature
        }
        let claims = parsed.payload
        guard let expiry = claims.exp?.value else { throw .missingExpiry }
        guard expiry.addingTimeInterval(Self.leewaySeconds) > now else { throw .expired }
        if let notBefore = claims.nbf?.value, notBefore.addingTimeInterval(-Self.leewaySeconds) > now {
            throw .notYetValid
        }
        guard let audience = claims.aud, (try? audience.verifyIntendedAudience(includes: appID)) != nil else {
            throw .wrongAudience
        }
        guard let subject = claims.sub?.value, !subject.isEmpty, subject.count <= 64 else { throw .invalidSubject }
        return VerifiedUser(id: subject, expiresAt: expiry)
    }

    /// The JSON object of a base64url header segment; nil for anything else.
    static func header(_ segment: ArraySlice<UInt8>) -> JSONObject? {
        var text = String(decoding: segment, as: UTF8.self).replacingOccurrences(of: "-", with: "+")
            .replacingOccurrences(of: "_", with: "/")
        text += String(repeating: "=", count: (4 - text.utf8.count % 4) % 4)
        guard let data = Data(base64Encoded: text) else { return nil }
        return (try? JSONParser.parse(String(decoding: data, as: UTF8.self)))?.objectValue
    }
}
