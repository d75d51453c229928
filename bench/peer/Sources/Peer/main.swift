// The peer: ActionHook's ingest endpoint as a Swift developer would usually write it, with
// Hummingbird 2 and PostgresNIO. `POST /v1/responses` checks the bearer key, decodes the body with
// Codable, and stores the response row (plus its webhook follow-up when ActionHook's matching rule
// would create one) in one transaction in ActionHook's own schema, then answers 202 with JSON.
//
// Environment: PEER_PORT (8091), PEER_DB_HOST (127.0.0.1), PEER_DB_PORT (5432), PEER_DB_USER (postgres),
// PEER_DB_NAME (actionhook), PEER_POOL_SIZE (64), PEER_APP_ID (bench), PEER_INGEST_KEY (required).
import Crypto
import Foundation
import HTTPTypes
import Hummingbird
import Logging
import PostgresNIO

// MARK: - JSON

/// Any JSON value: `userInfo` is free-form.
enum JSON: Codable, Sendable, Equatable {
    case null
    case bool(Bool)
    case number(Double)
    case string(String)
    case array([JSON])
    case object([String: JSON])

    init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSON].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSON].self))
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .null: try container.encodeNil()
        case .bool(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .string(let value): try container.encode(value)
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    subscript(key: String) -> JSON? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    /// The value as text, for a subject: strings as they are, whole numbers without a fraction.
    var text: String? {
        switch self {
        case .string(let value): value
        case .number(let value) where value == value.rounded() && abs(value) < 1e15: String(Int64(value))
        case .number(let value): String(value)
        case .bool(let value): String(value)
        default: nil
        }
    }
}

/// Stored as `jsonb` through PostgresNIO's Codable support.
extension JSON: PostgresEncodable {}

// MARK: - The API

struct IngestRequest: Decodable {
    var actionIdentifier: String
    var categoryIdentifier: String?
    var notificationIdentifier: String?
    var userText: String?
    var userInfo: JSON?
    var deviceToken: String?
    var responseId: String?
    var respondedAt: String?
}

struct FollowUpAnswer: Codable {
    var id: UUID
    var channel: String
    var dueAt: String
}

struct IngestAnswer: ResponseEncodable, PostgresEncodable {
    var id: UUID
    var outcome: String
    var ruleId: String?
    var subject: String?
    var followUps: [FollowUpAnswer]
}

/// The webhook follow-up's stored payload, as ActionHook renders it for the bench rule.
struct WebhookPayload: Encodable, PostgresEncodable {
    struct Body: Encodable {
        var event: String
        var eventId: JSON?
        var deviceToken: String?
        var responseId: UUID
    }
    var url: String?
    var body: Body
}

// MARK: - Configuration

let environment = ProcessInfo.processInfo.environment
let port = Int(environment["PEER_PORT"] ?? "") ?? 8091
let appID = environment["PEER_APP_ID"] ?? "bench"
guard let ingestKey = environment["PEER_INGEST_KEY"], !ingestKey.isEmpty else {
    fatalError("PEER_INGEST_KEY is required")
}
let expectedAuthorization = "Bearer \(ingestKey)"

var logger = Logger(label: "peer")
logger.logLevel = .warning

var database = PostgresClient.Configuration(
    host: environment["PEER_DB_HOST"] ?? "127.0.0.1",
    port: Int(environment["PEER_DB_PORT"] ?? "") ?? 5432,
    username: environment["PEER_DB_USER"] ?? "postgres",
    password: nil,
    database: environment["PEER_DB_NAME"] ?? "actionhook",
    tls: .disable)
database.options.maximumConnections = Int(environment["PEER_POOL_SIZE"] ?? "") ?? 64
let postgres = PostgresClient(configuration: database, backgroundLogger: logger)

// MARK: - The endpoint

let idempotencyKeyField = HTTPField.Name("Idempotency-Key")!
let timestampStyle = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

