import Crypto
import Foundation

/// Standard Webhooks signatures: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">` keyed with the
/// base64 bytes after `whsec_`.
public enum WebhookSignature {
    /// The `webhook-signature` value for a message, or `nil` when the secret is malformed.
    public static func sign(id: String, timestamp: Int, body: [UInt8], secret: String) -> String? {
        guard secret.hasPrefix(SecretToken.webhookSecretPrefix),
            let key = Data(base64Encoded: String(secret.dropFirst(SecretToken.webhookSecretPrefix.count)))
        else { return nil }
        var message = Array("\(id).\(timestamp).".utf8)
        message.append(contentsOf: body)
        let mac = HMAC<SHA256>.authenticationCode(for: message, using: SymmetricKey(data: key))
        return "v1," + Data(mac).base64EncodedString()
    }
}
