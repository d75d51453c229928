import ActionHookCore
import Crypto
import Foundation

/// The inputs libFuzzer (or the replayer) feeds to ActionHook's parsers and validators: each target
/// must return for any bytes, and what it accepts must keep the invariants checked here. A broken
/// invariant stops the process with its reason, which the fuzzer reports with the input.
enum FuzzTarget: String, CaseIterable {
    /// A request body through the JSON parser and `NotificationResponse.decode`.
    case ingest
    /// A body through `Rule.decode` and `NotificationCategory.decode`; a rule that decodes is matched
    /// and planned against a realistic response.
    case rule
    /// Text as a follow-up template string: validated and rendered.
    case template
    /// Text as a webhook host: address literals and local names.
    case address
    /// A webhook secret (up to the first NUL) and a body, signed.
    case signature
    /// An `ActionHook-Reply-Signature` header (up to the first NUL) and a reply body, checked against a device key.
    case replySignature = "reply-signature"

    /// The target named by `ACTIONHOOK_FUZZ_TARGET`.
    static var selected: FuzzTarget {
        let name = ProcessInfo.processInfo.environment["ACTIONHOOK_FUZZ_TARGET"] ?? ""
        guard let target = FuzzTarget(rawValue: name) else {
            let names = allCases.map(\.rawValue).joined(separator: ", ")
            fatalError("ACTIONHOOK_FUZZ_TARGET must name one of: \(names)")
        }
        return target
    }

    /// Runs one input. Inputs a parser or decoder refuses end here (`try?`): refusing is their job,
    /// and only a crash or a broken invariant is a finding.
    func run(_ bytes: [UInt8]) {
        switch self {
        case .ingest: Self.ingest(bytes)
        case .rule: Self.rule(bytes)
        case .template: Self.template(bytes)
        case .address: Self.address(bytes)
        case .signature: Self.signature(bytes)
        case .replySignature: Self.replySignature(bytes)
        }
    }

    private static func ingest(_ bytes: [UInt8]) {
        guard let value = try? JSONParser.parse(bytes) else { return }
        check(try? JSONParser.parse(value.jsonBytes) == value, "written JSON parses back to the same value")
        check(value.jsonByteCount == value.jsonBytes.count, "the compact size is counted as written")
        check(
            value.jsonByteCount <= JSONValue.maxCompactBytesPerSourceByte * bytes.count,
            "compact JSON is at most three bytes per source byte")
        let measured = Result { () throws(ValidationFailure) in try NotificationResponse.decode(value) }
        let bounded = Result { () throws(ValidationFailure) in
            try NotificationResponse.decode(value, sourceByteCount: bytes.count)
        }
        check(measured == bounded, "the size shortcut decides as measuring does")
        guard case .success(let response) = measured else { return }
        check(try? NotificationResponse.decode(response.json) == response, "the normal form decodes to itself")
        check(
            response.requestHash == Array(SHA256.hash(data: response.json.canonicalBytes)),
            "the request hash is the normal form's canonical text's")
    }

    private static func rule(_ bytes: [UInt8]) {
        guard let value = try? JSONParser.parse(bytes) else { return }
        _ = try? NotificationCategory.decode(value, id: "fuzz-category")
        guard let rule = try? Rule.decode(value, id: nil) else { return }
        for response in sampleResponses where rule.match.matches(response) {
            _ = try? RuleEngine.check(rule.handler, response: response)
            let followUps = RuleEngine.plan(
                rule, response: response, responseID: UUID(),
                receivedAt: Date(timeIntervalSince1970: 1_795_168_800), subject: "4242", outcome: .accepted)
            check(followUps.count == rule.followUps.count, "every follow-up is planned")
        }
    }

    private static func template(_ bytes: [UInt8]) {
        guard let text = String(validating: bytes, as: UTF8.self) else { return }
        _ = Template.validate(.string(text), pointer: "/body")
        let context = TemplateContext(response: sampleResponses[0], responseID: UUID(), subject: "4242")
        let rendered = Template.render(text, context: context)
        check(try? JSONParser.parse(rendered.jsonBytes) == rendered, "a rendered template is JSON")
    }

    private static func address(_ bytes: [UInt8]) {
        guard let host = String(validating: bytes, as: UTF8.self) else { return }
        if let address = AddressPolicy.parseLiteral(host) { _ = AddressPolicy.isPublic(address) }
        _ = AddressPolicy.isLocalName(host)
    }

