import ActionHookCore
import ActionHookStore
import MicroHTTPD

/// `UNNotificationCategory`-shaped categories of an app.
extension APIContext {
    func registerCategoryRoutes(in router: inout Router) {
        router.add(
            .get, "/v1/apps/{app}/categories",
            appAdmin { request, appID in
                let paging = try request.pageRequest()
                let page = try categories.list(appID: appID, PageRequest(limit: paging.limit, cursor: paging.cursor))
                return .list(page.items.map(\.json), nextCursor: page.nextCursor)
            })
        router.add(
            .put, "/v1/apps/{app}/categories/{category}",
            appAdmin { request, appID in
                let category = try NotificationCategory.decode(
                    try request.jsonBody(), id: request.parameter("category"))
                let created = try categories.put(appID: appID, category)
                cache.invalidate(appID: appID)
                return .json(created ? 201 : 200, category.json)
            })
        router.add(
            .get, "/v1/apps/{app}/categories/{category}",
            appAdmin { request, appID in
                guard let category = try categories.get(appID: appID, id: request.parameter("category")) else {
                    throw APIError.notFound("category")
                }
                return .json(200, category.json)
            })
        router.add(
            .delete, "/v1/apps/{app}/categories/{category}",
            appAdmin { request, appID in
                guard try categories.delete(appID: appID, id: request.parameter("category")) else {
                    throw APIError.notFound("category")
                }
                cache.invalidate(appID: appID)
                return .noContent
            })
    }
}
