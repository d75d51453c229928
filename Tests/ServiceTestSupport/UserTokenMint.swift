import Crypto
import CryptoExtras
import Foundation

/// Signs user tokens as a customer's backend would, written apart from the service's verifier (which uses
/// jwt-kit) so that the two check each other: ES256 and RS256 key pairs, an HS256 secret, and the hostile
/// tokens a verifier must refuse (`alg: none`, HS256 over an RSA public key).
package struct UserTokenMint: Sendable {
    package enum Key: Sendable {
        case es256(P256.Signing.PrivateKey)
        case rs256(_RSA.Signing.PrivateKey)
        case hs256(String)
    }

    package let kid: String
    package let key: Key

    package init(kid: String, key: Key) {
        self.kid = kid
        self.key = key
    }

    /// A new P-256 key pair.
    package static func es256(kid: String) -> UserTokenMint { UserTokenMint(kid: kid, key: .es256(.init())) }

    /// A new 2048-bit RSA key pair.
    package static func rs256(kid: String) throws -> UserTokenMint {
        UserTokenMint(kid: kid, key: .rs256(try _RSA.Signing.PrivateKey(keySize: .bits2048)))
    }

    /// The algorithm's JWT name.
    package var algorithm: String {
        switch key {
        case .es256: "ES256"
        case .rs256: "RS256"
        case .hs256: "HS256"
        }
    }

    /// The public key in PEM form (nil for HS256).
    package var publicKeyPEM: String? {
        switch key {
        case .es256(let key): key.publicKey.pemRepresentation
        case .rs256(let key): key.publicKey.pemRepresentation
        case .hs256: nil
        }
    }

    /// The private key in PEM form (the HS256 secret for HS256), as a backend keeps it.
    package var privateKeyPEM: String {
        switch key {
        case .es256(let key): key.pemRepresentation
        case .rs256(let key): key.pemRepresentation
        case .hs256(let secret): secret
        }
    }

    /// The key as the app definition's `identity.keys` element.
    package var keyJSON: String {
        guard let pem = publicKeyPEM else { return #"{"kid": "\#(kid)", "algorithm": "HS256"}"# }
        let escaped = pem.replacingOccurrences(of: "\n", with: "\\n")
        return #"{"kid": "\#(kid)", "algorithm": "\#(algorithm)", "publicKey": "\#(escaped)"}"#
    }

    /// A token for `user` of `app`, valid for `lifetime` seconds from `now` (negative: already expired);
    /// `claims` replaces or adds claims.
    package func token(
        user: String, app: String, lifetime: TimeInterval = 3600, now: Date = Date(), claims: [String: Any] = [:],
        header: [String: Any] = [:]
    ) throws -> String {
        var payload: [String: Any] = [
            "sub": user, "aud": app, "iat": Int(now.timeIntervalSince1970),
            "exp": Int(now.addingTimeInterval(lifetime).timeIntervalSince1970),
        ]
        for (name, value) in claims { payload[name] = value }
        var head: [String: Any] = ["alg": algorithm, "kid": kid, "typ": "JWT"]
        for (name, value) in header { head[name] = value }
        let input = try Self.segment(head) + "." + Self.segment(payload)
        return input + "." + Self.base64URL(try sign(Array(input.utf8)))
    }

    private func sign(_ input: [UInt8]) throws -> [UInt8] {
        switch key {
        case .es256(let key): Array(try key.signature(for: input).rawRepresentation)
        case .rs256(let key): Array(try key.signature(for: input, padding: .insecurePKCS1v1_5).rawRepresentation)
        case .hs256(let secret):
            Array(HMAC<SHA256>.authenticationCode(for: input, using: SymmetricKey(data: Array(secret.utf8))))
        }
    }

    /// An unsigned token (`alg: none`, empty signature) for `user`.
    package static func unsigned(user: String, app: String, kid: String) throws -> String {
        let payload: [String: Any] = ["sub": user, "aud": app, "exp": Int(Date().timeIntervalSince1970) + 3600]
        return try segment(["alg": "none", "kid": kid]) + "." + segment(payload) + "."
    }

    /// A token that names an RSA key's `kid` but is HS256-signed with that key's public PEM as the secret: what
    /// a verifier that lets the header choose the algorithm would accept.
    package static func confused(user: String, app: String, rsa: UserTokenMint) throws -> String {
        let pem = try require(rsa.publicKeyPEM)
        return try UserTokenMint(kid: rsa.kid, key: .hs256(pem)).token(user: user, app: app)
    }

    static func segment(_ object: [String: Any]) throws -> String {
        base64URL(Array(try JSONSerialization.data(withJSONObject: object, options: [.sortedKeys])))
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString().replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_").replacingOccurrences(of: "=", with: "")
    }
}

/// `#require` for helpers outside a test.
private func require<T>(_ value: T?) throws -> T {
    guard let value else { throw UserTokenMintError() }
    return value
}

private struct UserTokenMintError: Error {}
