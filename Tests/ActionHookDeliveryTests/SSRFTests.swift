import ActionHookCore
import ActionHookServer
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// F9: webhook targets on this machine or a private network are refused when saved (422) and,
/// for names that resolve there, when sending (`dead`, `forbidden_address`); a loopback canary
/// on the port those URLs name sees no connection.
@Suite("SSRF (F9)", .serialized)
struct SSRFTests {
    /// URL forms refused at save time; `port` is the canary's.
    static func refusedForms(port: Int) -> [String] {
        [
            // Loopback, in every spelling.
            "http://127.0.0.1:\(port)/hook",
            "http://2130706433:\(port)/",
            "http://0177.0.0.1:\(port)/",
            "http://0x7f.1:\(port)/",
            "http://0x7f000001:\(port)/",
            "http://017700000001:\(port)/",
            "http://127.1:\(port)/",
            "http://127.0.1:\(port)/",
            "http://127.000.000.001:\(port)/",
            "http://127.0.0.1.:\(port)/",
            "http://0x7f.1.:\(port)/",
            "HTTP://127.0.0.1:\(port)/",
            "http://[::1]:\(port)/",
            "http://[::1%25lo]:\(port)/",
            "http://[0:0:0:0:0:0:0:1]:\(port)/",
            "http://[::ffff:127.0.0.1]:\(port)/",
            "http://[0:0:0:0:0:ffff:7f00:1]:\(port)/",
            "http://[::127.0.0.1]:\(port)/",
            "http://[64:ff9b::7f00:1]:\(port)/",
            "http://[2002:7f00:1::1]:\(port)/",
            "http://localhost:\(port)/",
            "http://LOCALHOST.:\(port)/",
            "http://sub.localhost:\(port)/",
            "http://localhost.localdomain:\(port)/",
            // This host, unspecified.
            "http://0.0.0.0:\(port)/",
            "http://0:\(port)/",
            "http://[::]:\(port)/",
            // Private, shared, link-local (cloud metadata), multicast, broadcast.
            "http://10.0.0.1/",
            "http://10.255.255.254:8080/x",
            "http://172.16.0.1/",
            "http://172.31.255.255/",
            "http://192.168.1.1/",
            "http://169.254.169.254/latest/meta-data/",
            "http://[::ffff:169.254.169.254]/latest/meta-data/",
            "http://metadata.google.internal/computeMetadata/v1/",
            "http://[fe80::1]/",
            "http://[fc00::1]/",
            "http://[fd00::1]/",
            "http://100.64.0.1/",
            "http://224.0.0.1/",
            "http://255.255.255.255/",
            "http://[ff02::1]/",
            // Not http(s), or with credentials.
            "ftp://example.com/file",
            "file:///etc/passwd",
            "gopher://127.0.0.1:\(port)/_x",
            "javascript:alert(1)",
            "data:text/plain,hello",
            "http://user:pass@example.com/",
            "http://127.0.0.1:\(port)@example.com/",
        ]
    }

