import ActionHookCore
import Foundation
import Testing

/// Signatures, retry timing and the SSRF address policy: the pure parts of delivery.
@Suite("Delivery policy: signatures, retries, addresses")
struct DeliveryPolicyTests {
    // MARK: - Standard Webhooks signatures

    /// The published test vector, as the reference libraries assert it
    /// (standard-webhooks/standard-webhooks, libraries/php/tests/WebhookTest.php, testSignFunctionWorks).
    static let vectorSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
    static let vectorID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
    static let vectorTimestamp = 1_614_265_330
    static let vectorBody = Array(#"{"test": 2432232314}"#.utf8)
    static let vectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="

    @Test("the Standard Webhooks test vector reproduces exactly")
    func standardVector() {
        let signature = WebhookSignature.sign(
            id: Self.vectorID, timestamp: Self.vectorTimestamp, body: Self.vectorBody, secret: Self.vectorSecret)
        #expect(signature == Self.vectorSignature)
    }

    static let signedPartCases: [(String, String, Int, String)] = [
        ("id", "msg_p5jXN8AQM9LWM0D4loKWxJeK", 1_614_265_330, #"{"test": 2432232314}"#),
        ("timestamp", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_331, #"{"test": 2432232314}"#),
        ("body", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, #"{"test": 2432232315}"#),
        ("whitespace", "msg_p5jXN8AQM9LWM0D4loKWxJek", 1_614_265_330, #"{"test":2432232314}"#),
    ]

    @Test("every signed part changes the signature", arguments: Self.signedPartCases)
    func signedParts(part: String, id: String, timestamp: Int, body: String) {
        let signature = WebhookSignature.sign(
            id: id, timestamp: timestamp, body: Array(body.utf8), secret: Self.vectorSecret)
        #expect(signature != nil)
        #expect(signature != Self.vectorSignature, "changing the \(part) must change the signature")
        #expect(signature?.hasPrefix("v1,") == true)
    }

    @Test("another secret gives another signature; malformed secrets sign nothing")
    func secrets() {
        let other = WebhookSignature.sign(
            id: Self.vectorID, timestamp: Self.vectorTimestamp, body: Self.vectorBody,
            secret: "whsec_" + Data(repeating: 7, count: 24).base64EncodedString())
        #expect(other != nil && other != Self.vectorSignature)
        for malformed in [
            "", "whsec_!!!not-base64!!!", "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaS", "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
            "wh_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
        ] {
            let signature = WebhookSignature.sign(
                id: Self.vectorID, timestamp: Self.vectorTimestamp, body: Self.vectorBody, secret: malformed)
            #expect(signature == nil, "secret \(malformed.debugDescription)")
        }
        // The decoded signature is a 32-byte HMAC-SHA256.
        let bytes = Data(base64Encoded: String(Self.vectorSignature.dropFirst(3)))
        #expect(bytes?.count == 32)
        #expect(WebhookSecret.isValid(Self.vectorSecret))
    }

    // MARK: - Retry policy

    @Test("the default schedule is the documented one with ±10% jitter")
    func standardSchedule() {
        #expect(RetryPolicy.standard.schedule == [5, 300, 1800, 7200, 18000, 36000, 50400, 72000, 86400])
        #expect(RetryPolicy.standard.jitter == 0.1)
        #expect(RetryPolicy.standard.maxAttempts == 10)
        #expect(RetryPolicy.parse("5,300,1800,7200,18000,36000,50400,72000,86400") == RetryPolicy.standard)
    }

    static let parseCases: [(String, [Int]?)] = [
        ("5,300,1800", [5, 300, 1800]),
        ("1", [1]),
        ("0", [0]),
        (" 1 , 2 ,3 ", [1, 2, 3]),
        ("0,0,0", [0, 0, 0]),
        ("604800", [604_800]),
        ("604801", nil),
        ("", nil),
        (" ", nil),
        (",", nil),
        ("1,,2", nil),
        ("1,2,", nil),
        (",1", nil),
        ("-1", nil),
        ("1,-5", nil),
        ("1.5", nil),
        ("1e3", nil),
        ("0x10", nil),
        ("abc", nil),
        ("5;300", nil),
        ("5 300", nil),
        ("99999999999999999999999", nil),
        (Array(repeating: "1", count: 50).joined(separator: ","), Array(repeating: 1, count: 50)),
        (Array(repeating: "1", count: 51).joined(separator: ","), nil),
    ]

    @Test("ACTIONHOOK_RETRY_SCHEDULE parsing", arguments: Self.parseCases)
    func parse(text: String, expected: [Int]?) {
        let policy = RetryPolicy.parse(text)
        #expect(policy?.schedule == expected, "parsing \(text.debugDescription)")
        if let policy { #expect(policy.jitter == 0.1) }
    }

    @Test("attempt bounds: nothing before the first failure or after the last entry")
    func bounds() {
        let policy = RetryPolicy(schedule: [1, 2, 3], jitter: 0)
        #expect(policy.maxAttempts == 4)
        #expect(policy.delayMilliseconds(afterFailedAttempt: 0, unit: 0.5) == nil)
        #expect(policy.delayMilliseconds(afterFailedAttempt: -1, unit: 0.5) == nil)
        #expect(policy.delayMilliseconds(afterFailedAttempt: 1, unit: 0.5) == 1000)
        #expect(policy.delayMilliseconds(afterFailedAttempt: 2, unit: 0.5) == 2000)
        #expect(policy.delayMilliseconds(afterFailedAttempt: 3, unit: 0.5) == 3000)
        #expect(policy.delayMilliseconds(afterFailedAttempt: 4, unit: 0.5) == nil)
        #expect(policy.delayMilliseconds(afterFailedAttempt: 100, unit: 0.5) == nil)
        let none = RetryPolicy(schedule: [], jitter: 0.1)
        #expect(none.maxAttempts == 1)
        #expect(none.delayMilliseconds(afterFailedAttempt: 1, unit: 0.5) == nil)
        let zero = RetryPolicy(schedule: [0], jitter: 0.5)
        #expect(zero.delayMilliseconds(afterFailedAttempt: 1, unit: 0.99) == 0)
    }

    static let jitterCases: [(Int, Double)] = [
        (5, 0.1), (300, 0.1), (1800, 0.1), (86400, 0.1), (1, 0.1), (2, 0.25), (10, 0.0), (60, 0.5), (1, 0.9),
    ]

    @Test("jitter stays within ±jitter of each entry", arguments: Self.jitterCases)
    func jitterRange(seconds: Int, jitter: Double) {
        let policy = RetryPolicy(schedule: [seconds], jitter: jitter)
        let base = Double(seconds) * 1000
        let low = Int((base * (1 - jitter)).rounded(.down))
        let high = Int((base * (1 + jitter)).rounded(.up))
        #expect(policy.delayMilliseconds(afterFailedAttempt: 1, unit: 0) == Int((base * (1 - jitter)).rounded()))
        #expect(policy.delayMilliseconds(afterFailedAttempt: 1, unit: 0.5) == Int(base))
        var generator = SystemRandomNumberGenerator()
        var seen: [Int] = []
        for _ in 0..<2000 {
            let unit = Double.random(in: 0..<1, using: &generator)
            guard let delay = policy.delayMilliseconds(afterFailedAttempt: 1, unit: unit) else {
                Issue.record("no delay for attempt 1")
                return
            }
            seen.append(delay)
        }
        #expect(
            seen.allSatisfy { (low...high).contains($0) },
            "delays outside \(low)...\(high): \(seen.filter { !(low...high).contains($0) }.prefix(5))")
        if jitter > 0 && seconds >= 1 {
            // Spread over the range, not pinned to one end.
            #expect(seen.contains { Double($0) < base - base * jitter / 2 })
            #expect(seen.contains { Double($0) > base + base * jitter / 2 })
        } else {
            #expect(Set(seen) == [Int(base)])
        }
    }

    // MARK: - Address policy

    /// Every literal form: `nil` means "not a literal" (a host name, resolved later).
    static let literals: [(String, Bool?)] = [
        // Public IPv4, in several spellings.
        ("8.8.8.8", true), ("1.1.1.1", true), ("93.184.216.34", true), ("134744072", true),
        ("0x08080808", true), ("010.010.010.010", true), ("8.8.2056", true), ("8.526344", true),
        ("100.63.255.255", true), ("100.128.0.0", true), ("172.15.255.255", true), ("172.32.0.0", true),
        ("192.167.255.255", true), ("192.169.0.0", true), ("169.253.255.255", true), ("223.255.255.255", true),
        ("9.255.255.255", true), ("11.0.0.0", true), ("126.255.255.255", true), ("128.0.0.0", true),
        // Loopback in every spelling inet_aton takes.
        ("127.0.0.1", false), ("127.255.255.254", false), ("2130706433", false), ("0177.0.0.1", false),
        ("0x7f.1", false), ("0x7f.0.0.1", false), ("127.1", false), ("127.0.1", false), ("0x7f000001", false),
        ("017700000001", false), ("0X7F.0X0.0X0.0X1", false), ("127.000.000.001", false),
        // "This network", private, shared, link-local, special and reserved IPv4.
        ("0.0.0.0", false), ("0", false), ("0.1.2.3", false), ("10.0.0.1", false), ("10.255.255.255", false),
        ("012.0.0.1", false), ("167772161", false), ("172.16.0.1", false), ("172.31.255.255", false),
        ("192.168.0.1", false), ("192.168.255.255", false), ("0xc0.0xa8.1.1", false), ("169.254.169.254", false),
        ("169.254.0.1", false), ("100.64.0.1", false), ("100.127.255.255", false), ("192.0.0.8", false),
        ("192.0.2.1", false), ("198.51.100.7", false), ("203.0.113.9", false), ("198.18.0.1", false),
        ("198.19.255.255", false), ("192.88.99.1", false), ("224.0.0.1", false), ("239.255.255.250", false),
        ("240.0.0.1", false), ("255.255.255.255", false), ("4294967295", false),
        // Public IPv6.
        ("2606:4700:4700::1111", true), ("[2606:4700:4700::1111]", true), ("2001:4860:4860::8888", true),
        ("[::ffff:8.8.8.8]", true), ("::ffff:808:808", true), ("[64:ff9b::808:808]", true),
        ("64:ff9b::8.8.8.8", true), ("[2002:808:808::1]", true), ("2a00:1450:4001:81a::200e", true),
        // Loopback and unspecified IPv6, and IPv4 carried inside IPv6.
        ("::1", false), ("[::1]", false), ("0:0:0:0:0:0:0:1", false), ("[0000::0001]", false), ("::", false),
        ("[::]", false), ("::ffff:127.0.0.1", false), ("[::ffff:7f00:1]", false), ("0:0:0:0:0:ffff:7f00:1", false),
        ("::ffff:10.0.0.1", false), ("::ffff:169.254.169.254", false), ("::ffff:0.0.0.0", false),
        ("::127.0.0.1", false), ("::7f00:1", false), ("::10.0.0.1", false), ("64:ff9b::7f00:1", false),
        ("[64:ff9b::127.0.0.1]", false), ("64:ff9b::a00:1", false), ("64:ff9b::a9fe:a9fe", false),
        ("64:ff9b:1::7f00:1", false), ("2002:7f00:1::1", false), ("[2002:7f00:0001::]", false),
        ("2002:a00:1::1", false), ("2002:c0a8:101::1", false),
        // Unique local, link-local, site-local, multicast, documentation, discard, non-global.
        ("fc00::1", false), ("fd00::1", false), ("[fdff:ffff:ffff::1]", false), ("fe80::1", false),
        ("[fe80::1]", false), ("febf::1", false), ("fec0::1", false), ("ff02::1", false), ("ff05::2", false),
        ("ff0e::1", false), ("2001:db8::1", false), ("[2001:db8:85a3::8a2e:370:7334]", false), ("100::1", false),
        ("4000::1", false), ("::2", false),
        // Not literals: names, zone ids, junk.
        ("example.com", nil), ("localhost", nil), ("1.2.3.4.example", nil), ("fe80::1%eth0", nil),
        ("[fe80::1%25eth0]", nil), ("1.2.3.4.5", nil), ("256.256.256.256", nil), ("08.0.0.1", nil),
        ("0x", nil), ("deadbeef", nil), ("::ffff::1::", nil), ("", nil),
    ]

    @Test("IP literal forms: parsed and classified (public vs not)")
    func addressTable() {
        #expect(Self.literals.count >= 40)
        for (text, expectedPublic) in Self.literals {
            let parsed = AddressPolicy.parseLiteral(text)
            if let expectedPublic {
                guard let parsed else {
                    Issue.record("\(text) should parse as an IP literal")
                    continue
                }
                #expect(AddressPolicy.isPublic(parsed) == expectedPublic, "\(text) public should be \(expectedPublic)")
            } else {
                #expect(parsed == nil, "\(text) is not an IP literal")
            }
        }
    }

    @Test("alternative IPv4 spellings parse to the same address")
    func spellings() {
        let loopback = AddressPolicy.Address.v4(0x7F00_0001)
        for text in [
            "127.0.0.1", "2130706433", "0177.0.0.1", "0x7f.1", "127.1", "0x7f000001", "017700000001", "127.0.1",
        ] {
            #expect(AddressPolicy.parseLiteral(text) == loopback, "\(text)")
        }
        #expect(AddressPolicy.parseLiteral("[::1]") == .v6(Array(repeating: 0, count: 15) + [1]))
        #expect(AddressPolicy.parseLiteral("::ffff:127.0.0.1") == AddressPolicy.parseLiteral("0:0:0:0:0:ffff:7f00:1"))
    }

    static let localNameCases: [(String, Bool)] = [
        ("localhost", true), ("LOCALHOST", true), ("localhost.", true), ("LOCALHOST.", true), ("sub.localhost", true),
        ("a.b.localhost.", true), ("localhost.localdomain", true), ("printer.local", true),
        ("metadata.google.internal", true), ("example.com", false), ("localhost.example.com", false),
        ("notlocalhost", false), ("mylocal", false),
    ]

    @Test("local host names", arguments: Self.localNameCases)
    func localNames(name: String, local: Bool) {
        #expect(AddressPolicy.isLocalName(name) == local, "\(name)")
    }

    // MARK: - Webhook URLs

    static let urlCases: [(String, Bool)] = [
        ("https://hooks.example.com/actionhook", true),
        ("http://example.com", true),
        ("HTTPS://EXAMPLE.COM/X", true),
        ("https://8.8.8.8/hook", true),
        ("https://[2606:4700:4700::1111]:8443/p?q=1", true),
        ("https://hooks.example.com:443/a/b", true),
        ("https://hooks.example.com./x", true),
        ("https://8.8.8.8./", true),
        ("ftp://example.com/", false),
        ("file:///etc/passwd", false),
        ("gopher://example.com:70/_x", false),
        ("javascript:alert(1)", false),
        ("data:text/plain,hi", false),
        ("ws://example.com/", false),
        ("//example.com/x", false),
        ("example.com/x", false),
        ("https:///nohost", false),
        ("http://", false),
        ("", false),
        ("https://user:pass@example.com/", false),
        ("https://user@example.com/", false),
        ("http://localhost/", false),
        ("http://LOCALHOST./", false),
        ("http://sub.localhost:8080/", false),
        ("http://printer.local/", false),
        ("http://metadata.google.internal/computeMetadata/v1/", false),
        ("http://127.0.0.1/", false),
        ("http://2130706433/", false),
        ("http://0177.0.0.1/", false),
        ("http://0x7f.1/", false),
        ("http://127.1:9/", false),
        ("http://[::1]/", false),
        ("http://[::ffff:127.0.0.1]/", false),
        ("http://[0:0:0:0:0:ffff:7f00:1]/", false),
        ("http://0.0.0.0/", false),
        ("http://[::]/", false),
        ("http://10.1.2.3/", false),
        ("http://172.16.0.1/", false),
        ("http://192.168.1.1/", false),
        ("http://169.254.169.254/latest/meta-data/", false),
        ("http://[fe80::1]/", false),
        ("http://[fc00::1]/", false),
        ("http://[fd00::1]/", false),
        ("http://100.64.0.1/", false),
        ("http://224.0.0.1/", false),
        ("http://255.255.255.255/", false),
        ("http://[ff02::1]/", false),
        ("http://[64:ff9b::7f00:1]/", false),
        ("http://[2002:7f00:1::1]/", false),
        ("http://127.0.0.1./", false),
        ("http://%31%32%37.0.0.1/", false),
        ("http://[::1%25lo]/", false),
        ("http://127.0.0.1%2f@example.com/", false),
        ("https://example.com/" + String(repeating: "a", count: 2048), false),
    ]

    @Test("webhook URL targets at save time", arguments: Self.urlCases)
    func urlTargets(url: String, allowed: Bool) {
        #expect(WebhookURL.isAllowedTarget(url, allowPrivate: false) == allowed, "\(url.prefix(80))")
    }

    @Test("allowing private targets lifts only the address check")
    func allowPrivate() {
        for url in [
            "http://127.0.0.1:8080/hook", "http://localhost/", "http://[::1]:1/", "http://10.0.0.1/",
            "http://169.254.169.254/",
        ] {
            #expect(WebhookURL.isAllowedTarget(url, allowPrivate: true), "\(url)")
            #expect(!WebhookURL.isAllowedTarget(url, allowPrivate: false), "\(url)")
        }
        for url in [
            "ftp://127.0.0.1/", "file:///etc/passwd", "http://user:pass@127.0.0.1/", "javascript:alert(1)",
            "gopher://localhost/",
        ] {
            #expect(!WebhookURL.isAllowedTarget(url, allowPrivate: true), "\(url)")
        }
    }
}
