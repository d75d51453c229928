import ActionHookCore
import ArgumentParser
import Foundation

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
