import ActionHookCLI
import ActionHookCore
import ActionHookServer
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

/// `actionhook apply`, `export`, `test`, `apps` and `keys` against the real service, in-process through
/// the command's library code (and once as the built binary, for its exit code).
@Suite("Configuration as files: apply, export, test, apps, keys")
struct ApplyCommandTests {
    /// What a command wrote.
    final class Output: @unchecked Sendable {
        // Written from the command's thread only, read after it returned; the lock is for the checker.
        private let lock = NSLock()
        private var outText = ""
        private var errText = ""

        var terminal: Terminal {
            Terminal(
                out: { text in self.lock.withLock { self.outText += text } },
                err: { text in self.lock.withLock { self.errText += text } })
        }
        var out: String { lock.withLock { outText } }
        var err: String { lock.withLock { errText } }
    }

    /// A temporary directory holding files, removed with it.
    final class Folder {
        let url: URL
        init() throws {
            url = FileManager.default.temporaryDirectory.appendingPathComponent("actionhook-apply-\(UUID().uuidString)")
            try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        }
        deinit { try? FileManager.default.removeItem(at: url) }

        func write(_ name: String, _ text: String) throws -> String {
            let path = url.appendingPathComponent(name).path
            try text.write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }
    }

    static func client(_ api: TestAPI) -> AdminClient {
        AdminClient(baseURL: "http://127.0.0.1:\(api.port)", token: TestService.adminToken)
    }

    /// Rule `id` in YAML, as one list item.
    static func rule(_ id: String, priority: Int = 100, handler: String = "record") -> String {
        """
          - id: \(id)
            priority: \(priority)
            match:
              category: TODO_CATEGORY
              action: \(id)
            handler:
              type: \(handler)

        """
    }

    static func file(
        app: String = "files", rules: [String] = ["a", "b", "c", "d", "e"].map { rule($0) }, extra: String = ""
    )
        -> String
    {
        """
        app: \(app)
        name: \(app)
        \(extra)
        categories:
          - identifier: TODO_CATEGORY
            actions:
              - identifier: MARK_DONE
                title: Done
        rules:
        \(rules.joined())
        """
    }

    @discardableResult
    static func apply(
        _ api: TestAPI, _ paths: [String], prune: Bool = false, dryRun: Bool = false,
        environment: [String: String] = [:], output: Output = Output()
    ) throws -> (changed: Bool, output: Output) {
        let changed = try ConfigurationFiles.apply(
            paths: paths, options: ApplyOptions(prune: prune), dryRun: dryRun, client: client(api),
            environment: environment, terminal: output.terminal)
        return (changed, output)
    }

    static func fingerprint(_ api: TestAPI, app: String = "files") throws -> [String] {
        try api.fingerprint(app: app)
    }

    @Test("apply to an empty app creates everything; again reports no changes and writes nothing; export round-trips")
    func createNoChangeExport() throws {
        let api = try TestAPI()
        _ = try api.createApp("files")
        let folder = try Folder()
        let path = try folder.write("files.yaml", Self.file())

        let first = try Self.apply(api, [path])
        #expect(first.changed)
        #expect(first.output.out.contains("+ rule a"))
        #expect(first.output.out.contains("+ category TODO_CATEGORY"))
        #expect(first.output.out.contains("6 to create, 0 to change, 0 to delete"), "\(first.output.out)")
        #expect(try api.count("SELECT count(*) AS n FROM rules WHERE app_id = 'files'") == 5)

        let before = try Self.fingerprint(api)
        let second = try Self.apply(api, [path])
        #expect(!second.changed)
        #expect(second.output.out.contains("no changes"))
        #expect(try Self.fingerprint(api) == before)

        let exported = try ConfigurationFiles.exportText(appID: "files", client: Self.client(api))
        #expect(exported.contains("app: files"))
        let exportedPath = try folder.write("exported.yaml", exported)
        let third = try Self.apply(api, [exportedPath], prune: true)
        #expect(!third.changed, "\(third.output.out)")
        #expect(try Self.fingerprint(api) == before)
        // Exporting what was applied from the export gives the same text.
        #expect(try ConfigurationFiles.exportText(appID: "files", client: Self.client(api)) == exported)
    }

