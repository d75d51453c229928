import Crypto
import Foundation

/// A device's P-256 public key, as the app registers it (`publicKey`: the standard base64 of the key's
/// X9.63 form, 65 bytes `04‖X‖Y`, or of its SubjectPublicKeyInfo DER), with its fingerprint.
///
/// Keys and signatures use swift-crypto's `P256.Signing`: on Linux it is BoringSSL's constant-time P-256, on
/// Apple platforms it is CryptoKit itself, the API the app's Secure Enclave key speaks, so the server and the
/// client package share one type and one encoding.
public struct DevicePublicKey: Sendable, Equatable {
    /// The key's X9.63 form (65 bytes): what is stored and what the fingerprint is taken over.
    public let x963: [UInt8]
    /// The key.
    public let key: P256.Signing.PublicKey

    /// Reads the `publicKey` member of a registration; nil when it is not a P-256 public key in either form.
    public init?(base64 text: String) {
        guard let data = Data(base64Encoded: text) else { return nil }
        self.init(bytes: Array(data))
    }

    public static func == (lhs: DevicePublicKey, rhs: DevicePublicKey) -> Bool { lhs.x963 == rhs.x963 }

    /// A key from its X9.63 (65 bytes) or SubjectPublicKeyInfo DER bytes.
    public init?(bytes: [UInt8]) {
        let key: P256.Signing.PublicKey
        if bytes.count == 65, bytes.first == 0x04 {
            guard let parsed = try? P256.Signing.PublicKey(x963Representation: bytes) else { return nil }
            key = parsed
        } else {
            guard let parsed = try? P256.Signing.PublicKey(derRepresentation: bytes) else { return nil }
            key = parsed
        }
        self.key = key
        x963 = Array(key.x963Representation)
    }

    /// The key's fingerprint: the lowercase hex of the first 16 bytes of SHA-256 over its X9.63 form. A
    /// signed reply names its key by it, and receipts show it.
    public var fingerprint: String { Self.fingerprint(x963: x963) }

    /// The fingerprint of a key's X9.63 bytes.
    public static func fingerprint(x963: [UInt8]) -> String {
        Hex.encode(Array(SHA256.hash(data: x963).prefix(16)))
    }
}

/// What a reply's signature proved: `valid` with the fingerprint of the key it verified against, `invalid`
/// with the reason when it was just checked (for the log and metrics; the reply shows only `invalid`, and a
/// stored reply read back has no reason), or `absent`.
public enum SignatureCheck: Sendable, Equatable {
    case absent
    case valid(key: String)
    case invalid(SignatureRefusal?)

    /// The check a stored reply records: its `signature` and `signature_key` columns.
    public init(status: String?, key: String?) {
        switch (status, key) {
        case ("valid", let key?): self = .valid(key: key)
        case ("invalid", _): self = .invalid(nil)
        default: self = .absent
        }
    }

    /// `{"status": "valid", "key": fingerprint}`, `{"status": "invalid", "key": null}`, or `null` (absent):
    /// a reply's `signature` member.
    public var json: JSONValue {
        guard let status else { return .null }
        return .object(["status": .string(status), "key": key.map(JSONValue.string) ?? .null])
    }

    /// `valid`, `invalid` or nil (absent), as stored and shown.
    public var status: String? {
        switch self {
        case .absent: nil
        case .valid: "valid"
        case .invalid: "invalid"
        }
    }

    /// The fingerprint of the key a valid signature verified against.
    public var key: String? {
        if case .valid(let key) = self { return key }
        return nil
    }

    /// Whether the signature verified.
    public var isValid: Bool { key != nil }
}

/// Why a signature is `invalid`.
public enum SignatureRefusal: String, Error, Sendable, Equatable {
    /// The header is not `key=<fingerprint>, sig=<base64>`.
    case malformedHeader
    /// The reply lacks a field the signature covers and must have: `responseId`, `respondedAt` or `deviceToken`.
    case missingField
    /// A signed text field holds a line feed, which the encoding cannot carry.
    case unencodable
    /// The request's `Idempotency-Key` is not the reply's `responseId`: a signed reply is stored under its
    /// `responseId`, so that a copy of it sent again is recognised as the same reply, never stored anew.
    case keyMismatch
    /// The device has no registered key with the fingerprint the header names (none, another device's, a key
    /// replaced longer ago than the window, or the device was removed).
    case unknownKey
    /// The signature does not verify over the reply's canonical encoding.
    case badSignature
    /// `respondedAt` is older than the idempotency window: a replay could no longer be recognised by its key.
    case stale
}

/// The reply signature: the `ActionHook-Reply-Signature` header, the bytes a device signs, and their
/// verification.
///
/// The signed bytes are UTF-8 lines joined by a line feed (U+000A, no trailing one), each `name=value`, in
/// this order:
///
///     actionhook-reply-v1
///     app=<app id>
///     responseId=<responseId>
///     action=<actionIdentifier>
///     text=<lowercase hex SHA-256 of the typed text's UTF-8; empty when the reply has no text>
///     respondedAt=<respondedAt in UTC to the millisecond: 2026-11-28T10:40:46.123Z>
///     device=<deviceToken, lowercase hex>
///     notification=<userInfo.actionhook.n, lowercase; empty when the reply carries no ActionHook key>
///     position=<userInfo.actionhook.d in decimal; empty likewise>
///
/// The signature is ECDSA P-256 with SHA-256 over those bytes, sent as the standard base64 of its raw form
/// (`r‖s`, 64 bytes; CryptoKit's `rawRepresentation`). The values are the reply's as ActionHook normalises them
/// (the device token lowercased, `respondedAt` in UTC), so the app signs exactly what it sends.
public enum ReplySignature {
    /// The header that carries a reply's signature.
    public static let header = "ActionHook-Reply-Signature"
    /// The first line of the signed bytes.
    public static let version = "actionhook-reply-v1"

