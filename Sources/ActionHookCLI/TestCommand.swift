import ActionHookCore
import ArgumentParser
import Foundation

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
