import ActionHookCore
import Foundation
import Testing

/// What the worker does with a claim before sending (``DeliveryPlan``) and how an attempt is recorded
/// (``AttemptPolicy``): pure decisions, as tables of cases.
@Suite("Delivery decisions: the plan before sending, the record after")
struct DeliveryPlanTests {
    static let endpoint = WebhookEndpoint(url: "https://hooks.example.com/app", secret: "whsec_c2VjcmV0")
    static let credentials = APNsCredentials(
        teamId: "TEAM123456", keyId: "KEY1234567", privateKey: "-----BEGIN PRIVATE KEY-----", topic: "com.example",
        environment: "sandbox")

    static func claim(_ channel: FollowUpChannel, _ payload: String, attempt: Int = 1, deviceDead: Bool = false)
        -> ClaimedFollowUp
    {
        ClaimedFollowUp(
            appID: "app", id: UUID(), attempt: attempt, channel: channel,
            payload: try! JSONParser.parse(Array(payload.utf8)), lateness: 0, deviceDead: deviceDead)
    }

    static let settings = DeliverySettings(webhook: endpoint, apns: credentials, webhookDisabled: false)

    @Test(
        "plans",
        arguments: [
            ("app deleted", claim(.webhook, #"{"body": 1}"#), nil, DeliveryPlan.fail(errorClass: "app_deleted")),
            (
                "the app's endpoint", claim(.webhook, #"{"body": {"a": 1}}"#), settings,
                .webhook(url: endpoint.url, body: Array(#"{"a":1}"#.utf8), secret: endpoint.secret)
            ),
            (
                "a rule's own URL", claim(.webhook, #"{"url": "https://other.example/x", "body": null}"#), settings,
                .webhook(url: "https://other.example/x", body: Array("null".utf8), secret: endpoint.secret)
            ),
            (
                "no endpoint", claim(.webhook, #"{"body": 1}"#),
                DeliverySettings(webhook: nil, apns: nil, webhookDisabled: false), .fail(errorClass: "no_webhook_url")
            ),
            (
                "endpoint disabled", claim(.webhook, #"{"body": 1}"#),
                DeliverySettings(webhook: endpoint, apns: nil, webhookDisabled: true),
                .fail(errorClass: "endpoint_disabled")
            ),
            (
                "own URL while the endpoint is disabled", claim(.webhook, #"{"url": "https://o.example/", "body": 2}"#),
                DeliverySettings(webhook: endpoint, apns: nil, webhookDisabled: true),
                .webhook(url: "https://o.example/", body: Array("2".utf8), secret: endpoint.secret)
            ),
            (
                "no APNs credentials", claim(.apns, #"{"deviceToken": "ab"}"#),
                DeliverySettings(webhook: endpoint, apns: nil, webhookDisabled: false),
                .fail(errorClass: "no_apns_credentials")
            ),
            (
                "a dead token", claim(.apns, #"{"deviceToken": "ab"}"#, deviceDead: true), settings,
                .skip(reason: "device_dead")
            ),
            (
                "a push", claim(.apns, #"{"deviceToken": "ab"}"#), settings,
                .push(credentials: credentials, payload: .object(["deviceToken": .string("ab")]))
            ),
        ] as [(String, ClaimedFollowUp, DeliverySettings?, DeliveryPlan)])
    func plans(name: String, claim: ClaimedFollowUp, settings: DeliverySettings?, expected: DeliveryPlan) {
        #expect(DeliveryPlan.plan(claim, settings: settings) == expected, "\(name)")
    }

    static let policy = AttemptPolicy(retryPolicy: RetryPolicy(schedule: [1, 10], jitter: 0))

    @Test(
        "records",
        arguments: [
            (
                "delivered", claim(.webhook, "{}"), SendOutcome.delivered(httpStatus: 204),
                AttemptRecord(result: .delivered(httpStatus: 204), label: .delivered)
            ),
            (
                "first failure retried after the first wait", claim(.webhook, "{}"),
                .retryable(httpStatus: 500, errorClass: "http_500"),
                AttemptRecord(
                    result: .failed(httpStatus: 500, errorClass: "http_500", retryAfterMilliseconds: 1000),
                    label: .retrying)
            ),
            (
                "second failure retried after the second", claim(.webhook, "{}", attempt: 2),
                .retryable(httpStatus: nil, errorClass: "timeout"),
                AttemptRecord(
                    result: .failed(httpStatus: nil, errorClass: "timeout", retryAfterMilliseconds: 10_000),
                    label: .retrying)
            ),
            (
                "past the schedule: dead", claim(.webhook, "{}", attempt: 3),
                .retryable(httpStatus: 503, errorClass: "http_503"),
                AttemptRecord(
                    result: .failed(httpStatus: 503, errorClass: "http_503", retryAfterMilliseconds: nil), label: .dead)
            ),
            (
                "permanent", claim(.apns, #"{"deviceToken": "ab"}"#),
                .permanent(httpStatus: 413, errorClass: "PayloadTooLarge"),
                AttemptRecord(
                    result: .failed(httpStatus: 413, errorClass: "PayloadTooLarge", retryAfterMilliseconds: nil),
                    label: .dead)
            ),
            (
                "a dead device is marked", claim(.apns, #"{"deviceToken": "ab"}"#),
                .deadDevice(httpStatus: 410, reason: "Unregistered"),
                AttemptRecord(
                    result: .failed(httpStatus: 410, errorClass: "Unregistered", retryAfterMilliseconds: nil),
                    label: .dead, sideEffect: .markDeviceDead(token: "ab", reason: "Unregistered"))
            ),
            (
                "a dead device without a token marks nothing", claim(.apns, "{}"),
                .deadDevice(httpStatus: 400, reason: "BadDeviceToken"),
                AttemptRecord(
                    result: .failed(httpStatus: 400, errorClass: "BadDeviceToken", retryAfterMilliseconds: nil),
                    label: .dead)
            ),
            (
                "the app's endpoint gone: disabled", claim(.webhook, #"{"body": 1}"#), .endpointGone,
                AttemptRecord(
                    result: .failed(httpStatus: 410, errorClass: "endpoint_gone", retryAfterMilliseconds: nil),
                    label: .dead, sideEffect: .disableWebhook)
            ),
            (
                "a rule's own URL gone: that follow-up alone", claim(.webhook, #"{"url": "https://x.example/"}"#),
                .endpointGone,
                AttemptRecord(
                    result: .failed(httpStatus: 410, errorClass: "endpoint_gone", retryAfterMilliseconds: nil),
                    label: .dead)
            ),
        ] as [(String, ClaimedFollowUp, SendOutcome, AttemptRecord)])
    func records(name: String, claim: ClaimedFollowUp, outcome: SendOutcome, expected: AttemptRecord) {
        #expect(Self.policy.record(claim, outcome: outcome, jitterUnit: 0.5) == expected, "\(name)")
    }

    @Test("plans that send nothing are recorded at once; plans that send are not")
    func unsent() {
        let claim = Self.claim(.apns, #"{"deviceToken": "ab"}"#)
        #expect(
            Self.policy.record(claim, unsent: .skip(reason: "device_dead"))
                == AttemptRecord(result: .skipped(reason: "device_dead"), label: .skipped))
        #expect(
            Self.policy.record(claim, unsent: .fail(errorClass: "app_deleted"))
                == AttemptRecord(
                    result: .failed(httpStatus: nil, errorClass: "app_deleted", retryAfterMilliseconds: nil),
                    label: .dead))
        #expect(Self.policy.record(claim, unsent: .push(credentials: Self.credentials, payload: .null)) == nil)
    }
}
