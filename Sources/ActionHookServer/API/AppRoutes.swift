import ActionHookCore
import ActionHookStore
import Basics
import Foundation
import MicroHTTPD

/// Apps, their ingest keys, and admin tokens.
extension APIContext {
    func registerAppRoutes(in router: inout Router) {
        router.add(
            .post, "/v1/apps",
            admin { request in
                let decoded = try AppDefinition.decodeCreate(try request.jsonBody())
                let app = decoded.app
                try app.checkRetention(idempotencyWindowHours: idempotencyTTLHours)
                try checkWebhookTargets([("/webhook/url", app.webhook?.url)])
                let (stored, key) = try apps.create(app)
                guard case .object(var answer) = stored.json else { return .json(201, stored.json) }
                answer["ingestKey"] = key.json
                for (name, secret) in decoded.answerMembers.members { answer[name] = secret }
                return .json(201, .object(answer), headers: ["Location": "/v1/apps/\(app.id)"])
            })
        router.add(
            .get, "/v1/apps",
            admin { request in
                let paging = try request.pageRequest()
                let page = try apps.list(PageRequest(limit: paging.limit, cursor: paging.cursor))
                return .list(page.items.map(\.json), nextCursor: page.nextCursor)
            })
        router.add(
            .get, "/v1/apps/{app}",
            appAdmin { _, appID in
                guard let app = try apps.app(appID) else { throw APIError.notFound("app") }
                return .json(200, app.json)
            })
        router.add(
            .patch, "/v1/apps/{app}",
            appAdmin { request, appID in
                let body = try request.jsonBody()
                var generated = JSONObject()
                let updated = try apps.update(appID) { current in
                    let decoded = try current.applyingPatch(body)
                    try decoded.app.checkRetention(idempotencyWindowHours: idempotencyTTLHours)
                    try checkWebhookTargets([("/webhook/url", decoded.app.webhook?.url)])
                    generated = decoded.answerMembers
                    return decoded.app
                }
                cache.invalidate(appID: appID)
                guard !generated.isEmpty, case .object(var answer) = updated.json else {
                    return .json(200, updated.json)
                }
                for (name, secret) in generated.members { answer[name] = secret }
                return .json(200, .object(answer))
            })
        router.add(
            .delete, "/v1/apps/{app}",
            appAdmin { _, appID in
                guard try apps.delete(appID) else { throw APIError.notFound("app") }
                cache.invalidate(appID: appID)
                return .noContent
            })
        router.add(
            .post, "/v1/apps/{app}/keys",
            appAdmin { request, appID in
                // No body: an ingest key. `{"scope": "send"}`: a server key for the app's backend.
                var scope = KeyScope.ingest
                if !request.body.isEmpty {
                    guard case .object(let object) = try request.jsonBody() else {
                        throw ValidationFailure.shape([FieldError(pointer: "", detail: "must be a JSON object")])
                    }
                    var errors: [FieldError] = object.keys.filter { $0 != "scope" }.map {
                        FieldError(pointer: "/" + $0, detail: "is not a known field")
                    }
                    if let value = object["scope"] {
                        if let parsed = value.stringValue.flatMap(KeyScope.init(rawValue:)) {
                            scope = parsed
                        } else {
                            errors.append(FieldError(pointer: "/scope", detail: "must be ingest or send"))
                        }
                    }
                    if !errors.isEmpty { throw ValidationFailure.invalid(errors) }
                }
                return .json(201, try apps.createKey(appID: appID, scope: scope).json)
            })
        router.add(
            .delete, "/v1/apps/{app}/keys/{keyId}",
            appAdmin { request, appID in
                let keyID = try request.uuidParameter("keyId", what: "ingest key")
                guard try apps.revokeKey(appID: appID, keyID: keyID) else { throw APIError.notFound("ingest key") }
                cache.invalidate(appID: appID)
                return .noContent
            })

        router.add(
            .post, "/v1/admin-tokens",
            admin { request in
                var reader = try AdminTokenRequest(request.jsonBody())
                let (info, secret) = try adminTokens.create(name: try reader.name())
                guard case .object(var answer) = info.json else { return .json(201, info.json) }
                answer["token"] = .string(secret)
                return .json(201, .object(answer))
            })
        router.add(
            .get, "/v1/admin-tokens",
            admin { _ in
                .list(try adminTokens.list().map(\.json), nextCursor: nil)
            })
        router.add(
            .delete, "/v1/admin-tokens/{tokenId}",
            admin { request in
                let id = try request.uuidParameter("tokenId", what: "admin token")
                guard try adminTokens.revoke(id: id) else { throw APIError.notFound("admin token") }
                return .noContent
            })
    }

    /// Routes that take no body accept an empty one or `{}`.
    func requireEmptyBody(_ request: HTTPRequest) throws {
        guard !request.body.isEmpty else { return }
        guard case .object(let object) = try request.jsonBody(), object.isEmpty else {
            throw ValidationFailure.invalid([FieldError(pointer: "", detail: "must be empty")])
        }
    }
}

/// The body of `POST /v1/admin-tokens`: `{"name": "..."}`.
struct AdminTokenRequest {
    let body: JSONValue

    init(_ body: JSONValue) {
        self.body = body
    }

    mutating func name() throws -> String {
        guard case .object(let object) = body else {
            throw ValidationFailure.shape([FieldError(pointer: "", detail: "must be a JSON object")])
        }
        var errors: [FieldError] = object.keys.filter { $0 != "name" }.map {
            FieldError(pointer: JSONPointer.appending($0, to: ""), detail: "is not a known field")
        }
        let name = object["name"]?.stringValue
        if object["name"] != nil && name == nil {
            throw ValidationFailure.shape([FieldError(pointer: "/name", detail: "must be a string")])
        }
        if name == nil || name!.isEmpty || name!.count > 200 {
            errors.append(FieldError(pointer: "/name", detail: "must be 1 to 200 characters"))
        }
        guard errors.isEmpty, let name else { throw ValidationFailure.invalid(errors) }
        return name
    }
}
