import ActionHookCore
import Dispatch
import Foundation
import JWTKit
import Locks

/// Mints user tokens as an app's backend would, for local development (`actionhook users token`): a JWT
/// whose header names the algorithm and the key's `kid`, with the claims `sub` (the user), `aud` (the app),
/// `iat` and `exp`, signed with jwt-kit (the library the service verifies them with).
public enum UserTokenMinter {
    /// What signs the token.
    public enum Material: Sendable {
        /// A PEM private key: ES256 (P-256) or RS256 (2048 bits or more).
        case privateKey(String)
        /// The HS256 secret ActionHook generated for the key.
        case secret(String)
    }

    /// The claims of a user token.
    struct Claims: JWTPayload {
        var sub: SubjectClaim
        var aud: AudienceClaim
        var iat: IssuedAtClaim
        var exp: ExpirationClaim

        func verify(using algorithm: some JWTAlgorithm) async throws {}
    }

    /// A token for `user` of `appID` signed with `material` under `kid`, valid for `lifetime` seconds from
    /// `now`. `algorithm` defaults to HS256 for a secret and ES256 for a private key.
    public static func mint(
        appID: String, user: String, kid: String, algorithm: String?, material: Material, lifetime: Int,
        now: Date = Date()
    ) throws -> String {
        guard Slug.isValid(appID) else {
            throw CLIError("--app must be an app id (1 to 64 characters of A-Z a-z 0-9 . _ -)")
        }
        guard !user.isEmpty, user.count <= 64 else { throw CLIError("--user must be 1 to 64 characters") }
        guard IdentitySettings.isValidKeyID(kid) else {
            throw CLIError("--kid must be 1 to 64 characters of A-Z a-z 0-9 . _ -")
        }
        guard lifetime > 0 else { throw CLIError("--lifetime must be a positive number of seconds") }
        let defaultAlgorithm: IdentityAlgorithm
        switch material {
        case .secret: defaultAlgorithm = .hs256
        case .privateKey: defaultAlgorithm = .es256
        }
        let chosen: IdentityAlgorithm
        if let algorithm {
            guard let named = IdentityAlgorithm(rawValue: algorithm.uppercased()) else {
                throw CLIError("--algorithm must be ES256, RS256 or HS256")
            }
            chosen = named
        } else {
            chosen = defaultAlgorithm
        }

        let identifier = JWKIdentifier(string: kid)
        let add: @Sendable (JWTKeyCollection) async -> Void
        switch (chosen, material) {
        case (.hs256, .secret(let secret)):
            guard !secret.isEmpty else { throw CLIError("--secret is empty") }
            add = { await $0.add(hmac: HMACKey(from: secret), digestAlgorithm: .sha256, kid: identifier) }
        case (.es256, .privateKey(let pem)):
            guard let key = try? ES256PrivateKey(pem: pem) else {
                throw CLIError("--key is not a P-256 private key in PEM form (ES256)")
            }
            add = { await $0.add(ecdsa: key, kid: identifier) }
        case (.rs256, .privateKey(let pem)):
            guard let key = try? Insecure.RSA.PrivateKey(pem: pem) else {
                throw CLIError("--key is not an RSA private key of 2048 bits or more in PEM form (RS256)")
            }
            add = { await $0.add(rsa: key, digestAlgorithm: .sha256, kid: identifier) }
        case (.hs256, .privateKey):
            throw CLIError("HS256 signs with the key's secret: give --secret, not --key")
        case (_, .secret):
            throw CLIError("\(chosen.rawValue) signs with a private key: give --key FILE.pem, not --secret")
        }

        // Whole seconds: the NumericDate claims are written without fractions.
        let issued = Date(timeIntervalSince1970: now.timeIntervalSince1970.rounded(.down))
        let claims = Claims(
            sub: SubjectClaim(value: user), aud: AudienceClaim(value: [appID]), iat: IssuedAtClaim(value: issued),
            exp: ExpirationClaim(value: issued.addingTimeInterval(TimeInterval(lifetime))))
        let header: JWTHeader = {
            var header = JWTHeader()
            header.alg = chosen.rawValue
            header.typ = "JWT"
            return header
        }()
        do {
            return try blocking {
                // jwt-kit's key collection is an actor: the key is added and the token signed in one task.
                let keys = JWTKeyCollection()
                await add(keys)
                return try await keys.sign(claims, kid: identifier, header: header)
            }
        } catch {
            throw CLIError("the token could not be signed: \(error)")
        }
    }

    /// Where the signing task runs: not Swift's cooperative pool, which the caller blocking on this thread
    /// may hold (a test runs on it), so that the task it waits for can always run.
    private static let executor = DispatchTaskExecutor(label: "actionhook.users-token")

    /// Runs jwt-kit's asynchronous signing from a synchronous command and waits for it.
    static func blocking<T: Sendable>(_ body: @escaping @Sendable () async throws -> T) throws -> T {
        try executor.wait(for: body)
    }
}
