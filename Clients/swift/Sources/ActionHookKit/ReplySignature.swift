import Foundation

#if canImport(CryptoKit)
    import CryptoKit
#else
    import Crypto
#endif

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// The reply signature, as the device makes it: the bytes it signs for a reply, the key's fingerprint and the
/// `ActionHook-Reply-Signature` header. The encoding is ActionHook's (README, "Signed replies"), byte for byte.
///
/// The signed bytes are UTF-8 lines joined by a line feed (no trailing one):
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
/// signed with ECDSA P-256 over SHA-256 and sent as the standard base64 of the raw `r‖s` (64 bytes).
public enum ReplySignature {
    /// The header that carries a reply's signature.
    public static let header = "ActionHook-Reply-Signature"
    /// The first line of the signed bytes.
    public static let version = "actionhook-reply-v1"
    /// The positions a notification key may name, as the server reads them (`userInfo.actionhook.d`).
    static let maxDevicePosition = 1 << 20

    /// The bytes a device signs for `reply` of app `appID`; nil when the reply cannot be signed: it has no device
    /// token, or a value holds a line feed. Such a reply is sent unsigned.
    public static func message(appID: String, reply: Reply) -> Data? {
        guard let device = reply.deviceToken else { return nil }
        let values = [appID, reply.responseId, reply.actionIdentifier, device]
        guard !values.contains(where: { $0.utf8.contains(0x0A) }) else { return nil }
        let key = notificationKey(in: reply.userInfo)
        let text = reply.userText.map { hex(Array(SHA256.hash(data: Data($0.utf8)))) } ?? ""
        let lines = [
            version, "app=" + appID, "responseId=" + reply.responseId, "action=" + reply.actionIdentifier,
            "text=" + text, "respondedAt=" + Timestamp.string(from: reply.respondedAt), "device=" + device.lowercased(),
            "notification=" + (key?.notification ?? ""), "position=" + (key.map { String($0.position) } ?? ""),
        ]
        return Data(lines.joined(separator: "\n").utf8)
    }

    /// The notification and device position `userInfo["actionhook"]` names (`n`, `d`), as the server reads
    /// them: `n` a UUID (lowercased), `d` a whole number from 0 to 2^20 − 1; nil unless both are so.
    static func notificationKey(in userInfo: [String: JSONValue]) -> (notification: String, position: Int)? {
        guard case .object(let members)? = userInfo[Reply.notificationKey], case .string(let text)? = members["n"],
            let id = UUID(uuidString: text), case .number(let number)? = members["d"], number.rounded() == number,
            number >= 0, number < Double(maxDevicePosition)
        else { return nil }
        return (id.uuidString.lowercased(), Int(number))
    }

    /// The header's value: `key=<fingerprint>, sig=<base64 of the raw signature>`.
    public static func headerValue(fingerprint: String, signature: Data) -> String {
        "key=\(fingerprint), sig=\(signature.base64EncodedString())"
    }

    /// A key's fingerprint: the lowercase hex of the first 16 bytes of SHA-256 over its X9.63 form (65 bytes,
    /// `04‖X‖Y`). The server shows it as the device's `publicKey.fingerprint`.
    public static func fingerprint(x963 publicKey: Data) -> String {
        hex(Array(SHA256.hash(data: publicKey).prefix(16)))
    }

    /// The header value that signs `reply` with `key`; nil when the reply cannot be signed (see `message`) or
    /// the key failed to sign.
    static func header(appID: String, reply: Reply, key: any DeviceSigningKey, fingerprint: String) -> String? {
        guard let message = message(appID: appID, reply: reply),
            let signature = try? key.signature(for: message), signature.count == 64
        else { return nil }
        return headerValue(fingerprint: fingerprint, signature: signature)
    }

    static func hex(_ bytes: [UInt8]) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        text.reserveCapacity(bytes.count * 2)
        for byte in bytes {
            text.append(digits[Int(byte >> 4)])
            text.append(digits[Int(byte & 0x0F)])
        }
        return String(decoding: text, as: UTF8.self)
    }
}

// MARK: Keys

