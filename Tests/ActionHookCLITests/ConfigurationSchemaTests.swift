import ActionHookCLI
import ActionHookCore
import Foundation
import TestSupport
import Testing

/// `actionhook-config.schema.json` (the file format's JSON Schema, for editors) stays in step with
/// openapi.yaml: its categories and rules are the API's own schemas.
@Suite("Configuration file schema")
struct ConfigurationSchemaTests {
    static func rewritingReferences(_ value: JSONValue) -> JSONValue {
        switch value {
        case .object(let object):
            return .object(
                JSONObject(
                    object.members.map { member in
                        if member.key == "$ref", let target = member.value.stringValue,
                            target.hasPrefix("#/components/schemas/")
                        {
                            return (
                                key: "$ref",
                                value: .string("#/$defs/" + target.dropFirst("#/components/schemas/".count))
                            )
                        }
                        return (key: member.key, value: rewritingReferences(member.value))
                    }))
        case .array(let elements):
            return .array(elements.map(rewritingReferences))
        default:
            return value
        }
    }

    @Test("every definition the schema copies from openapi.yaml is the same (scripts/gen-config-schema.py)")
    func schemaMatchesOpenAPI() throws {
        let root = Repository.root
        let openapi = try YAMLDocument(
            text: try String(contentsOf: root.appendingPathComponent("openapi.yaml"), encoding: .utf8), name: "openapi")
        let components = try #require(openapi.value.objectValue?["components"]?.objectValue?["schemas"]?.objectValue)
        let schema = try JSONParser.parse(
            try String(contentsOf: root.appendingPathComponent("actionhook-config.schema.json"), encoding: .utf8))
        let defs = try #require(schema.objectValue?["$defs"]?.objectValue)
        #expect(defs["CategoryInput"] != nil && defs["RuleCreate"] != nil && defs["Handler"] != nil)
        for (name, definition) in defs.members where name != "EnvironmentReference" {
            let source = try #require(components[name], "\(name) is not in openapi.yaml")
            #expect(
                Self.rewritingReferences(source).canonicalText == definition.canonicalText,
                "\(name) differs from openapi.yaml: run python3 scripts/gen-config-schema.py")
        }
    }
}