    @Test("≥ 30 URL forms are refused (422) as the app webhook and as a rule's follow-up url")
    func refusedWhenSaved() async throws {
        let canary = try RawTCPServer()
        let api = try TestAPI()
        let forms = Self.refusedForms(port: canary.port)
        #expect(forms.count >= 30)
        _ = try api.createApp("safe", extra: #""webhook": {"url": "https://hooks.example.com/safe"}"#)

        for (index, url) in forms.enumerated() {
            // Creating an app with it.
            let created = try api.admin(
                "POST", "/v1/apps", json: #"{"id": "ssrf-\#(index)", "name": "x", "webhook": {"url": "\#(url)"}}"#)
            #expect(created.status == 422, "creating an app with \(url) answered \(created.status)")
            #expect(Self.pointers(created).contains("/webhook/url"), "\(url): \(created.text)")
            #expect(try api.admin("GET", "/v1/apps/ssrf-\(index)").status == 404)

            // Changing an app's webhook to it.
            let patched = try api.admin("PATCH", "/v1/apps/safe", json: #"{"webhook": {"url": "\#(url)"}}"#)
            #expect(patched.status == 422, "patching the webhook to \(url) answered \(patched.status)")
            #expect(Self.pointers(patched).contains("/webhook/url"), "\(url): \(patched.text)")

            // A rule whose follow-up targets it.
            let rule = try api.admin(
                "POST", "/v1/apps/safe/rules",
                json:
                    #"{"id": "r\#(index)", "handler": {"type": "record"}, "followUps": [{"channel": "webhook", "url": "\#(url)"}]}"#
            )
            #expect(rule.status == 422, "a rule with \(url) answered \(rule.status)")
            #expect(Self.pointers(rule).contains("/followUps/0/url"), "\(url): \(rule.text)")
            #expect(try api.admin("GET", "/v1/apps/safe/rules/r\(index)").status == 404)
        }
        let safe = try api.admin("GET", "/v1/apps/safe")
        #expect((safe.json["webhook"] as? [String: Any])?["url"] as? String == "https://hooks.example.com/safe")
        #expect(try api.count("SELECT count(*) AS n FROM rules") == 0)
        #expect(try api.count("SELECT count(*) AS n FROM apps") == 1)
        #expect(canary.connections == 0)
    }

    @Test("names resolving to loopback and literals saved while allowed end dead (forbidden_address); 0 connections")
    func refusedWhenSending() async throws {
        let canary = try RawTCPServer()
        let port = canary.port
        let names = Self.loopbackNames()
        try #require(!names.isEmpty, "no host name on this machine resolves only to loopback")

        // The delivering service refuses private targets; a sibling that allows them saves the literals.
        let api = try TestAPI {
            $0.workerEnabled = true
            $0.allowPrivateWebhooks = false
            $0.worker.pollInterval = .milliseconds(200)
        }
        let permissive = Hooks.sibling(of: api) { $0.allowPrivateWebhooks = true }
        try permissive.start()
        defer { permissive.stop() }

        // Names pass the save-time check (they are resolved when sending).
        let key = try Hooks.createApp(
            api, "ssrf", url: "http://\(names[0]):\(port)/endpoint", secret: Hooks.newSecret())
        let nameFollowUps =
            ([#"{"channel": "webhook"}"#]
            + names.map { #"{"channel": "webhook", "url": "http://\#($0):\#(port)/by-name"}"# }).joined(separator: ", ")
        try Hooks.saveRule(
            api, app: "ssrf",
            #"{"id": "names", "match": {"action": ["names"]}, "handler": {"type": "record"}, "followUps": [\#(nameFollowUps)]}"#
        )

        let literals = [
            "http://127.0.0.1:\(port)/", "http://[::1]:\(port)/", "http://2130706433:\(port)/",
            "http://localhost:\(port)/", "http://[::ffff:127.0.0.1]:\(port)/", "http://0x7f.1:\(port)/",
            "http://127.1:\(port)/", "http://0.0.0.0:\(port)/", "http://[::]:\(port)/",
            "http://[64:ff9b::7f00:1]:\(port)/",
        ]
        let literalFollowUps = literals.map { #"{"channel": "webhook", "url": "\#($0)"}"# }.joined(separator: ", ")
        let saved = try Hooks.admin(
            port: permissive.port, "POST", "/v1/apps/ssrf/rules",
            json:
                #"{"id": "literals", "match": {"action": ["literals"]}, "handler": {"type": "record"}, "followUps": [\#(literalFollowUps)]}"#
        )
        try #require(saved.status == 201, "\(saved.text)")

        let byName = try Hooks.ingest(api, key: key, #"{"actionIdentifier": "names"}"#).followUps
        #expect(byName.count == names.count + 1)
        let literalResponse = try HTTPTestClient(port: permissive.port).request(
            "POST", "/v1/responses", headers: [("Authorization", "Bearer \(key)")],
            json: #"{"actionIdentifier": "literals"}"#)
        try #require(literalResponse.status == 202, "\(literalResponse.text)")
        let byLiteral = (literalResponse.json["followUps"] as? [[String: Any]] ?? []).compactMap { $0["id"] as? String }
        #expect(byLiteral.count == literals.count)

        for id in byName + byLiteral {
            let row = try await Hooks.waitFor(api, id, status: "dead", timeout: .seconds(30))
            #expect(row.status == "dead", "\(id) is \(row.status)")
            #expect(row.lastError == "forbidden_address", "\(id): \(row.lastError ?? "nil")")
            let attempts = try Hooks.attempts(api, id)
            #expect(attempts.count == 1)
            #expect(attempts.first?.errorClass == "forbidden_address")
            #expect(attempts.first?.httpStatus == nil)
        }
        #expect(canary.connections == 0, "a refused webhook reached the loopback canary")
        #expect(try Hooks.statusCounts(api) == ["dead": byName.count + byLiteral.count])

        // The canary does count: a direct connection registers.
        _ = try HTTPTestClient(port: port)
        #expect(await Hooks.poll(timeout: .seconds(5)) { canary.connections == 1 })
    }

    @Test(
        "a send's step URLs to loopback, private or link-local addresses are 422s at their pointers on a strict instance"
    )
    func stepURLsRefusedWhenSending() async throws {
        let canary = try RawTCPServer()
        let port = canary.port
        let api = try TestAPI {
            $0.workerEnabled = true
            $0.allowPrivateWebhooks = false
            $0.worker.pollInterval = .milliseconds(200)
        }
        let permissive = Hooks.sibling(of: api) { $0.allowPrivateWebhooks = true }
        try permissive.start()
        defer { permissive.stop() }
        func serverKey(_ app: String) throws -> String {
            let key = try api.admin("POST", "/v1/apps/\(app)/keys", json: #"{"scope": "send"}"#)
            try #require(key.status == 201, "\(key.text)")
            return try #require(key.json["secret"] as? String)
        }
        func send(port: Int, app: String, key: String, urls: [String]) throws -> TestResponse {
            let followUps = urls.map { #"{"type": "webhook", "url": "\#($0)"}"# }.joined(separator: ", ")
            return try HTTPTestClient(port: port).request(
                "POST", "/v1/apps/\(app)/notifications", headers: [("Authorization", "Bearer \(key)")],
                json: #"""
                    {"to": ["\#(String(repeating: "ab", count: 32))"], "aps": {"alert": "Hi"},
                     "onNoReply": [{"afterSeconds": 1, "followUps": [\#(followUps)]}]}
                    """#)
        }

        // Ten forms, one step follow-up each (a step's most), for an app whose endpoint is public.
        _ = try Hooks.createApp(api, "public", url: "https://hooks.example.com/app", secret: Hooks.newSecret())
        let publicKey = try serverKey("public")
        let forms = [
            "http://127.0.0.1:\(port)/hook", "http://[::1]:\(port)/", "http://10.0.0.1/",
            "http://10.255.255.254:8080/x",
            "http://192.168.1.1/", "http://169.254.169.254/latest/meta-data/", "http://2130706433:\(port)/",
            "http://[::ffff:127.0.0.1]:\(port)/", "http://localhost:\(port)/", "http://[fd00::1]/",
        ]
        let answer = try send(port: api.port, app: "public", key: publicKey, urls: forms)
        #expect(answer.status == 422, "\(answer.status) \(answer.text)")
        let errors = answer.json["errors"] as? [[String: Any]] ?? []
        #expect(
            errors.compactMap { $0["pointer"] as? String }
                == forms.indices.map { "/onNoReply/0/followUps/\($0)/url" })
        #expect(errors.allSatisfy { $0["detail"] as? String == WebhookURL.refusedTargetDetail })
        for form in forms { #expect(!answer.text.contains(form)) }

        // An app whose own endpoint is on loopback (saved where that is allowed): a step on its origin is still
        // refused on the strict instance, and accepted by the permissive one.
        let local = "http://127.0.0.1:\(port)"
        let saved = try Hooks.admin(
            port: permissive.port, "POST", "/v1/apps",
            json: #"{"id": "local", "name": "local", "webhook": {"url": "\#(local)/app"}}"#)
        try #require(saved.status == 201, "\(saved.text)")
        let localKey = try serverKey("local")
        let strict = try send(port: api.port, app: "local", key: localKey, urls: ["\(local)/step"])
        #expect(strict.status == 422, "\(strict.status) \(strict.text)")
        #expect(Self.pointers(strict) == ["/onNoReply/0/followUps/0/url"])
        #expect(try api.count("SELECT count(*) AS n FROM notifications") == 0)
        let allowed = try send(port: permissive.port, app: "local", key: localKey, urls: ["\(local)/step"])
        #expect(allowed.status == 202, "\(allowed.status) \(allowed.text)")
        #expect(try api.count("SELECT count(*) AS n FROM notifications") == 1)

        // The strict worker refuses that step when it comes due: dead, forbidden_address, 0 connections.
        let step = try #require(
            try api.query("SELECT id::text AS id FROM followups WHERE kind = 'step' AND channel = 'webhook'").first)
        let stepID = try step.decode("id", as: String.self)
        let row = try await Hooks.waitFor(api, stepID, status: "dead", timeout: .seconds(30))
        #expect(row.lastError == "forbidden_address")
        #expect(canary.connections == 0, "a step reached the loopback canary")
    }

    /// Names from /etc/hosts and the machine's own host name that resolve only to loopback and that
    /// the save-time check lets through (it refuses `localhost` and friends by name).
    static func loopbackNames() -> [String] {
        var candidates: [String] = []
        if let hosts = try? String(contentsOfFile: "/etc/hosts", encoding: .utf8) {
            for line in hosts.split(separator: "\n") {
                let fields =
                    line.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first?
                    .split(whereSeparator: { $0 == " " || $0 == "\t" }) ?? []
                guard fields.count >= 2 else { continue }
                let address = String(fields[0])
                guard address.hasPrefix("127.") || address == "::1" else { continue }
                candidates += fields.dropFirst().map(String.init)
            }
        }
        candidates.append(ProcessInfo.processInfo.hostName)
        var seen = Set<String>()
        return candidates.filter { name in
            !name.isEmpty && seen.insert(name.lowercased()).inserted && !AddressPolicy.isLocalName(name)
                && AddressPolicy.parseLiteral(name) == nil
                && WebhookURL.isAllowedTarget("http://\(name)/", allowPrivate: false)
                && resolvesOnlyToLoopback(name)
        }
    }

    /// Resolves `name` with getaddrinfo: true when it has addresses and all are loopback.
    static func resolvesOnlyToLoopback(_ name: String) -> Bool {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var result: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(name, nil, &hints, &result) == 0, let first = result else { return false }
        defer { freeaddrinfo(first) }
        var any = false
        var current: UnsafeMutablePointer<addrinfo>? = first
        while let info = current {
            if let address = info.pointee.ai_addr {
                any = true
                switch info.pointee.ai_family {
                case AF_INET:
                    let loopback = address.withMemoryRebound(to: sockaddr_in.self, capacity: 1) {
                        UInt32(bigEndian: $0.pointee.sin_addr.s_addr) >> 24 == 127
                    }
                    if !loopback { return false }
                case AF_INET6:
                    let loopback = address.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { pointer -> Bool in
                        var bytes = pointer.pointee.sin6_addr
                        return withUnsafeBytes(of: &bytes) { Array($0) } == Array(repeating: 0, count: 15) + [1]
                    }
                    if !loopback { return false }
                default:
                    return false
                }
            }
            current = info.pointee.ai_next
        }
        return any
    }

    /// The `pointer`s of a problem's `errors`.
    static func pointers(_ response: TestResponse) -> [String] {
        (response.json["errors"] as? [[String: Any]] ?? []).compactMap { $0["pointer"] as? String }
    }
}
