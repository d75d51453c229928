import ActionHookKit
import Foundation
import Testing

@Suite("Events: what every case answers, and the switch apps are told to write")
struct EventTests {
    static let problem = Problem(type: "about:blank", title: "Refused", detail: nil)

    static let events: [(ActionHookEvent, responseId: String?, endsReply: Bool)] = [
        (.delivered(responseId: "r1", status: 202), "r1", true),
        (.refused(responseId: "r2", status: 422, problem: problem), "r2", true),
        (.dropped(responseId: "r3", reason: .queueFull), "r3", true),
        (.dropped(responseId: "r4", reason: .pastDeadline(Date(timeIntervalSince1970: 0))), "r4", true),
        (.retrying(responseId: "r5", attempt: 2, status: nil, delay: 1), "r5", false),
        (.notQueued(responseId: "r6"), "r6", false),
        (.paused(status: 401, problem: problem), nil, false),
        (.damaged(file: "7.json"), nil, false),
    ]

    @Test("responseId and endsReply answer for every case, without a switch")
    func accessors() {
        for (event, responseId, endsReply) in Self.events {
            #expect(event.responseId == responseId, "\(event)")
            #expect(event.endsReply == endsReply, "\(event)")
        }
    }

    /// The switch the README shows: with `@unknown default:`, a case added in a minor version is a warning
    /// in the app, not an error (this file compiles with every case handled and no warning).
    @Test("the documented switch, @unknown default included, handles every event")
    func documentedSwitch() {
        func describe(_ event: ActionHookEvent) -> String {
            switch event {
            case .delivered(let id, _): "stored \(id)"
            case .refused(let id, let status, _): "refused \(id) \(status)"
            case .dropped(let id, let reason):
                switch reason {
                case .queueFull, .queuedTooLong: "dropped \(id): queue"
                case .expired, .pastDeadline: "dropped \(id): late"
                @unknown default: "dropped \(id)"
                }
            case .retrying(let id, let attempt, _, _): "retrying \(id) #\(attempt)"
            case .notQueued(let id): "not queued \(id)"
            case .paused: "paused"
            case .damaged(let file): "damaged \(file)"
            @unknown default: "other"
            }
        }
        #expect(Self.events.map { describe($0.0) } == [
            "stored r1", "refused r2 422", "dropped r3: queue", "dropped r4: late", "retrying r5 #2", "not queued r6",
            "paused", "damaged 7.json",
        ])
    }
}
