import Crypto
import Foundation

/// An APNs provider authentication token: an ES256 JWT with `kid` in the header and `iss` (team
/// id) and `iat` in the claims. APNs accepts a token for an hour and refuses new ones more often
/// than every 20 minutes, so a token is reused for `refreshAfter`.
public struct APNsProviderToken: Sendable {
    /// The compact JWT.
    public let jwt: String
    /// When it was issued (seconds since 1970, whole).
    public let issuedAt: Int

    /// Tokens are refreshed after 40 minutes: inside Apple's 20–60 minute window.
    public static let refreshAfter = 40 * 60

    /// Signs a token for `credentials` issued at `issuedAt`.
    public static func make(credentials: APNsCredentials, issuedAt: Int) throws -> APNsProviderToken {
        let key = try P256.Signing.PrivateKey(pemRepresentation: credentials.privateKey)
        let header = base64URL(Array(#"{"alg":"ES256","kid":"\#(credentials.keyId)"}"#.utf8))
        let claims = base64URL(Array(#"{"iss":"\#(credentials.teamId)","iat":\#(issuedAt)}"#.utf8))
        let signingInput = header + "." + claims
        let signature = try key.signature(for: Array(signingInput.utf8))
        // JWS ES256 wants the raw r || s form, not DER.
        return APNsProviderToken(
            jwt: signingInput + "." + base64URL(Array(signature.rawRepresentation)), issuedAt: issuedAt)
    }

    /// Whether the token should be replaced at `now`.
    public func isStale(at now: Int) -> Bool {
        now - issuedAt >= Self.refreshAfter
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}
