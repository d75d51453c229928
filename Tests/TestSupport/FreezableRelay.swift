import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP relay on 127.0.0.1 to a server on loopback that can be frozen: while frozen it passes no byte in
/// either direction and closes nothing, as a stopped (SIGSTOPped) or cut-off server looks to a client. New
/// connections are still accepted and connected onwards, and then hear nothing either.
package final class FreezableRelay: Sendable {
    package let port: Int
    private let listener: Int32
    private let upstreamPort: Int
    private let frozen = Atomic<Bool>(false)
    private let stopped = Atomic<Bool>(false)
    private let sockets = Mutex<[Int32]>([])

    /// Listens on a free port and relays each connection to `upstreamPort`.
    package init(upstreamPort: Int) throws {
        let listener = try LoopbackListener()
        self.listener = listener.descriptors[0]
        port = listener.port
        self.upstreamPort = upstreamPort
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Stops passing bytes (they wait in the relay) until ``thaw()``.
    package func freeze() { frozen.store(true, ordering: .sequentiallyConsistent) }

    /// Passes bytes again, those held first.
    package func thaw() { frozen.store(false, ordering: .sequentiallyConsistent) }

    /// Stops accepting and closes every relayed connection.
    package func stop() {
        stopped.store(true, ordering: .sequentiallyConsistent)
        thaw()
        shutdown(listener, Int32(SHUT_RDWR))
        for socket in sockets.withLock({ $0 }) { shutdown(socket, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop() {
        defer { close(listener) }
        while !stopped.load(ordering: .sequentiallyConsistent) {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(upstreamPort).bigEndian)
            inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else {
                close(server)
                close(client)
                continue
            }
            sockets.withLock { $0 += [client, server] }
            Thread.detachNewThread { [self] in pump(from: client, to: server) }
            Thread.detachNewThread { [self] in pump(from: server, to: client) }
        }
    }

    /// Copies bytes until either side ends; each pump shuts the other side down for writing when its
    /// source ends, and the second one to finish closes both.
    private func pump(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            if count <= 0 { break }
            while frozen.load(ordering: .sequentiallyConsistent) { usleep(10_000) }
            var offset = 0
            while offset < count {
                // send, not write: a peer already gone must not raise SIGPIPE in the test process.
                let written = buffer.withUnsafeBytes {
                    send(destination, $0.baseAddress! + offset, count - offset, Int32(MSG_NOSIGNAL))
                }
                if written < 0 && errno == EINTR { continue }
                if written <= 0 { break }
                offset += written
            }
            if offset < count { break }
        }
        shutdown(destination, Int32(SHUT_WR))
        shutdown(source, Int32(SHUT_RD))
    }
}
