import ActionHookCore
import Crypto
import Foundation

/// A phone's reply-signing key, as ActionHookKit keeps one: its public half for the registration, and the
/// `ActionHook-Reply-Signature` of a reply body (the JSON the phone sends).
package struct DeviceSigner: Sendable {
    package let privateKey: P256.Signing.PrivateKey

    package init() { privateKey = P256.Signing.PrivateKey() }

    /// `publicKey` of a device registration: base64 of the X9.63 form.
    package var publicKey: String { privateKey.publicKey.x963Representation.base64EncodedString() }

    /// The key's fingerprint, as replies and receipts name it.
    package var fingerprint: String {
        DevicePublicKey.fingerprint(x963: Array(privateKey.publicKey.x963Representation))
    }

    /// The header's value for `body` of `app` (the body as the server will read it), signed with this key
    /// and naming `claiming` as the key (this key's own fingerprint unless given).
    package func header(app: String, body: [String: Any], claiming: String? = nil) throws -> String {
        let value = try JSONParser.parse(Array(try JSONSerialization.data(withJSONObject: body)))
        let response = try NotificationResponse.decode(value)
        let message = try ReplySignature.message(appID: app, response: response).get()
        return ReplySignature.Header.text(
            key: claiming ?? fingerprint, signature: Array(try privateKey.signature(for: message).rawRepresentation))
    }
}
