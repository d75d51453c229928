import ActionHookCore
import AsyncHTTPClient
import Foundation
import NIOCore

/// One answer of the admin API.
public struct AdminAnswer: Sendable {
    /// The status code.
    public var status: Int
    /// Header fields, names lowercased.
    public var headers: [String: String]
    /// The body parsed as JSON, when it is JSON.
    public var json: JSONValue?

    /// The field errors of a problem answer, as (pointer, detail).
    public var fieldErrors: [(pointer: String, detail: String)] {
        (json?.objectValue?["errors"]?.arrayValue ?? []).compactMap { error in
            guard let object = error.objectValue, let pointer = object["pointer"]?.stringValue else { return nil }
            return (pointer, object["detail"]?.stringValue ?? "is not valid")
        }
    }

    /// The problem's `detail` (or `title`), for messages.
    public var problemDetail: String {
        json?.objectValue?["detail"]?.stringValue ?? json?.objectValue?["title"]?.stringValue ?? "HTTP \(status)"
    }
}

/// The admin API of one ActionHook instance, reached over HTTP like any remote client
/// (`ACTIONHOOK_URL`, `ACTIONHOOK_ADMIN_TOKEN`).
///
/// It uses AsyncHTTPClient, which the service already depends on for its webhooks: no second HTTP stack
/// (FoundationNetworking would bring libcurl), TLS through the same NIOSSL, and per-request deadlines.
/// The commands are short-lived and synchronous, so each call waits for its answer.
public struct AdminClient: Sendable {
    /// The service's base URL, without a trailing slash.
    public var baseURL: String
    /// The admin bearer token.
    public var token: String
    /// How long one request may take.
    public var timeoutSeconds: Int64

    /// A client for `baseURL` with `token`.
    public init(baseURL: String, token: String, timeoutSeconds: Int64 = 30) {
        var base = baseURL
        while base.hasSuffix("/") { base.removeLast() }
        self.baseURL = base
        self.token = token
        self.timeoutSeconds = timeoutSeconds
    }

    /// From `ACTIONHOOK_URL` (default `http://127.0.0.1:8080`) and `ACTIONHOOK_ADMIN_TOKEN` (required).
    public static func fromEnvironment(_ environment: [String: String]) throws -> AdminClient {
        guard let token = environment["ACTIONHOOK_ADMIN_TOKEN"], !token.isEmpty else {
            throw CLIError("ACTIONHOOK_ADMIN_TOKEN is not set; the command line calls the admin API with it")
        }
        let url = environment["ACTIONHOOK_URL"].flatMap { $0.isEmpty ? nil : $0 } ?? "http://127.0.0.1:8080"
        guard let components = URLComponents(string: url), ["http", "https"].contains(components.scheme ?? ""),
            components.host != nil
        else {
            throw CLIError("ACTIONHOOK_URL is not an http or https URL")
        }
        return AdminClient(baseURL: url, token: token)
    }

    /// An admin API path: `/v1/` and the segments, each percent-encoded, so that an id from a file or the
    /// command line (`a/b`, `..`, `x?y`) names exactly one segment and never another route.
    public static func path(_ segments: String..., query: String? = nil) -> String {
        "/v1/" + segments.map(encodeSegment).joined(separator: "/") + (query.map { "?" + $0 } ?? "")
    }

    /// One path segment, percent-encoded: only RFC 3986's unreserved characters stay as they are, and a
    /// segment that is `.` or `..` is encoded whole (a URL library or proxy would otherwise resolve it).
    static func encodeSegment(_ segment: String) -> String {
        if segment == "." { return "%2E" }
        if segment == ".." { return "%2E%2E" }
        var out = ""
        for byte in segment.utf8 {
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = String(byte, radix: 16, uppercase: true)
                out += "%" + (hex.count == 1 ? "0" : "") + hex
            }
        }
        return out
    }

    /// Sends one request; `path` starts with `/`.
    public func send(
        _ method: String, _ path: String, body: JSONValue? = nil, headers: [(String, String)] = []
    ) throws -> AdminAnswer {
        var request: HTTPClient.Request
        do {
            request = try HTTPClient.Request(url: baseURL + path, method: .init(rawValue: method))
        } catch {
            throw CLIError("ACTIONHOOK_URL with the path \(path) is not a valid URL")
        }
        request.headers.add(name: "Authorization", value: "Bearer \(token)")
        request.headers.add(name: "Accept", value: "application/json")
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .string(body.jsonText)
        }
        let response: HTTPClient.Response
        do {
            response = try HTTPClient.shared.execute(
                request: request, deadline: .now() + TimeAmount.seconds(timeoutSeconds)
            ).wait()
        } catch {
            throw CLIError("could not reach \(baseURL) (ACTIONHOOK_URL): \(error)")
        }
        var fields: [String: String] = [:]
        for (name, value) in response.headers { fields[name.lowercased()] = value }
        let bytes = response.body.map { Array($0.readableBytesView) } ?? []
        let json = bytes.isEmpty ? nil : try? JSONParser.parse(bytes)
        let answer = AdminAnswer(status: Int(response.status.code), headers: fields, json: json)
        if answer.status == 401 {
            throw CLIError("\(baseURL) refused the admin token (ACTIONHOOK_ADMIN_TOKEN): 401")
        }
        if answer.status >= 500 {
            throw CLIError("\(method) \(path) failed on the server: \(answer.status) \(answer.problemDetail)")
        }
        return answer
    }
}
