import Basics
import Foundation

/// What an outbox row is: the producer and purpose of a follow-up.
public enum FollowUpKind: String, Sendable, Equatable, CaseIterable {
    /// A rule's follow-up.
    case rule
    /// A snoozed notification sent again.
    case snooze
    /// A send's push to one of its devices.
    case push
    /// A follow-up of a no-reply step (fenced: cancelled at claim when its notification was answered).
    case step
    /// `notification.expired` (fenced like a step).
    case expiry
    /// A push that replaces an answered notification on another device.
    case replace
    /// `notification.answered`.
    case answered

    /// Whether a claim must find its notification unanswered to send it.
    public var isFencedBySilence: Bool { self == .step || self == .expiry }
}

/// The rows a send writes, planned before writing: the notification, one push per device, and the
/// follow-ups of its no-reply steps and expiry, each with its id and due time. Pure.
public struct SendPlan: Sendable {
    /// One outbox row.
    public struct Row: Sendable, Equatable {
        /// The follow-up's id (the `apns-id` / `webhook-id`).
        public var id: UUID
        /// What it is.
        public var kind: FollowUpKind
        /// A push's device position; a step row's position among its step's rows.
        public var ordinal: Int
        /// The no-reply step it belongs to.
        public var step: Int?
        /// Webhook or APNs.
        public var channel: FollowUpChannel
        /// What to deliver, as the delivery worker reads it.
        public var payload: JSONValue
        /// When.
        public var dueAt: Date
        /// The device it goes to (pushes).
        public var deviceToken: String?
        /// For a reminder, the position in ``SendPlan/rows`` of the push it sends again (same payload,
        /// same device): the store writes the push's payload once and copies it.
        public var repeats: Int?
    }

    /// The notification's id.
    public var notificationID: UUID
    /// Its `apns-collapse-id`.
    public var collapseId: String
    /// When replies stop counting.
    public var expiresAt: Date
    /// Every device with a key: the send's own, then those escalations add.
    public var devices: [SendDevice]
    /// Each device's push (the escalation's for the devices escalations add).
    public var deviceFollowUps: [UUID]
    /// Each step's due time.
    public var stepDueTimes: [Date]
    /// Each step's `afterSeconds`.
    public var stepAfterSeconds: [Int]
    /// The rows to write.
    public var rows: [Row]
    /// When it was sent (the database's clock).
    public var createdAt: Date

    /// Plans `request` sent at `now` (the database's clock) to `devices`.
    public init(_ request: SendRequest, devices: [SendDevice], id: UUID, now: Date, limits: SendLimits = SendLimits()) {
        notificationID = id
        let expiresAt = request.expiry(now: now, limits: limits)
        self.expiresAt = expiresAt
        collapseId = request.collapseId ?? id.lowercasedString
        let everyDevice = devices + request.escalationDevices
        self.devices = everyDevice
        sentDeviceCount = devices.count
        let pushes = Pushes(
            request: request, devices: everyDevice, id: id, expiresAt: expiresAt, collapseId: collapseId)
        var rows = Rows(now: now, escalated: devices.count)
        // The send's own pushes, its first rows in device order; a reminder sends each again as it is.
        let own = devices.indices.map { pushes.push($0, aps: request.aps) }
        for position in devices.indices {
            rows.deviceFollowUps.append(
                rows.add(
                    .push, ordinal: position, step: nil, .apns, own[position], dueAt: now,
                    token: devices[position].deviceToken))
        }
        let summary = Self.summary(request, id: id, sentAt: now, expiresAt: expiresAt)
        for (index, step) in request.onNoReply.enumerated() {
            rows.add(step, index, own: own, devices: devices, pushes: pushes, request: request, summary: summary)
        }
        if request.events.contains("expired") {
            let event: JSONValue = .object([
                "type": .string("notification.expired"), "timestamp": .string(Timestamp.format(expiresAt)),
                "data": .object(["notification": summary]),
            ])
            rows.add(
                .expiry, ordinal: 0, step: nil, .webhook, .object(["url": .null, "body": event]), dueAt: expiresAt,
                token: nil)
        }
        self.rows = rows.rows
        deviceFollowUps = rows.deviceFollowUps
        stepDueTimes = request.onNoReply.map { now.addingTimeInterval(TimeInterval($0.afterSeconds)) }
        stepAfterSeconds = request.onNoReply.map(\.afterSeconds)
        createdAt = now
    }

    /// Each device's push: its APNs request (token, push type, priority, expiration, collapse id, its own
    /// environment for a registered device) around the payload with ActionHook's key for its position.
    private struct Pushes {
        let request: SendRequest
        let devices: [SendDevice]
        let id: UUID
        let expiresAt: Date
        let collapseId: String

        func push(_ position: Int, aps: JSONObject) -> JSONValue {
            let device = devices[position]
            let key = NotificationKey(
                notificationID: id, device: position, recipient: device.recipient, expiresAt: expiresAt)
            var object: JSONObject = [
                "deviceToken": .string(device.deviceToken), "pushType": .string(request.pushType),
            ]
            if let priority = request.priority { object["priority"] = .integer(priority) }
            object["expiration"] = .integer(Int(expiresAt.timeIntervalSince1970.rounded(.up)))
            object["collapseId"] = .string(collapseId)
            // A registered device is pushed in its own APNs environment.
            if let environment = device.environment { object["environment"] = .string(environment) }
            object["payload"] = request.apnsPayload(aps: aps, key: key)
            return .object(object)
        }
    }

