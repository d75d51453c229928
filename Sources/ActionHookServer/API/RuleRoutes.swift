import ActionHookCore
import ActionHookStore
import Foundation
import MicroHTTPD

/// Rules, with `ETag`/`If-Match`, and the dry run.
extension APIContext {
    func registerRuleRoutes(in router: inout Router) {
        router.add(
            .post, "/v1/apps/{app}/rules/test",
            appAdmin { request, appID in
                try dryRun(request, appID: appID)
            })
        router.add(
            .post, "/v1/apps/{app}/rules",
            appAdmin { request, appID in
                let rule = try Rule.decode(try request.jsonBody(), id: nil)
                try checkWebhookTargets(rule)
                let stored = try rules.create(appID: appID, rule)
                cache.invalidate(appID: appID)
                return .json(
                    201, stored.json, headers: ["ETag": stored.etag, "Location": "/v1/apps/\(appID)/rules/\(rule.id)"])
            })
        router.add(
            .get, "/v1/apps/{app}/rules",
            appAdmin { request, appID in
                let paging = try request.pageRequest()
                let page = try rules.list(appID: appID, PageRequest(limit: paging.limit, cursor: paging.cursor))
                return .list(page.items.map(\.json), nextCursor: page.nextCursor)
            })
        router.add(
            .get, "/v1/apps/{app}/rules/{rule}",
            appAdmin { request, appID in
                guard let stored = try rules.get(appID: appID, id: request.parameter("rule")) else {
                    throw APIError.notFound("rule")
                }
                return .json(200, stored.json, headers: ["ETag": stored.etag])
            })
        router.add(
            .put, "/v1/apps/{app}/rules/{rule}",
            appAdmin { request, appID in
                let rule = try Rule.decode(try request.jsonBody(), id: request.parameter("rule"))
                try checkWebhookTargets(rule)
                let stored = try rules.replace(appID: appID, rule, ifMatch: try ifMatchVersion(request))
                cache.invalidate(appID: appID)
                return .json(200, stored.json, headers: ["ETag": stored.etag])
            })
        router.add(
            .delete, "/v1/apps/{app}/rules/{rule}",
            appAdmin { request, appID in
                try rules.delete(appID: appID, id: request.parameter("rule"), ifMatch: try ifMatchVersion(request))
                cache.invalidate(appID: appID)
                return .noContent
            })
    }

    func checkWebhookTargets(_ rule: Rule) throws {
        try checkWebhookTargets(rule.followUps.enumerated().map { ("/followUps/\($0.offset)/url", $0.element.url) })
    }

    /// The version named by `If-Match` (`"3"`, `W/"3"`), `nil` for none or `*`. Anything else
    /// cannot match a current version: 412.
    func ifMatchVersion(_ request: HTTPRequest) throws -> Int? {
        guard let header = request.headers["if-match"]?.trimmingCharacters(in: .whitespaces) else { return nil }
        if header == "*" { return nil }
        var tag = Substring(header)
        if tag.hasPrefix("W/") { tag = tag.dropFirst(2) }
        guard tag.count >= 3, tag.first == "\"", tag.last == "\"", let version = Int(tag.dropFirst().dropLast()) else {
            throw APIError(
                problem: ProblemDetails(
                    status: 412, title: "Precondition Failed", detail: "If-Match does not name a version of this rule.")
            )
        }
        return version
    }

    /// Runs an ingest body through the app's rules without storing anything (nor reading a sent notification:
    /// the rule's own follow-ups, without a snooze's re-delivery).
    func dryRun(_ request: HTTPRequest, appID: String) throws -> HTTPResponse {
        let response = try NotificationResponse.decode(try request.jsonBody(), limits: limits)
        let now = Date()
        let decision = try decide(response, appID: appID, now: now)
        // Judged against the server's clock now, as ingest judges it against the database's.
        let age = ReplyAgeLimit.age(respondedAt: response.respondedAt, receivedAt: now)
        let expired = decision.ageLimit.isExpired(age: age)
        let outcome = expired ? .expired : RuleEngine.outcome(of: decision.rule?.handler)
        var planned: [PlannedFollowUp] = []
        if let rule = decision.rule, !expired {
            planned = RuleEngine.plan(
                rule, response: response, responseID: UUID(), receivedAt: Date(), subject: decision.subject,
                outcome: outcome)
            // A snooze's re-delivery is the push a sent notification carried, which a dry run does not read.
        }
        return .json(
            200,
            .object([
                "matched": .bool(decision.rule != nil),
                "ruleId": decision.rule.map { .string($0.id) } ?? .null,
                "outcome": .string(outcome.rawValue),
                "subject": decision.subject.map(JSONValue.string) ?? .null,
                "maxReplyAgeSeconds": decision.ageLimit.maxAgeSeconds.map(JSONValue.integer) ?? .null,
                "ageSeconds": age.map { ReplyAgeLimit.json(age: $0) } ?? .null,
                "followUps": .array(
                    planned.map {
                        .object([
                            "channel": .string($0.channel.rawValue), "delaySeconds": .integer($0.delaySeconds),
                            "payload": $0.payload,
                        ])
                    }),
            ]))
    }
}
