import ActionHookCore
import ActionHookStore
import MicroHTTPD

/// Responses, subjects and follow-ups.
extension APIContext {
    func registerHistoryRoutes(in router: inout Router) {
        router.add(.get, "/v1/apps/{app}/responses", appAdmin { request, appID in
            var outcome: Outcome?
            if let text = request.queryValue("outcome"), !text.isEmpty {
                guard let value = Outcome(rawValue: text) else {
                    throw APIError.badRequest("The outcome query parameter is not a known outcome.")
                }
                outcome = value
            }
            let filter = ResponseFilter(
                subject: request.queryValue("subject"), action: request.queryValue("action"),
                category: request.queryValue("category"), outcome: outcome, since: try request.timeQuery("since"),
                until: try request.timeQuery("until"))
            let paging = try request.pageRequest()
            let page = try responses.list(
                appID: appID, filter: filter, PageRequest(limit: paging.limit, cursor: paging.cursor))
            return .list(page.items.map(\.json), nextCursor: page.nextCursor)
        })
        router.add(.get, "/v1/apps/{app}/responses/{responseId}", appAdmin { request, appID in
            let id = try request.uuidParameter("responseId", what: "response")
            guard let view = try responses.get(appID: appID, id: id), case .object(var object) = view.json else {
                throw APIError.notFound("response")
            }
            object["followUps"] = .array(try followUps.forResponse(appID: appID, responseID: id))
            return .json(200, .object(object))
        })
        router.add(.get, "/v1/apps/{app}/subjects/{subject}", appAdmin { request, appID in
            let subject = request.parameter("subject")
            let decisions = try responses.decisions(appID: appID, subject: subject)
            guard !decisions.isEmpty else { throw APIError.notFound("decision for this subject") }
            return .json(200, .object(["subject": .string(subject), "decisions": .array(decisions)]))
        })
        router.add(.get, "/v1/apps/{app}/followups", appAdmin { request, appID in
            var status: FollowUpStatus?
            if let text = request.queryValue("status"), !text.isEmpty {
                guard let value = FollowUpStatus(rawValue: text) else {
                    throw APIError.badRequest("The status query parameter is not a known follow-up status.")
                }
                status = value
            }
            let paging = try request.pageRequest()
            let page = try followUps.list(
                appID: appID, status: status, PageRequest(limit: paging.limit, cursor: paging.cursor))
            return .list(page.items, nextCursor: page.nextCursor)
        })
        router.add(.post, "/v1/apps/{app}/followups/{followUpId}/retry", appAdmin { request, appID in
            try requireEmptyBody(request)
            let id = try request.uuidParameter("followUpId", what: "follow-up")
            return .json(200, try followUps.retry(appID: appID, id: id))
        })
        router.add(.delete, "/v1/apps/{app}/followups/{followUpId}", appAdmin { request, appID in
            let id = try request.uuidParameter("followUpId", what: "follow-up")
            return .json(200, try followUps.cancel(appID: appID, id: id))
        })
    }
}
