import ActionHookCore
import Foundation

/// How `apply` treats what the file does not name.
public struct ApplyOptions: Sendable {
    /// Deletes categories and rules that are on the server but not in the file (kept otherwise).
    public var prune: Bool
    /// Sends the secrets read from the environment even when no other webhook or APNs setting changed
    /// (to rotate a secret); otherwise they are sent only when their endpoint is created or changed.
    public var writeSecrets: Bool

    /// Options; both off by default.
    public init(prune: Bool = false, writeSecrets: Bool = false) {
        self.prune = prune
        self.writeSecrets = writeSecrets
    }
}

/// What applying one file would change on the server, read from it and ready to be carried out.
public struct ApplyPlan: Sendable {
    /// One category or rule the plan touches.
    public struct Item: Sendable, Equatable {
        /// `category` or `rule`.
        public var kind: String
        /// Its id.
        public var id: String
        /// For a changed item, the lines of its YAML that differ (`- old`, `+ new`).
        public var diff: [String] = []
    }

    /// The file.
    public var file: ConfigurationFile
    /// Whether the app exists; when not, applying creates it.
    public var appExists: Bool
    /// The app settings to send (the whole create body when the app is new), secrets resolved.
    var settingsBody: JSONObject
    /// The settings that change, in words (never with a secret's value).
    public var settingsChanges: [String]
    /// The configuration sent: the file's items as written, then the server's that are kept.
    var body: JSONValue
    /// The entity tag of the configuration the plan was made against.
    public var etag: String
    /// Items new on the server.
    public var created: [Item]
    /// Items whose definition changes.
    public var changed: [Item]
    /// Items deleted (with `--prune`).
    public var deleted: [Item]
    /// Items on the server but not in the file, kept (without `--prune`).
    public var kept: [Item]

    /// Whether applying changes anything.
    public var hasChanges: Bool {
        !appExists || !settingsChanges.isEmpty || configurationChanges
    }

    var configurationChanges: Bool { !created.isEmpty || !changed.isEmpty || !deleted.isEmpty }

    /// Reads the app and its configuration from the server and compares them with the file.
    public static func make(
        file: ConfigurationFile, options: ApplyOptions, client: AdminClient, environment: [String: String]
    ) throws -> ApplyPlan {
        let settings = try file.resolvedSettings(environment: environment)
        let own = JSONValue.object(["categories": .array(file.categories), "rules": .array(file.rules)])
        let desired: AppConfiguration
        do {
            // Checked here with the server's own rules first, so a bad file is reported before anything is
            // sent; the server checks again (webhook targets, say) when it is applied.
            desired = try AppConfiguration.decode(own, allowPrivateWebhooks: true)
        } catch {
            throw CLIError(lines: error.errors.map { file.describe(pointer: $0.pointer, detail: $0.detail) })
        }

        let app = try client.send("GET", AdminClient.path("apps", file.appID))
        let appExists: Bool
        var current = AppConfiguration(categories: [], rules: [])
        var etag = current.etag
        var settingsBody = JSONObject()
        var settingsChanges: [String] = []
        switch app.status {
        case 200:
            appExists = true
            let read = try client.send("GET", AdminClient.path("apps", file.appID, "config"))
            guard read.status == 200, let json = read.json, let tag = read.headers["etag"] else {
                throw CLIError("GET /v1/apps/\(file.appID)/config answered \(read.status): \(read.problemDetail)")
            }
            do {
                current = try AppConfiguration.decode(json, allowPrivateWebhooks: true)
            } catch {
                throw CLIError("the server's configuration of \(file.appID) could not be read: \(error.detail)")
            }
            etag = tag
            (settingsBody, settingsChanges) = compare(settings, with: app.json?.objectValue ?? [:], options: options)
        case 404:
            appExists = false
            settingsBody = settings
            settingsBody["id"] = .string(file.appID)
            settingsChanges = compare(settings, with: [:], options: options).1
            if settingsBody["name"] == nil || settingsBody["name"] == .null {
                settingsBody["name"] = .string(file.appID)
            }
        default:
            throw CLIError("GET /v1/apps/\(file.appID) answered \(app.status): \(app.problemDetail)")
        }

        var plan = ApplyPlan(
            file: file, appExists: appExists, settingsBody: settingsBody, settingsChanges: settingsChanges,
            body: own, etag: etag, created: [], changed: [], deleted: [], kept: [])
        var sentCategories = file.categories
        var sentRules = file.rules
        // Which items are new, changed or gone is decided as the server decides it (the same canonical
        // comparison); here each change gets its readable diff, and items left out stay unless pruned.
        let changes = desired.changes(from: current)
        func record(
            _ kind: String, _ items: AppConfigurationChanges.Items, old: [String: JSONValue],
            new: [String: JSONValue], keep: (JSONValue) -> Void
        ) throws {
            plan.created += items.created.map { Item(kind: kind, id: $0) }
            for id in items.updated {
                guard let before = old[id], let after = new[id] else { continue }
                let diff = LineDiff.lines(from: try YAMLWriter.text(before), to: try YAMLWriter.text(after))
                plan.changed.append(Item(kind: kind, id: id, diff: diff))
            }
            for id in items.deleted {
                if options.prune {
                    plan.deleted.append(Item(kind: kind, id: id))
                } else {
                    plan.kept.append(Item(kind: kind, id: id))
                    if let json = old[id] { keep(json) }
                }
            }
        }
        func byID(_ items: [(id: String, json: JSONValue)]) -> [String: JSONValue] {
            Dictionary(items.map { ($0.id, $0.json) }, uniquingKeysWith: { first, _ in first })
        }
        try record(
            "category", changes.categories, old: byID(current.categories.map { ($0.id, $0.json) }),
            new: byID(desired.categories.map { ($0.id, $0.json) }), keep: { sentCategories.append($0) })
        try record(
            "rule", changes.rules, old: byID(current.rules.map { ($0.id, $0.json) }),
            new: byID(desired.rules.map { ($0.id, $0.json) }), keep: { sentRules.append($0) })
        plan.body = .object(["categories": .array(sentCategories), "rules": .array(sentRules)])
        return plan
    }

