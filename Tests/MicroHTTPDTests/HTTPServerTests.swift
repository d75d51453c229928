import Foundation
import Logging
import MicroHTTPD
import Synchronization
import TestSupport
import Testing

/// Starts a server on port 0 with `routes`, runs `body`, and stops it.
func withServer<T>(
    _ configure: (inout HTTPServerConfiguration) -> Void = { _ in },
    routes: (inout Router) -> Void,
    _ body: (HTTPServer) throws -> T
) throws -> T {
    var configuration = HTTPServerConfiguration(host: "127.0.0.1", port: 0, threads: 2)
    configure(&configuration)
    var router = Router()
    routes(&router)
    let server = HTTPServer(configuration: configuration, router: router, logger: Logger(label: "test"))
    try server.start()
    defer { server.stop(gracePeriod: .seconds(2)) }
    return try body(server)
}

func echoRoutes(_ router: inout Router) {
    router.add(.get, "/items/{id}") { request in
        let text =
            "id=\(request.parameter("id")) q=\(request.queryValue("q") ?? "-") h=\(request.headers["X-Thing"] ?? "-")"
            + " peer=\(request.peerAddress ?? "-")"
        return .text(200, text)
    }
    router.add(.post, "/items/{id}", bodyLimit: 64) { request in
        HTTPResponse(status: 201, headers: ["Content-Type": "application/octet-stream"], body: request.body)
    }
    router.add(.delete, "/items/{id}") { _ in HTTPResponse(status: 204) }
}

@Suite("HTTP server")
struct HTTPServerTests {
    @Test("routes with path parameters, query items and case-insensitive headers")
    func routing() throws {
        try withServer(routes: echoRoutes) { server in
            let client = try HTTPTestClient(port: server.port)
            let response = try client.request("GET", "/items/42?q=hello%20world", headers: [("x-THING", "v")])
            #expect(response.status == 200)
            #expect(response.text == "id=42 q=hello world h=v peer=127.0.0.1")

            let posted = try client.request("POST", "/items/7", body: Array("payload".utf8))
            #expect(posted.status == 201)
            #expect(posted.text == "payload")

            let head = try client.request("HEAD", "/items/1")
            #expect(head.status == 200)
        }
    }

    @Test("peer addresses are written as text when asked for")
    func peerAddresses() {
        #expect(PeerAddress.ipv4(UInt32(bigEndian: 0xC0A8_0102)).text == "192.168.1.2")
        #expect(PeerAddress.ipv6(0, UInt64(bigEndian: 1)).text == "::1")
        let documentation = PeerAddress.ipv6(UInt64(bigEndian: 0x2001_0DB8_0000_0000), UInt64(bigEndian: 0x42))
        #expect(documentation.text == "2001:db8::42")
        #expect(PeerAddress.text("10.0.0.1").text == "10.0.0.1")
    }

    @Test("unknown paths are 404 and wrong methods 405 with Allow, as problem+json")
    func notFoundAndMethodNotAllowed() throws {
        try withServer(routes: echoRoutes) { server in
            let client = try HTTPTestClient(port: server.port)
            let missing = try client.request("GET", "/nothing/here")
            #expect(missing.status == 404)
            #expect(missing.headers["content-type"] == "application/problem+json")
            #expect(missing.json["status"] as? Int == 404)
            #expect(missing.json["title"] as? String == "Not Found")

            let wrong = try client.request("PUT", "/items/1", body: [])
            #expect(wrong.status == 405)
            #expect(wrong.headers["allow"] == "GET, POST, DELETE")
            #expect(wrong.headers["content-type"] == "application/problem+json")
        }
    }

    @Test("413 from Content-Length before any body byte is sent")
    func payloadTooLargeFromHeaders() throws {
        try withServer(routes: echoRoutes) { server in
            let client = try HTTPTestClient(port: server.port)
            // Only the headers go out; the server must answer without waiting for the body.
            try client.send("POST /items/1 HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n")
            let response = try client.readResponse()
            #expect(response.status == 413)
            #expect(response.headers["content-type"] == "application/problem+json")
            #expect(client.isClosedByPeer())
        }
    }

    @Test("a chunked body over the limit is 413 and not stored")
    func payloadTooLargeChunked() throws {
        let seen = Mutex(0)
        try withServer(
            routes: { router in
                router.add(.post, "/upload", bodyLimit: 32) { _ in
                    seen.withLock { $0 += 1 }
                    return HTTPResponse(status: 200)
                }
            }
        ) { server in
            let client = try HTTPTestClient(port: server.port)
            var request = "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
            for _ in 0..<8 { request += "10\r\n0123456789abcdef\r\n" }
            request += "0\r\n\r\n"
            try client.send(request)
            let response = try client.readResponse()
            #expect(response.status == 413)

            let small = try HTTPTestClient(port: server.port)
            try small.send(
                "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n0\r\n\r\n")
            #expect(try small.readResponse().status == 200)
        }
        #expect(seen.withLock { $0 } == 1)
    }

