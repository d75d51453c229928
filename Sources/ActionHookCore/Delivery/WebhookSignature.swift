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

extension WebhookSignature {
    /// Why a delivery's signature was not accepted.
    public enum Failure: Error, Equatable, Sendable, CustomStringConvertible {
        /// `webhook-id`, `webhook-timestamp` or `webhook-signature` is absent.
        case missingHeader(String)
        /// `webhook-timestamp` is not whole seconds since 1970.
        case malformedTimestamp
        /// The timestamp lies further from now than the tolerance (a replay, or a wrong clock).
        case timestampOutOfTolerance
        /// The secret is not a `whsec_` secret.
        case malformedSecret
        /// No `v1` entry of the header matches the body.
        case mismatch

        /// A short reason, naming no value.
        public var description: String {
            switch self {
            case .missingHeader(let name): "the \(name) header is missing"
            case .malformedTimestamp: "webhook-timestamp is not a Unix time in seconds"
            case .timestampOutOfTolerance: "webhook-timestamp is too far from now"
            case .malformedSecret: "the secret is not a whsec_ secret"
            case .mismatch: "no v1 signature matches the body"
            }
        }
    }

    /// Checks a delivery as a receiver does: the timestamp within `toleranceSeconds` of `now`, and one
    /// of the space-separated `v1,<base64>` entries equal to the signature of `id.timestamp.body`,
    /// compared in constant time.
    public static func verify(
        id: String?, timestamp: String?, signature: String?, body: [UInt8], secret: String,
        now: Date = Date(), toleranceSeconds: Int = 300
    ) throws(Failure) {
        guard let id else { throw .missingHeader("webhook-id") }
        guard let timestamp else { throw .missingHeader("webhook-timestamp") }
        guard let signature else { throw .missingHeader("webhook-signature") }
        guard let seconds = Int(timestamp) else { throw .malformedTimestamp }
        // A hostile timestamp may be any 64-bit number: the difference must not overflow.
        let (difference, overflow) = Int(now.timeIntervalSince1970).subtractingReportingOverflow(seconds)
        guard !overflow, difference.magnitude <= toleranceSeconds.magnitude else { throw .timestampOutOfTolerance }
        guard let expected = sign(id: id, timestamp: seconds, body: body, secret: secret) else {
            throw .malformedSecret
        }
        let expectedBytes = Array(expected.utf8)
        // Every entry is compared, so the time taken does not tell which one came close.
        var matched = false
        for entry in signature.split(separator: " ") where entry.hasPrefix("v1,") {
            matched = SecretToken.constantTimeEquals(Array(entry.utf8), expectedBytes) || matched
        }
        guard matched else { throw .mismatch }
    }
}