    /// The PATCH body and the readable changes that bring the server's settings to the file's.
    static func compare(_ file: JSONObject, with server: JSONObject, options: ApplyOptions) -> (JSONObject, [String]) {
        var patch = JSONObject()
        var changes: [String] = []
        func shown(_ value: JSONValue?) -> String {
            guard let value, !value.isNull else { return "none" }
            return value.stringValue ?? value.jsonText
        }
        if let name = file["name"], !name.isNull, name != server["name"] {
            patch["name"] = name
            changes.append("name: \(shown(server["name"])) → \(shown(name))")
        }
        for key in ["rateLimitPerSecond", "retentionDays"] {
            // A value that is not an integer is sent too, for the server to refuse at its line.
            if let value = file[key],
                value.intValue != server[key]?.intValue || (value.intValue == nil && !value.isNull)
            {
                patch[key] = value
                changes.append("\(key): \(shown(server[key])) → \(shown(value))")
            }
        }
        let endpoints: [(key: String, compared: [String], secret: String, defaults: [String: String])] = [
            ("webhook", ["url"], "secret", [:]),
            ("apns", ["teamId", "keyId", "topic", "environment"], "privateKey", ["environment": "production"]),
        ]
        for endpoint in endpoints {
            guard let wanted = file[endpoint.key] else { continue }
            let existing = server[endpoint.key]?.objectValue
            guard let object = wanted.objectValue else {
                if wanted.isNull && existing != nil {
                    patch[endpoint.key] = .null
                    changes.append("\(endpoint.key): removed")
                }
                continue
            }
            var differing: [String] = []
            for field in endpoint.compared {
                let value = object[field]?.stringValue ?? endpoint.defaults[field]
                if existing == nil || value != existing?[field]?.stringValue {
                    differing.append("\(endpoint.key).\(field): \(shown(existing?[field])) → \(value ?? "none")")
                }
            }
            let unknown = object.keys.filter { !endpoint.compared.contains($0) && $0 != endpoint.secret }
            if !differing.isEmpty || !unknown.isEmpty {
                patch[endpoint.key] = wanted
                changes += differing
                if object[endpoint.secret] != nil {
                    changes.append("\(endpoint.key).\(endpoint.secret): from the environment")
                }
            } else if options.writeSecrets, let secret = object[endpoint.secret] {
                patch[endpoint.key] = .object([endpoint.secret: secret])
                changes.append("\(endpoint.key).\(endpoint.secret): from the environment")
            }
        }
        if let wanted = file["identity"] {
            let differing = identityChanges(wanted, from: server["identity"])
            if !differing.isEmpty {
                // Sent as written: `keys`, when present, is the whole list (an HS256 key kept by its kid
                // keeps its secret on the server).
                patch["identity"] = wanted
                changes += differing
            }
        }
        return (patch, changes)
    }

