import ActionHookCore
import ActionHookStore
import Basics
import Foundation
import MicroHTTPD

/// `POST /v1/apps/{app}/notifications` (send), its receipts and list: the routes of the app's backend,
/// authenticated with a server key of the app (scope `send`) or the admin token.
extension APIContext {
    /// A send names up to 1,000 devices with their labels and the push's content: 512 KiB is room
    /// for that and little more.
    static let sendBodyLimit = 512 * 1024

    func registerNotificationRoutes(in router: inout Router) {
        router.add(
            .post, "/v1/apps/{app}/notifications", bodyLimit: Self.sendBodyLimit,
            sender { request, appID in
                let key = try idempotencyKeyHeader(request)
                var body = try SendRequest.decode(try request.jsonBody(), limits: sendLimits, now: Date())
                if let name = body.category {
                    guard let category = try ruleSet(appID: appID).categories[name] else {
                        throw ValidationFailure.invalid([
                            FieldError(pointer: "/category", detail: "is not one of the app's categories")
                        ])
                    }
                    if category.requireSignedReplies { body.requireSignedReplies = true }
                }
                if !body.stepWebhookURLs.isEmpty {
                    try body.checkWebhookTargets(
                        appEndpoint: try apps.app(appID)?.definition.webhook?.url, allowPrivate: allowPrivateWebhooks)
                }
                switch try notifications.send(appID: appID, idempotencyKey: key, request: body) {
                case .created(let answer, let devices):
                    metrics.notificationSent(appID: appID, devices: devices)
                    return .json(202, answer)
                case .replayed(let answer):
                    return .json(200, answer, headers: ["Idempotent-Replayed": "true"])
                }
            })
        router.add(
            .get, "/v1/apps/{app}/notifications",
            sender { request, appID in
                let status = try request.choiceQuery(
                    "status", as: NotificationStatus.self,
                    refusal: "The status query parameter must be pending, answered, unanswered or expired.")
                let filter = NotificationFilter(
                    status: status, subject: request.queryValue("subject").flatMap { $0.isEmpty ? nil : $0 },
                    category: request.queryValue("category").flatMap { $0.isEmpty ? nil : $0 },
                    since: try request.timeQuery("since"))
                let paging = try request.pageRequest()
                let page = try notifications.list(
                    appID: appID, filter: filter, PageRequest(limit: paging.limit, cursor: paging.cursor))
                return .list(page.items, nextCursor: page.nextCursor)
            })
        router.add(
            .put, "/v1/apps/{app}/devices/{deviceToken}",
            sender { request, appID in
                let token = try deviceTokenParameter(request)
                let registration = try DeviceRegistration.decode(try request.jsonBody(), userFromToken: false)
                guard let device = try devices.register(appID: appID, token: token, registration, keepingOwner: false)
                else { preconditionFailure("a registration that may take the device always stores it") }
                deviceKeys.invalidate(appID: appID, token: token)
                return .json(200, device)
            })
        router.add(
            .get, "/v1/apps/{app}/devices",
            sender { request, appID in
                let paging = try request.pageRequest()
                let page = try devices.list(
                    appID: appID, user: request.queryValue("user").flatMap { $0.isEmpty ? nil : $0 },
                    PageRequest(limit: paging.limit, cursor: paging.cursor))
                return .list(page.items, nextCursor: page.nextCursor)
            })
        router.add(
            .get, "/v1/apps/{app}/users/{user}",
            sender { request, appID in
                guard let user = try devices.user(appID: appID, request.parameter("user")) else {
                    throw APIError.notFound("user")
                }
                return .json(200, user)
            })
        router.add(
            .get, "/v1/apps/{app}/notifications/{notificationId}",
            sender { request, appID in
                let id = try request.uuidParameter("notificationId", what: "notification")
                guard let receipt = try notifications.receipt(appID: appID, id: id) else {
                    throw APIError.notFound("notification")
                }
                return .json(200, receipt)
            })
    }

    /// The path's `deviceToken`, lowercased; 422 when it is not a device token.
    func deviceTokenParameter(_ request: HTTPRequest) throws -> String {
        guard let token = DeviceRegistration.token(request.parameter("deviceToken")) else {
            throw ValidationFailure.invalid([
                FieldError(
                    pointer: "/deviceToken", detail: "must be hexadecimal with an even length of 16 to 200 characters")
            ])
        }
        return token
    }

    /// A handler for the send routes: the app's server key or the admin token, then the app must exist.
    func sender(_ body: @escaping @Sendable (HTTPRequest, String) throws -> HTTPResponse)
        -> @Sendable (HTTPRequest)
        -> HTTPResponse
    {
        endpoint { request in
            let appID = request.parameter("app")
            try auth.requireSender(request, appID: appID)
            guard Slug.isValid(appID), try apps.app(appID) != nil else { throw APIError.notFound("app") }
            return try body(request, appID)
        }
    }
}
