import ActionHookCore
import ArgumentParser
import Foundation

/// Runs a command's body, printing a ``CLIError`` as it is and exiting 1 for it.
func reporting(_ terminal: Terminal = .standard, _ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as CLIError {
        for line in error.lines { terminal.error("actionhook: \(line)") }
        throw ExitCode.failure
    }
}

/// Runs `body` with the admin client the environment names (`ACTIONHOOK_URL`, `ACTIONHOOK_ADMIN_TOKEN`),
/// reporting as ``reporting(_:_:)`` does.
func withAdminClient(_ body: (AdminClient) throws -> Void) throws {
    try reporting { try body(try AdminClient.fromEnvironment(ProcessInfo.processInfo.environment)) }
}

/// Applies configuration files: for each app, the plan, then the change in one transaction.
public enum ConfigurationFiles {
    /// Applies (or, with `dryRun`, only plans) every file under `paths`; returns whether anything changed
    /// (or, in a dry run, would change). Every file is read and checked before any is applied.
    @discardableResult
    public static func apply(
        paths: [String], options: ApplyOptions, dryRun: Bool, client: AdminClient, environment: [String: String],
        terminal: Terminal
    ) throws -> Bool {
        var files: [ConfigurationFile] = []
        var problems: [String] = []
        for path in try paths.flatMap(ConfigurationFile.paths) {
            do {
                files.append(try ConfigurationFile(path: path))
            } catch let error as CLIError {
                problems += error.lines
            }
        }
        let apps = Dictionary(grouping: files, by: \.appID).filter { $0.value.count > 1 }
        for (app, named) in apps.sorted(by: { $0.key < $1.key }) {
            problems.append(
                "the app \(app) is configured by more than one file: \(named.map(\.path).joined(separator: ", "))")
        }
        if !problems.isEmpty { throw CLIError(lines: problems) }

        var changes = false
        for file in files {
            let plan = try ApplyPlan.make(file: file, options: options, client: client, environment: environment)
            for line in plan.lines { terminal.line(line) }
            guard plan.hasChanges else { continue }
            changes = true
            if dryRun {
                try plan.check(client: client)
            } else {
                try plan.execute(client: client, terminal: terminal)
            }
        }
        if dryRun && changes { terminal.line("dry run: nothing was applied") }
        return changes
    }
}

/// `actionhook apply -f FILE|DIR`.
public struct Apply: ParsableCommand {
    /// The command's description.
    public static let configuration = CommandConfiguration(
        abstract: "Apply configuration files: show the plan, then change each app's categories and rules atomically.",
        discussion: """
            Talks to the admin API at ACTIONHOOK_URL (default http://127.0.0.1:8080) with ACTIONHOOK_ADMIN_TOKEN.
            Categories and rules on the server that the file does not name are kept unless --prune is given.
            Secrets are written in the file as ${ENV:NAME} and read from the environment.
            """)

    @Option(name: [.short, .customLong("file")], help: "A configuration file, or a directory of them (repeatable).")
    var files: [String]

    @Flag(help: "Show the plan and check it on the server without changing anything.")
    var dryRun = false

    @Flag(help: "Delete categories and rules that are on the server but not in the file.")
    var prune = false

    @Flag(help: "With --dry-run: exit 2 when changes are pending, 0 when there are none.")
    var exitCode = false

    @Flag(help: "Send the secrets from the environment even when nothing else about their endpoint changed.")
    var writeSecrets = false

    /// Creates the command (ArgumentParser fills in the options).
    public init() {}

    /// Runs the command.
    public func run() throws {
        let environment = ProcessInfo.processInfo.environment
        var pending = false
        try reporting {
            pending = try ConfigurationFiles.apply(
                paths: files, options: ApplyOptions(prune: prune, writeSecrets: writeSecrets), dryRun: dryRun,
                client: try AdminClient.fromEnvironment(environment), environment: environment, terminal: .standard)
        }
        if dryRun && exitCode && pending { throw ExitCode(2) }
    }
}

