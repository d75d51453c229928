import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Which network addresses webhooks may reach: public unicast only, unless private targets are
/// allowed for local development. Guards against server-side request forgery.
public enum AddressPolicy {
    /// An IP address in binary form.
    public enum Address: Sendable, Equatable {
        case v4(UInt32)
        case v6([UInt8])
    }

    /// Parses an IP literal in every spelling `inet_aton` accepts for IPv4 (decimal `2130706433`,
    /// octal `0177.0.0.1`, hex `0x7f.1`, short `127.1`) and RFC 4291 text for IPv6 (brackets allowed,
    /// zone ids refused). `nil` for a host name.
    public static func parseLiteral(_ host: String) -> Address? {
        var text = host
        if text.hasPrefix("[") && text.hasSuffix("]") { text = String(text.dropFirst().dropLast()) }
        if text.contains(":") {
            guard !text.contains("%") else { return nil }
            var address = in6_addr()
            guard inet_pton(AF_INET6, text, &address) == 1 else { return nil }
            return .v6(withUnsafeBytes(of: &address) { Array($0) })
        }
        guard let last = text.split(separator: ".").last, !last.isEmpty,
            last.allSatisfy({ $0.isHexDigit || $0 == "x" || $0 == "X" }),
            text.first?.isNumber == true
        else { return nil }
        var address = in_addr()
        guard inet_aton(text, &address) != 0 else { return nil }
        return .v4(UInt32(bigEndian: address.s_addr))
    }

    /// Whether a webhook may connect to `address`.
    public static func isPublic(_ address: Address) -> Bool {
        switch address {
        case .v4(let value):
            return isPublicV4(value)
        case .v6(let bytes):
            // IPv4-mapped (::ffff:a.b.c.d), IPv4-compatible (::a.b.c.d) and NAT64 (64:ff9b::/96) carry an
            // IPv4 address that decides.
            if bytes[0..<10].allSatisfy({ $0 == 0 })
                && (bytes[10] == 0xFF && bytes[11] == 0xFF || bytes[10] == 0 && bytes[11] == 0)
            {
                return isPublicV4(v4(bytes[12...]))
            }
            if bytes[0] == 0x00 && bytes[1] == 0x64 && bytes[2] == 0xFF && bytes[3] == 0x9B
                && bytes[4..<12].allSatisfy({ $0 == 0 })
            {
                return isPublicV4(v4(bytes[12...]))
            }
            // 6to4 (2002::/16) embeds an IPv4 address in bytes 2...5.
            if bytes[0] == 0x20 && bytes[1] == 0x02 { return isPublicV4(v4(bytes[2...5])) }
            if bytes[0] == 0xFF { return false }  // multicast
            if bytes[0] & 0xFE == 0xFC { return false }  // unique local fc00::/7
            if bytes[0] == 0xFE && bytes[1] & 0xC0 == 0x80 { return false }  // link-local fe80::/10
            if bytes[0] == 0xFE && bytes[1] & 0xC0 == 0xC0 { return false }  // site-local fec0::/10
            if bytes[0] == 0x20 && bytes[1] == 0x01 && bytes[2] == 0x0D && bytes[3] == 0xB8 { return false }  // docs
            if bytes[0] == 0x01 && bytes[1..<8].allSatisfy({ $0 == 0 }) { return false }  // discard 100::/64
            // Only global unicast (2000::/3) is public.
            return bytes[0] & 0xE0 == 0x20
        }
    }

    static func v4<C: Collection>(_ bytes: C) -> UInt32 where C.Element == UInt8 {
        bytes.reduce(0) { $0 << 8 | UInt32($1) }
    }

    static func isPublicV4(_ value: UInt32) -> Bool {
        func within(_ base: UInt32, _ bits: UInt32) -> Bool {
            let mask: UInt32 = bits == 0 ? 0 : ~UInt32(0) << (32 - bits)
            return value & mask == base & mask
        }
        let blocked: [(UInt32, UInt32)] = [
            (0x0000_0000, 8),  // 0.0.0.0/8 "this network"
            (0x0A00_0000, 8),  // 10/8
            (0x6440_0000, 10),  // 100.64/10 carrier-grade NAT
            (0x7F00_0000, 8),  // 127/8 loopback
            (0xA9FE_0000, 16),  // 169.254/16 link-local (cloud metadata)
            (0xAC10_0000, 12),  // 172.16/12
            (0xC000_0000, 24),  // 192.0.0/24 IETF
            (0xC000_0200, 24),  // 192.0.2/24 docs
            (0xC058_6300, 24),  // 192.88.99/24 6to4 relay
            (0xC0A8_0000, 16),  // 192.168/16
            (0xC612_0000, 15),  // 198.18/15 benchmarking
            (0xC633_6400, 24),  // 198.51.100/24 docs
            (0xCB00_7100, 24),  // 203.0.113/24 docs
            (0xE000_0000, 4),  // 224/4 multicast
            (0xF000_0000, 4),  // 240/4 reserved and broadcast
        ]
        return !blocked.contains { within($0.0, $0.1) }
    }

    /// Host names that always mean this machine.
    public static func isLocalName(_ host: String) -> Bool {
        let name = host.lowercased().trimmingCharacters(in: CharacterSet(charactersIn: "."))
        return name == "localhost" || name.hasSuffix(".localhost") || name == "localhost.localdomain"
            || name.hasSuffix(".local") || name.hasSuffix(".internal")
    }
}
