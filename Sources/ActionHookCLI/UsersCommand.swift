import ActionHookCore
import ArgumentParser
import Foundation

/// `actionhook users list|show|erase|token`.
public struct Users: ParsableCommand {
    /// The command's description.
    public static let configuration = CommandConfiguration(
        abstract: "List an app's registered devices and users, erase a user, mint a development user token.",
        subcommands: [List.self, Show.self, Erase.self, Token.self])

    /// Creates the command.
    public init() {}

    /// `actionhook users list [--app APP] [--user USER]`.
    public struct List: ParsableCommand {
        /// The command's description.
        public static let configuration = CommandConfiguration(
            abstract: "List registered devices, one line each.",
            discussion: """
                Each line is app, device token, user (- when anonymous), platform, environment, status \
                (with its reason when not active) and when it was last registered, separated by tabs. \
                Without --app, every app's devices are listed.
                """)

        @Option(help: "Only this app's devices (default: every app's).")
        var app: String?

        @Option(help: "Only the devices registered under this user.")
        var user: String?

        /// Creates the command.
        public init() {}

        /// Runs the command.
        public func run() throws {
            try withAdminClient { client in
                try UserCommands.listDevices(appID: app, user: user, client: client, terminal: .standard)
            }
        }
    }

    /// `actionhook users show --app APP USER`.
    public struct Show: ParsableCommand {
        /// The command's description.
        public static let configuration = CommandConfiguration(
            abstract: "Show a user's devices, active first, newest first, with what the app reported.")

        @Option(help: "The app's id.")
        var app: String

        @Argument(help: "The user's id, as the backend registers it.")
        var user: String

        /// Creates the command.
        public init() {}

        /// Runs the command.
        public func run() throws {
            try withAdminClient { client in
                try UserCommands.showUser(appID: app, user: user, client: client, terminal: .standard)
            }
        }
    }

    /// `actionhook users erase --app APP USER --yes`.
    public struct Erase: ParsableCommand {
        /// The command's description.
        public static let configuration = CommandConfiguration(
            abstract: "Erase a user: every device registered under it, its replies and what would still be sent.",
            discussion: "This cannot be undone; --yes is required.")

        @Option(help: "The app's id.")
        var app: String

        @Argument(help: "The user's id.")
        var user: String

        @Flag(help: "Confirm the erasure (required).")
        var yes = false

        /// Creates the command.
        public init() {}

        /// Checks the confirmation before anything is sent.
        public func validate() throws {
            guard yes else {
                throw ValidationError(
                    "erasing a user cannot be undone: pass --yes to erase \(TerminalText.escaped(user))'s devices and replies"
                )
            }
        }

        /// Runs the command.
        public func run() throws {
            try withAdminClient { client in
                try UserCommands.eraseUser(appID: app, user: user, client: client, terminal: .standard)
            }
        }
    }

    /// `actionhook users token --app APP --user USER --kid KID (--key FILE | --secret S)`.
    public struct Token: ParsableCommand {
        /// The command's description.
        public static let configuration = CommandConfiguration(
            abstract: "Mint a user token for local development (a JWT for the ActionHook-User-Token header).",
            discussion: """
                For development and tests only. In production your app's backend mints user tokens with its \
                private key (see examples/identity/mint_user_token.py) and hands them to its signed-in users; \
                the private key never leaves the backend. The token's header names --algorithm and --kid; its \
                claims are sub (the user), aud (the app), iat and exp. Nothing is sent to a server.
                """)

        @Option(help: "The app's id (the token's audience).")
        var app: String

        @Option(help: "The user's id (the token's subject), 1 to 64 characters.")
        var user: String

        @Option(help: "The key id registered in the app's identity keys.")
        var kid: String

        @Option(help: "A PEM file with the private key (ES256: P-256; RS256: 2048 bits or more).")
        var key: String?

        @Option(
            help:
                "The HS256 secret ActionHook generated for the key (ahu_…); ACTIONHOOK_USER_TOKEN_SECRET when omitted.")
        var secret: String?

        @Option(help: "ES256, RS256 or HS256 (default: HS256 with a secret, else ES256).")
        var algorithm: String?

        @Option(help: "Seconds until the token expires.")
        var lifetime = 3600

        /// Creates the command.
        public init() {}

        /// Runs the command.
        public func run() throws {
            try reporting {
                let environment = ProcessInfo.processInfo.environment
                // The secret may come from the environment so that it stays out of the process list.
                let hmacSecret =
                    secret ?? environment["ACTIONHOOK_USER_TOKEN_SECRET"].flatMap { $0.isEmpty ? nil : $0 }
                let material: UserTokenMinter.Material
                switch (key, hmacSecret) {
                case (let path?, nil):
                    guard let pem = try? String(contentsOfFile: path, encoding: .utf8) else {
                        throw CLIError("\(path): cannot be read")
                    }
                    material = .privateKey(pem)
                case (nil, let secret?):
                    material = .secret(secret)
                case (nil, nil):
                    throw CLIError("give --key FILE.pem (ES256, RS256) or --secret (HS256)")
                case (_?, _?):
                    throw CLIError("give either --key or --secret, not both")
                }
                let token = try UserTokenMinter.mint(
                    appID: app, user: user, kid: kid, algorithm: algorithm, material: material,
                    lifetime: lifetime)
                Terminal.standard.line(token)
            }
        }
    }
}