/// Writes an app's configuration as a file `apply` accepts unchanged.
extension ConfigurationFiles {
    /// The YAML text of the app's settings (without secrets), categories and rules.
    public static func exportText(appID: String, client: AdminClient) throws -> String {
        let app = try client.send("GET", AdminClient.path("apps", appID))
        guard app.status == 200, let settings = app.json?.objectValue else {
            throw CLIError(
                app.status == 404 ? "app \(appID) does not exist" : "GET /v1/apps/\(appID) answered \(app.status)")
        }
        let read = try client.send("GET", AdminClient.path("apps", appID, "config"))
        guard read.status == 200, let configuration = read.json?.objectValue else {
            throw CLIError("GET /v1/apps/\(appID)/config answered \(read.status): \(read.problemDetail)")
        }
        var file: JSONObject = ["app": .string(appID)]
        if let name = settings["name"] { file["name"] = name }
        if let webhook = settings["webhook"]?.objectValue {
            file["webhook"] = .object(["url": webhook["url"] ?? .null])
        }
        if let apns = settings["apns"]?.objectValue {
            file["apns"] = .object(
                JSONObject(
                    ["teamId", "keyId", "topic", "environment"].compactMap { key in
                        apns[key].map { (key: key, value: $0) }
                    }))
        }
        for key in ["rateLimitPerSecond", "retentionDays"] {
            if let value = settings[key], !value.isNull { file[key] = value }
        }
        file["categories"] = configuration["categories"] ?? .array([])
        file["rules"] = configuration["rules"] ?? .array([])
        return """
            # The configuration of the app \(appID), written by `actionhook export`.
            # Apply it with `actionhook apply -f FILE`. Secrets are not exported: to set one, add
            # `secret: ${ENV:NAME}` under webhook (or `privateKey: ${ENV:NAME}` under apns).

            """ + (try YAMLWriter.text(.object(file)))
    }
}

/// `actionhook export APP`.
public struct Export: ParsableCommand {
    /// The command's description.
    public static let configuration = CommandConfiguration(
        abstract:
            "Write an app's configuration (settings without secrets, categories, rules) as YAML on standard output.")

    @Argument(help: "The app's id.")
    var app: String

    /// Creates the command.
    public init() {}

    /// Runs the command.
    public func run() throws {
        try withAdminClient { client in
            Terminal.standard.out(try ConfigurationFiles.exportText(appID: app, client: client))
        }
    }
}

/// Runs a reply through an app's rules without storing anything.
public enum ReplyDryRun {
    /// Posts the reply in `path` (JSON or YAML) to the dry run and prints the match and the follow-ups.
    public static func run(path: String, appID: String, client: AdminClient, terminal: Terminal) throws {
        let (_, result) = try FileRequest.post(
            path, to: AdminClient.path("apps", appID, "rules", "test"), what: "the reply", appID: appID,
            accepting: [200], client: client)
        if let rule = result["ruleId"]?.stringValue {
            terminal.line("matched rule: \(rule)")
        } else {
            terminal.line("matched rule: none")
        }
        terminal.line("outcome: \(result["outcome"]?.stringValue ?? "?")")
        if let subject = result["subject"]?.stringValue { terminal.line("subject: \(subject)") }
        let followUps = result["followUps"]?.arrayValue ?? []
        terminal.line("follow-ups: \(followUps.count)")
        for (index, followUp) in followUps.enumerated() {
            let object = followUp.objectValue ?? [:]
            terminal.line(
                "  \(index + 1). \(object["channel"]?.stringValue ?? "?") after \(object["delaySeconds"]?.jsonText ?? "0") s:"
            )
            let payload = object["payload"] ?? .null
            // Shown as YAML, like the files it came from; as JSON if it cannot be written as YAML.
            let text = (try? YAMLWriter.text(payload)) ?? payload.jsonText
            for line in text.split(separator: "\n") { terminal.line("       \(line)") }
        }
    }
}

/// `actionhook test -f reply.json --app APP`.
public struct TestReply: ParsableCommand {
    /// The command's description.
    public static let configuration = CommandConfiguration(
        commandName: "test",
        abstract: "Run a reply through an app's rules (the dry run): the matching rule and the rendered follow-ups.")

    @Option(name: [.short, .customLong("file")], help: "The reply, as the app would post it to /v1/responses.")
    var file: String

    @Option(help: "The app's id.")
    var app: String

    /// Creates the command.
    public init() {}

    /// Runs the command.
    public func run() throws {
        try withAdminClient { client in try ReplyDryRun.run(path: file, appID: app, client: client, terminal: .standard)
        }
    }
}

/// `actionhook apps create|list`.
public struct Apps: ParsableCommand {
    /// The command's description.
    public static let configuration = CommandConfiguration(
        abstract: "Create and list apps.", subcommands: [Create.self, List.self])

    /// Creates the command.
    public init() {}

    /// `actionhook apps create ID [--name NAME]`.
    public struct Create: ParsableCommand {
        /// The command's description.
        public static let configuration = CommandConfiguration(
            abstract: "Create an app and print its first ingest key (shown once).")

        @Argument(help: "The app's id (1 to 64 characters of A-Z a-z 0-9 . _ -).")
        var id: String

        @Option(help: "A display name (default: the id).")
        var name: String?

        /// Creates the command.
        public init() {}

        /// Runs the command.
        public func run() throws {
            try withAdminClient { client in
                try AdminCommands.createApp(id: id, name: name, client: client, terminal: .standard)
            }
        }
    }

    /// `actionhook apps list`.
    public struct List: ParsableCommand {
        /// The command's description.
        public static let configuration = CommandConfiguration(abstract: "List the apps: id and name.")

        /// Creates the command.
        public init() {}

