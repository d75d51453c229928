import ActionHookCore
import Foundation

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
