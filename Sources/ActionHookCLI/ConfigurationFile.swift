import ActionHookCore
import Foundation

/// One app's configuration as a file: the app's id, its settings that are not secret, and its categories
/// and rules in the shapes the API takes them.
///
/// ```yaml
/// app: acme-calendar
/// name: Acme Calendar
/// webhook:
///   url: https://hooks.acme.example/actionhook
///   secret: ${ENV:ACME_WEBHOOK_SECRET}
/// categories: [...]
/// rules: [...]
/// ```
///
/// Secrets (`webhook.secret`, `apns.privateKey`) are never written in the file: their value must be
/// `${ENV:NAME}`, read from the environment when the file is applied. `${ENV:NAME}` works for any
/// string in `webhook` and `apns`. `identity` holds public keys only: an HS256 key's secret is generated
/// by the server and printed once by `apply`.
public struct ConfigurationFile: Sendable {
    /// The members a file may have at its top level.
    public static let topLevelKeys = [
        "$schema", "app", "name", "webhook", "apns", "rateLimitPerSecond", "retentionDays", "identity", "categories",
        "rules",
    ]
    /// The settings that hold secrets.
    static let secretFields: Set<String> = ["/webhook/secret", "/apns/privateKey"]

    /// The file's path, as given.
    public var path: String
    /// The parsed document with its lines.
    public var document: YAMLDocument
    /// The app's id.
    public var appID: String
    /// The app settings the file sets (`name`, `webhook`, `apns`, `rateLimitPerSecond`, `retentionDays`,
    /// `identity`), as written.
    public var settings: JSONObject
    /// The categories, as written.
    public var categories: [JSONValue]
    /// The rules, as written.
    public var rules: [JSONValue]

    /// Reads and checks the file's outline (its items are checked by the server's rules when applied).
    public init(path: String) throws {
        let text: String
        do {
            text = try String(contentsOfFile: path, encoding: .utf8)
        } catch {
            throw CLIError("\(path): cannot be read")
        }
        try self.init(text: text, path: path)
    }

    /// Parses a file's text; `path` names it in messages.
    public init(text: String, path: String) throws {
        self.path = path
        document = try YAMLDocument(text: text, name: path)
        guard case .object(let root) = document.value else {
            throw CLIError("\(path):1: the file must be a mapping with app, categories and rules")
        }
        var problems: [String] = []
        let location = { [document] (pointer: String) in "\(path):\(document.line(for: pointer) ?? 1)" }
        for key in root.keys where !Self.topLevelKeys.contains(key) {
            problems.append("\(location("/" + key)): \(key): is not a known field")
        }
        if let id = root["app"]?.stringValue, Slug.isValid(id) {
            appID = id
        } else {
            appID = ""
            problems.append("\(location("/app")): app: must name the app (1 to 64 characters of A-Z a-z 0-9 . _ -)")
        }
        func list(_ key: String) -> [JSONValue] {
            guard let value = root[key], !value.isNull else { return [] }
            guard let array = value.arrayValue else {
                problems.append("\(location("/" + key)): \(key): must be a list")
                return []
            }
            return array
        }
        categories = list("categories")
        rules = list("rules")
        var settings = JSONObject()
        for key in ["name", "webhook", "apns", "rateLimitPerSecond", "retentionDays", "identity"] {
            if let value = root[key] { settings[key] = value }
        }
        self.settings = settings
        for pointer in Self.secretFields.sorted() {
            guard let value = Self.value(at: pointer, in: document.value), !value.isNull else { continue }
            if Self.environmentReference(value.stringValue ?? "") == nil {
                problems.append(
                    "\(location(pointer)): \(pointer.dropFirst()): a secret is never written in the file; "
                        + "write ${ENV:NAME} and set NAME in the environment")
            }
        }
        // HS256 identity keys sign with a secret ActionHook generates and shows once, when the key is added.
        for (index, key) in (root["identity"]?.objectValue?["keys"]?.arrayValue ?? []).enumerated() {
            guard let object = key.objectValue, object["secret"] != nil else { continue }
            let pointer = "/identity/keys/\(index)/secret"
            problems.append(
                "\(location(pointer)): \(pointer.dropFirst()): an HS256 secret is never written in the file; "
                    + "ActionHook generates it when the key is added and apply prints it once")
        }
        if !problems.isEmpty { throw CLIError(lines: problems) }
    }

