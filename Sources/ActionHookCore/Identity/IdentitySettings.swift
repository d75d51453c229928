import Basics
import Foundation
import JWTKit

/// How an app treats the user token (`ActionHook-User-Token`) its phones send.
public enum IdentityMode: String, Sendable, CaseIterable {
    /// No user tokens: devices register anonymously, replies carry no user (the behaviour before identity).
    case off
    /// A token is verified when present and its user recorded; requests without one are taken as anonymous.
    case optional
    /// Device registration and replies without a valid token are refused (401) and nothing is stored.
    case required
}

/// The algorithm of a key that signs user tokens.
public enum IdentityAlgorithm: String, Sendable, CaseIterable {
    /// ECDSA P-256 with SHA-256; the app registers the public key.
    case es256 = "ES256"
    /// RSASSA-PKCS1-v1_5 with SHA-256 (2048 bits or more); the app registers the public key.
    case rs256 = "RS256"
    /// HMAC-SHA-256 with a secret ActionHook generates and shows once.
    case hs256 = "HS256"
}

/// One key that may sign an app's user tokens, chosen by the token's `kid`.
public struct IdentityKey: Sendable, Equatable {
    /// The key id tokens name in their header.
    public var kid: String
    /// The algorithm tokens signed with this key must name.
    public var algorithm: IdentityAlgorithm
    /// The PEM public key (ES256, RS256) or the shared secret (HS256, write-only through the API).
    public var material: String

    /// Creates a key.
    public init(kid: String, algorithm: IdentityAlgorithm, material: String) {
        self.kid = kid
        self.algorithm = algorithm
        self.material = material
    }
}

/// An app's identity verification: its mode and the keys its backend signs user tokens with.
public struct IdentitySettings: Sendable, Equatable {
    /// The mode.
    public var mode: IdentityMode
    /// The keys, several at once so that the backend can roll from one to the next.
    public var keys: [IdentityKey]

    /// No identity: the default.
    public static let off = IdentitySettings(mode: .off, keys: [])
    /// The most keys an app keeps at once.
    public static let maxKeys = 10
    /// The prefix of generated HS256 secrets.
    public static let secretPrefix = "ahu_"

    /// Creates settings.
    public init(mode: IdentityMode, keys: [IdentityKey]) {
        self.mode = mode
        self.keys = keys
    }

    /// The settings as the API shows them: public keys in full, HS256 secrets only as configured.
    public var json: JSONValue {
        .object([
            "mode": .string(mode.rawValue),
            "keys": .array(
                keys.map { key in
                    var object: JSONObject = ["kid": .string(key.kid), "algorithm": .string(key.algorithm.rawValue)]
                    if key.algorithm == .hs256 {
                        object["secretConfigured"] = .bool(true)
                    } else {
                        object["publicKey"] = .string(key.material)
                    }
                    return .object(object)
                }),
        ])
    }

    /// The settings as stored: every key with its material.
    public var storedJSON: JSONValue {
        .object([
            "mode": .string(mode.rawValue),
            "keys": .array(
                keys.map {
                    .object([
                        "kid": .string($0.kid), "algorithm": .string($0.algorithm.rawValue),
                        "material": .string($0.material),
                    ])
                }),
        ])
    }

    /// Reads what ``storedJSON`` wrote; nil for anything else.
    public init?(stored: JSONValue) {
        guard let object = stored.objectValue, let mode = object["mode"]?.stringValue.flatMap(IdentityMode.init),
            let keys = object["keys"]?.arrayValue
        else { return nil }
        var decoded: [IdentityKey] = []
        for key in keys {
            guard let kid = key.objectValue?["kid"]?.stringValue,
                let algorithm = key.objectValue?["algorithm"]?.stringValue.flatMap(IdentityAlgorithm.init),
                let material = key.objectValue?["material"]?.stringValue
            else { return nil }
            decoded.append(IdentityKey(kid: kid, algorithm: algorithm, material: material))
        }
        self.init(mode: mode, keys: decoded)
    }

    /// Whether `kid` may name a key: 1 to 64 characters of A-Z a-z 0-9 . _ -.
    public static func isValidKeyID(_ kid: String) -> Bool { Slug.isValid(kid) }