    /// The rows as they are planned, and the follow-up of each device's push.
    private struct Rows {
        let now: Date
        /// The position of the next device an escalation adds.
        var escalated: Int
        var rows: [Row] = []
        var deviceFollowUps: [UUID] = []

        @discardableResult
        mutating func add(
            _ kind: FollowUpKind, ordinal: Int, step: Int?, _ channel: FollowUpChannel, _ payload: JSONValue,
            dueAt: Date, token: String?, repeats: Int? = nil
        ) -> UUID {
            let row = Row(
                id: UUID.timeOrdered(at: now), kind: kind, ordinal: ordinal, step: step, channel: channel,
                payload: payload, dueAt: dueAt, deviceToken: token, repeats: repeats)
            rows.append(row)
            return row.id
        }

        /// A no-reply step's rows, numbered in the step from 0.
        mutating func add(
            _ step: NoReplyStep, _ index: Int, own: [JSONValue], devices: [SendDevice], pushes: Pushes,
            request: SendRequest, summary: JSONValue
        ) {
            let due = now.addingTimeInterval(TimeInterval(step.afterSeconds))
            var ordinal = 0
            func stepRow(_ channel: FollowUpChannel, _ payload: JSONValue, token: String?, repeats: Int? = nil) -> UUID
            {
                defer { ordinal += 1 }
                return add(
                    .step, ordinal: ordinal, step: index, channel, payload, dueAt: due, token: token, repeats: repeats)
            }
            for action in step.actions {
                switch action {
                case .remind:
                    for position in devices.indices {
                        _ = stepRow(.apns, own[position], token: devices[position].deviceToken, repeats: position)
                    }
                case .webhook(let url, let body):
                    // The service owns the envelope: the caller's body is data inside the event, so a send's key
                    // cannot have any JSON of its choosing signed with the app's webhook secret.
                    var data: JSONObject = [
                        "notification": summary, "step": .integer(index), "afterSeconds": .integer(step.afterSeconds),
                    ]
                    if let body { data["body"] = body }
                    let event: JSONValue = .object([
                        "type": .string("notification.unanswered"), "timestamp": .string(Timestamp.format(due)),
                        "data": .object(data),
                    ])
                    _ = stepRow(
                        .webhook, .object(["url": url.map(JSONValue.string) ?? .null, "body": event]), token: nil)
                case .escalate(let targets, let aps):
                    for _ in targets {
                        let push = pushes.push(escalated, aps: aps ?? request.aps)
                        deviceFollowUps.append(stepRow(.apns, push, token: pushes.devices[escalated].deviceToken))
                        escalated += 1
                    }
                }
            }
        }
    }

    /// The answer, as stored and replayed.
    public var answer: JSONValue {
        .object([
            "id": .string(notificationID.lowercasedString), "status": .string("pending"),
            "createdAt": .string(Timestamp.format(createdAt)), "expiresAt": .string(Timestamp.format(expiresAt)),
            "collapseId": .string(collapseId), "devices": devicesJSON, "steps": stepsJSON,
        ])
    }

    /// When the first no-reply step comes due, if there is one.
    public var silenceAt: Date? { stepDueTimes.first }

    /// How many of ``devices`` the send named itself (the rest are added by escalations).
    public var sentDeviceCount: Int

    /// The steps as stored and answered: `[{"afterSeconds", "dueAt"}]`, in order.
    public var stepsJSON: JSONValue {
        .array(
            stepDueTimes.indices.map {
                .object([
                    "afterSeconds": .integer(stepAfterSeconds[$0]),
                    "dueAt": .string(Timestamp.format(stepDueTimes[$0])),
                ])
            })
    }

    /// The device list as stored and answered: `[{"deviceToken", "recipient", "followUpId", "escalation"}]`,
    /// by position, with `user` and `environment` for a registered device reached through its user.
    public var devicesJSON: JSONValue {
        .array(
            devices.indices.map { position -> JSONValue in
                var device: JSONObject = [
                    "deviceToken": .string(devices[position].deviceToken),
                    "recipient": devices[position].recipient.map(JSONValue.string) ?? .null,
                    "followUpId": .string(deviceFollowUps[position].lowercasedString),
                    "escalation": .bool(position >= sentDeviceCount),
                ]
                if let user = devices[position].user { device["user"] = .string(user) }
                if let environment = devices[position].environment { device["environment"] = .string(environment) }
                return .object(device)
            })
    }

    /// The notification as webhook events describe it.
    static func summary(_ request: SendRequest, id: UUID, sentAt: Date, expiresAt: Date) -> JSONValue {
        .object([
            "id": .string(id.lowercasedString), "category": request.category.map(JSONValue.string) ?? .null,
            "subject": request.subject.map(JSONValue.string) ?? .null,
            "sentAt": .string(Timestamp.format(sentAt)), "expiresAt": .string(Timestamp.format(expiresAt)),
        ])
    }
}

