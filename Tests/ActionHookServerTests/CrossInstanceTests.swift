import Foundation
import ServiceTestSupport
import TestSupport
import Testing

@testable import ActionHookServer

@Suite("Two instances over one database")
struct CrossInstanceTests {
    @Test("only an instance with a delivery worker listens for new follow-ups: one without is not woken by each write")
    func followUpNoticesOnlyWithAWorker() throws {
        let api = try TestAPI()
        let delivering = TestService.make(database: api.database, migrate: false) { $0.workerEnabled = true }
        #expect(!api.service.configuration.workerEnabled)
        #expect(
            Set(api.service.listenedChannels) == [
                "actionhook_invalidate", "actionhook_app_deleted", "actionhook_device_keys",
            ])
        #expect(
            Set(delivering.listenedChannels) == [
                "actionhook_invalidate", "actionhook_app_deleted", "actionhook_device_keys", "actionhook_followups",
            ])
    }

    @Test("a key revoked and a rule added through one instance take effect on the other at once")
    func changesReachEveryInstance() throws {
        let api = try TestAPI()
        let other = TestService.make(database: api.database, migrate: false)
        try other.start()
        defer { other.stop() }
        let key = try api.createApp("shared-app")
        func ingestOnOther(_ body: String) throws -> TestResponse {
            try HTTPTestClient(port: other.port).request(
                "POST", "/v1/responses", headers: [("Authorization", "Bearer \(key)")], json: body)
        }

        // The other instance caches the key and the (empty) rule set.
        let first = try ingestOnOther(
            #"{"actionIdentifier":"MARK_DONE","userInfo":{"aps":{"category":"TODO_CATEGORY"}}}"#)
        #expect(first.status == 202)
        #expect(first.json["outcome"] as? String == "unmatched")

        let rule = try api.admin(
            "POST", "/v1/apps/shared-app/rules",
            json:
                #"{"id":"done","match":{"category":"TODO_CATEGORY","action":"MARK_DONE"},"handler":{"type":"record"}}"#)
        #expect(rule.status == 201)
        #expect(
            try eventually(within: 2) {
                try ingestOnOther(#"{"actionIdentifier":"MARK_DONE","userInfo":{"aps":{"category":"TODO_CATEGORY"}}}"#)
                    .json["outcome"] as? String == "recorded"
            })

        let keys = try api.query("SELECT id FROM api_keys WHERE app_id = 'shared-app'")
        let keyID = try #require(try keys.first?.decode("id", as: UUID.self))
        #expect(try api.admin("DELETE", "/v1/apps/shared-app/keys/\(keyID.uuidString.lowercased())").status == 204)
        #expect(try eventually(within: 2) { try ingestOnOther(#"{"actionIdentifier":"x"}"#).status == 401 })
    }
}
