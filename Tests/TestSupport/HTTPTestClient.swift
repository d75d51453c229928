import Foundation

/// A response read off a raw socket.
package struct TestResponse: Sendable {
    /// The status code.
    package let status: Int
    /// Header fields, names lowercased; the last value wins.
    package let headers: [String: String]
    /// The body bytes.
    package let body: [UInt8]

    /// The body as UTF-8 text.
    package var text: String { String(decoding: body, as: UTF8.self) }

    /// The body parsed as a JSON object (empty when it is not one).
    package var json: [String: Any] {
        (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] ?? [:]
    }
}

/// Why the test client failed.
package struct TestClientError: Error, CustomStringConvertible {
    /// What went wrong.
    package let description: String

    /// Creates an error.
    package init(description: String) {
        self.description = description
    }
}

/// A blocking HTTP/1.1 client over one TCP connection, so tests control exactly what is sent:
/// keep-alive, partial requests, chunked bodies, many connections at once.
package final class HTTPTestClient {
    let socket: Int32
    private var buffer: [UInt8]

    /// Connects to `host:port`, optionally from a given local address (e.g. `127.0.0.2`).
    package init(host: String = "127.0.0.1", port: Int, from localAddress: String? = nil, timeoutSeconds: Int = 10)
        throws
    {
        // The descriptor is stored only once connected: a class whose stored properties are all set
        // runs its deinit even when its init throws, and a second close() here would close whatever
        // descriptor another thread had opened under the same number in between.
        let fd = Foundation.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw TestClientError(description: "socket() failed") }
        var timeout = timeval(tv_sec: timeoutSeconds, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        if let localAddress {
            var local = Self.address(localAddress, port: 0)
            let bound = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard bound == 0 else {
                close(fd)
                throw TestClientError(description: "bind() failed")
            }
        }
        var remote = Self.address(host, port: port)
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard connected == 0 else {
            let error = errno
            close(fd)
            throw TestClientError(description: "connect() failed: errno \(error)")
        }
        socket = fd
        buffer = []
    }

    deinit {
        close(socket)
    }

    static func address(_ host: String, port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        return address
    }

    /// Sends raw bytes.
    package func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes {
                Foundation.send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL))
            }
            guard sent > 0 else { throw TestClientError(description: "send() failed: errno \(errno)") }
            offset += sent
        }
    }

    /// Sends raw text.
    package func send(_ text: String) throws {
        try send(Array(text.utf8))
    }

    /// Sends a request with `Content-Length` when there is a body.
    package func sendRequest(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil
    ) throws {
        var head = "\(method) \(path) HTTP/1.1\r\nHost: localhost\r\n"
        for (name, value) in headers { head += "\(name): \(value)\r\n" }
        if let body { head += "Content-Length: \(body.count)\r\n" }
        head += "\r\n"
        try send(Array(head.utf8) + (body ?? []))
    }

    /// Sends a request and reads its response.
    package func request(
        _ method: String, _ path: String, headers: [(String, String)] = [], body: [UInt8]? = nil
    ) throws -> TestResponse {
        try sendRequest(method, path, headers: headers, body: body)
        return try readResponse(head: method == "HEAD")
    }

    /// Sends a JSON request body.
    package func request(_ method: String, _ path: String, headers: [(String, String)] = [], json: String) throws
        -> TestResponse
    {
        try request(method, path, headers: headers + [("Content-Type", "application/json")], body: Array(json.utf8))
    }

    /// Reads one response (`Content-Length` bodies, or until the peer closes).
    package func readResponse(head: Bool = false) throws -> TestResponse {
        let headerEnd = try readUntil(Array("\r\n\r\n".utf8))
        let headerText = String(decoding: buffer[..<headerEnd], as: UTF8.self)
        buffer.removeFirst(headerEnd + 4)
        var lines = headerText.components(separatedBy: "\r\n")
        let statusLine = lines.removeFirst().split(separator: " ")
        guard statusLine.count >= 2, let status = Int(statusLine[1]) else {
            throw TestClientError(description: "bad status line")
        }
        var headers: [String: String] = [:]
        for line in lines {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(
                in: .whitespaces)
        }
        var body: [UInt8] = []
        if head || status == 204 || status == 304 || status / 100 == 1 {
            body = []
        } else if let length = headers["content-length"].flatMap({ Int($0) }) {
            while buffer.count < length {
                guard try fill() else { throw TestClientError(description: "connection closed mid-body") }
            }
            body = Array(buffer[..<length])
            buffer.removeFirst(length)
        } else {
            while try fill() {}
            body = buffer
            buffer = []
        }
        return TestResponse(status: status, headers: headers, body: body)
    }

    /// Whether the server has closed the connection (waits up to the receive timeout).
    package func isClosedByPeer() -> Bool {
        var byte: UInt8 = 0
        let received = recv(socket, &byte, 1, 0)
        return received == 0 || (received < 0 && errno == ECONNRESET)
    }

    private func readUntil(_ marker: [UInt8]) throws -> Int {
        var searchFrom = 0
        while true {
            if buffer.count >= marker.count {
                for start in searchFrom...(buffer.count - marker.count)
                where buffer[start..<(start + marker.count)].elementsEqual(marker) {
                    return start
                }
                searchFrom = max(0, buffer.count - marker.count + 1)
            }
            guard try fill() else { throw TestClientError(description: "connection closed before a response") }
        }
    }

    /// Reads more bytes; false at end of stream.
    private func fill() throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        let received = recv(socket, &chunk, chunk.count, 0)
        if received == 0 { return false }
        guard received > 0 else {
            if errno == ECONNRESET { return false }
            throw TestClientError(description: "recv() failed: errno \(errno)")
        }
        buffer.append(contentsOf: chunk[..<received])
        return true
    }
}