/// A sent notification as a reply bound to it finds it, read under its row lock in the reply's
/// transaction.
public struct BoundNotification: Sendable, Equatable {
    /// The notification's id.
    public var id: UUID
    /// How many replies act.
    public var answers: AnswerPolicy
    /// When replies stop counting.
    public var expiresAt: Date?
    /// Whether a reply answered it before (committed, or earlier in the same batch).
    public var answered: Bool
    /// Its collapse id.
    public var collapseId: String
    /// Its category and subject.
    public var category: String?
    /// What it is about.
    public var subject: String?
    /// When it was sent.
    public var createdAt: Date
    /// Webhook events asked for (`answered`, `expired`).
    public var events: [String]
    /// The replacing push's `aps`, when the send asked for one.
    public var replacement: JSONObject?
    /// The replying device's position and recipient (`nil` when the position is not one of the send's).
    public var device: Int?
    /// The replying device's recipient label.
    public var recipient: String?
    /// The user the send reached the replying device as (a `to` user), nil for a device named by token.
    public var deviceUser: String?
    /// The devices the send named itself (read only when a replacement is asked for): an answer replaces
    /// the notification on these; devices an escalation added are left alone, since they may never have
    /// been sent anything.
    public var devices: [SendDevice]
    /// The push this device was sent (the APNs follow-up's payload: token, push type, `payload`, collapse
    /// id), read only for a snooze, which re-delivers exactly it; nil for a device not of the send.
    public var push: JSONObject?
    /// Whether its replies act only when signed by their device's key (its category's `requireSignedReplies`,
    /// or the send's own).
    public var signedReplies = false

    /// Creates a bound notification.
    public init(
        id: UUID, answers: AnswerPolicy, expiresAt: Date?, answered: Bool, collapseId: String, category: String?,
        subject: String?, createdAt: Date, events: [String], replacement: JSONObject?, device: Int?,
        recipient: String?, devices: [SendDevice], push: JSONObject? = nil, deviceUser: String? = nil
    ) {
        self.push = push
        self.deviceUser = deviceUser
        self.id = id
        self.answers = answers
        self.expiresAt = expiresAt
        self.answered = answered
        self.collapseId = collapseId
        self.category = category
        self.subject = subject
        self.createdAt = createdAt
        self.events = events
        self.replacement = replacement
        self.device = device
        self.recipient = recipient
        self.devices = devices
    }

    /// The follow-ups the answer that wins adds: a replacing push to every other device of the send, with
    /// the notification's collapse id, and `notification.answered` when asked for.
    func answerFollowUps(_ response: NotificationResponse, view: StoredResponseView) -> [PlannedFollowUp] {
        var planned: [PlannedFollowUp] = []
        if let replacement {
            // Rendered with the answering reply: "Answered by {{recipient}}" names who answered.
            var context = TemplateContext(response: response, responseID: view.id, subject: view.subject)
            context.notificationID = id
            context.recipient = recipient
            let aps = Template.render(.object(replacement), context: context)
            for (position, device) in devices.enumerated()
            where position != self.device && device.deviceToken != response.deviceToken {
                var push: JSONObject = [
                    "deviceToken": .string(device.deviceToken), "pushType": .string("alert"),
                    "collapseId": .string(collapseId),
                    "expiration": .integer(Int((expiresAt ?? view.receivedAt).timeIntervalSince1970.rounded(.up))),
                    "payload": .object(["aps": aps]),
                ]
                // In the device's own environment, as the notification itself went.
                if let environment = device.environment { push["environment"] = .string(environment) }
                planned.append(
                    PlannedFollowUp(
                        ordinal: -100 - position, channel: .apns, delaySeconds: 0, payload: .object(push),
                        kind: .replace))
            }
        }
        if events.contains("answered") {
            var responseJSON = view.json.objectValue ?? JSONObject()
            responseJSON["recipient"] = recipient.map(JSONValue.string) ?? .null
            planned.append(
                PlannedFollowUp(
                    ordinal: -2, channel: .webhook, delaySeconds: 0,
                    payload: .object([
                        "url": .null,
                        "body": .object([
                            "type": .string("notification.answered"),
                            "timestamp": .string(Timestamp.format(view.receivedAt)),
                            "data": .object([
                                "notification": .object([
                                    "id": .string(id.lowercasedString),
                                    "category": category.map(JSONValue.string) ?? .null,
                                    "subject": subject.map(JSONValue.string) ?? .null,
                                    "sentAt": .string(Timestamp.format(createdAt)),
                                ]),
                                "response": .object(responseJSON),
                                "latencyMs": .integer(latencyMilliseconds(at: view.receivedAt)),
                            ]),
                        ]),
                    ]), kind: .answered))
        }
        return planned
    }

    /// Milliseconds from the send to `date`.
    public func latencyMilliseconds(at date: Date) -> Int {
        max(0, Int((date.timeIntervalSince(createdAt) * 1000).rounded()))
    }
}
