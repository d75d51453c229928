import ActionHookCore
import ActionHookStore
import Foundation
import MicroHTTPD

/// `POST /v1/responses` and `GET /v1/categories`: the routes the iOS app calls with its ingest key.
extension APIContext {
    func registerIngestRoutes(in router: inout Router) {
        router.add(Route(.post, "/v1/responses", handler: .deferred(ingest)))
        router.add(.get, "/v1/categories", endpoint { request in
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
            case .success(.created(let answer)) where Self.isExpired(answer):
                metrics.replyExpired(appID: item.appID, category: knownCategory(item))
                respond(Self.expiredAnswer(answer))
            case .success(.created(let answer)):
                respond(.json(202, answer))
            case .success(.replayed(let answer)) where Self.isExpired(answer):
                respond(Self.expiredAnswer(answer, headers: ["Idempotent-Replayed": "true"]))
            case .success(.replayed(let answer)):
                respond(.json(200, answer, headers: ["Idempotent-Replayed": "true"]))
            case .failure(let error):
                respond(errors.response(for: error, request: request))
            }
        }
    }

    /// The reply's category as a metric label: one of the app's categories, else `other`, so replies
    /// cannot make new series with names of their own.
    func knownCategory(_ item: IngestItem) -> String {
        guard let category = item.response.categoryIdentifier,
            (try? ruleSet(appID: item.appID).categories[category]) != nil
        else { return "other" }
        return category
    }

    /// Whether a stored answer is that of a reply that came too late (outcome `expired`).
    static func isExpired(_ answer: JSONValue) -> Bool {
        answer.objectValue?["outcome"]?.stringValue == Outcome.expired.rawValue
    }

    /// The `410 Gone` a late reply gets, first and on every replay: problem+json with the stored
    /// response's id, the limit and the reply's age.
    static func expiredAnswer(_ answer: JSONValue, headers: HTTPHeaders = HTTPHeaders()) -> HTTPResponse {
        let stored = answer.objectValue ?? JSONObject()
        var problem: JSONObject = [
            "type": .string("https://actionhook.dev/problems/reply-expired"),
            "title": .string("Reply expired"),
            "status": .integer(410),
            "detail": .string(
                "The reply is older than its category's or rule's age limit: it was stored as expired and did not act."),
        ]
        for member in ["id", "ruleId", "maxReplyAgeSeconds", "ageSeconds"] {
            if let value = stored[member] { problem[member] = value }
        }
        var headers = headers
        headers.set("Content-Type", "application/problem+json")
        return HTTPResponse(status: 410, headers: headers, body: JSONValue.object(problem).jsonBytes)
    }

    /// Everything ingest decides before the database: key, body, limits, rules.
    func ingestItem(_ request: HTTPRequest) throws -> IngestItem {
        let principal = try auth.requireIngestKey(request)
        let body = try request.jsonBody()
        let response = try NotificationResponse.decode(body, limits: limits, sourceByteCount: request.body.count)
        try rateLimits.check(
            appID: principal.appID, appRate: principal.rateLimitPerSecond, deviceToken: response.deviceToken)
        var item = IngestItem(
            appID: principal.appID, idempotencyKey: try idempotencyKey(request, response: response), response: response,
            decision: try decide(response, appID: principal.appID))
        item.keyFromClient = request.headers["idempotency-key"] != nil || response.responseId != nil
        return item
    }

    /// The first matching rule, the subject and the age limit; handler checks (a comment's text), a
    /// `respondedAt` in the future and a missing one that the age limit requires throw 422.
    func decide(_ response: NotificationResponse, appID: String, now: Date = Date()) throws -> IngestDecision {
        let set = try ruleSet(appID: appID)
        let category = response.categoryIdentifier.flatMap { set.categories[$0] }
        if let respondedAt = response.respondedAt,
            respondedAt.timeIntervalSince(now) > Double(clockSkewSeconds)
        {
            throw ValidationFailure.invalid([
                FieldError(
                    pointer: "/respondedAt",
                    detail: "must not be later than the server's clock by more than \(clockSkewSeconds) seconds")
            ])
        }
        let rule = RuleEngine.firstMatch(for: response, in: set.rules)
        let ageLimit = ReplyAgeLimit.resolve(rule: rule, category: category)
        if ageLimit.requireRespondedAt && response.respondedAt == nil {
            throw ValidationFailure.invalid([
                FieldError(
                    pointer: "/respondedAt",
                    detail: "is required: replies to this category or rule have an age limit, judged from respondedAt")
            ])
        }
        if let rule { try RuleEngine.check(rule.handler, response: response) }
        return IngestDecision(
            rule: rule, subject: RuleEngine.subject(of: response, category: category), ageLimit: ageLimit)
    }

    /// The `Idempotency-Key` header, else the body's `responseId`, else a fresh key (no deduplication).
    func idempotencyKey(_ request: HTTPRequest, response: NotificationResponse) throws -> String {
        if let header = request.headers["idempotency-key"] {
            guard (1...255).contains(header.utf8.count), header.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                throw APIError.badRequest("The Idempotency-Key header must be 1 to 255 visible ASCII characters.")
            }
            return header
        }
        return response.responseId ?? UUID().lowercasedString
    }
}
