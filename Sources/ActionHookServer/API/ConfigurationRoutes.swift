import ActionHookCore
import ActionHookStore
import Foundation
import MicroHTTPD

/// An app's whole configuration (categories and rules) read and replaced as one, atomically.
extension APIContext {
    /// A configuration holds up to a thousand categories and rules: more than the 16 KiB other bodies get.
    static let configurationBodyLimit = 4 * 1024 * 1024

    func registerConfigurationRoutes(in router: inout Router) {
        router.add(
            .get, "/v1/apps/{app}/config",
            appAdmin { _, appID in
                let current = try configurations.current(appID: appID)
                return .json(200, current.json, headers: ["ETag": current.etag])
            })
        router.add(
            .put, "/v1/apps/{app}/config", bodyLimit: Self.configurationBodyLimit,
            appAdmin { request, appID in
                let dryRun = try booleanQuery(request, "dryRun")
                let configuration = try AppConfiguration.decode(
                    try request.jsonBody(), allowPrivateWebhooks: allowPrivateWebhooks)
                let result = try configurations.replace(
                    appID: appID, with: configuration, ifMatch: try ifMatchTag(request), dryRun: dryRun)
                if !dryRun && !result.changes.isEmpty { cache.invalidate(appID: appID) }
                guard case .object(var answer) = result.changes.json else {
                    preconditionFailure("changes are an object")
                }
                answer["dryRun"] = .bool(dryRun)
                answer["etag"] = .string(result.etag)
                return .json(200, .object(answer), headers: ["ETag": result.etag])
            })
    }

    /// The entity tag named by `If-Match`, `nil` for none or `*`. A weak tag never matches a strong one
    /// (RFC 9110 §13.1.1), and anything that is not a tag cannot match: 412.
    func ifMatchTag(_ request: HTTPRequest) throws -> String? {
        guard let header = request.headers["if-match"]?.trimmingCharacters(in: .whitespaces) else { return nil }
        if header == "*" { return nil }
        guard header.count >= 2, header.first == "\"", header.last == "\"" else {
            throw APIError(
                problem: ProblemDetails(
                    status: 412, title: "Precondition Failed",
                    detail: "If-Match does not name a version of this configuration."))
        }
        return header
    }

    /// A `true`/`false` query item, `false` when absent.
    func booleanQuery(_ request: HTTPRequest, _ name: String) throws -> Bool {
        switch request.queryValue(name) {
        case nil, "false": return false
        case "true": return true
        default: throw APIError.badRequest("The \(name) query parameter must be true or false.")
        }
    }
}
