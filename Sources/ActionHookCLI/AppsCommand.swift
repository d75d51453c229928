import ArgumentParser

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
