// The only file that touches Security and CryptoKit's Secure Enclave: the device key in the Keychain, made in the
// Secure Enclave where the device has one. It compiles on Apple platforms; on Linux the GlueTypeCheck test target
// compiles this same file (a symbolic link) against stand-in modules with Apple's signatures (`Security`, and
// `SecureEnclaveStandIn` beside swift-crypto for CryptoKit), where ACTIONHOOKKIT_GLUE_CHECK is set. The signing
// core (`ReplySignature`, `DeviceKeyStore`) is plain Swift.
#if (canImport(CryptoKit) && canImport(Security) && canImport(Darwin)) || ACTIONHOOKKIT_GLUE_CHECK
    import Foundation
    import Security
    #if ACTIONHOOKKIT_GLUE_CHECK
        import ActionHookKit
        import Crypto
        import SecureEnclaveStandIn
    #else
        import CryptoKit
    #endif

    /// The device key kept in the Keychain: a Secure Enclave key where `SecureEnclave.isAvailable` (its
    /// `dataRepresentation`, an opaque blob only this device's Secure Enclave can use, is what the Keychain
    /// holds; the private key never leaves the enclave), else a software P-256 key. The item is a generic
    /// password readable after the first unlock and never leaves the device (no backup, no iCloud Keychain), so
    /// a reply answered on the lock screen is signed too.
    public struct KeychainDeviceKeyStore: DeviceKeyStore {
        /// The item's service.
        public var service: String
        /// The item's account: the app id, so that one app's key is not another's.
        public var account: String
        /// The Keychain access group, to share the key with an app extension; nil for the app's default.
        public var accessGroup: String?
        /// Whether a new key is made in the Secure Enclave when the device has one.
        public var useSecureEnclave: Bool

        /// A store for the key of app `account`.
        public init(
            account: String, service: String = "dev.actionhook.device-key", accessGroup: String? = nil,
            useSecureEnclave: Bool = true
        ) {
            self.account = account
            self.service = service
            self.accessGroup = accessGroup
            self.useSecureEnclave = useSecureEnclave
        }

        /// The first byte of the item's data: which kind of key the rest is.
        private enum Kind: UInt8 {
            case software = 0
            case secureEnclave = 1
        }

        private var query: [String: Any] {
            var query: [String: Any] = [
                kSecClass as String: kSecClassGenericPassword, kSecAttrService as String: service,
                kSecAttrAccount as String: account,
            ]
            if let accessGroup { query[kSecAttrAccessGroup as String] = accessGroup }
            return query
        }

        public func load() throws -> (any DeviceSigningKey)? {
            var query = query
            query[kSecReturnData as String] = true
            query[kSecMatchLimit as String] = kSecMatchLimitOne
            var result: CFTypeRef?
            let status = SecItemCopyMatching(query as CFDictionary, &result)
            if status == errSecItemNotFound { return nil }
            guard status == errSecSuccess else { throw DeviceKeyError.keychain(status: status) }
            guard let data = result as? Data, let first = data.first, let kind = Kind(rawValue: first) else {
                throw DeviceKeyError.unreadable
            }
            let body = data.dropFirst()
            do {
                switch kind {
                case .software:
                    return try SoftwareDeviceKey(rawRepresentation: Data(body))
                case .secureEnclave:
                    return SecureEnclaveDeviceKey(
                        try SecureEnclave.P256.Signing.PrivateKey(dataRepresentation: Data(body)))
                }
            } catch {
                throw DeviceKeyError.unreadable
            }
        }

        public func generate() throws -> any DeviceSigningKey {
            guard useSecureEnclave, SecureEnclave.isAvailable else { return SoftwareDeviceKey() }
            var error: Unmanaged<CFError>?
            guard
                let access = SecAccessControlCreateWithFlags(
                    nil, kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly, .privateKeyUsage, &error)
            else {
                throw error.map { $0.takeRetainedValue() as Error } ?? DeviceKeyError.keychain(status: errSecParam)
            }
            return SecureEnclaveDeviceKey(try SecureEnclave.P256.Signing.PrivateKey(accessControl: access))
        }

        public func keep(_ key: any DeviceSigningKey) throws {
            let data: Data
            switch key {
            case let key as SecureEnclaveDeviceKey:
                data = Data([Kind.secureEnclave.rawValue]) + key.key.dataRepresentation
            case let key as SoftwareDeviceKey: data = Data([Kind.software.rawValue]) + key.rawRepresentation
            default: throw DeviceKeyError.foreignKey
            }
            let attributes: [String: Any] = [
                kSecValueData as String: data,
                kSecAttrAccessible as String: kSecAttrAccessibleAfterFirstUnlockThisDeviceOnly,
            ]
            // Updated in place: the old key is never gone before the new one is kept.
            var status = SecItemUpdate(query as CFDictionary, attributes as CFDictionary)
            if status == errSecItemNotFound {
                status = SecItemAdd(query.merging(attributes) { $1 } as CFDictionary, nil)
            }
            guard status == errSecSuccess else { throw DeviceKeyError.keychain(status: status) }
        }

        public func remove() throws {
            let status = SecItemDelete(query as CFDictionary)
            guard status == errSecSuccess || status == errSecItemNotFound else {
                throw DeviceKeyError.keychain(status: status)
            }
        }
    }

    /// A Secure Enclave P-256 key.
    struct SecureEnclaveDeviceKey: DeviceSigningKey, @unchecked Sendable {
        // @unchecked: the key is an immutable handle to the enclave's key.
        let key: SecureEnclave.P256.Signing.PrivateKey

        init(_ key: SecureEnclave.P256.Signing.PrivateKey) {
            self.key = key
        }

        var publicKeyX963: Data { key.publicKey.x963Representation }

        func signature(for data: Data) throws -> Data {
            try key.signature(for: data).rawRepresentation
        }
    }
#endif
