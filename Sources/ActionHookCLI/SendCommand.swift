import ActionHookCore
import ArgumentParser
import Foundation

/// `actionhook send -f notification.json --app APP`.
public struct Send: ParsableCommand {
    /// The command's description.
    public static let configuration = CommandConfiguration(
        abstract:
            "Send a notification (a JSON or YAML body of POST /v1/apps/{app}/notifications) and print its id, devices and steps."
    )

    @Option(name: [.customShort("f"), .long], help: "The notification: a JSON or YAML file.")
    var file: String

    @Option(help: "The app's id.")
    var app: String

    @Option(help: "An Idempotency-Key: sending the same file again with it sends nothing new.")
    var idempotencyKey: String?

    /// Creates the command.
    public init() {}

    /// Runs the command.
    public func run() throws {
        try withAdminClient { client in
            try NotificationSend.run(
                path: file, appID: app, idempotencyKey: idempotencyKey, client: client, terminal: .standard)
        }
    }
}

/// The body of `actionhook send`.
public enum NotificationSend {
    /// Posts the notification in `path` and prints what was sent; refusals name the file's line.
    public static func run(
        path: String, appID: String, idempotencyKey: String?, client: AdminClient, terminal: Terminal
    ) throws {
        let (answer, sent) = try FileRequest.post(
            path, to: AdminClient.path("apps", appID, "notifications"), what: "the notification", appID: appID,
            accepting: [200, 202], headers: idempotencyKey.map { [("Idempotency-Key", $0)] } ?? [], client: client)
        terminal.line(
            "\(answer.status == 200 ? "already sent" : "sent") notification \(sent["id"]?.stringValue ?? "?")")
        terminal.line("expires at: \(sent["expiresAt"]?.stringValue ?? "?")")
        terminal.line("collapse id: \(sent["collapseId"]?.stringValue ?? "?")")
        let devices = sent["devices"]?.arrayValue ?? []
        terminal.line("devices: \(devices.count)")
        for device in devices {
            let object = device.objectValue ?? [:]
            let recipient = object["recipient"]?.stringValue.map { " (\($0))" } ?? ""
            terminal.line(
                "  \(object["deviceToken"]?.stringValue ?? "?")\(recipient): apns-id \(object["followUpId"]?.stringValue ?? "?")"
            )
        }
        for step in sent["steps"]?.arrayValue ?? [] {
            let object = step.objectValue ?? [:]
            terminal.line(
                "no-reply step after \(object["afterSeconds"]?.jsonText ?? "?") s, due at \(object["dueAt"]?.stringValue ?? "?")"
            )
        }
        terminal.line("receipt: actionhook's GET /v1/apps/\(appID)/notifications/\(sent["id"]?.stringValue ?? "?")")
    }
}

/// A request whose body is a JSON or YAML file (`actionhook test`, `actionhook send`).
enum FileRequest {
    /// Reads `path`, posts its value to `route` and returns the answer and its JSON object. A refusal
    /// names the file's line of each field the server pointed at; a 404 says the app does not exist.
    static func post(
        _ path: String, to route: String, what: String, appID: String, accepting statuses: Set<Int>,
        headers: [(String, String)] = [], client: AdminClient
    ) throws -> (AdminAnswer, JSONObject) {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw CLIError("\(path): cannot be read")
        }
        let document = try YAMLDocument(text: text, name: path)
        let answer = try client.send("POST", route, body: document.value, headers: headers)
        guard statuses.contains(answer.status), let object = answer.json?.objectValue else {
            if answer.status == 404 { throw CLIError("app \(appID) does not exist") }
            let lines = answer.fieldErrors.map { error in
                "\(path):\(document.line(for: error.pointer) ?? 1): \(error.pointer.isEmpty ? what : String(error.pointer.dropFirst())): \(error.detail)"
            }
            throw CLIError(
                lines: lines.isEmpty ? ["\(what) was refused (\(answer.status)): \(answer.problemDetail)"] : lines)
        }
        return (answer, object)
    }
}
