import ArgumentParser

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
