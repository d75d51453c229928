import ActionHookCLI
import ActionHookCore
import ActionHookServer
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

/// What the command line prints comes from a server or a webhook sender; ids it sends go into URL paths.
/// Neither may be used to reach the terminal with escape sequences or another route with a crafted id.
@Suite("The command line's terminal and paths")
struct TerminalSafetyTests {
    @Test(
        "admin paths percent-encode each segment",
        arguments: [
            (["apps", "plain-app_1.x~"], "/v1/apps/plain-app_1.x~"),
            (["apps", "a/b", "config"], "/v1/apps/a%2Fb/config"),
            (["apps", "..", "keys"], "/v1/apps/%2E%2E/keys"),
            (["apps", "x?y#z", "keys", "k 1"], "/v1/apps/x%3Fy%23z/keys/k%201"),
            (["apps", "é%"], "/v1/apps/%C3%A9%25"),
        ])
    func pathSegments(segments: [String], expected: String) {
        let path: String
        switch segments.count {
        case 2: path = AdminClient.path(segments[0], segments[1])
        case 3: path = AdminClient.path(segments[0], segments[1], segments[2])
        default: path = AdminClient.path(segments[0], segments[1], segments[2], segments[3])
        }
        #expect(path == expected)
    }

    @Test("an app name with escape sequences is listed with them written out")
    func hostileAppName() throws {
        let api = try TestAPI()
        let client = ApplyCommandTests.client(api)
        let name = "evil\u{1B}]0;owned\u{07}\u{1B}[2J\u{9B}31mname"
        let created = try api.admin(
            "POST", "/v1/apps", json: #"{"id": "evil", "name": "evil\u001b]0;owned\u0007\u001b[2J\u009b31mname"}"#)
        try #require(created.status == 201, "\(created.text)")
        let listed = ApplyCommandTests.Output()
        try AdminCommands.listApps(client: client, terminal: listed.terminal)
        #expect(!listed.out.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 || $0.value == 0x9B })
        #expect(listed.out == "evil\t" + TerminalText.escaped(name) + "\n")
        #expect(listed.out.contains("\\x1b]0;owned\\x07\\x1b[2J\\u009b31mname"))

        // An id that is not a single segment reaches no other route: it is one (unknown) app.
        let keys = ApplyCommandTests.Output()
        #expect(throws: CLIError.self) {
            try AdminCommands.createKey(appID: "evil/../evil", client: client, terminal: keys.terminal)
        }
        #expect(try api.count("SELECT count(*) AS n FROM api_keys WHERE app_id = 'evil'") == 1)
    }

    @Test("the inbox writes out control characters of headers and bodies, signed or not")
    func inboxReport() {
        let delivery = WebhookInbox.Delivery(
            path: "/hook\u{1B}[1A", id: "msg_\u{1B}]0;title\u{07}", timestamp: "1\r2",
            failure: .mismatch, body: Array("plain \u{1B}[31mred\u{1B}[0m\nsecond line".utf8))
        let report = delivery.report
        #expect(!report.unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 || $0.value == 0x0D })
        #expect(report.contains("msg_\\x1b]0;title\\x07"))
        #expect(report.contains("plain \\x1b[31mred\\x1b[0m\nsecond line"))
    }
}
