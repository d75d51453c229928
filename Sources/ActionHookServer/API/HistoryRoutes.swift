import ActionHookCore
import ActionHookStore
import MicroHTTPD

/// Responses, subjects and follow-ups.
extension APIContext {
    func registerHistoryRoutes(in router: inout Router) {
        router.add(
            .get, "/v1/apps/{app}/responses",
            appAdmin { request, appID in
                let outcome = try request.choiceQuery(
                    "outcome", as: Outcome.self, refusal: "The outcome query parameter is not a known outcome.")
                let filter = ResponseFilter(
                    subject: request.queryValue("subject"), action: request.queryValue("action"),
                    category: request.queryValue("category"), outcome: outcome, since: try request.timeQuery("since"),
                    until: try request.timeQuery("until"), deviceToken: request.queryValue("deviceToken"),
                    user: request.queryValue("user").flatMap { $0.isEmpty ? nil : $0 })
                switch request.queryValue("format") {
                case nil, "json"?: break
                case "ndjson"?: return try export(appID: appID, filter: filter, request: request)
                default: throw APIError.badRequest("The format query parameter must be json or ndjson.")
                }
                let paging = try request.pageRequest()
                let page = try responses.list(
                    appID: appID, filter: filter, PageRequest(limit: paging.limit, cursor: paging.cursor))
                return .list(page.items.map(\.json), nextCursor: page.nextCursor)
            })
        router.add(
            .get, "/v1/apps/{app}/responses/{responseId}",
            appAdmin { request, appID in
                let id = try request.uuidParameter("responseId", what: "response")
                guard let view = try responses.get(appID: appID, id: id), case .object(var object) = view.json else {
                    throw APIError.notFound("response")
                }
                object["followUps"] = .array(try followUps.forResponse(appID: appID, responseID: id))
                return .json(200, .object(object))
            })
        router.add(
            .get, "/v1/apps/{app}/subjects/{subject}",
            appAdmin { request, appID in
                let subject = request.parameter("subject")
                let category = request.queryValue("category").flatMap { $0.isEmpty ? nil : $0 }
                let decisions = try responses.decisions(appID: appID, subject: subject, category: category)
                guard !decisions.isEmpty else { throw APIError.notFound("decision for this subject") }
                return .json(200, .object(["subject": .string(subject), "decisions": .array(decisions)]))
            })
        router.add(
            .delete, "/v1/apps/{app}/subjects/{subject}",
            appAdmin { request, appID in
                try erase(appID: appID, .subject(request.parameter("subject")), request: request)
            })
        router.add(
            .delete, "/v1/apps/{app}/devices/{deviceToken}",
            appAdmin { request, appID in
                try erase(appID: appID, .device(request.parameter("deviceToken")), request: request)
            })
        router.add(
            .delete, "/v1/apps/{app}/users/{user}",
            appAdmin { request, appID in
                let user = request.parameter("user")
                let tokens = try devices.tokens(appID: appID, user: user)
                guard !tokens.isEmpty else { throw APIError.notFound("user") }
                // Each device as its own erasure does: replies, labels, what would still be sent, the token.
                var totals = (responses: 0, notifications: 0, cancelled: 0, devices: 0)
                for token in tokens {
                    let erased = try longResponses.erase(appID: appID, .device(token))
                    totals.responses += erased.responses
                    totals.notifications += erased.notifications
                    totals.cancelled += erased.followUpsCancelled
                    totals.devices += erased.devices
                }
                logger.notice(
                    "erased a user",
                    metadata: [
                        "app": "\(appID)", "devices": "\(tokens.count)", "responses": "\(totals.responses)",
                        "follow_ups_cancelled": "\(totals.cancelled)", "request_id": "\(request.requestID)",
                    ])
                return .json(
                    200,
                    .object([
                        "devices": .integer(tokens.count), "responses": .integer(totals.responses),
                        "notifications": .integer(totals.notifications),
                        "followUpsCancelled": .integer(totals.cancelled),
                    ]))
            })
        router.add(
            .get, "/v1/apps/{app}/followups",
            appAdmin { request, appID in
                let status = try request.choiceQuery(
                    "status", as: FollowUpStatus.self,
                    refusal: "The status query parameter is not a known follow-up status.")
                let paging = try request.pageRequest()
                let page = try followUps.list(
                    appID: appID, status: status, PageRequest(limit: paging.limit, cursor: paging.cursor))
                return .list(page.items, nextCursor: page.nextCursor)
            })
        router.add(
            .post, "/v1/apps/{app}/followups/{followUpId}/retry",
            appAdmin { request, appID in
                try requireEmptyBody(request)
                let id = try request.uuidParameter("followUpId", what: "follow-up")
                return .json(200, try followUps.retry(appID: appID, id: id))
            })
        router.add(
            .delete, "/v1/apps/{app}/followups/{followUpId}",
            appAdmin { request, appID in
                let id = try request.uuidParameter("followUpId", what: "follow-up")
                return .json(200, try followUps.cancel(appID: appID, id: id))
            })
    }

    /// Everything stored for one subject or device, oldest page last, as NDJSON: one stored response
    /// (the history's shape) per line. Audited in the log by count, never by content.
    func export(appID: String, filter: ResponseFilter, request: HTTPRequest) throws -> HTTPResponse {
        guard filter.subject != nil || filter.deviceToken != nil else {
            throw APIError.badRequest("An NDJSON export needs a subject or deviceToken query parameter.")
        }
        var body: [UInt8] = []
        var cursor: String?
        var count = 0
        repeat {
            let page = try longResponses.list(appID: appID, filter: filter, PageRequest(limit: 500, cursor: cursor))
            for item in page.items {
                body += item.json.jsonBytes
                body.append(UInt8(ascii: "\n"))
            }
            count += page.items.count
            cursor = page.nextCursor
        } while cursor != nil
        logger.notice(
            "exported stored replies",
            metadata: [
                "app": "\(appID)", "by": "\(filter.subject != nil ? "subject" : "device")", "responses": "\(count)",
                "request_id": "\(request.requestID)",
            ])
        return HTTPResponse(status: 200, headers: ["Content-Type": "application/x-ndjson"], body: body)
    }

    /// Erases the user text and `userInfo` of one subject's or device's replies and cancels what they
    /// would still send. Audited in the log by count, never by content or by the subject or token.
    func erase(appID: String, _ scope: ResponseStore.ErasureScope, request: HTTPRequest) throws -> HTTPResponse {
        let (erased, notifications, cancelled, devices) = try longResponses.erase(appID: appID, scope)
        let kind: String
        switch scope {
        case .subject: kind = "subject"
        case .device: kind = "device"
        }
        // As for any object of another app: nothing stored here about it is a 404.
        guard erased + notifications + devices > 0 else { throw APIError.notFound("stored reply for this \(kind)") }
        logger.notice(
            "erased stored replies",
            metadata: [
                "app": "\(appID)", "by": "\(kind)", "responses": "\(erased)", "notifications": "\(notifications)",
                "follow_ups_cancelled": "\(cancelled)",
                "request_id": "\(request.requestID)",
            ])
        return .json(
            200,
            .object([
                "responses": .integer(erased), "notifications": .integer(notifications),
                "followUpsCancelled": .integer(cancelled),
            ]))
    }
}
