import Crypto
import Foundation

/// Bearer secrets: ingest keys, admin tokens and webhook signing secrets.
///
/// Only SHA-256 digests of ingest keys and admin tokens are stored. A token is looked up by its
/// digest, so the time a lookup takes depends on the digest, never on how much of the secret
/// an attacker guessed right.
public enum SecretToken {
    /// The prefix of ingest keys.
    public static let ingestKeyPrefix = "ahk_"
    /// The prefix of server keys (scope `send`): the app's backend sends notifications with them.
    public static let serverKeyPrefix = "ahs_"
    /// The prefix of admin tokens created through the API.
    public static let adminTokenPrefix = "aha_"
    /// The prefix of webhook signing secrets (Standard Webhooks).
    public static let webhookSecretPrefix = "whsec_"

    /// A new random token: `prefix` followed by 32 random bytes in base64url.
    public static func generate(prefix: String) -> String {
        prefix + base64URL(randomBytes(32))
    }

    /// A new webhook signing secret: `whsec_` and 32 random bytes in standard base64.
    public static func generateWebhookSecret() -> String {
        webhookSecretPrefix + Data(randomBytes(32)).base64EncodedString()
    }

    /// The SHA-256 digest of a token's UTF-8 bytes.
    public static func digest(_ token: String) -> [UInt8] {
        var token = token
        return token.withUTF8 { SHA256.hash(data: UnsafeRawBufferPointer($0)).withUnsafeBytes { Array($0) } }
    }

    /// Compares two byte strings in time that depends only on their lengths.
    public static func constantTimeEquals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        guard lhs.count == rhs.count else { return false }
        var difference: UInt8 = 0
        for index in lhs.indices { difference |= lhs[index] ^ rhs[index] }
        return difference == 0
    }

    /// The token from an `Authorization: Bearer <token>` header value, or `nil`.
    public static func bearer(_ header: String?) -> String? {
        guard var header else { return nil }
        // On the bytes: the scheme and the separating spaces are ASCII.
        let token = header.withUTF8 { bytes -> String? in
            var start = 0
            while start < bytes.count && bytes[start] == UInt8(ascii: " ") { start += 1 }
            // The scheme is case-insensitive; every byte of "bearer" is a letter, so OR-ing 0x20 folds case.
            let scheme = "bearer".utf8
            guard bytes.count - start > scheme.count, bytes[start + scheme.count] == UInt8(ascii: " "),
                zip(bytes[start...], scheme).allSatisfy({ $0 | 0x20 == $1 })
            else { return nil }
            let rest = UnsafeBufferPointer(rebasing: bytes[(start + scheme.count)...])
            // A token of visible ASCII after the spaces (the usual case) is taken as it is; anything else
            // is trimmed of Unicode white space.
            let tokenStart = rest.firstIndex { $0 != UInt8(ascii: " ") } ?? rest.count
            let token = UnsafeBufferPointer(rebasing: rest[tokenStart...])
            if token.allSatisfy({ $0 > 0x20 && $0 < 0x7F }) { return String(decoding: token, as: UTF8.self) }
            return String(String(decoding: rest, as: UTF8.self).trimmingWhiteSpace())
        }
        guard let token else { return nil }
        return token.isEmpty || token.utf8.count > 512 ? nil : token
    }

    static func randomBytes(_ count: Int) -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    static func base64URL(_ bytes: [UInt8]) -> String {
        Data(bytes).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }
}