    /// Whether `pem` is a public key of `algorithm` that can verify tokens (RSA: 2048 bits or more).
    public static func isUsablePublicKey(_ pem: String, _ algorithm: IdentityAlgorithm) -> Bool {
        switch algorithm {
        case .es256: return (try? ES256PublicKey(pem: pem)) != nil
        case .rs256: return (try? Insecure.RSA.PublicKey(pem: pem)) != nil
        case .hs256: return false
        }
    }

    /// Decodes an app definition's `identity` object. Keys are matched to `existing` by `kid`: an HS256
    /// key keeps its secret; a new HS256 key gets a generated secret, returned in `generated` (by kid) so
    /// that the answer can show it once. A caller never sends an HS256 secret.
    static func decode(
        _ object: JSONObject, existing: IdentitySettings?, _ diagnostics: inout Diagnostics
    ) -> (settings: IdentitySettings, generated: [String: String])? {
        var reader = ObjectReader(object, at: "/identity")
        let modeText = reader.string("mode", &diagnostics) ?? existing?.mode.rawValue ?? IdentityMode.off.rawValue
        let mode = IdentityMode(rawValue: modeText)
        if mode == nil { diagnostics.invalid("/identity/mode", "must be off, optional or required") }
        var keys: [IdentityKey] = existing?.keys ?? []
        var generated: [String: String] = [:]
        if let list = reader.array("keys", &diagnostics) {
            keys = []
            if list.count > maxKeys { diagnostics.invalid("/identity/keys", "must have at most \(maxKeys) keys") }
            for (index, element) in list.prefix(maxKeys).enumerated() {
                let pointer = "/identity/keys/\(index)"
                guard let keyObject = element.objectValue else {
                    diagnostics.wrongType(pointer, expected: "an object")
                    continue
                }
                guard let key = decodeKey(keyObject, at: pointer, existing: existing, &diagnostics) else { continue }
                if keys.contains(where: { $0.kid == key.kid }) {
                    diagnostics.invalid(pointer + "/kid", "is used by another key")
                    continue
                }
                if key.algorithm == .hs256, !(existing?.keys.contains(key) ?? false) {
                    generated[key.kid] = key.material
                }
                keys.append(key)
            }
        }
        reader.reportUnknown(&diagnostics)
        guard let mode else { return nil }
        if mode != .off, keys.isEmpty {
            diagnostics.invalid("/identity/keys", "must have at least one key when the mode is \(mode.rawValue)")
        }
        return (IdentitySettings(mode: mode, keys: keys), generated)
    }

    private static func decodeKey(
        _ object: JSONObject, at pointer: String, existing: IdentitySettings?, _ diagnostics: inout Diagnostics
    ) -> IdentityKey? {
        var reader = ObjectReader(object, at: pointer)
        let kid = reader.string("kid", &diagnostics)
        let algorithmText = reader.string("algorithm", &diagnostics)
        let publicKey = reader.string("publicKey", &diagnostics)
        reader.reportUnknown(&diagnostics, serverOwned: ["secret", "secretConfigured"])
        guard let kid, isValidKeyID(kid) else {
            diagnostics.invalid(pointer + "/kid", "is required: 1 to 64 characters of A-Z a-z 0-9 . _ -")
            return nil
        }
        guard let algorithm = algorithmText.flatMap(IdentityAlgorithm.init) else {
            diagnostics.invalid(pointer + "/algorithm", "must be ES256, RS256 or HS256")
            return nil
        }
        if algorithm == .hs256 {
            if publicKey != nil { diagnostics.invalid(pointer + "/publicKey", "is not used by HS256 keys") }
            let kept = existing?.keys.first { $0.kid == kid && $0.algorithm == .hs256 }
            return kept
                ?? IdentityKey(kid: kid, algorithm: .hs256, material: SecretToken.generate(prefix: secretPrefix))
        }
        guard let publicKey else {
            diagnostics.invalid(pointer + "/publicKey", "is required for \(algorithm.rawValue) keys")
            return nil
        }
        guard publicKey.utf8.count <= 16_384, isUsablePublicKey(publicKey, algorithm) else {
            let detail =
                algorithm == .es256
                ? "must be a P-256 public key in PEM form (-----BEGIN PUBLIC KEY-----)"
                : "must be an RSA public key of 2048 bits or more in PEM form (-----BEGIN PUBLIC KEY-----)"
            diagnostics.invalid(pointer + "/publicKey", detail)
            return nil
        }
        return IdentityKey(kid: kid, algorithm: algorithm, material: publicKey)
    }
}