    @Test("one edited rule is one change, shown as a diff; --prune deletes what the file no longer has")
    func editAndPrune() throws {
        let api = try TestAPI()
        _ = try api.createApp("files")
        let folder = try Folder()
        try Self.apply(api, [try folder.write("files.yaml", Self.file())])

        var rules = ["a", "b", "c", "d", "e"].map { Self.rule($0) }
        rules[1] = Self.rule("b", priority: 5)
        let edited = try folder.write("files.yaml", Self.file(rules: rules))
        let dry = try Self.apply(api, [edited], dryRun: true)
        #expect(dry.changed)
        #expect(dry.output.out.contains("~ rule b"))
        #expect(dry.output.out.contains("- priority: 100"))
        #expect(dry.output.out.contains("+ priority: 5"))
        #expect(dry.output.out.contains("0 to create, 1 to change, 0 to delete"), "\(dry.output.out)")
        #expect(try api.admin("GET", "/v1/apps/files/rules/b").headers["etag"] == #""1""#)
        try Self.apply(api, [edited])
        #expect(try api.admin("GET", "/v1/apps/files/rules/b").headers["etag"] == #""2""#)
        #expect(try api.admin("GET", "/v1/apps/files/rules/a").headers["etag"] == #""1""#)

        let fewer = try folder.write("files.yaml", Self.file(rules: Array(rules.prefix(3))))
        let kept = try Self.apply(api, [fewer])
        #expect(!kept.changed)
        #expect(kept.output.out.contains("= rule d kept"))
        #expect(try api.count("SELECT count(*) AS n FROM rules WHERE app_id = 'files'") == 5)
        let pruned = try Self.apply(api, [fewer], prune: true)
        #expect(pruned.output.out.contains("- rule d"))
        #expect(pruned.output.out.contains("- rule e"))
        #expect(try api.count("SELECT count(*) AS n FROM rules WHERE app_id = 'files'") == 3)
    }