/// The bodies of the `users` commands.
public enum UserCommands {
    /// Prints the devices of `appID` (every app's when nil), only `user`'s when given: one line each, in
    /// pages of `pageSize` (at most 500).
    public static func listDevices(
        appID: String?, user: String?, pageSize: Int = 500, client: AdminClient, terminal: Terminal
    ) throws {
        let apps = try appID.map { [$0] } ?? allApps(client: client)
        for app in apps {
            var cursor: String?
            repeat {
                var query = ["limit=\(pageSize)"]
                if let user { query.append("user=" + AdminClient.encodeSegment(user)) }
                if let cursor { query.append("cursor=" + AdminClient.encodeSegment(cursor)) }
                let answer = try client.send(
                    "GET", AdminClient.path("apps", app, "devices", query: query.joined(separator: "&")))
                guard answer.status == 200, let page = answer.json?.objectValue else {
                    throw AdminCommands.refusal(answer, what: "app \(app)")
                }
                for device in page["items"]?.arrayValue ?? [] {
                    terminal.line(row([app] + summary(device.objectValue ?? [:])))
                }
                cursor = page["nextCursor"]?.stringValue
            } while cursor != nil
        }
    }

    /// Prints a user's devices with what each app reported.
    public static func showUser(appID: String, user: String, client: AdminClient, terminal: Terminal) throws {
        let answer = try client.send("GET", AdminClient.path("apps", appID, "users", user))
        guard answer.status == 200, let object = answer.json?.objectValue else {
            if answer.status == 404 { throw missing(answer, appID: appID, user: user) }
            throw AdminCommands.refusal(answer, what: "user \(user) of app \(appID)")
        }
        let devices = object["devices"]?.arrayValue ?? []
        let active = devices.filter { $0.objectValue?["status"]?.stringValue == "active" }.count
        terminal.line("user \(cell(object["user"]?.stringValue ?? user)) of app \(appID)")
        terminal.line("devices: \(devices.count) (\(active) active)")
        for device in devices {
            let fields = device.objectValue ?? [:]
            terminal.line("  " + row(summary(fields).enumerated().filter { $0.offset != 1 }.map(\.element)))
            var details = ["locale", "timeZone", "appVersion", "osVersion", "model", "registeredAt"].compactMap {
                name in fields[name]?.stringValue.map { "\(name) \(cell($0))" }
            }
            // The device key its replies are signed with.
            if let key = fields["publicKey"]?.value(atPath: "fingerprint")?.stringValue {
                details.append("key \(cell(key))")
            }
            if !details.isEmpty { terminal.line("    " + details.joined(separator: ", ")) }
        }
    }

    /// Erases a user and prints what was erased.
    public static func eraseUser(appID: String, user: String, client: AdminClient, terminal: Terminal) throws {
        let answer = try client.send("DELETE", AdminClient.path("apps", appID, "users", user))
        guard answer.status == 200, let counts = answer.json?.objectValue else {
            if answer.status == 404 { throw missing(answer, appID: appID, user: user) }
            throw AdminCommands.refusal(answer, what: "user \(user) of app \(appID)")
        }
        func count(_ name: String) -> String { counts[name]?.intValue.map(String.init) ?? "0" }
        terminal.line(
            "erased user \(cell(user)) of app \(appID): \(count("devices")) devices, \(count("responses")) replies, "
                + "\(count("notifications")) sent notifications, \(count("followUpsCancelled")) follow-ups cancelled")
    }

    /// A 404's meaning: the app (`No app exists…`) or the user (no device registered under it).
    static func missing(_ answer: AdminAnswer, appID: String, user: String) -> CLIError {
        answer.problemDetail.hasPrefix("No app ")
            ? CLIError("app \(appID) does not exist")
            : CLIError("user \(cell(user)) has no device registered in app \(appID)")
    }

    /// Every app's id, page by page.
    static func allApps(client: AdminClient) throws -> [String] {
        var ids: [String] = []
        var cursor: String?
        repeat {
            let query = "limit=500" + (cursor.map { "&cursor=" + AdminClient.encodeSegment($0) } ?? "")
            let answer = try client.send("GET", "/v1/apps?" + query)
            guard answer.status == 200, let page = answer.json?.objectValue else {
                throw AdminCommands.refusal(answer, what: "the apps")
            }
            ids += (page["items"]?.arrayValue ?? []).compactMap { $0.objectValue?["id"]?.stringValue }
            cursor = page["nextCursor"]?.stringValue
        } while cursor != nil
        return ids
    }

    /// A device's token, user, platform, environment, status (with its reason) and last registration.
    static func summary(_ device: JSONObject) -> [String] {
        let status = device["status"]?.stringValue ?? "?"
        let reason = device["reason"]?.stringValue.map { " (\($0))" } ?? ""
        return [
            device["deviceToken"]?.stringValue ?? "?", device["user"]?.stringValue ?? "-",
            device["platform"]?.stringValue ?? "-", device["environment"]?.stringValue ?? "-", status + reason,
            device["updatedAt"]?.stringValue ?? "-",
        ]
    }

    /// Cells joined by tabs, each with its own tabs and line breaks written out, so that a value (a user
    /// id, a device model) can neither start another column nor another line. ``Terminal/line(_:)``
    /// writes out the other control characters.
    static func row(_ cells: [String]) -> String { cells.map(cell).joined(separator: "\t") }

    /// One value, its tabs and line breaks written out.
    static func cell(_ text: String) -> String {
        text.replacingOccurrences(of: "\t", with: "\\t").replacingOccurrences(of: "\n", with: "\\n")
    }
}
