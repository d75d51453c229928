import ActionHookServer
import Foundation
import Logging
import MicroHTTPD
import Postgres
import TestSupport
import Testing

/// `openapi.yaml` at the repository root documents exactly the routes the service serves.
@Suite("OpenAPI document matches the router")
struct OpenAPIRouteTests {
    @Test("every `METHOD /path` in openapi.yaml is a route, and every route is documented")
    func specMatchesRoutes() throws {
        let url = Repository.root.appendingPathComponent("openapi.yaml")
        // A missing document is a failure, not a skip.
        let text = try #require(
            try? String(contentsOf: url, encoding: .utf8), "openapi.yaml is missing at \(url.path)")
        let documented = OpenAPIPaths.operations(in: text)
        #expect(!documented.isEmpty, "no operations found under paths: in openapi.yaml")

        // The router needs no database to list its routes; nothing is started.
        let configuration = Configuration(
            database: PostgresConfiguration(connectionString: "postgresql://nobody@127.0.0.1:1/none"))
        let service = ActionHookService(configuration: configuration, logger: Logger(label: "openapi-test"))
        let served = service.routes.filter { !$0.hasPrefix("HEAD ") }
        #expect(Set(served).count == served.count, "the router lists a route twice")

        let duplicates = Dictionary(grouping: documented, by: { $0 }).filter { $0.value.count > 1 }.keys.sorted()
        #expect(duplicates.isEmpty, "documented twice: \(duplicates)")
        let undocumented = Set(served).subtracting(documented).sorted()
        let unserved = Set(documented).subtracting(served).sorted()
        #expect(
            undocumented.isEmpty && unserved.isEmpty,
            """
            openapi.yaml and the router differ.
            Served but not documented: \(undocumented)
            Documented but not served: \(unserved)
            """)
    }

    @Test("the paths reader: 2-space path keys, 4-space method keys, quotes, comments, other sections")
    func readerUnderstandsTheLayout() {
        let sample = """
            openapi: 3.1.0
            info:
              title: x
              # get: not an operation
            paths:
              # a comment
              /healthz:
                get:
                  summary: alive
                  responses:
                    '200':
                      description: ok
              '/v1/apps/{app}':
                parameters:
                  - $ref: '#/components/parameters/App'
                get:
                  operationId: getApp
                patch: # a comment after the key
                  operationId: patchApp
                x-internal: true
                delete:
                  operationId: deleteApp
              "/v1/apps/{app}/keys":
                post:
                  responses: {}
                head:
                  responses: {}
            components:
              schemas:
                App:
                  properties:
                    get:
                      type: string
              /not-a-path:
                put: {}
            """
        #expect(
            OpenAPIPaths.operations(in: sample) == [
                "GET /healthz", "GET /v1/apps/{app}", "PATCH /v1/apps/{app}", "DELETE /v1/apps/{app}",
                "POST /v1/apps/{app}/keys",
            ])
        #expect(OpenAPIPaths.operations(in: "openapi: 3.1.0\ninfo:\n  title: x\n").isEmpty)
        #expect(OpenAPIPaths.operations(in: "paths:\r\n  /a:\r\n    get:\r\n      x: 1\r\n") == ["GET /a"])
    }
}

/// A line-based reader of the `paths:` section: path keys at 2 spaces, method keys at 4 spaces.
private enum OpenAPIPaths {
    static let methods: Set<String> = ["get", "put", "post", "delete", "patch", "options", "trace"]

    /// `METHOD /path` for every operation, in document order; `head` is left out, as the router
    /// answers HEAD from GET.
    static func operations(in text: String) -> [String] {
        var operations: [String] = []
        var inPaths = false
        var path: String?
        // `Character.isNewline` covers "\n" and the single grapheme "\r\n".
        for raw in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
            let line = String(raw)
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            let indent = line.prefix { $0 == " " }.count
            if indent == 0 {
                inPaths = key(of: trimmed) == "paths"
                path = nil
                continue
            }
            guard inPaths, let name = key(of: trimmed) else { continue }
            if indent == 2 {
                path = name.hasPrefix("/") ? name : nil
            } else if indent == 4, let path, methods.contains(name.lowercased()) {
                operations.append(name.uppercased() + " " + path)
            }
        }
        return operations
    }

    /// The key of a `key:` or `key: value` line, unquoted; nil for list items and other lines.
    private static func key(of line: String) -> String? {
        guard !line.hasPrefix("-") else { return nil }
        var text = Substring(line)
        let name: Substring
        if let quote = text.first, quote == "'" || quote == "\"" {
            text = text.dropFirst()
            guard let end = text.firstIndex(of: quote) else { return nil }
            name = text[..<end]
            text = text[text.index(after: end)...]
            guard text.hasPrefix(":") else { return nil }
        } else {
            guard let colon = text.firstIndex(where: { $0 == ":" }) else { return nil }
            name = text[..<colon]
            text = text[colon...]
        }
        let rest = text.dropFirst()
        guard rest.isEmpty || rest.hasPrefix(" ") else { return nil }
        return String(name).trimmingCharacters(in: .whitespaces)
    }
}