/// The device's private key for reply signatures: P-256, signing with ECDSA over SHA-256. On Apple platforms a
/// Secure Enclave key or a software key kept in the Keychain (`KeychainDeviceKeyStore`); in tests and on Linux a
/// software key (`SoftwareDeviceKey`).
public protocol DeviceSigningKey: Sendable {
    /// The public key's X9.63 form (65 bytes, `04‖X‖Y`): what registration sends as `publicKey`.
    var publicKeyX963: Data { get }
    /// The ECDSA P-256/SHA-256 signature over `data`, raw (`r‖s`, 64 bytes).
    func signature(for data: Data) throws -> Data
}

/// A P-256 key in memory (CryptoKit's, or swift-crypto's on Linux).
public struct SoftwareDeviceKey: DeviceSigningKey, @unchecked Sendable {
    // @unchecked: the key is an immutable value; not every SDK's CryptoKit marks its keys Sendable.
    /// The key.
    public let privateKey: P256.Signing.PrivateKey

    /// A new random key.
    public init() {
        privateKey = P256.Signing.PrivateKey()
    }

    /// A key from CryptoKit's key.
    public init(_ privateKey: P256.Signing.PrivateKey) {
        self.privateKey = privateKey
    }

    /// A key from its raw representation (the 32-byte scalar), as `rawRepresentation` gives it.
    public init(rawRepresentation: Data) throws {
        privateKey = try P256.Signing.PrivateKey(rawRepresentation: rawRepresentation)
    }

    /// The 32-byte scalar: what a store keeps.
    public var rawRepresentation: Data { privateKey.rawRepresentation }

    public var publicKeyX963: Data { privateKey.publicKey.x963Representation }

    public func signature(for data: Data) throws -> Data {
        try privateKey.signature(for: data).rawRepresentation
    }
}

/// Where the device key is kept. The client asks for a new key (`generate`) when the device registers without
/// one or rotates its key, sends its public half, and keeps it (`keep`) once the server confirmed the
/// registration; until then the key kept before (if any) stays the one replies are signed with.
public protocol DeviceKeyStore: Sendable {
    /// The key kept now; nil when there is none.
    func load() throws -> (any DeviceSigningKey)?
    /// A new key, not kept yet.
    func generate() throws -> any DeviceSigningKey
    /// Keeps `key`, made by this store's `generate`, in place of the key kept before.
    func keep(_ key: any DeviceSigningKey) throws
    /// Forgets the kept key (sign-out: the server revokes it).
    func remove() throws
}

/// Why a key store failed.
public enum DeviceKeyError: Error, Sendable, Equatable {
    /// `keep` was given a key another store made.
    case foreignKey
    /// The kept key could not be read back (damaged, or made on another device).
    case unreadable
    /// The Keychain answered an error (`OSStatus`).
    case keychain(status: Int32)
}

/// Software keys kept in memory (for tests) or in a file readable only by the app (on Linux). Apple apps use
/// `KeychainDeviceKeyStore`.
public final class SoftwareDeviceKeyStore: DeviceKeyStore, @unchecked Sendable {
    // @unchecked: `memory` is only touched under `lock`.
    private let lock = NSLock()
    private let file: URL?
    private var memory: SoftwareDeviceKey?

    /// Keys kept in `file` (the 32-byte scalar, mode 0600, written atomically).
    public init(file: URL) {
        self.file = file
    }

    /// Keys kept in memory only: gone with the process.
    public init() {
        file = nil
    }

    public func load() throws -> (any DeviceSigningKey)? {
        try lock.withLock {
            guard let file else { return memory }
            guard let data = try? Data(contentsOf: file) else { return nil }
            guard let key = try? SoftwareDeviceKey(rawRepresentation: data) else { throw DeviceKeyError.unreadable }
            return key
        }
    }

    public func generate() throws -> any DeviceSigningKey {
        SoftwareDeviceKey()
    }

    public func keep(_ key: any DeviceSigningKey) throws {
        guard let key = key as? SoftwareDeviceKey else { throw DeviceKeyError.foreignKey }
        try lock.withLock {
            guard let file else {
                memory = key
                return
            }
            let temporary = file.deletingLastPathComponent().appendingPathComponent(".tmp-\(UUID().uuidString)")
            try ReplyQueue.create(temporary.path, key.rawRepresentation, exclusive: true)
            guard rename(temporary.path, file.path) == 0 else {
                let error = ReplyQueue.posixError()
                unlink(temporary.path)
                throw error
            }
        }
    }

    public func remove() throws {
        lock.withLock {
            memory = nil
            if let file { unlink(file.path) }
        }
    }
}
