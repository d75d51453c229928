// A stand-in for CryptoKit's `SecureEnclave` (the part ActionHookKit's Keychain glue uses), for Linux only
// (Package.swift declares it inside `#if os(Linux)`), with Apple's names and call shapes: a Secure Enclave key
// is played by a software P-256 key (swift-crypto), whose `dataRepresentation` is an opaque blob as the enclave's
// is. Not named CryptoKit: the library's own `#if canImport(CryptoKit)` must stay false on Linux.
import Crypto
import Foundation
import Security

public enum SecureEnclave {
    /// Whether the device has a Secure Enclave: here, always.
    public static let isAvailable = true

    public enum P256 {
        public enum Signing {
            public struct PrivateKey: @unchecked Sendable {
                // @unchecked: an immutable value.
                private static let prefix = Data("standin-secure-enclave:".utf8)
                private let key: Crypto.P256.Signing.PrivateKey
                /// The access control the key was made with; nil for one read back from its data.
                public let standInAccessControl: SecAccessControl?

                public init(compactRepresentable: Bool = true, accessControl: SecAccessControl) throws {
                    key = Crypto.P256.Signing.PrivateKey(compactRepresentable: compactRepresentable)
                    standInAccessControl = accessControl
                }

                public init(dataRepresentation: Data) throws {
                    guard dataRepresentation.starts(with: Self.prefix) else { throw CryptoKitError.incorrectKeySize }
                    key = try Crypto.P256.Signing.PrivateKey(
                        rawRepresentation: dataRepresentation.dropFirst(Self.prefix.count))
                    standInAccessControl = nil
                }

                public var dataRepresentation: Data { Self.prefix + key.rawRepresentation }

                public var publicKey: Crypto.P256.Signing.PublicKey { key.publicKey }

                public func signature<D: DataProtocol>(for data: D) throws -> Crypto.P256.Signing.ECDSASignature {
                    try key.signature(for: data)
                }
            }
        }
    }
}
