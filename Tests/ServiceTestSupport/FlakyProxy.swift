import Foundation
import Synchronization
import TestSupport

#if canImport(Glibc)
    import Glibc
#endif

/// A TCP proxy on 127.0.0.1 between a client and the service that can lose connections the way a phone's
/// network does: each new connection is given a fate by `decide` (its index from 0).
package final class FlakyProxy: Sendable {
    package enum Fate: Sendable {
        /// Relay the request and the service's answer, then close: every request gets a connection of its
        /// own, so fates apply per request even for a client that keeps connections alive.
        case pass
        /// Close the client's connection at once: the request never reaches the service.
        case dropBeforeRequest
        /// Relay the request, wait for the service's first answer bytes, then close both sides without
        /// relaying them: the service acted, the client never hears of it. `afterAnswer` runs first.
        case dropAnswer
    }

    package let port: Int
    private let listener: Int32
    private let upstream: Atomic<Int>
    private let connections = Atomic<Int>(0)
    private let stopped = Atomic<Bool>(false)
    private let decide: @Sendable (Int) -> Fate
    private let afterAnswer: @Sendable () -> Void

    /// Listens on a free port and relays to `upstreamPort`.
    package init(
        upstreamPort: Int, afterAnswer: @escaping @Sendable () -> Void = {},
        decide: @escaping @Sendable (Int) -> Fate
    ) throws {
        let listener = try LoopbackListener()
        self.listener = listener.descriptor
        port = listener.port
        upstream = Atomic(upstreamPort)
        self.decide = decide
        self.afterAnswer = afterAnswer
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    /// Sends new connections to another port (the service restarted elsewhere).
    package func redirect(to port: Int) {
        upstream.store(port, ordering: .sequentiallyConsistent)
    }

    /// Stops accepting; connections already relayed end when their sides close. The accept loop closes
    /// the listening socket itself: closed here, its descriptor number could be reused (by the service
    /// under test, say) while the loop is about to call accept() on it.
    package func stop() {
        stopped.store(true, ordering: .sequentiallyConsistent)
        shutdown(listener, Int32(SHUT_RDWR))
    }

    private func acceptLoop() {
        defer { close(listener) }
        while !stopped.load(ordering: .sequentiallyConsistent) {
            let client = accept(listener, nil, nil)
            if client < 0 {
                if errno == EINTR { continue }
                return
            }
            if stopped.load(ordering: .sequentiallyConsistent) {
                close(client)
                return
            }
            let index = connections.add(1, ordering: .sequentiallyConsistent).oldValue
            let fate = decide(index)
            Thread.detachNewThread { [self] in serve(client, fate) }
        }
    }

    private func serve(_ client: Int32, _ fate: Fate) {
        if case .dropBeforeRequest = fate {
            close(client)
            return
        }
        let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = Self.loopback(port: upstream.load(ordering: .sequentiallyConsistent))
        let connected = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            close(server)
            close(client)
            return
        }
        let closed = Atomic<Bool>(false)
        let closeBoth: @Sendable () -> Void = {
            guard !closed.exchange(true, ordering: .sequentiallyConsistent) else { return }
            shutdown(client, Int32(SHUT_RDWR))
            shutdown(server, Int32(SHUT_RDWR))
        }
        Thread.detachNewThread {
            Self.pump(from: client, to: server)
            closeBoth()
        }
        // The final answer (interim 1xx answers, such as 100 Continue, are relayed as they come): only a
        // whole final answer means the service finished with the request.
        let answer = Self.readFinalAnswer(from: server, relayingInterimTo: client)
        if let answer {
            if case .dropAnswer = fate {
                afterAnswer()
            } else {
                Self.sendAll(answer, to: client)
            }
        }
        closeBoth()
        // Give the other pump a moment to see the shutdown before the descriptors are reused.
        usleep(50_000)
        close(server)
        close(client)
    }

    /// Reads answers from `source` until a final one (status 200 or more, headers and `Content-Length`
    /// bytes of body) is whole, relaying interim ones to `client`; nil when the connection ends first.
    private static func readFinalAnswer(from source: Int32, relayingInterimTo client: Int32) -> [UInt8]? {
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            if let end = headerEnd(received) {
                let head = String(decoding: received[0..<end], as: UTF8.self).lowercased()
                let status = head.split(separator: " ", maxSplits: 2).dropFirst().first.flatMap { Int($0) } ?? 0
                if (100..<200).contains(status) {
                    sendAll(Array(received[0..<(end + 4)]), to: client)
                    received.removeFirst(end + 4)
                    continue
                }
                let length =
                    head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                    .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
                if received.count >= end + 4 + length { return Array(received[0..<(end + 4 + length)]) }
            }
            let count = read(source, &buffer, buffer.count)
            if count <= 0 { return nil }
            received += buffer[0..<count]
        }
    }

    private static func sendAll(_ bytes: [UInt8], to destination: Int32) {
        var sent = 0
        while sent < bytes.count {
            let written = bytes[sent...].withUnsafeBytes {
                send(destination, $0.baseAddress, bytes.count - sent, Int32(MSG_NOSIGNAL))
            }
            if written <= 0 { return }
            sent += written
        }
    }

    private static func headerEnd(_ bytes: [UInt8]) -> Int? {
        guard bytes.count >= 4 else { return nil }
        for index in 0...(bytes.count - 4)
        where bytes[index] == 13 && bytes[index + 1] == 10 && bytes[index + 2] == 13 && bytes[index + 3] == 10 {
            return index
        }
        return nil
    }

    private static func pump(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 16_384)
        while true {
            let count = read(source, &buffer, buffer.count)
            if count <= 0 { return }
            var sent = 0
            while sent < count {
                let written = buffer[sent..<count].withUnsafeBytes {
                    send(destination, $0.baseAddress, count - sent, Int32(MSG_NOSIGNAL))
                }
                if written <= 0 { return }
                sent += written
            }
        }
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        return address
    }
}
