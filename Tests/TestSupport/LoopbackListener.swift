import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Listening TCP sockets on loopback, on a port the kernel chooses: 127.0.0.1, and with `alsoIPv6` the same
/// port on ::1 when the machine has IPv6 loopback and the port is free there too.
///
/// What the sockets do is the owner's: accept and serve, accept and relay, or never accept at all (the kernel
/// still completes handshakes into the backlog). The owner closes them, with ``close()`` or each from the
/// thread that accepts on it: closed from another thread while an accept loop still uses it, a descriptor's
/// number could be reused by another test's socket and the loop would accept that socket's connections.
package struct LoopbackListener: Sendable {
    /// The listening descriptors, 127.0.0.1's first.
    package let descriptors: [Int32]
    /// The addresses bound, in the order of ``descriptors``.
    package let addresses: [String]
    /// The port, the same on every address bound.
    package let port: Int

    /// Listens on 127.0.0.1 (and ::1 with `alsoIPv6`) with a backlog of `backlog`.
    package init(alsoIPv6: Bool = false, backlog: Int32 = 128) throws {
        let v4 = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard v4 >= 0 else { throw TestClientError(description: "socket() failed: errno \(errno)") }
        var yes: Int32 = 1
        setsockopt(v4, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(v4, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(v4, backlog) == 0 else {
            let error = errno
            Glibc.close(v4)
            throw TestClientError(description: "bind/listen on 127.0.0.1 failed: errno \(error)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(v4, $0, &length) }
        }
        let port = Int(UInt16(bigEndian: address.sin_port))
        var descriptors = [v4]
        var addresses = ["127.0.0.1"]
        if alsoIPv6, let v6 = Self.listenIPv6(port: port, backlog: backlog) {
            descriptors.append(v6)
            addresses.append("::1")
        }
        self.descriptors = descriptors
        self.addresses = addresses
        self.port = port
    }

    /// The descriptor listening on 127.0.0.1.
    package var descriptor: Int32 { descriptors[0] }

    /// Closes every listening descriptor (only where no thread still accepts on one).
    package func close() {
        for descriptor in descriptors { Glibc.close(descriptor) }
    }

    /// A port nothing listens on now: listened on, read back, closed. (No listener thread is left behind:
    /// one blocked in accept() on a closed descriptor could take connections from whatever reuses that
    /// descriptor number next.)
    package static func freePort() throws -> Int {
        let listener = try LoopbackListener()
        listener.close()
        return listener.port
    }

    /// A socket listening on [::1]:`port`, IPv6 only, or nil when the machine has no IPv6 loopback or the
    /// port is taken there.
    private static func listenIPv6(port: Int, backlog: Int32) -> Int32? {
        let v6 = socket(AF_INET6, Int32(SOCK_STREAM.rawValue), 0)
        guard v6 >= 0 else { return nil }
        var yes: Int32 = 1
        setsockopt(v6, Int32(IPPROTO_IPV6), IPV6_V6ONLY, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in6()
        address.sin6_family = sa_family_t(AF_INET6)
        address.sin6_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET6, "::1", &address.sin6_addr)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(v6, $0, socklen_t(MemoryLayout<sockaddr_in6>.size))
            }
        }
        guard bound == 0, listen(v6, backlog) == 0 else {
            Glibc.close(v6)
            return nil
        }
        return v6
    }
}
