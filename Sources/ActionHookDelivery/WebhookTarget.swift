import ActionHookCore
import Dispatch
import Foundation

/// Resolves a webhook URL's host and checks every address against ``AddressPolicy``.
enum WebhookTarget {
    /// Why a target is refused.
    enum Refusal: Error, Equatable {
        case malformed
        case forbiddenAddress
        case unresolvable
    }

    /// Checks `url` before connecting: literals and names alike must reach only public addresses,
    /// unless `allowPrivate`. Name resolution runs on a Dispatch thread, never on the cooperative pool.
    static func check(_ url: String, allowPrivate: Bool) async -> Refusal? {
        guard WebhookURL.isWellFormed(url), let host = URLComponents(string: url)?.host else { return .malformed }
        if allowPrivate { return nil }
        if AddressPolicy.isLocalName(host) { return .forbiddenAddress }
        if let literal = AddressPolicy.parseLiteral(host) {
            return AddressPolicy.isPublic(literal) ? nil : .forbiddenAddress
        }
        let addresses = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: resolve(host)) }
        }
        guard !addresses.isEmpty else { return .unresolvable }
        return addresses.allSatisfy(AddressPolicy.isPublic) ? nil : .forbiddenAddress
    }

    static func resolve(_ host: String) -> [AddressPolicy.Address] {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, nil, &hints, &result) == 0, let first = result else { return [] }
        defer { freeaddrinfo(first) }
        var addresses: [AddressPolicy.Address] = []
        var current: UnsafeMutablePointer<addrinfo>? = first
        while let info = current {
            if let address = info.pointee.ai_addr {
                switch info.pointee.ai_family {
                case AF_INET:
                    address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                        addresses.append(.v4(UInt32(bigEndian: $0.pointee.sin_addr.s_addr)))
                    }
                case AF_INET6:
                    address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) {
                        var bytes = $0.pointee.sin6_addr
                        addresses.append(.v6(withUnsafeBytes(of: &bytes) { Array($0) }))
                    }
                default:
                    break
                }
            }
            current = info.pointee.ai_next
        }
        return addresses
    }
}
