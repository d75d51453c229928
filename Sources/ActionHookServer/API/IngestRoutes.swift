import ActionHookCore
import ActionHookStore
import Foundation
import MicroHTTPD

/// `POST /v1/responses`, `GET /v1/categories` and `PUT`/`DELETE /v1/devices/{deviceToken}`: the routes the iOS
/// app calls with its ingest key (and, when the app verifies identity, its user token).
extension APIContext {
    func registerIngestRoutes(in router: inout Router) {
        router.add(Route(.post, "/v1/responses", handler: .deferred(ingest)))
        router.add(
            .put, "/v1/devices/{deviceToken}",
            endpoint { request in
                let (principal, user, token) = try ownDevice(request)
                // Anonymous registration only where identity is off: once the app verifies identity, a device
                // it registers is always some verified user's.
                if user == nil, principal.identity.mode != .off { throw APIError.userTokenRequired }
                var registration = try DeviceRegistration.decode(try request.jsonBody(), userFromToken: true)
                registration.user = user?.id
                // Without a user token the app cannot take a device away from the user it is registered to.
                guard
                    let device = try devices.register(
                        appID: principal.appID, token: token, registration, keepingOwner: user == nil)
                else {
                    deviceKeys.invalidate(appID: principal.appID, token: token)
                    throw APIError.conflict(
                        "This device is registered to a user; register it with that user's token (ActionHook-User-Token)."
                    )
                }
                deviceKeys.invalidate(appID: principal.appID, token: token)
                return .json(200, device)
            })
        router.add(
            .delete, "/v1/devices/{deviceToken}",
            endpoint { request in
                let (principal, user, token) = try ownDevice(request)
                let signedOut = try devices.signOut(appID: principal.appID, token: token, user: user?.id)
                deviceKeys.invalidate(appID: principal.appID, token: token)
                guard signedOut else { throw APIError.notFound("device") }
                return .noContent
            })
        router.add(
            .get, "/v1/categories",
            endpoint { request in
                let principal = try auth.requireIngestKey(request)
                let listing = CategoryListing(try ruleSet(appID: principal.appID).categories.values)
                // The app revalidates its kept copy on every launch; an unchanged set costs no body.
                let headers: HTTPHeaders = ["ETag": listing.etag, "Cache-Control": "no-cache"]
                if let match = request.headers["if-none-match"], listing.isNotModified(ifNoneMatch: match) {
                    return HTTPResponse(status: 304, headers: headers)
                }
                return .json(200, listing.body, headers: headers)
            })
    }

    /// What the app's own device routes check first: its ingest key, its user token as the app's identity
    /// asks, the path's device token, and the rate limits.
    func ownDevice(_ request: HTTPRequest) throws -> (IngestPrincipal, VerifiedUser?, String) {
        let principal = try auth.requireIngestKey(request)
        let user = try identities.user(of: request, principal: principal)
        let token = try deviceTokenParameter(request)
        try rateLimits.check(appID: principal.appID, appRate: principal.rateLimitPerSecond, deviceToken: token)
        return (principal, user, token)
    }

    /// Validates on the server thread, then hands the write to the group-commit batcher; the
    /// connection stays suspended until the response's transaction has committed.
    func ingest(_ request: HTTPRequest, respond: @escaping @Sendable (HTTPResponse) -> Void) {
        let item: IngestItem
        do {
            item = try ingestItem(request)
        } catch {
            respond(errors.response(for: error, request: request))
            return
        }
        batcher.submit(item) { [self, errors, metrics] result in
            switch result {
            case .success(let stored):
                let replayed: Bool
                if case .replayed = stored { replayed = true } else { replayed = false }
                switch stored.answer.outcome {
                case .expired:
                    if !replayed { metrics.replyExpired(appID: item.appID, category: knownCategory(item)) }
                    respond(
                        errors.response(for: ReplyExpired(answer: stored.answer, replayed: replayed), request: request))
                case .unverified:
                    if !replayed { metrics.replyUnverified(appID: item.appID, category: knownCategory(item)) }
                    respond(
                        errors.response(
                            for: ReplyUnverified(answer: stored.answer, replayed: replayed), request: request))
                default:
                    if let answered = stored.answer.answered {
                        metrics.notificationAnswered(
                            appID: item.appID, category: knownCategory(answered.category, appID: item.appID),
                            seconds: answered.seconds)
                    }
                    respond(
                        replayed
                            ? .json(200, stored.answer.json, headers: ["Idempotent-Replayed": "true"])
                            : .json(202, stored.answer.json))
                }
            case .failure(let error):
                respond(errors.response(for: error, request: request))
            }
        }
    }