    @Test("keep-alive: several requests on one connection")
    func keepAlive() throws {
        try withServer(routes: echoRoutes) { server in
            let client = try HTTPTestClient(port: server.port)
            for index in 0..<5 {
                let response = try client.request("GET", "/items/\(index)")
                #expect(response.status == 200)
                #expect(response.headers["connection"]?.lowercased() != "close")
            }
            let posted = try client.request("POST", "/items/9", body: Array("x".utf8))
            #expect(posted.status == 201)
            #expect(try client.request("GET", "/items/10").status == 200)
        }
    }

    @Test("a burst of 300 connections at once is answered in full")
    func burst() throws {
        try withServer({ $0.perIPConnectionLimit = 0 }, routes: echoRoutes) { server in
            let clients = try (0..<300).map { _ in try HTTPTestClient(port: server.port) }
            for (index, client) in clients.enumerated() {
                try client.sendRequest("GET", "/items/\(index)")
            }
            var answered = 0
            for (index, client) in clients.enumerated() {
                let response = try client.readResponse()
                if response.status == 200 && response.text.hasPrefix("id=\(index) ") { answered += 1 }
            }
            #expect(answered == 300)
        }
    }

    @Test("X-Request-Id is echoed when well formed and generated otherwise")
    func requestID() throws {
        try withServer(routes: { router in
            router.add(.get, "/id") { request in
                HTTPResponse(status: 200, headers: ["X-Request-Id": request.requestID])
            }
        }) { server in
            let client = try HTTPTestClient(port: server.port)
            #expect(
                try client.request("GET", "/id", headers: [("X-Request-Id", "abc-123")]).headers["x-request-id"]
                    == "abc-123")
            let generated = try client.request("GET", "/id", headers: [("X-Request-Id", "bad id\u{7f}<script>")])
            let id = try #require(generated.headers["x-request-id"])
            #expect(id != "bad id")
            #expect(UUID(uuidString: id) != nil)
            // Generated ids are lower-case version 4 UUIDs, all different.
            var seen = Set<String>()
            for _ in 0..<200 {
                let generated = try #require(try client.request("GET", "/id").headers["x-request-id"])
                #expect(
                    generated.wholeMatch(of: /[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}/)
                        != nil)
                seen.insert(generated)
            }
            #expect(seen.count == 200 && !seen.contains(id))
            // Error responses carry it too.
            let missing = try client.request("GET", "/missing", headers: [("X-Request-Id", "trace.7")])
            #expect(missing.status == 404)
            #expect(missing.headers["x-request-id"] == "trace.7")
        }
    }

    @Test("200 idle and slow connections do not block a normal request")
    func slowClients() throws {
        try withServer(
            {
                $0.perIPConnectionLimit = 0
                $0.connectionLimit = 500
            }, routes: echoRoutes
        ) { server in
            var slow: [HTTPTestClient] = []
            for index in 0..<200 {
                let client = try HTTPTestClient(port: server.port)
                // Half send nothing, half send an unfinished request line.
                if index.isMultiple(of: 2) { try client.send("GET /items/1 HTTP/1.1\r\nX-Slow: ") }
                slow.append(client)
            }
            let clock = ContinuousClock()
            let started = clock.now
            let response = try HTTPTestClient(port: server.port).request("GET", "/items/5")
            #expect(response.status == 200)
            #expect(clock.now - started < .seconds(2))
            withExtendedLifetime(slow) {}
        }
    }

    @Test("idle connections are closed after the connection timeout")
    func connectionTimeout() throws {
        try withServer({ $0.connectionTimeoutSeconds = 1 }, routes: echoRoutes) { server in
            let client = try HTTPTestClient(port: server.port, timeoutSeconds: 5)
            try client.send("GET /items/1 HTTP/1.1\r\n")
            #expect(client.isClosedByPeer())
        }
    }

    @Test("the per-address connection limit refuses connections past it")
    func perAddressLimit() throws {
        try withServer({ $0.perIPConnectionLimit = 3 }, routes: echoRoutes) { server in
            let held = try (0..<3).map { _ in try HTTPTestClient(port: server.port) }
            for client in held { try client.sendRequest("GET", "/items/1") }
            for client in held { #expect(try client.readResponse().status == 200) }
            let extra = try HTTPTestClient(port: server.port, timeoutSeconds: 3)
            #expect(extra.isClosedByPeer())
            // Another loopback address is not affected.
            let other = try HTTPTestClient(port: server.port, from: "127.0.0.2")
            #expect(try other.request("GET", "/items/2").status == 200)
        }
    }

    @Test("deferred handlers answer from another thread")
    func deferred() throws {
        try withServer(routes: { router in
            router.add(
                Route(
                    .get, "/later/{n}",
                    handler: .deferred { request, respond in
                        let n = request.parameter("n")
                        DispatchQueue.global().asyncAfter(deadline: .now() + .milliseconds(20)) {
                            respond(.text(200, "later \(n)"))
                        }
                    }))
            router.add(Route(.get, "/now", handler: .deferred { _, respond in respond(.text(200, "now")) }))
        }) { server in
            let clients = try (0..<20).map { _ in try HTTPTestClient(port: server.port) }
            for (index, client) in clients.enumerated() { try client.sendRequest("GET", "/later/\(index)") }
            for (index, client) in clients.enumerated() {
                #expect(try client.readResponse().text == "later \(index)")
            }
            let client = try HTTPTestClient(port: server.port)
            #expect(try client.request("GET", "/now").text == "now")
            #expect(try client.request("GET", "/now").text == "now")
        }
    }

    @Test("a deferred answer given while the handler still runs is sent, suspended or not")
    func deferredAnswerDuringHandler() throws {
        // The answer comes from another thread while the handler has not returned yet: either
        // before the server thread decides to suspend (then it sends the answer at once) or after
        // (then the connection is resumed). Each request lands on one side of that race or the other.
        try withServer(routes: { router in
            router.add(
                Route(
                    .get, "/race/{n}",
                    handler: .deferred { request, respond in
                        let n = request.parameter("n")
                        let answered = DispatchSemaphore(value: 0)
                        Thread.detachNewThread {
                            respond(.text(200, "race \(n)"))
                            answered.signal()
                        }
                        if Int(n)! % 2 == 0 { answered.wait() }
                    }))
        }) { server in
            let clients = try (0..<8).map { _ in try HTTPTestClient(port: server.port) }
            for round in 0..<25 {
                for (index, client) in clients.enumerated() {
                    try client.sendRequest("GET", "/race/\(round * 8 + index)")
                }
                for (index, client) in clients.enumerated() {
                    #expect(try client.readResponse().text == "race \(round * 8 + index)")
                }
            }
        }
    }

    @Test("a graceful stop lets in-flight requests finish and refuses new connections")
    func gracefulStop() throws {
        // Both requests must have reached their handlers before the stop: a connection still in
        // the kernel's backlog when the server quiesces is never accepted.
        let arrived = DispatchSemaphore(value: 0)
        var router = Router()
        router.add(.get, "/slow") { _ in
            arrived.signal()
            Thread.sleep(forTimeInterval: 0.3)
            return .text(200, "done")
        }
        router.add(Route(.get, "/never", handler: .deferred { _, _ in arrived.signal() }))
        let server = HTTPServer(
            configuration: HTTPServerConfiguration(host: "127.0.0.1", port: 0, threads: 2), router: router,
            logger: Logger(label: "test"))
        try server.start()
        let port = server.port
        let slow = try HTTPTestClient(port: port)
        try slow.sendRequest("GET", "/slow")
        let pending = try HTTPTestClient(port: port)
        try pending.sendRequest("GET", "/never")
        #expect(arrived.wait(timeout: .now() + 10) == .success)
        #expect(arrived.wait(timeout: .now() + 10) == .success)

        let stopped = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            server.stop(gracePeriod: .seconds(1))
            stopped.signal()
        }
        #expect(try slow.readResponse().text == "done")
        // A deferred request that never answers gets a 503 when the grace period ends.
        #expect(try pending.readResponse().status == 503)
        #expect(stopped.wait(timeout: .now() + 5) == .success)
        #expect(throws: TestClientError.self) { try HTTPTestClient(port: port) }
    }

    @Test("the router answers as trying routes in order: an earlier parameter route shadows a later literal one")
    func routerOrder() {
        var router = Router()
        router.add(.get, "/v1/items/{id}") { _ in HTTPResponse(status: 200) }
        router.add(.get, "/v1/items/new") { _ in HTTPResponse(status: 200) }
        router.add(.post, "/v1/items/new") { _ in HTTPResponse(status: 200) }
        router.add(.get, "/healthz") { _ in HTTPResponse(status: 200) }
        func found(_ method: HTTPMethod, _ path: String) -> (String, [String: String])? {
            guard case .found(let route, let parameters) = router.match(method: method, path: path) else { return nil }
            return (route.pattern, parameters)
        }
        #expect(found(.get, "/v1/items/new")?.0 == "/v1/items/{id}")
        #expect(found(.get, "/v1/items/new")?.1 == ["id": "new"])
        #expect(found(.post, "/v1/items/new")?.0 == "/v1/items/new")
        #expect(found(.get, "/healthz")?.0 == "/healthz")
        #expect(found(.head, "/healthz")?.0 == "/healthz")
        #expect(found(.get, "//healthz/")?.0 == "/healthz")
        guard case .methodNotAllowed(let allowed) = router.match(method: .delete, path: "/healthz") else {
            Issue.record("DELETE /healthz was not 405")
            return
        }
        #expect(allowed == [.get])
    }

    @Test("problem bodies escape text and list field errors")
    func problemJSON() throws {
        let problem = ProblemDetails(
            status: 422, title: "Invalid", detail: "a \"quoted\"\nline",
            errors: [.init(pointer: "/userText", detail: "must not be empty")])
        let object = try #require(
            try JSONSerialization.jsonObject(with: Data(problem.jsonBytes)) as? [String: Any])
        #expect(object["detail"] as? String == "a \"quoted\"\nline")
        #expect(object["type"] as? String == "https://actionhook.dev/problems/invalid")
        let errors = try #require(object["errors"] as? [[String: String]])
        #expect(errors == [["pointer": "/userText", "detail": "must not be empty"]])
    }
}
