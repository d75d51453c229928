import ActionHookCore
import ActionHookStore
import Basics
import Logging
import MicroHTTPD

/// An error that already knows its HTTP answer.
struct APIError: Error {
    let problem: ProblemDetails
    var headers: HTTPHeaders = HTTPHeaders()

    static let unauthorized = APIError(
        problem: ProblemDetails(
            status: 401, title: "Unauthorized", detail: "A valid bearer credential is required for this route."),
        headers: ["WWW-Authenticate": "Bearer"])

    /// A request the app's identity mode (`required`) refuses without a user token.
    static let userTokenRequired = APIError(
        problem: ProblemDetails(
            status: 401, title: "User Token Required",
            detail: "This app requires a user token: send the one its backend signed in ActionHook-User-Token."),
        headers: ["WWW-Authenticate": #"Bearer error="invalid_token""#])

    /// A user token that did not verify; the detail names the check that failed, never the token.
    static func invalidUserToken(_ refusal: UserTokenRefusal) -> APIError {
        APIError(
            problem: ProblemDetails(status: 401, title: "Invalid User Token", detail: refusal.description),
            headers: ["WWW-Authenticate": #"Bearer error="invalid_token""#])
    }

    static func forbidden(_ detail: String) -> APIError {
        APIError(problem: ProblemDetails(status: 403, title: "Forbidden", detail: detail))
    }

    static func notFound(_ what: String) -> APIError {
        APIError(problem: .notFound("No \(what) exists with this id."))
    }

    static let unsupportedMediaType = APIError(
        problem: ProblemDetails(
            status: 415, title: "Unsupported Media Type", detail: "The body must be application/json."))

    static func badRequest(_ detail: String, errors: [FieldError] = []) -> APIError {
        APIError(problem: ProblemDetails(status: 400, title: "Bad Request", detail: detail, errors: errors))
    }

    static func conflict(_ detail: String) -> APIError {
        APIError(problem: ProblemDetails(status: 409, title: "Conflict", detail: detail))
    }

    static func tooManyRequests(retryAfter seconds: Int) -> APIError {
        APIError(
            problem: ProblemDetails(
                status: 429, title: "Too Many Requests", detail: "The rate limit is exceeded; retry later."),
            headers: ["Retry-After": String(seconds)])
    }
}

/// A reply that came too late: it was stored as `expired` and did not act. Answered `410 Gone`, first
/// and on every replay.
struct ReplyExpired: Error {
    /// The stored answer, whose members (id, rule, limit, age) the problem carries.
    let answer: StoredAnswer
    /// Whether this is a replay of the stored answer.
    let replayed: Bool
}

/// A reply stored as `unverified`: its category, rule or notification requires a reply signed by the device's
/// key and its signature was absent or invalid. Answered `403 Forbidden`, first and on every replay: the client
/// must not send it again as it is.
struct ReplyUnverified: Error {
    /// The stored answer, whose members (id, rule, signature) the problem carries.
    let answer: StoredAnswer
    /// Whether this is a replay of the stored answer.
    let replayed: Bool
}

/// Turns any error into its problem+json answer: the one place where errors meet statuses.
struct ErrorMapper: Sendable {
    let logger: Logger

    func response(for error: any Error, request: HTTPRequest) -> HTTPResponse {
        switch error {
        case let error as APIError:
            return .problem(error.problem, headers: error.headers)
        case let expired as ReplyExpired:
            return Self.response(for: expired)
        case let unverified as ReplyUnverified:
            return Self.response(for: unverified)
        case let failure as ValidationFailure:
            return .problem(
                ProblemDetails(
                    status: failure.status, title: failure.title, detail: failure.detail,
                    errors: failure.errors))
        case let error as JSONParseError:
            return .problem(ProblemDetails(status: 400, title: "Malformed JSON", detail: error.description))
        case is InvalidCursor:
            return .problem(
                ProblemDetails(status: 400, title: "Bad Request", detail: "The cursor is not one this server issued."))
        case let error as StoreError:
            if error == .unavailable {
                logger.warning("database unavailable", metadata: ["request_id": "\(request.requestID)"])
            }
            return .problem(problem(for: error), headers: headers(for: error))
        case is IngestBatcherStopped:
            return .problem(
                .unavailable("The server is shutting down; retry the request."), headers: ["Retry-After": "1"])
        case is IngestDeadlinePassed:
            logger.warning("database did not answer in time", metadata: ["request_id": "\(request.requestID)"])
            return .problem(
                .unavailable("The database did not answer in time; retry with the same idempotency key."),
                headers: ["Retry-After": "1"])
        default:
            logger.error(
                "request failed", metadata: ["error": "\(error)", "request_id": "\(request.requestID)"])
            return .problem(.internalError)
        }
    }

    /// The `410 Gone` a late reply gets: problem+json with the stored response's id, the limit and the
    /// reply's age.
    static func response(for expired: ReplyExpired) -> HTTPResponse {
        storedReplyProblem(
            expired.answer, replayed: expired.replayed, status: 410, type: "reply-expired", title: "Reply expired",
            detail: expired.answer.body.objectValue?["expiresAt"] != nil
                ? "The notification it answers expired before the reply arrived: it was stored as expired and did not act."
                : "The reply is older than its category's or rule's age limit: it was stored as expired and did not act.",
            members: ["id", "ruleId", "maxReplyAgeSeconds", "ageSeconds", "notificationId", "expiresAt"])
    }

    /// The `403 Forbidden` an unverified reply gets: problem+json with the stored response's id, its rule and
    /// what its signature proved (`signature`: `null` when absent, else `{"status": "invalid", …}`).
    static func response(for unverified: ReplyUnverified) -> HTTPResponse {
        storedReplyProblem(
            unverified.answer, replayed: unverified.replayed, status: 403, type: "reply-signature-required",
            title: "Reply signature required",
            detail: "Replies here act only when signed by the device's registered key (ActionHook-Reply-Signature); "
                + "this one's signature was absent or invalid: it was stored as unverified and did not act.",
            members: ["id", "ruleId", "notificationId"], signature: true)
    }

    /// The problem a reply that was stored but did not act gets, first and on every replay: `members` of its
    /// stored answer (and its `signature`, `null` when absent, with `signature`).
    private static func storedReplyProblem(
        _ answer: StoredAnswer, replayed: Bool, status: Int, type: String, title: String, detail: String,
        members: [String], signature: Bool = false
    ) -> HTTPResponse {
        let stored = answer.body.objectValue ?? JSONObject()
        var problem: JSONObject = [
            "type": .string("https://actionhook.dev/problems/" + type), "title": .string(title),
            "status": .integer(status), "detail": .string(detail),
        ]
        for member in members {
            if let value = stored[member] { problem[member] = value }
        }
        if signature { problem["signature"] = stored["signature"] ?? .null }
        var headers: HTTPHeaders = ["Content-Type": "application/problem+json"]
        if replayed { headers.set("Idempotent-Replayed", "true") }
        return HTTPResponse(status: status, headers: headers, body: JSONValue.object(problem).jsonBytes)
    }

    func headers(for error: StoreError) -> HTTPHeaders {
        switch error {
        case .appDeleted: return APIError.unauthorized.headers
        case .appBeingDeleted, .unavailable: return ["Retry-After": "1"]
        default: return HTTPHeaders()
        }
    }

    func problem(for error: StoreError) -> ProblemDetails {
        switch error {
        case .notFound:
            return .notFound("No object exists with this id.")
        case .alreadyExists:
            return ProblemDetails(status: 409, title: "Conflict", detail: "An object with this id already exists.")
        case .versionMismatch:
            return ProblemDetails(
                status: 412, title: "Precondition Failed",
                detail: "If-Match does not name the current version; read it again.")
        case .wrongState(let detail):
            return ProblemDetails(status: 409, title: "Conflict", detail: detail)
        case .idempotencyKeyInFlight:
            return ProblemDetails(
                status: 409, title: "Conflict",
                detail: "A request with this idempotency key is still being processed; retry shortly.")
        case .idempotencyKeyReused:
            return ProblemDetails(
                status: 422, title: "Idempotency Key Reused",
                detail: "This idempotency key was already used with a different body.")
        case .appDeleted:
            return APIError.unauthorized.problem
        case .appBeingDeleted:
            return .unavailable("The app is being changed; retry the request.")
        case .unavailable:
            return .unavailable("The database is unavailable; retry with the same idempotency key.")
        }
    }
}
