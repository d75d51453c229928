import Foundation
import Synchronization
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A bare TCP listener on 127.0.0.1 (and the same port on ::1 when it exists) that counts the
/// connections it accepts and hands each to `handler` on its own thread. With the default
/// handler it is a canary: it closes every connection at once, and ``connections`` proves whether
/// anything reached the port.
package final class RawTCPServer: Sendable {
    private let accepted = Atomic<Int>(0)
    private let finished = Atomic<Int>(0)
    private let sent = Atomic<Int>(0)
    private let stopping = Atomic<Bool>(false)
    private let loops = Atomic<Int>(0)
    private let handler: @Sendable (Int32, RawTCPServer) -> Void
    /// The port, the same on every address bound.
    package let port: Int
    /// The addresses bound: 127.0.0.1, and ::1 when the machine has IPv6 loopback.
    package let addresses: [String]

    package init(handler: @escaping @Sendable (Int32, RawTCPServer) -> Void = { _, _ in }) throws {
        self.handler = handler
        // Each accept loop closes its own socket when it ends.
        let listener = try LoopbackListener(alsoIPv6: true)
        port = listener.port
        addresses = listener.addresses
        for socket in listener.descriptors {
            loops.add(1, ordering: .sequentiallyConsistent)
            Thread { [self] in acceptLoop(socket) }.start()
        }
    }

    deinit {
        stop()
    }

    /// Connections accepted so far.
    package var connections: Int { accepted.load(ordering: .sequentiallyConsistent) }
    /// Connections whose handler returned.
    package var finishedConnections: Int { finished.load(ordering: .sequentiallyConsistent) }
    /// Bytes handlers reported sending.
    package var bytesSent: Int { sent.load(ordering: .sequentiallyConsistent) }

    package func recordSent(_ count: Int) {
        sent.add(count, ordering: .sequentiallyConsistent)
    }

    private func acceptLoop(_ listening: Int32) {
        // The loop closes its own socket: closed from stop() while the loop is still polling, the
        // number could be reused by another test's socket and the loop would accept its connections.
        defer {
            close(listening)
            loops.subtract(1, ordering: .sequentiallyConsistent)
        }
        while !stopping.load(ordering: .sequentiallyConsistent) {
            var descriptor = pollfd(fd: listening, events: Int16(POLLIN), revents: 0)
            guard Glibc.poll(&descriptor, 1, 50) > 0 else { continue }
            let connection = accept(listening, nil, nil)
            guard connection >= 0 else { continue }
            accepted.add(1, ordering: .sequentiallyConsistent)
            Thread { [self] in
                handler(connection, self)
                close(connection)
                finished.add(1, ordering: .sequentiallyConsistent)
            }.start()
        }
    }

    /// Stops accepting; returns once the accept loops have closed the listening sockets.
    package func stop() {
        guard !stopping.exchange(true, ordering: .sequentiallyConsistent) else { return }
        Hooks.pollBlocking(timeout: .seconds(10)) { self.loops.load(ordering: .sequentiallyConsistent) == 0 }
    }

    /// Reads a request head, answers `200` with a chunked body that never ends, and writes until the
    /// peer stops reading (send times out after 5 s) or hangs up; a 256 MiB cap ends it regardless.
    package static let endlessChunkedOK: @Sendable (Int32, RawTCPServer) -> Void = { connection, server in
        var timeout = timeval(tv_sec: 5, tv_usec: 0)
        setsockopt(connection, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(connection, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var head: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !head.containsHeadEnd {
            let n = recv(connection, &buffer, buffer.count, 0)
            guard n > 0 else { return }
            head.append(contentsOf: buffer[..<n])
        }
        func write(_ bytes: [UInt8]) -> Bool {
            var offset = 0
            while offset < bytes.count {
                let n = bytes[offset...].withUnsafeBytes {
                    send(connection, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
                }
                guard n > 0 else { return false }
                offset += n
                server.recordSent(n)
            }
            return true
        }
        guard write(Array("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\n\r\n".utf8))
        else { return }
        let chunk = Array("10000\r\n".utf8) + [UInt8](repeating: UInt8(ascii: "y"), count: 0x10000) + Array("\r\n".utf8)
        while server.bytesSent < 256 << 20 {
            guard write(chunk) else { return }
        }
    }
}

extension Array where Element == UInt8 {
    fileprivate var containsHeadEnd: Bool {
        guard count >= 4 else { return false }
        return (0...(count - 4)).contains {
            self[$0] == 13 && self[$0 + 1] == 10 && self[$0 + 2] == 13 && self[$0 + 3] == 10
        }
    }
}