    /// The header's parts: the fingerprint of the signing key and the raw signature.
    public struct Header: Sendable, Equatable {
        public var key: String
        public var signature: [UInt8]

        /// Parses `key=<32 lowercase hex digits>, sig=<base64 of 64 bytes>`; nil when it is anything else.
        public init?(_ text: String) {
            // Read as bytes: Foundation's trimming goes through NSString, which cost more than the rest of a
            // reply's parsing.
            var key: String?
            var signature: [UInt8]?
            let bytes = Array(text.utf8)
            for part in bytes.split(separator: UInt8(ascii: ","), omittingEmptySubsequences: false) {
                let isSpace = { (byte: UInt8) in byte == UInt8(ascii: " ") || byte == UInt8(ascii: "\t") }
                guard let first = part.firstIndex(where: { !isSpace($0) }),
                    let last = part.lastIndex(where: { !isSpace($0) })
                else { return nil }
                let trimmed = part[first...last]
                guard let equals = trimmed.firstIndex(of: UInt8(ascii: "=")) else { return nil }
                let name = String(decoding: trimmed[..<equals], as: UTF8.self)
                let value = String(decoding: trimmed[(equals + 1)...], as: UTF8.self)
                switch name {
                case "key" where key == nil:
                    guard value.utf8.count == 32, Hex.isLowercaseHex(value) else { return nil }
                    key = value
                case "sig" where signature == nil:
                    guard let data = Data(base64Encoded: value), data.count == 64 else { return nil }
                    signature = Array(data)
                default: return nil
                }
            }
            guard let key, let signature else { return nil }
            self.key = key
            self.signature = signature
        }

        /// The header's text.
        public static func text(key: String, signature: [UInt8]) -> String {
            "key=\(key), sig=\(Data(signature).base64EncodedString())"
        }
    }

    /// The bytes a device signs for `response` of `appID`; nil when the reply lacks `responseId`,
    /// `respondedAt` or `deviceToken` (``SignatureRefusal/missingField``) or a text field holds a line feed.
    public static func message(appID: String, response: NotificationResponse) -> Result<[UInt8], SignatureRefusal> {
        guard let responseId = response.responseId, let respondedAt = response.respondedAt,
            let device = response.deviceToken
        else { return .failure(.missingField) }
        guard !responseId.utf8.contains(0x0A), !response.actionIdentifier.utf8.contains(0x0A),
            !appID.utf8.contains(0x0A)
        else { return .failure(.unencodable) }
        let key = NotificationKey.read(from: response.userInfo)
        let text = response.userText.map { Hex.encode(Array(SHA256.hash(data: Data($0.utf8)))) } ?? ""
        let lines = [
            version, "app=" + appID, "responseId=" + responseId, "action=" + response.actionIdentifier,
            "text=" + text, "respondedAt=" + Timestamp.format(respondedAt), "device=" + device,
            "notification=" + (key.map { $0.notificationID.lowercasedString } ?? ""),
            "position=" + (key.map { String($0.device) } ?? ""),
        ]
        return .success(Array(lines.joined(separator: "\n").utf8))
    }

    /// Checks a reply's signature header against the device's keys.
    ///
    /// - Parameters:
    ///   - header: the header's text; nil is `absent`.
    ///   - idempotencyKey: the request's `Idempotency-Key` header, if it has one.
    ///   - now: the server's clock, and `windowSeconds` the idempotency window: a signed reply answered longer
    ///     ago than that is `stale`, since a replay of it would no longer be recognised by its `responseId`.
    ///   - keys: the keys of the reply's device (its token) that may verify now, by fingerprint: its current
    ///     key, and a replaced one within the window. Asked only for a well-formed header and reply.
    public static func check(
        header: String?, appID: String, response: NotificationResponse, idempotencyKey: String? = nil, now: Date,
        windowSeconds: Int, keys: (String) throws -> [String: DevicePublicKey]
    ) rethrows -> SignatureCheck {
        guard let header else { return .absent }
        guard let parsed = Header(header) else { return .invalid(.malformedHeader) }
        if let idempotencyKey, idempotencyKey != response.responseId { return .invalid(.keyMismatch) }
        let bytes: [UInt8]
        switch message(appID: appID, response: response) {
        case .success(let message): bytes = message
        case .failure(let refusal): return .invalid(refusal)
        }
        guard let device = response.deviceToken, let key = try keys(device)[parsed.key] else {
            return .invalid(.unknownKey)
        }
        guard let signature = try? P256.Signing.ECDSASignature(rawRepresentation: parsed.signature),
            key.key.isValidSignature(signature, for: bytes)
        else { return .invalid(.badSignature) }
        if let respondedAt = response.respondedAt, now.timeIntervalSince(respondedAt) > Double(windowSeconds) {
            return .invalid(.stale)
        }
        return .valid(key: parsed.key)
    }
}