    @Test("a file with one invalid rule among five changes nothing and names the rule, the line and the reason")
    func invalidRule() throws {
        let api = try TestAPI()
        _ = try api.createApp("files")
        let folder = try Folder()
        try Self.apply(api, [try folder.write("files.yaml", Self.file())])
        let before = try Self.fingerprint(api)

        var rules = ["a", "b", "c", "d", "e"].map { Self.rule($0, priority: 50) }
        rules[2] = Self.rule("c", handler: "explode")
        let text = Self.file(rules: rules)
        let path = try folder.write("files.yaml", text)
        let line =
            try #require(
                text.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains("explode") }) + 1
        let error = try #require(throws: CLIError.self) { try Self.apply(api, [path]) }
        #expect(error.lines.count == 1, "\(error)")
        #expect(error.description.hasPrefix("\(path):\(line): rule 'c' rules/2/handler/type: must be"), "\(error)")
        #expect(try Self.fingerprint(api) == before)

        // Refused by the server only (a follow-up aimed at this machine): still mapped to the file's line.
        rules = ["a", "b", "c", "d", "e"].map { Self.rule($0, priority: 50) }
        rules[3] = """
              - id: d
                handler:
                  type: record
                followUps:
                  - channel: webhook
                    url: http://127.0.0.1:9/hook

            """
        let local = Self.file(rules: rules)
        let localPath = try folder.write("files.yaml", local)
        let urlLine =
            try #require(
                local.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains("127.0.0.1") })
            + 1
        let checked = try #require(throws: CLIError.self) { try Self.apply(api, [localPath], dryRun: true) }
        #expect(checked.description.hasPrefix("\(localPath):\(urlLine): rule 'd'"), "\(checked)")
        let refused = try #require(throws: CLIError.self) { try Self.apply(api, [localPath]) }
        #expect(
            refused.description.hasPrefix("\(localPath):\(urlLine): rule 'd' rules/3/followUps/0/url: must not target"),
            "\(refused)")
        #expect(try Self.fingerprint(api) == before)
    }

    @Test("a JSON file is accepted as well, and its problems are reported at their lines")
    func jsonFile() throws {
        let api = try TestAPI()
        _ = try api.createApp("files")
        let folder = try Folder()
        let json = """
            {
              "app": "files",
              "categories": [{"identifier": "TODO_CATEGORY", "actions": []}],
              "rules": [
                {"id": "done", "handler": {"type": "accept"}},
                {"id": "bad", "handler": {"type": "snooze", "delaySeconds": -5}}
              ]
            }
            """
        let path = try folder.write("files.json", json)
        let error = try #require(throws: CLIError.self) { try Self.apply(api, [path]) }
        #expect(error.description.hasPrefix("\(path):6: rule 'bad' rules/1/handler/delaySeconds:"), "\(error)")
        try Self.apply(api, [try folder.write("files.json", json.replacingOccurrences(of: "-5", with: "5"))])
        #expect(try api.count("SELECT count(*) AS n FROM rules WHERE app_id = 'files'") == 2)
    }

    @Test("settings the server refuses are named at their line; an unknown top-level field is refused before any call")
    func settingsErrors() throws {
        let api = try TestAPI()
        let folder = try Folder()
        let text = Self.file(app: "settings-app", extra: "webhook:\n  url: ftp://hooks.example.com/in")
        let path = try folder.write("settings.yaml", text)
        let line =
            try #require(
                text.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains("ftp:") }) + 1
        let refused = try #require(throws: CLIError.self) { try Self.apply(api, [path]) }
        #expect(refused.description.hasPrefix("\(path):\(line): webhook/url: must be"), "\(refused)")
        #expect(try api.admin("GET", "/v1/apps/settings-app").status == 404)

        let unknown = try folder.write("unknown.yaml", Self.file(app: "settings-app", extra: "colour: blue"))
        let outline = try #require(throws: CLIError.self) { try Self.apply(api, [unknown]) }
        #expect(outline.description == "\(unknown):3: colour: is not a known field")
    }

    @Test("retentionDays: set by the file, exported, changed, cleared by null; a bad value is named at its line")
    func retentionDays() throws {
        let api = try TestAPI()
        let folder = try Folder()
        func retention() throws -> Any? { try api.admin("GET", "/v1/apps/kept").json["retentionDays"] }

        let path = try folder.write("kept.yaml", Self.file(app: "kept", extra: "retentionDays: 7"))
        let created = try Self.apply(api, [path])
        #expect(created.output.out.contains("+ setting retentionDays: none → 7"), "\(created.output.out)")
        #expect(try retention() as? Int == 7)
        #expect(try Self.apply(api, [path]).output.out.contains("no changes"))

        let exported = try ConfigurationFiles.exportText(appID: "kept", client: Self.client(api))
        #expect(exported.contains("retentionDays: 7"), "\(exported)")
        let again = try Self.apply(api, [try folder.write("exported.yaml", exported)])
        #expect(!again.changed, "\(again.output.out)")

        let changed = try Self.apply(
            api, [try folder.write("kept.yaml", Self.file(app: "kept", extra: "retentionDays: 3"))])
        #expect(changed.output.out.contains("~ setting retentionDays: 7 → 3"), "\(changed.output.out)")
        #expect(try retention() as? Int == 3)

        for value in ["0", "40000", "x"] {
            let text = Self.file(app: "kept", extra: "retentionDays: \(value)")
            let bad = try folder.write("bad.yaml", text)
            let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
            let line = try #require(lines.firstIndex { $0.hasPrefix("retentionDays:") }) + 1
            let refused = try #require(throws: CLIError.self) { try Self.apply(api, [bad]) }
            #expect(refused.description.hasPrefix("\(bad):\(line): retentionDays: must be"), "\(refused)")
            #expect(try retention() as? Int == 3)
        }

        let cleared = try Self.apply(
            api, [try folder.write("kept.yaml", Self.file(app: "kept", extra: "retentionDays: null"))])
        #expect(cleared.output.out.contains("~ setting retentionDays: 3 → none"), "\(cleared.output.out)")
        #expect(try retention() is NSNull)
        #expect(!(try ConfigurationFiles.exportText(appID: "kept", client: Self.client(api))).contains("retentionDays"))
    }

    @Test("a configuration changed by another writer between read and apply is refused with 412")
    func changedSinceRead() throws {
        let api = try TestAPI()
        _ = try api.createApp("files")
        let folder = try Folder()
        let path = try folder.write("files.yaml", Self.file())
        let plan = try ApplyPlan.make(
            file: try ConfigurationFile(path: path), options: ApplyOptions(), client: Self.client(api), environment: [:]
        )
        #expect(plan.hasChanges)
        let other = try api.admin(
            "POST", "/v1/apps/files/rules", json: #"{"id":"other","handler":{"type":"record"}}"#)
        #expect(other.status == 201)
        let output = Output()
        let error = try #require(throws: CLIError.self) {
            try plan.execute(client: Self.client(api), terminal: output.terminal)
        }
        #expect(error.description.contains("changed on the server since it was read (412)"))
        #expect(try api.count("SELECT count(*) AS n FROM rules WHERE app_id = 'files'") == 1)
    }

    @Test("a secret from the environment is sent but never printed; a missing variable or a literal secret is refused")
    func secrets() throws {
        let api = try TestAPI()
        let folder = try Folder()
        let secret = "whsec_" + Data((0..<32).map { UInt8($0) }).base64EncodedString()
        let text = Self.file(
            app: "secret-app",
            extra: """
                webhook:
                  url: https://hooks.example.com/in
                  secret: ${ENV:SECRET_APP_WEBHOOK_SECRET}
                """)
        let path = try folder.write("secret.yaml", text)

        let missing = try #require(throws: CLIError.self) { try Self.apply(api, [path]) }
        #expect(missing.description.contains("the environment variable SECRET_APP_WEBHOOK_SECRET is not set"))
        #expect(try api.admin("GET", "/v1/apps/secret-app").status == 404)

        let environment = ["SECRET_APP_WEBHOOK_SECRET": secret]
        let created = try Self.apply(api, [path], environment: environment)
        #expect(created.output.out.contains("created app secret-app"))
        #expect(created.output.out.contains("webhook.secret: from the environment"))
        #expect(!created.output.out.contains(secret) && !created.output.err.contains(secret))
        let stored = try api.query("SELECT webhook_secret FROM apps WHERE id = 'secret-app'")
        #expect(try stored[0].decode("webhook_secret", as: String.self) == secret)

        let again = try Self.apply(api, [path], environment: environment)
        #expect(!again.changed)
        let exported = try ConfigurationFiles.exportText(appID: "secret-app", client: Self.client(api))
        #expect(!exported.contains(secret))

        // --write-secrets sends a rotated secret although nothing else changed.
        let rotated = "whsec_" + Data((0..<32).map { UInt8(255 - $0) }).base64EncodedString()
        let output = Output()
        let rotation = try ConfigurationFiles.apply(
            paths: [path], options: ApplyOptions(writeSecrets: true), dryRun: false, client: Self.client(api),
            environment: ["SECRET_APP_WEBHOOK_SECRET": rotated], terminal: output.terminal)
        #expect(rotation)
        #expect(output.out.contains("~ setting webhook.secret: from the environment"))
        #expect(!output.out.contains(rotated) && !output.err.contains(rotated))
        let rotatedRow = try api.query("SELECT webhook_secret FROM apps WHERE id = 'secret-app'")
        #expect(try rotatedRow[0].decode("webhook_secret", as: String.self) == rotated)

        let literal = try folder.write(
            "literal.yaml", text.replacingOccurrences(of: "${ENV:SECRET_APP_WEBHOOK_SECRET}", with: secret))
        let refused = try #require(throws: CLIError.self) { try Self.apply(api, [literal]) }
        #expect(refused.description.contains("webhook/secret: a secret is never written in the file"))
        #expect(!refused.description.contains(secret))
    }

    @Test("the binary: apply --dry-run --exit-code exits 2 with changes pending, 0 after apply; errors exit 1")
    func binaryExitCodes() throws {
        let api = try TestAPI()
        _ = try api.createApp("files")
        let folder = try Folder()
        let path = try folder.write("files.yaml", Self.file())
        let binary = try ServeProcess.binary()
        func run(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
            let process = Process()
            process.executableURL = binary
            process.arguments = arguments
            process.environment = [
                "ACTIONHOOK_URL": "http://127.0.0.1:\(api.port)", "ACTIONHOOK_ADMIN_TOKEN": TestService.adminToken,
            ]
            let out = Pipe()
            let err = Pipe()
            process.standardOutput = out
            process.standardError = err
            try process.run()
            let outData = out.fileHandleForReading.readDataToEndOfFile()
            let errData = err.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (
                process.terminationStatus, String(decoding: outData, as: UTF8.self),
                String(decoding: errData, as: UTF8.self)
            )
        }
        let pending = try run(["apply", "-f", path, "--dry-run", "--exit-code"])
        #expect(pending.status == 2, "\(pending)")
        #expect(pending.out.contains("dry run: nothing was applied"))
        #expect(try api.count("SELECT count(*) AS n FROM rules WHERE app_id = 'files'") == 0)
        #expect(try run(["apply", "-f", folder.url.path]).status == 0)
        let clean = try run(["apply", "-f", path, "--dry-run", "--exit-code"])
        #expect(clean.status == 0)
        #expect(clean.out.contains("no changes"))
        let exported = try run(["export", "files"])
        #expect(exported.status == 0)
        #expect(exported.out.contains("- id: a"))
        let bad = try run(["apply", "-f", folder.url.appendingPathComponent("missing.yaml").path])
        #expect(bad.status == 1)
        #expect(bad.err.contains("no such file or directory"))
    }

    @Test("every example applies to a new app, and its scenario's replies give the documented outcomes")
    func examples() throws {
        let api = try TestAPI()
        let examples = Repository.root.appendingPathComponent("examples")
        let scenariosPath = examples.appendingPathComponent("replies/scenarios.yaml").path
        let scenarios = try YAMLDocument(
            text: try String(contentsOfFile: scenariosPath, encoding: .utf8), name: "scenarios")
        let apps = try #require(scenarios.value.objectValue)
        #expect(apps.keys.sorted() == ["acme-calendar", "acme-timer", "acme-todo"])

        let output = Output()
        try Self.apply(api, [examples.path], output: output)
        var keys: [String: String] = [:]
        for line in output.out.split(separator: "\n") where line.hasPrefix("created app ") {
            let words = line.split(separator: " ")
            keys[String(words[2].dropLast())] = String(words.last!)
        }
        #expect(Set(keys.keys) == Set(apps.keys), "\(output.out)")
        #expect(try Self.apply(api, [examples.path]).changed == false)

        for (app, steps) in apps.members {
            let key = try #require(keys[app])
            for step in steps.arrayValue ?? [] {
                let object = try #require(step.objectValue)
                let reply = try #require(object["reply"]?.stringValue)
                let body = try String(
                    contentsOf: examples.appendingPathComponent("replies").appendingPathComponent(reply),
                    encoding: .utf8)
                let answer = try api.ingest(key: key, json: body)
                #expect(answer.status == object["status"]?.intValue, "\(reply): \(answer.text)")
                guard answer.status == 202 else { continue }
                #expect(answer.json["outcome"] as? String == object["outcome"]?.stringValue, "\(reply)")
                #expect(answer.json["ruleId"] as? String == object["rule"]?.stringValue, "\(reply)")
                let channels = (answer.json["followUps"] as? [[String: Any]] ?? []).compactMap {
                    $0["channel"] as? String
                }
                #expect(channels == (object["followUps"]?.arrayValue ?? []).compactMap(\.stringValue), "\(reply)")
            }
        }

        // `actionhook test` on the first calendar reply: the rule and its rendered follow-ups.
        let tested = Output()
        try ReplyDryRun.run(
            path: examples.appendingPathComponent("replies/calendar/1-accept.json").path, appID: "acme-calendar",
            client: Self.client(api), terminal: tested.terminal)
        #expect(tested.out.contains("matched rule: invite-accept"))
        #expect(tested.out.contains("outcome: accepted"))
        #expect(tested.out.contains("1. webhook after 0 s"))
        #expect(tested.out.contains("event: invite.accepted"))
        #expect(tested.out.contains("body: See you at Tom's place"))
    }

    @Test("send: the example to-do reminder is sent once per key, with its devices and steps; the receipt agrees")
    func sendExample() throws {
        let api = try TestAPI()
        let examples = Repository.root.appendingPathComponent("examples")
        _ = try Self.apply(api, [examples.appendingPathComponent("todo.yaml").path])
        let path = examples.appendingPathComponent("send/todo-reminder.yaml").path
        let sent = Output()
        try NotificationSend.run(
            path: path, appID: "acme-todo", idempotencyKey: "todo-1729", client: Self.client(api),
            terminal: sent.terminal)
        #expect(sent.out.hasPrefix("sent notification "), "\(sent.out)")
        #expect(sent.out.contains("devices: 3"))
        #expect(sent.out.contains("(user-23)"))
        #expect(sent.out.contains("no-reply step after 600 s"))
        #expect(sent.out.contains("no-reply step after 3600 s"))
        let id = try #require(sent.out.split(separator: "\n").first?.split(separator: " ").last.map(String.init))
        let again = Output()
        try NotificationSend.run(
            path: path, appID: "acme-todo", idempotencyKey: "todo-1729", client: Self.client(api),
            terminal: again.terminal)
        #expect(again.out.hasPrefix("already sent notification \(id)"))
        #expect(try api.count("SELECT count(*) AS n FROM followups WHERE kind = 'push'") == 2)
        // Remind (2 devices), then the webhook and the escalation; the expiry webhook.
        #expect(try api.count("SELECT count(*) AS n FROM followups WHERE kind = 'step'") == 4)
        #expect(try api.count("SELECT count(*) AS n FROM followups WHERE kind = 'expiry'") == 1)
        let receipt = try api.admin("GET", "/v1/apps/acme-todo/notifications/\(id)")
        #expect(receipt.json["status"] as? String == "pending")
        #expect((receipt.json["steps"] as? [[String: Any]])?.count == 2)

        // A refusal names the file's line.
        let folder = try Folder()
        let bad = try folder.write("bad.yaml", "to:\n  - nothex\naps:\n  alert: hi\n")
        #expect(throws: CLIError.self) {
            try NotificationSend.run(
                path: bad, appID: "acme-todo", idempotencyKey: nil, client: Self.client(api),
                terminal: Output().terminal)
        }
    }

    @Test("apps create and list; keys create and revoke")
    func appsAndKeys() throws {
        let api = try TestAPI()
        let client = Self.client(api)
        let created = Output()
        try AdminCommands.createApp(id: "cli-app", name: "CLI App", client: client, terminal: created.terminal)
        #expect(created.out.contains("created app cli-app"))
        let secret = try #require(
            created.out.split(separator: "\n").first { $0.hasPrefix("ingest key secret") }?.split(separator: " ").last)
        #expect(try api.ingest(key: String(secret), json: #"{"actionIdentifier":"x"}"#).status == 202)
        #expect(throws: CLIError.self) {
            try AdminCommands.createApp(id: "cli-app", name: nil, client: client, terminal: created.terminal)
        }

        let listed = Output()
        try AdminCommands.listApps(client: client, terminal: listed.terminal)
        #expect(listed.out == "cli-app\tCLI App\n")

        let key = Output()
        try AdminCommands.createKey(appID: "cli-app", client: client, terminal: key.terminal)
        let keyID = try #require(key.out.split(separator: "\n").first?.split(separator: " ").last.map(String.init))
        let keySecret = try #require(key.out.split(separator: "\n").last?.split(separator: " ").last.map(String.init))
        #expect(try api.ingest(key: keySecret, json: #"{"actionIdentifier":"x"}"#).status == 202)
        try AdminCommands.revokeKey(appID: "cli-app", keyID: keyID, client: client, terminal: key.terminal)
        #expect(try api.ingest(key: keySecret, json: #"{"actionIdentifier":"x"}"#).status == 401)
        #expect(throws: CLIError.self) {
            try AdminCommands.revokeKey(appID: "cli-app", keyID: keyID, client: client, terminal: key.terminal)
        }
    }
}