    /// The readable changes from the server's `identity` to the file's; empty when they agree. Keys are
    /// compared by `kid` (their order does not matter), public keys without surrounding white space; an
    /// HS256 key is the same while its kid and algorithm are. A member the CLI does not know is a change,
    /// so that the server names it at its line.
    static func identityChanges(_ wanted: JSONValue, from server: JSONValue?) -> [String] {
        let current = server?.objectValue
        let currentMode = current?["mode"]?.stringValue ?? IdentityMode.off.rawValue
        let currentKeys = current?["keys"]?.arrayValue ?? []
        guard let object = wanted.objectValue else {
            if wanted.isNull {
                return currentMode != IdentityMode.off.rawValue || !currentKeys.isEmpty
                    ? ["identity: removed (mode off, no keys)"] : []
            }
            return ["identity: \(wanted.jsonText)"]
        }
        var changes: [String] = []
        for key in object.keys where key != "mode" && key != "keys" { changes.append("identity.\(key): set") }
        if let mode = object["mode"], mode.stringValue != currentMode {
            changes.append("identity.mode: \(currentMode) → \(mode.stringValue ?? mode.jsonText)")
        }
        guard let keys = object["keys"] else { return changes }
        guard let list = keys.arrayValue else { return changes + ["identity.keys: \(keys.jsonText)"] }
        typealias Key = (kid: String, algorithm: String, publicKey: String?, unknown: Bool)
        func key(_ value: JSONValue) -> Key {
            let fields = value.objectValue ?? [:]
            return (
                fields["kid"]?.stringValue ?? fields["kid"]?.jsonText ?? "?",
                fields["algorithm"]?.stringValue ?? fields["algorithm"]?.jsonText ?? "?",
                fields["publicKey"].map {
                    $0.stringValue?.trimmingCharacters(in: .whitespacesAndNewlines) ?? $0.jsonText
                },
                value.objectValue == nil || fields.keys.contains { !["kid", "algorithm", "publicKey"].contains($0) }
            )
        }
        let old = currentKeys.map(key)
        let new = list.map(key)
        for wantedKey in new {
            guard let existing = old.first(where: { $0.kid == wantedKey.kid }) else {
                let generated = wantedKey.algorithm == IdentityAlgorithm.hs256.rawValue
                changes.append(
                    "identity.keys: + \(wantedKey.kid) (\(wantedKey.algorithm)"
                        + (generated ? "; the server generates its secret" : "") + ")")
                continue
            }
            if existing.algorithm != wantedKey.algorithm || existing.publicKey != wantedKey.publicKey
                || wantedKey.unknown
            {
                let secret =
                    wantedKey.algorithm == IdentityAlgorithm.hs256.rawValue && existing.algorithm != wantedKey.algorithm
                changes.append(
                    "identity.keys: ~ \(wantedKey.kid) (\(existing.algorithm) → \(wantedKey.algorithm)"
                        + (secret ? "; the server generates its secret" : "") + ")")
            }
        }
        for existing in old where !new.contains(where: { $0.kid == existing.kid }) {
            changes.append("identity.keys: - \(existing.kid) (\(existing.algorithm))")
        }
        return changes
    }