    /// The reply's category as a metric label: one of the app's categories, else `other`, so replies
    /// cannot make new series with names of their own.
    func knownCategory(_ item: IngestItem) -> String {
        knownCategory(item.response.categoryIdentifier, appID: item.appID)
    }

    /// `category` when it is one of the app's categories, else `other`.
    func knownCategory(_ category: String?, appID: String) -> String {
        guard let category, (try? ruleSet(appID: appID).categories[category]) != nil else { return "other" }
        return category
    }

    /// Everything ingest decides before the database: key, body, limits, rules.
    func ingestItem(_ request: HTTPRequest) throws -> IngestItem {
        let principal = try auth.requireIngestKey(request)
        let user = try identities.user(of: request, principal: principal)
        let body = try request.jsonBody()
        var response = try NotificationResponse.decode(body, limits: limits, sourceByteCount: request.body.count)
        response.user = user?.id
        try rateLimits.check(
            appID: principal.appID, appRate: principal.rateLimitPerSecond, deviceToken: response.deviceToken)
        response.signature = try replySignature(request, appID: principal.appID, response: response)
        var item = IngestItem(
            appID: principal.appID, idempotencyKey: try idempotencyKey(request, response: response), response: response,
            decision: try decide(response, appID: principal.appID))
        item.keyFromClient = request.headers["idempotency-key"] != nil || response.responseId != nil
        return item
    }

    /// What the reply's `ActionHook-Reply-Signature` proves, checked here on the request's thread (an ECDSA
    /// verification is the costliest step of a reply; the database writer never waits for one) against the
    /// device's keys, which are cached.
    func replySignature(_ request: HTTPRequest, appID: String, response: NotificationResponse) throws
        -> SignatureCheck
    {
        guard let header = request.headers[ReplySignature.header.lowercased()] else { return .absent }
        let window = idempotencyTTLHours * 3600
        let check = try ReplySignature.check(
            header: header, appID: appID, response: response, idempotencyKey: request.headers["idempotency-key"],
            now: Date(), windowSeconds: window
        ) { token in
            try deviceKeys.keys(appID: appID, token: token) {
                try devices.verifyingKeys(appID: appID, token: token, windowSeconds: window)
            }
        }
        switch check {
        case .valid: metrics.replySignatureChecked(appID: appID, result: "valid")
        case .invalid(let reason): metrics.replySignatureChecked(appID: appID, result: reason?.rawValue ?? "invalid")
        case .absent: break
        }
        return check
    }

    /// The first matching rule, the subject and the age limit (``IngestDecision/decide``), with the
    /// app's cached rules.
    func decide(_ response: NotificationResponse, appID: String, now: Date = Date()) throws -> IngestDecision {
        let set = try ruleSet(appID: appID)
        return try IngestDecision.decide(
            response, rules: set.rules, categories: set.categories, now: now, clockSkewSeconds: clockSkewSeconds)
    }

    /// The `Idempotency-Key` header, else the body's `responseId`, else a fresh key (no deduplication).
    func idempotencyKey(_ request: HTTPRequest, response: NotificationResponse) throws -> String {
        try idempotencyKeyHeader(request) ?? response.responseId ?? UUID().lowercasedString
    }
}