let router = Router()
router.post("/v1/responses") { request, context -> EditedResponse<IngestAnswer> in
    guard request.headers[.authorization] == expectedAuthorization else { throw HTTPError(.unauthorized) }
    let bytes = Data((try await request.body.collect(upTo: 16 * 1024)).readableBytesView)
    let body: IngestRequest
    do { body = try JSONDecoder().decode(IngestRequest.self, from: bytes) } catch {
        throw HTTPError(.badRequest, message: "The body is not a valid response.")
    }
    guard (1...256).contains(body.actionIdentifier.count) else {
        throw HTTPError(.unprocessableContent, message: "actionIdentifier must be 1 to 256 characters")
    }
    let respondedAt = try body.respondedAt.map { text in
        do { return try timestampStyle.parse(text) } catch {
            throw HTTPError(.unprocessableContent, message: "respondedAt must be an RFC 3339 date-time")
        }
    }
    let idempotencyKey = request.headers[idempotencyKeyField] ?? body.responseId ?? UUID().uuidString
    let requestHash = Data(SHA256.hash(data: bytes))
    let userInfo = body.userInfo ?? .object([:])
    let category = body.categoryIdentifier ?? userInfo["aps"]?["category"]?.text

    // The one rule the benchmark's requests match: accepting an invitation, with a webhook to the app.
    let accepted = category == "event-invite" && body.actionIdentifier == "accept"
    let subject = category == "event-invite" ? userInfo["eventId"]?.text : nil
    let now = Date()
    let responseID = UUID.timeOrdered(now)
    var answer = IngestAnswer(
        id: responseID, outcome: accepted ? "accepted" : "unmatched", ruleId: accepted ? "invite-accept" : nil,
        subject: subject, followUps: [])
    var followUp: (id: UUID, payload: WebhookPayload)?
    if accepted {
        let id = UUID()
        followUp = (
            id,
            WebhookPayload(
                url: nil,
                body: .init(
                    event: "invite.accepted", eventId: userInfo["eventId"], deviceToken: body.deviceToken,
                    responseId: responseID))
        )
        answer.followUps.append(FollowUpAnswer(id: id, channel: "webhook", dueAt: now.formatted(timestampStyle)))
    }

    do {
        try await postgres.withTransaction(logger: context.logger) { connection in
            try await connection.query(
                """
                INSERT INTO responses (app_id, id, idempotency_key, request_hash, action_identifier, category_identifier,
                    notification_identifier, user_text, user_info, device_token, client_response_id, responded_at,
                    outcome, rule_id, subject, answer)
                VALUES (\(appID), \(responseID), \(idempotencyKey), \(requestHash), \(body.actionIdentifier),
                    \(category), \(body.notificationIdentifier), \(body.userText), \(userInfo), \(body.deviceToken),
                    \(body.responseId), \(respondedAt), \(answer.outcome), \(answer.ruleId), \(subject), \(answer))
                """,
                logger: context.logger)
            // The key has a table of its own, partitioned by when it was stored as ActionHook's is (the
            // benchmark's keys never repeat, so this peer does not look for them first).
            try await connection.query(
                """
                INSERT INTO idempotency_keys (app_id, key, response_id, request_hash)
                VALUES (\(appID), \(idempotencyKey), \(responseID), \(requestHash))
                """,
                logger: context.logger)
            if let followUp {
                try await connection.query(
                    """
                    INSERT INTO followups (app_id, id, response_id, ordinal, channel, notification_identifier, payload,
                        due_at)
                    VALUES (\(appID), \(followUp.id), \(responseID), 0, 'webhook', \(body.notificationIdentifier),
                        \(followUp.payload), now())
                    """,
                    logger: context.logger)
            }
        }
    } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {
        throw HTTPError(.conflict, message: "this Idempotency-Key was used before")
    } catch {
        context.logger.error("ingest failed", metadata: ["error": "\(String(reflecting: error))"])
        throw HTTPError(.serviceUnavailable)
    }
    return EditedResponse(status: .accepted, response: answer)
}

let app = Application(
    router: router,
    configuration: .init(address: .hostname("127.0.0.1", port: port), serverName: "peer"),
    services: [postgres],
    logger: logger)
try await app.runService()

extension UUID {
    /// A version 7 UUID for `date` (its Unix milliseconds in the first 48 bits), as ActionHook makes ids:
    /// responses are partitioned by them.
    static func timeOrdered(_ date: Date) -> UUID {
        let milliseconds = UInt64(max(0, (date.timeIntervalSince1970 * 1000).rounded(.down)))
        var bytes = UUID().uuid
        withUnsafeMutableBytes(of: &bytes) { raw in
            for index in 0..<6 { raw[index] = UInt8(truncatingIfNeeded: milliseconds >> (8 * (5 - index))) }
            raw[6] = (raw[6] & 0x0F) | 0x70
        }
        return UUID(uuid: bytes)
    }
}