    /// The settings with every `${ENV:NAME}` replaced from `environment`; a variable that is not set is
    /// an error naming it (never its value).
    public func resolvedSettings(environment: [String: String]) throws -> JSONObject {
        var problems: [String] = []
        func resolve(_ value: JSONValue, at pointer: String) -> JSONValue {
            switch value {
            case .string(let text):
                guard let name = Self.environmentReference(text) else { return value }
                guard let found = environment[name], !found.isEmpty else {
                    problems.append(
                        "\(path):\(document.line(for: pointer) ?? 1): \(pointer.dropFirst()): "
                            + "the environment variable \(name) is not set")
                    return value
                }
                return .string(found)
            case .object(let object):
                return .object(
                    JSONObject(
                        object.members.map {
                            (key: $0.key, value: resolve($0.value, at: JSONPointer.appending($0.key, to: pointer)))
                        }))
            default:
                return value
            }
        }
        var resolved = JSONObject()
        for (key, value) in settings.members {
            resolved[key] = key == "webhook" || key == "apns" ? resolve(value, at: "/" + key) : value
        }
        if !problems.isEmpty { throw CLIError(lines: problems) }
        return resolved
    }

    /// `NAME` when `text` is exactly `${ENV:NAME}`.
    static func environmentReference(_ text: String) -> String? {
        guard text.hasPrefix("${ENV:"), text.hasSuffix("}"), text.count > 7 else { return nil }
        let name = text.dropFirst(6).dropLast()
        guard name.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }) else { return nil }
        return String(name)
    }

    static func value(at pointer: String, in root: JSONValue) -> JSONValue? {
        var current: JSONValue? = root
        for token in pointer.split(separator: "/") {
            current = current?.objectValue?[String(token)]
        }
        return current
    }

    /// `FILE:LINE: what (pointer): detail` for a problem the server (or the local check) found at a
    /// pointer into the file's own categories and rules, or its settings.
    public func describe(pointer: String, detail: String) -> String {
        let line = document.line(for: pointer) ?? 1
        let parts = pointer.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
        var what = ""
        if parts.count >= 2, let index = Int(parts[1]) {
            let items = parts[0] == "rules" ? rules : parts[0] == "categories" ? categories : []
            let idKey = parts[0] == "rules" ? "id" : "identifier"
            if index < items.count {
                let id = items[index].objectValue?[idKey]?.stringValue
                what = (parts[0] == "rules" ? "rule " : "category ") + (id.map { "'\($0)'" } ?? "#\(index + 1)") + " "
            }
        }
        let field = pointer.isEmpty ? "the file" : String(pointer.dropFirst())
        return "\(path):\(line): \(what)\(field): \(detail)"
    }

    /// The configuration files `path` names: the file itself, or the `.yaml`, `.yml` and `.json` files
    /// directly inside a directory, by name.
    public static func paths(_ path: String) throws -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            throw CLIError("\(path): no such file or directory")
        }
        guard isDirectory.boolValue else { return [path] }
        let names: [String]
        do {
            names = try FileManager.default.contentsOfDirectory(atPath: path)
        } catch {
            throw CLIError("\(path): cannot be read (\(error.localizedDescription))")
        }
        let files = names.filter { name in [".yaml", ".yml", ".json"].contains { name.hasSuffix($0) } }.sorted()
        guard !files.isEmpty else { throw CLIError("\(path): holds no .yaml, .yml or .json file") }
        return files.map { (path as NSString).appendingPathComponent($0) }
    }
}
