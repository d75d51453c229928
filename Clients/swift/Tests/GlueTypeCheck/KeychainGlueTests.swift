import ActionHookKit
import Crypto
import Foundation
import Security
import Testing

@Suite("The Keychain key store, compiled against Apple's signatures")
struct KeychainGlueTests {
    /// A store of its own (the stand-in's Keychain is one per process, as the real one is per app).
    static func store(secureEnclave: Bool = true) -> KeychainDeviceKeyStore {
        KeychainDeviceKeyStore(account: "app-\(UUID().uuidString)", useSecureEnclave: secureEnclave)
    }

    static func verifies(_ key: any DeviceSigningKey, _ other: any DeviceSigningKey) throws -> Bool {
        let message = Data("actionhook-reply-v1\napp=calendar".utf8)
        let signature = try P256.Signing.ECDSASignature(rawRepresentation: key.signature(for: message))
        return try P256.Signing.PublicKey(x963Representation: other.publicKeyX963).isValidSignature(
            signature, for: message)
    }

    @Test("a Secure Enclave key is kept as its data, read back as the same key, readable after the first unlock")
    func secureEnclaveKey() throws {
        let store = Self.store()
        #expect(try store.load() == nil)
        let key = try store.generate()
        #expect(!(key is SoftwareDeviceKey))
        #expect(try store.load() == nil, "a generated key is not kept until `keep`")
        try store.keep(key)
        let loaded = try #require(try store.load())
        #expect(!(loaded is SoftwareDeviceKey))
        #expect(loaded.publicKeyX963 == key.publicKeyX963)
        #expect(try Self.verifies(loaded, key))
        #expect(
            StandInKeychain.standInAccessible(service: store.service, account: store.account)
                == kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly)
    }

    @Test("without the Secure Enclave a software key is kept; a new key replaces it; remove forgets it")
    func softwareKeyReplacedRemoved() throws {
        let store = Self.store(secureEnclave: false)
        let first = try store.generate()
        #expect(first is SoftwareDeviceKey)
        try store.keep(first)
        #expect(try store.load()?.publicKeyX963 == first.publicKeyX963)
        let second = try store.generate()
        try store.keep(second)
        let loaded = try #require(try store.load())
        #expect(loaded.publicKeyX963 == second.publicKeyX963)
        #expect(try Self.verifies(loaded, second))
        try store.remove()
        #expect(try store.load() == nil)
        try store.remove()
    }

    @Test("a key another store made is refused")
    func foreignKey() throws {
        struct Other: DeviceSigningKey {
            var publicKeyX963: Data { Data() }
            func signature(for data: Data) throws -> Data { Data() }
        }
        #expect(throws: DeviceKeyError.foreignKey) { try Self.store().keep(Other()) }
    }
}
