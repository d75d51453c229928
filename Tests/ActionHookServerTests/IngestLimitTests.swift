import Foundation
import Postgres
import ServiceTestSupport
import TestSupport
import Testing

/// F8: ingest limits answer with the documented status, store nothing, and never echo the body.
@Suite("Ingest limits (F8)")
struct IngestLimitTests {
    /// A value planted in refused bodies; no error answer may repeat it.
    static let seeded = "SEEDED-SECRET-5c0ffee-\(UUID().uuidString)"

    static func setUp(_ api: TestAPI, app: String = "limits") throws -> String {
        let key = try api.createApp(app)
        try IOSScenario.createRule(api, app: app, #"{"id": "limits-record", "handler": {"type": "record"}}"#)
        return key
    }

    /// Checks the shape every refusal shares and returns the pointers of its field errors.
    @discardableResult
    static func expectProblem(_ answer: TestResponse, _ status: Int, _ label: String) -> [String] {
        #expect(answer.status == status, "\(label): \(answer.status) \(answer.text)")
        #expect(answer.headers["content-type"] == "application/problem+json", "\(label)")
        #expect(answer.json["status"] as? Int == status, "\(label)")
        #expect(answer.json["title"] is String, "\(label)")
        #expect(!answer.text.contains(seeded), "\(label) echoes the body")
        return IOSScenario.pointers(answer)
    }

    static func rawIngest(_ api: TestAPI, key: String, contentType: String?, body: [UInt8]) throws -> TestResponse {
        var headers = [("Authorization", "Bearer \(key)")]
        if let contentType { headers.append(("Content-Type", contentType)) }
        return try HTTPTestClient(port: api.port).request("POST", "/v1/responses", headers: headers, body: body)
    }

    /// A body of exactly `size` bytes: a valid response padded with trailing whitespace.
    static func padded(_ json: String, to size: Int) -> String {
        json + String(repeating: " ", count: size - json.utf8.count)
    }

    @Test("body over 16 KiB: 413 from Content-Length before the body is sent; 16 KiB exactly is accepted")
    func bodySize() throws {
        let api = try IOSScenario.makeAPI()
        let key = try Self.setUp(api)

        // Only the head is sent: the answer must come without the body (the read would time out).
        let client = try HTTPTestClient(port: api.port, timeoutSeconds: 5)
        try client.send(
            "POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(key)\r\n"
                + "Content-Type: application/json\r\nContent-Length: 16385\r\n\r\n")
        Self.expectProblem(try client.readResponse(), 413, "declared 16385")

        let huge = try HTTPTestClient(port: api.port, timeoutSeconds: 5)
        try huge.send(
            "POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(key)\r\n"
                + "Content-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n")
        Self.expectProblem(try huge.readResponse(), 413, "declared 1 GiB")

        let valid = #"{"actionIdentifier": "open", "userText": "\#(Self.seeded)"}"#
        Self.expectProblem(
            try api.ingest(key: key, json: Self.padded(valid, to: 16 * 1024 + 1)), 413, "sent 16385")
        // A chunked body has no Content-Length: it is cut off once over the limit.
        let chunked = try HTTPTestClient(port: api.port, timeoutSeconds: 5)
        let chunk = Self.padded(valid, to: 20000)
        try chunked.send(
            "POST /v1/responses HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer \(key)\r\n"
                + "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
                + String(chunk.utf8.count, radix: 16) + "\r\n" + chunk + "\r\n0\r\n\r\n")
        Self.expectProblem(try chunked.readResponse(), 413, "chunked 20000")
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 0)

        let atLimit = try api.ingest(key: key, json: Self.padded(valid, to: 16 * 1024))
        #expect(atLimit.status == 202, "\(atLimit.text)")
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 1)
    }

    @Test("userInfo over 8 KiB or deeper than 32, long identifiers and text: 422 with the field's pointer")
    func fieldLimits() throws {
        let api = try IOSScenario.makeAPI()
        let key = try Self.setUp(api)
        // {"k":"…"} is 8 bytes plus the string: 8184 characters make exactly 8192 bytes.
        func userInfo(_ length: Int) -> String {
            #"{"k": "\#(String(repeating: "x", count: length - Self.seeded.count))\#(Self.seeded)"}"#
        }
        func nested(_ depth: Int) -> String {
            String(repeating: #"{"a": "#, count: depth - 1) + #"{"s": "\#(Self.seeded)"}"#
                + String(repeating: "}", count: depth - 1)
        }
        let refusals: [(String, String)] = [
            ("/userInfo", #"{"actionIdentifier": "open", "userInfo": \#(userInfo(8185))}"#),
            ("/userInfo", #"{"actionIdentifier": "open", "userInfo": \#(nested(33))}"#),
            ("/userInfo", #"{"actionIdentifier": "open", "userInfo": \#(nested(60))}"#),
            (
                "/actionIdentifier",
                #"{"actionIdentifier": "\#(String(repeating: "a", count: 257 - Self.seeded.count))\#(Self.seeded)"}"#
            ),
            ("/actionIdentifier", #"{"actionIdentifier": ""}"#),
            ("/actionIdentifier", #"{"userText": "\#(Self.seeded)"}"#),
            (
                "/userText",
                #"{"actionIdentifier": "open", "userText": "\#(String(repeating: "t", count: 4001 - Self.seeded.count))\#(Self.seeded)"}"#
            ),
            // Characters, not bytes: 4001 two-byte characters.
            ("/userText", #"{"actionIdentifier": "open", "userText": "\#(String(repeating: "é", count: 4001))"}"#),
            (
                "/responseInfo/UIUserNotificationActionResponseTypedTextKey",
                #"{"identifier": "comment-reply", "responseInfo": {"UIUserNotificationActionResponseTypedTextKey": "\#(String(repeating: "t", count: 4001))"}}"#
            ),
            ("/deviceToken", #"{"actionIdentifier": "open", "deviceToken": "\#(Self.seeded)"}"#),
            ("/respondedAt", #"{"actionIdentifier": "open", "respondedAt": "\#(Self.seeded)"}"#),
            ("/secretField", #"{"actionIdentifier": "open", "secretField": "\#(Self.seeded)"}"#),
        ]
        for (index, (pointer, body)) in refusals.enumerated() {
            let pointers = Self.expectProblem(try api.ingest(key: key, json: body), 422, "refusal \(index)")
            #expect(pointers == [pointer], "refusal \(index)")
        }
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 0)

        // The limits themselves are allowed.
        let accepted = [
            #"{"actionIdentifier": "open", "userInfo": \#(userInfo(8184))}"#,
            #"{"actionIdentifier": "open", "userInfo": \#(nested(32))}"#,
            #"{"actionIdentifier": "\#(String(repeating: "a", count: 256))"}"#,
            #"{"actionIdentifier": "open", "userText": "\#(String(repeating: "t", count: 4000))"}"#,
            #"{"actionIdentifier": "open", "userText": "\#(String(repeating: "é", count: 4000))"}"#,
        ]
        for (index, body) in accepted.enumerated() {
            let answer = try api.ingest(key: key, json: body)
            #expect(answer.status == 202, "accepted \(index): \(answer.text)")
        }
        #expect(try api.count("SELECT count(*) AS n FROM responses") == accepted.count)
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE char_length(user_text) = 4000") == 2)
    }

    @Test("invalid UTF-8 and non-JSON bodies are 400, other media types 415; nothing is stored")
    func malformedBodies() throws {
        let api = try IOSScenario.makeAPI()
        let key = try Self.setUp(api)
        let secret = Array(Self.seeded.utf8)
        let prefix = Array(#"{"actionIdentifier": "open", "userText": ""#.utf8)
        let suffix = Array(#""}"#.utf8)
        let badUTF8: [[UInt8]] = [
            prefix + secret + [0xC3, 0x28] + suffix,  // a broken two-byte sequence
            prefix + secret + [0xC0, 0xAF] + suffix,  // an overlong "/"
            prefix + secret + [0xED, 0xA0, 0x80] + suffix,  // an encoded surrogate
            prefix + secret + [0xFF] + suffix,
        ]
        for (index, body) in badUTF8.enumerated() {
            Self.expectProblem(
                try Self.rawIngest(api, key: key, contentType: "application/json", body: body), 400, "utf8 \(index)")
        }
        let notJSON = [
            "actionIdentifier=open&userText=\(Self.seeded)",
            #"{"actionIdentifier": "open", "userText": "\#(Self.seeded)"} trailing"#,
            #"{"actionIdentifier": "open", "userText": "\#(Self.seeded)""#,
            #"{"actionIdentifier": "open", "actionIdentifier": "\#(Self.seeded)"}"#,
            #"["\#(Self.seeded)"]"#,
            #""\#(Self.seeded)""#,
            #"{"actionIdentifier": 42, "userText": "\#(Self.seeded)"}"#,
            #"{"actionIdentifier": "open", "userInfo": ["\#(Self.seeded)"]}"#,
            "",
        ]
        for (index, body) in notJSON.enumerated() {
            Self.expectProblem(
                try Self.rawIngest(api, key: key, contentType: "application/json", body: Array(body.utf8)), 400,
                "not json \(index)")
        }
        let valid = Array(#"{"actionIdentifier": "open", "userText": "\#(Self.seeded)"}"#.utf8)
        for contentType in [
            "text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/jsonx",
            "application/json-seq", "+json", "application/json5", "", nil,
        ] {
            Self.expectProblem(
                try Self.rawIngest(api, key: key, contentType: contentType, body: valid), 415,
                "content type \(contentType ?? "none")")
        }
        #expect(try api.count("SELECT count(*) AS n FROM responses") == 0)
        // The same body with a JSON media type (parameters allowed) is fine.
        let jsonTypes = [
            "application/json; charset=utf-8", "Application/JSON", " application/json ;x=1", "application/vnd.api+json",
            "APPLICATION/PROBLEM+JSON", "text/abcdef+json",
        ]
        for contentType in jsonTypes {
            let accepted = try Self.rawIngest(api, key: key, contentType: contentType, body: valid)
            #expect(accepted.status == 202, "content type \(contentType)")
        }
        #expect(try api.count("SELECT count(*) AS n FROM responses") == jsonTypes.count)
    }

    @Test("per-app rate limit: 429 with Retry-After, refused requests store nothing, other apps unaffected")
    func appRateLimit() throws {
        let api = try IOSScenario.makeAPI(configure: { $0.rateLimitPerSecond = 2 })
        let key = try Self.setUp(api)
        let otherKey = try Self.setUp(api, app: "limits-other")

        var accepted: [String] = []
        var refused: [String] = []
        for index in 0..<20 {
            let idempotencyKey = "rate-\(index)"
            let answer = try api.ingest(
                key: key, json: #"{"actionIdentifier": "open", "userText": "\#(Self.seeded)"}"#,
                headers: [("Idempotency-Key", idempotencyKey)])
            switch answer.status {
            case 202:
                accepted.append(idempotencyKey)
            case 429:
                refused.append(idempotencyKey)
                Self.expectProblem(answer, 429, idempotencyKey)
                let retryAfter = answer.headers["retry-after"].flatMap { Int($0) }
                #expect(retryAfter.map { $0 >= 1 } == true, "Retry-After: \(answer.headers["retry-after"] ?? "none")")
            default:
                Issue.record("unexpected status \(answer.status): \(answer.text)")
            }
        }
        #expect(!accepted.isEmpty)
        #expect(!refused.isEmpty)
        // The burst is twice the rate: the first four pass.
        #expect(accepted.prefix(4) == ["rate-0", "rate-1", "rate-2", "rate-3"])
        let stored = try api.query("SELECT idempotency_key FROM responses WHERE app_id = 'limits'").map {
            try $0.decode("idempotency_key", as: String.self)
        }
        #expect(Set(stored) == Set(accepted))
        #expect(stored.count == accepted.count)

        // Another app has its own bucket.
        let other = try api.ingest(key: otherKey, json: #"{"actionIdentifier": "open"}"#)
        #expect(other.status == 202)

        // An app's own rate (1/s, burst 2) overrides the default (2/s, burst 4).
        let slowKey = try api.createApp("limits-slow", extra: #""rateLimitPerSecond": 1"#)
        var slowStatuses: [Int] = []
        for _ in 0..<4 {
            slowStatuses.append(try api.ingest(key: slowKey, json: #"{"actionIdentifier": "open"}"#).status)
        }
        #expect(slowStatuses.prefix(2) == [202, 202])
        #expect(slowStatuses.contains(429), "\(slowStatuses)")

        // A refused request can be sent again with the same key once Retry-After has passed.
        let retryKey = try #require(refused.last)
        let retry = try api.ingest(
            key: key, json: #"{"actionIdentifier": "open", "userText": "\#(Self.seeded)"}"#,
            headers: [("Idempotency-Key", retryKey)])
        if retry.status == 429 {
            let wait = retry.headers["retry-after"].flatMap { Int($0) } ?? 1
            Thread.sleep(forTimeInterval: Double(wait))
            let later = try api.ingest(
                key: key, json: #"{"actionIdentifier": "open", "userText": "\#(Self.seeded)"}"#,
                headers: [("Idempotency-Key", retryKey)])
            #expect(later.status == 202, "\(later.text)")
        } else {
            #expect(retry.status == 202)
        }
        #expect(try api.count("SELECT count(*) AS n FROM responses WHERE idempotency_key = \(retryKey)") == 1)
    }

    @Test("per-device rate limit: one device is limited, another device and the app are not")
    func deviceRateLimit() throws {
        let api = try IOSScenario.makeAPI(configure: { $0.deviceRateLimitPerSecond = 1 })
        let key = try Self.setUp(api)
        func body(_ device: String) -> String {
            #"{"actionIdentifier": "open", "deviceToken": "\#(device)", "userText": "\#(Self.seeded)"}"#
        }
        var statuses: [Int] = []
        for _ in 0..<10 {
            let answer = try api.ingest(key: key, json: body(IOSScenario.deviceA))
            statuses.append(answer.status)
            if answer.status == 429 {
                Self.expectProblem(answer, 429, "device")
                #expect(answer.headers["retry-after"].flatMap { Int($0) }.map { $0 >= 1 } == true)
            }
        }
        #expect(statuses.allSatisfy { $0 == 202 || $0 == 429 }, "\(statuses)")
        #expect(statuses.prefix(2) == [202, 202])
        #expect(statuses.contains(429))
        let acceptedForA = statuses.filter { $0 == 202 }.count
        #expect(
            try api.count("SELECT count(*) AS n FROM responses WHERE device_token = \(IOSScenario.deviceA)")
                == acceptedForA)

        // Another device, and requests without a device, still pass.
        #expect(try api.ingest(key: key, json: body(IOSScenario.deviceB)).status == 202)
        #expect(try api.ingest(key: key, json: #"{"actionIdentifier": "open"}"#).status == 202)
        #expect(try api.count("SELECT count(*) AS n FROM responses") == acceptedForA + 2)
    }
}