        /// Runs the command.
        public func run() throws {
            try withAdminClient { client in try AdminCommands.listApps(client: client, terminal: .standard) }
        }
    }
}

/// `actionhook keys create|revoke`.
public struct Keys: ParsableCommand {
    /// The command's description.
    public static let configuration = CommandConfiguration(
        abstract: "Create and revoke an app's ingest and server keys.", subcommands: [Create.self, Revoke.self])

    /// Creates the command.
    public init() {}

    /// `actionhook keys create APP`.
    public struct Create: ParsableCommand {
        /// The command's description.
        public static let configuration = CommandConfiguration(
            abstract:
                "Create an ingest key (the phone's) or a server key (--scope send, the backend's) and print it (the secret is shown once)."
        )

        @Argument(help: "The app's id.")
        var app: String

        @Option(help: "ingest (default): forwards replies; send: sends notifications and reads their receipts.")
        var scope: String = "ingest"

        /// Creates the command.
        public init() {}

        /// Runs the command.
        public func run() throws {
            try withAdminClient { client in
                try AdminCommands.createKey(appID: app, scope: scope, client: client, terminal: .standard)
            }
        }
    }

    /// `actionhook keys revoke APP KEY_ID`.
    public struct Revoke: ParsableCommand {
        /// The command's description.
        public static let configuration = CommandConfiguration(
            abstract: "Revoke an ingest key at once, on every instance.")

        @Argument(help: "The app's id.")
        var app: String

        @Argument(help: "The key's id (a UUID, as `keys create` printed it).")
        var keyID: String

        /// Creates the command.
        public init() {}

        /// Runs the command.
        public func run() throws {
            try withAdminClient { client in
                try AdminCommands.revokeKey(appID: app, keyID: keyID, client: client, terminal: .standard)
            }
        }
    }
}

/// The bodies of the `apps` and `keys` commands.
public enum AdminCommands {
    /// Creates an app and prints its id and first ingest key.
    public static func createApp(id: String, name: String?, client: AdminClient, terminal: Terminal) throws {
        let answer = try client.send(
            "POST", "/v1/apps", body: .object(["id": .string(id), "name": .string(name ?? id)]))
        guard answer.status == 201, let key = answer.json?.objectValue?["ingestKey"]?.objectValue else {
            throw refusal(answer, what: "app \(id)")
        }
        terminal.line("created app \(id)")
        terminal.line("ingest key id: \(key["id"]?.stringValue ?? "?")")
        terminal.line("ingest key secret (shown only now): \(key["secret"]?.stringValue ?? "?")")
    }

    /// Prints every app, one `id<TAB>name` line each.
    public static func listApps(client: AdminClient, terminal: Terminal) throws {
        var cursor: String?
        repeat {
            let query = cursor.map {
                "?limit=500&cursor=" + ($0.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? $0)
            }
            let answer = try client.send("GET", "/v1/apps" + (query ?? "?limit=500"))
            guard answer.status == 200, let page = answer.json?.objectValue else {
                throw refusal(answer, what: "the apps")
            }
            for app in page["items"]?.arrayValue ?? [] {
                let object = app.objectValue ?? [:]
                terminal.line("\(object["id"]?.stringValue ?? "?")\t\(object["name"]?.stringValue ?? "")")
            }
            cursor = page["nextCursor"]?.stringValue
        } while cursor != nil
    }

    /// Creates an ingest key (or, with scope `send`, a server key) and prints its id and secret.
    public static func createKey(appID: String, scope: String = "ingest", client: AdminClient, terminal: Terminal)
        throws
    {
        let answer = try client.send(
            "POST", AdminClient.path("apps", appID, "keys"),
            body: scope == "ingest" ? nil : .object(["scope": .string(scope)]))
        guard answer.status == 201, let key = answer.json?.objectValue else {
            throw refusal(answer, what: "app \(appID)")
        }
        let kind = scope == "ingest" ? "ingest key" : "server key"
        terminal.line("\(kind) id: \(key["id"]?.stringValue ?? "?")")
        terminal.line("\(kind) secret (shown only now): \(key["secret"]?.stringValue ?? "?")")
    }

    /// Revokes an ingest key.
    public static func revokeKey(appID: String, keyID: String, client: AdminClient, terminal: Terminal) throws {
        let answer = try client.send("DELETE", AdminClient.path("apps", appID, "keys", keyID))
        guard answer.status == 204 else { throw refusal(answer, what: "app \(appID) or its key \(keyID)") }
        terminal.line("revoked ingest key \(keyID) of app \(appID)")
    }

    static func refusal(_ answer: AdminAnswer, what: String) -> CLIError {
        if answer.status == 404 { return CLIError("\(what) does not exist") }
        let fields = answer.fieldErrors.map { "\($0.pointer.dropFirst()): \($0.detail)" }
        return CLIError(lines: ["\(what): the server answered \(answer.status): \(answer.problemDetail)"] + fields)
    }
}