    private static func signature(_ bytes: [UInt8]) {
        let split = bytes.firstIndex(of: 0) ?? bytes.count
        let secret = String(decoding: bytes[..<split], as: UTF8.self)
        let body = Array(bytes[min(split + 1, bytes.count)...])
        guard let header = WebhookSignature.sign(id: "msg_fuzz", timestamp: 1_795_168_800, body: body, secret: secret)
        else { return }
        check(header.hasPrefix("v1,"), "a signature header starts with v1,")
    }

    /// A device key no input holds the private half of: no header and body the fuzzer makes can verify.
    private static let deviceKey = DevicePublicKey(
        bytes: Array(P256.Signing.PrivateKey().publicKey.x963Representation))!

    private static func replySignature(_ bytes: [UInt8]) {
        let split = bytes.firstIndex(of: 0) ?? bytes.count
        let header = String(decoding: bytes[..<split], as: UTF8.self)
        if let parsed = ReplySignature.Header(header) {
            let again = ReplySignature.Header(ReplySignature.Header.text(key: parsed.key, signature: parsed.signature))
            check(again == parsed, "a parsed reply signature header reads back the same from its text")
        }
        let body = Array(bytes[min(split + 1, bytes.count)...])
        guard let value = try? JSONParser.parse(body), let response = try? NotificationResponse.decode(value) else {
            return
        }
        let verdict = ReplySignature.check(
            header: header, appID: "fuzz", response: response, now: Date(), windowSeconds: 86_400
        ) { _ in [deviceKey.fingerprint: deviceKey] }
        check(!verdict.isValid, "no input verifies against a key whose private half no input holds")
    }

    /// Responses from the iOS shapes: an invite answered with userInfo, a text reply, the legacy shape.
    private static let sampleResponses: [NotificationResponse] = [
        #"""
        {"actionIdentifier": "accept", "categoryIdentifier": "event-invite", "notificationIdentifier": "invite-1",
         "userInfo": {"aps": {"alert": {"title": "Rooftop party", "body": "Saturday 8pm"}, "category": "event-invite"},
                      "eventId": 4242, "organizer": {"id": "u-1", "tier": "vip"}, "recurring": true,
                      "attendees": 12, "tags": ["a", "b"]},
         "deviceToken": "0a0b0c0d0e0f10111213141516171819", "respondedAt": "2026-11-20T10:00:00.000Z"}
        """#,
        #"""
        {"actionIdentifier": "reply", "userText": "On my way 🎉",
         "userInfo": {"aps": {"category": "reply"}, "threadId": "t-9", "priority": "high"}}
        """#,
        #"""
        {"identifier": "comment", "responseInfo": {"UIUserNotificationActionResponseTypedTextKey": "ok"},
         "userInfo": {"aps": {"category": "TODO_CATEGORY"}, "todoId": 7, "list": {"shared": true}}}
        """#,
    ].map { text in
        guard let value = try? JSONParser.parse(text), let response = try? NotificationResponse.decode(value) else {
            fatalError("a sample response does not decode")
        }
        return response
    }

    private static func check(_ holds: Bool?, _ invariant: StaticString) {
        if holds != true { fatalError("invariant broken: \(invariant)") }
    }
}

#if FUZZING
    private let target = FuzzTarget.selected

    /// libFuzzer's entry point for each input.
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
        target.run(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
        return 0
    }

    @_silgen_name("LLVMFuzzerRunDriver")
    func runFuzzerDriver(
        _ argc: UnsafeMutablePointer<Int32>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> Int32
    ) -> Int32

    /// The executable's entry point under the name SwiftPM links as `main`: libFuzzer's driver, with
    /// its command-line options (`-max_total_time=…`, corpus folders).
    @_cdecl("ActionHookFuzz_main")
    public func fuzzMain(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> Int32 {
        var count = argc
        var arguments = argv
        return runFuzzerDriver(&count, &arguments) { data, size in fuzzerTestOneInput(data, size) }
    }
#else
    /// Without libFuzzer: runs the selected target over the files named on the command line (a corpus,
    /// or an input a fuzzer reported), so a finding can be replayed in a debug build.
    @main
    enum Replay {
        static func main() throws {
            let target = FuzzTarget.selected
            var count = 0
            for path in CommandLine.arguments.dropFirst() {
                let url = URL(fileURLWithPath: path)
                let files =
                    (try? FileManager.default.contentsOfDirectory(at: url, includingPropertiesForKeys: nil)) ?? [url]
                for file in files {
                    target.run(Array(try Data(contentsOf: file)))
                    count += 1
                }
            }
            print("actionhook-fuzz: \(target.rawValue): \(count) inputs, no invariant broken")
        }
    }
#endif
