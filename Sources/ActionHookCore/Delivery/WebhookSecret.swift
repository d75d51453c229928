import Foundation

/// Standard Webhooks signing secrets.
public enum WebhookSecret {
    /// Whether `text` is `whsec_` followed by base64 of 24 to 64 bytes.
    public static func isValid(_ text: String) -> Bool {
        guard text.hasPrefix(SecretToken.webhookSecretPrefix),
            let bytes = Data(base64Encoded: String(text.dropFirst(SecretToken.webhookSecretPrefix.count)))
        else { return false }
        return (24...64).contains(bytes.count)
    }
}
