import ActionHookCore
import Dispatch
import Foundation

/// Looks up a host name's addresses: `getaddrinfo` in the service, an answer of the test's choosing in tests.
struct HostResolver: Sendable {
    let resolve: @Sendable (String) -> [AddressPolicy.Address]

    /// The system's resolver.
    static let system = HostResolver(resolve: WebhookTarget.resolve)
}

/// A webhook URL checked against ``AddressPolicy`` before connecting, with the address to connect to.
///
/// A name is resolved once, here: the connection goes to the address that was checked, never to what a
/// second lookup answers (a name whose next answer is loopback cannot rebind the request there).
struct WebhookTarget: Equatable {
    /// Why a target is refused.
    enum Refusal: Error, Equatable {
        case malformed
        case forbiddenAddress
        case unresolvable
    }

    /// The host as the HTTP client reads it from the URL (IPv6 brackets removed): the `Host` header and the
    /// TLS server name stay this.
    var host: String
    /// The checked address a host name resolved to, in the form the HTTP client parses; `nil` for an IP
    /// literal (connecting to it involves no lookup) and when private targets are allowed (nothing to keep
    /// the connection from).
    var pinnedAddress: String?

    /// Checks `url` before connecting: literals and names alike must reach only public addresses (as
    /// `isPublic` decides), unless `allowPrivate`. Name resolution runs on a Dispatch thread, never on the
    /// cooperative pool.
    static func check(
        _ url: String, allowPrivate: Bool, resolver: HostResolver = .system,
        isPublic: @escaping @Sendable (AddressPolicy.Address) -> Bool = AddressPolicy.isPublic
    ) async -> Result<WebhookTarget, Refusal> {
        // The host exactly as the HTTP client will take it from the URL, so that the address it is given is
        // the one for the host it connects to.
        guard WebhookURL.isWellFormed(url), let named = URL(string: url)?.host, !named.isEmpty else {
            return .failure(.malformed)
        }
        let host = named.hasPrefix("[") && named.hasSuffix("]") ? String(named.dropFirst().dropLast()) : named
        if allowPrivate { return .success(WebhookTarget(host: host, pinnedAddress: nil)) }
        // A trailing dot names the same host: "127.0.0.1." is loopback too.
        let bare = host.hasSuffix(".") ? String(host.dropLast()) : host
        if AddressPolicy.isLocalName(bare) { return .failure(.forbiddenAddress) }
        if let literal = AddressPolicy.parseLiteral(bare) {
            return isPublic(literal)
                ? .success(WebhookTarget(host: host, pinnedAddress: nil)) : .failure(.forbiddenAddress)
        }
        // A colon is an IPv6 literal that did not parse (a zone id, say), never a name to look up.
        if host.contains(":") { return .failure(.forbiddenAddress) }
        let addresses = await withCheckedContinuation { continuation in
            DispatchQueue.global().async { continuation.resume(returning: resolver.resolve(host)) }
        }
        guard let first = addresses.first else { return .failure(.unresolvable) }
        guard addresses.allSatisfy(isPublic) else { return .failure(.forbiddenAddress) }
        return .success(WebhookTarget(host: host, pinnedAddress: text(first)))
    }

    /// `address` as text (`93.184.216.34`, `2001:db8::1`).
    static func text(_ address: AddressPolicy.Address) -> String {
        switch address {
        case .v4(let value):
            return [24, 16, 8, 0].map { String(value >> UInt32($0) & 0xFF) }.joined(separator: ".")
        case .v6(let bytes):
            var address = in6_addr()
            withUnsafeMutableBytes(of: &address) { $0.copyBytes(from: bytes.prefix(16)) }
            var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN))
            guard inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count)) != nil else {
                preconditionFailure("inet_ntop refused a 16-byte IPv6 address")
            }
            return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
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