    /// The plan in words: one line per change, a changed item followed by its diff.
    public var lines: [String] {
        var lines = ["app \(file.appID) (\(file.path))"]
        if !appExists { lines.append("  + app \(file.appID) (created)") }
        // A new app's settings are set, not changed.
        for change in settingsChanges { lines.append((appExists ? "  ~ setting " : "  + setting ") + change) }
        for item in created { lines.append("  + \(item.kind) \(item.id)") }
        for item in changed {
            lines.append("  ~ \(item.kind) \(item.id)")
            lines += item.diff.map { "      " + $0 }
        }
        for item in deleted { lines.append("  - \(item.kind) \(item.id)") }
        for item in kept {
            lines.append("  = \(item.kind) \(item.id) kept: on the server, not in the file (--prune deletes it)")
        }
        if hasChanges {
            lines.append(
                "  \(created.count + (appExists ? 0 : 1)) to create, \(changed.count + (appExists ? settingsChanges.count : 0)) "
                    + "to change, \(deleted.count) to delete")
        } else {
            lines.append("  no changes")
        }
        return lines
    }

    /// Checks the plan's categories and rules on the server (`dryRun=true`, under `If-Match`) without
    /// changing anything: what only the server knows (which webhook targets it allows, whether the
    /// configuration changed since it was read) is reported as ``execute(client:terminal:)`` would.
    public func check(client: AdminClient) throws {
        guard appExists && configurationChanges else { return }
        try check(
            client.send(
                "PUT", AdminClient.path("apps", file.appID, "config", query: "dryRun=true"), body: body,
                headers: [("If-Match", etag)]))
    }

    /// Carries the plan out: the configuration is checked on the server first (with the tag it was read
    /// at), then the app's settings are written, then its categories and rules replaced in one transaction
    /// under `If-Match`, so a configuration another writer changed since the plan was made is refused.
    public func execute(client: AdminClient, terminal: Terminal) throws {
        guard hasChanges else { return }
        let path = AdminClient.path("apps", file.appID)
        try check(client: client)
        if !appExists {
            let created = try client.send("POST", "/v1/apps", body: .object(settingsBody))
            try check(created, expected: 201)
            if let key = created.json?.objectValue?["ingestKey"]?.objectValue,
                let id = key["id"]?.stringValue, let secret = key["secret"]?.stringValue
            {
                terminal.line(
                    "created app \(file.appID); its ingest key \(id) (the secret is shown only now): \(secret)")
            }
            printGeneratedSecrets(created, terminal: terminal)
        } else if !settingsChanges.isEmpty {
            let patched = try client.send("PATCH", path, body: .object(settingsBody))
            try check(patched)
            printGeneratedSecrets(patched, terminal: terminal)
        }
        if configurationChanges {
            let answer = try client.send("PUT", path + "/config", body: body, headers: [("If-Match", etag)])
            try check(answer)
            terminal.line("applied app \(file.appID): configuration \(answer.headers["etag"] ?? "")")
        } else {
            terminal.line("applied app \(file.appID)")
        }
    }

    /// Prints the secrets the server generated and shows only in this answer: the webhook's signing secret
    /// (a webhook given without one) and each new HS256 identity key's secret.
    func printGeneratedSecrets(_ answer: AdminAnswer, terminal: Terminal) {
        let object = answer.json?.objectValue ?? [:]
        if let generated = object["webhookSecret"]?.stringValue {
            terminal.line("a webhook signing secret was generated (shown only now): \(generated)")
        }
        for (kid, secret) in object["identitySecrets"]?.objectValue?.members ?? [] {
            terminal.line(
                "an HS256 secret was generated for the identity key \(kid) (shown only now): \(secret.stringValue ?? "?")"
            )
        }
    }

    /// Throws the server's refusal as lines naming the file, the line and the field.
    func check(_ answer: AdminAnswer, expected: Int = 200) throws {
        if answer.status == expected { return }
        switch answer.status {
        case 412:
            throw CLIError(
                "app \(file.appID): the configuration changed on the server since it was read (412); "
                    + "nothing was applied; run apply again to see the new plan")
        case 404:
            throw CLIError("app \(file.appID) does not exist (it was deleted since the plan was made)")
        case 400 where !answer.fieldErrors.isEmpty, 422 where !answer.fieldErrors.isEmpty:
            throw CLIError(lines: answer.fieldErrors.map { file.describe(pointer: $0.pointer, detail: $0.detail) })
        default:
            throw CLIError("app \(file.appID): the server answered \(answer.status): \(answer.problemDetail)")
        }
    }
}