/// The YAML reading and writing under `apply` and `export`, without a service.
@Suite("Configuration files: YAML values and lines")
struct ConfigurationYAMLTests {
    @Test("strings YAML would read as another type are quoted, so written values read back the same")
    func writerRoundTrip() throws {
        let value = JSONValue.object([
            "strings": .array(
                [
                    "true", "no", "42", "1.5", "", "null", "~", "2026-11-20", "{{userText}}", "a: b", "- x", "#x",
                    "multi\nline",
                ]
                .map(JSONValue.string)),
            "numbers": .array([.integer(0), .integer(-7), .number("2.5")]),
            "flags": .array([.bool(true), .bool(false)]),
            "nothing": .null,
            "empty": .object([:]),
            "none": .array([]),
        ])
        let text = try YAMLWriter.text(value)
        #expect(try YAMLDocument(text: text, name: "t").value == value, "\(text)")
    }

    @Test("each value's line is kept by JSON pointer; a pointer below a scalar finds its nearest line")
    func lines() throws {
        let document = try YAMLDocument(
            text: """
                app: x
                rules:
                  - id: a
                    handler:
                      type: accept
                  - id: b
                """, name: "f")
        #expect(document.line(for: "/app") == 1)
        #expect(document.line(for: "/rules/0") == 3)
        #expect(document.line(for: "/rules/0/handler/type") == 5)
        #expect(document.line(for: "/rules/1/id") == 6)
        #expect(document.line(for: "/rules/1/handler/type") == 6)
        #expect(throws: CLIError.self) { try YAMLDocument(text: "a: 1\na: 2\n", name: "f") }
        #expect(throws: CLIError.self) { try YAMLDocument(text: "a: [1, 2\n", name: "f") }
    }
}
