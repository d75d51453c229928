import ActionHookCore
import ArgumentParser
import Foundation

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
        // Identity as the file takes it: the mode and each key's kid, algorithm and public key. An HS256
        // key's secret stays on the server (`secretConfigured` is the server's to say).
        if let identity = settings["identity"]?.objectValue {
            let keys = (identity["keys"]?.arrayValue ?? []).map { key -> JSONValue in
                let fields = key.objectValue ?? [:]
                return .object(
                    JSONObject(
                        ["kid", "algorithm", "publicKey"].compactMap { name in
                            fields[name].map { (key: name, value: $0) }
                        }))
            }
            let mode = identity["mode"]?.stringValue ?? IdentityMode.off.rawValue
            if mode != IdentityMode.off.rawValue || !keys.isEmpty {
                file["identity"] = .object(["mode": .string(mode), "keys": .array(keys)])
            }
        }
        file["categories"] = configuration["categories"] ?? .array([])
        file["rules"] = configuration["rules"] ?? .array([])
        return """
            # The configuration of the app \(appID), written by `actionhook export`.
            # Apply it with `actionhook apply -f FILE`. Secrets are not exported: to set one, add
            # `secret: ${ENV:NAME}` under webhook (or `privateKey: ${ENV:NAME}` under apns). An HS256
            # identity key keeps the secret the server generated for it while its kid stays.

            """ + (try YAMLWriter.text(.object(file)))
    }
}

/// `actionhook export APP`.
public struct Export: ParsableCommand {
    /// The command's description.
    public static let configuration = CommandConfiguration(
        abstract:
            "Write an app's configuration (settings without secrets, identity keys, categories, rules) as YAML on standard output."
    )

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
