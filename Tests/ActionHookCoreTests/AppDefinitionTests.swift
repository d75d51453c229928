import ActionHookCore
import Foundation
import Testing

/// An app's settings as `POST /v1/apps` and `PATCH /v1/apps/{app}` take them: the integer settings
/// `rateLimitPerSecond` and `retentionDays`.
@Suite("App definitions")
struct AppDefinitionTests {
    static func createFailure(_ body: String) -> ValidationFailure? {
        do {
            _ = try AppDefinition.decodeCreate(json(body))
            return nil
        } catch {
            return error
        }
    }

    static func patchFailure(_ app: AppDefinition, _ body: String) -> ValidationFailure? {
        do {
            _ = try app.applyingPatch(json(body))
            return nil
        } catch {
            return error
        }
    }

    @Test("retentionDays and rateLimitPerSecond are read on create; absent or null is the server's")
    func create() throws {
        let app = try AppDefinition.decodeCreate(json(#"{"id":"a","retentionDays":7,"rateLimitPerSecond":5}"#)).app
        #expect(app.retentionDays == 7)
        #expect(app.rateLimitPerSecond == 5)
        #expect(try AppDefinition.decodeCreate(json(#"{"id":"a"}"#)).app.retentionDays == nil)
        #expect(try AppDefinition.decodeCreate(json(#"{"id":"a","retentionDays":null}"#)).app.retentionDays == nil)
        #expect(try AppDefinition.decodeCreate(json(#"{"id":"a","retentionDays":1}"#)).app.retentionDays == 1)
        #expect(try AppDefinition.decodeCreate(json(#"{"id":"a","retentionDays":36500}"#)).app.retentionDays == 36_500)
    }

    @Test(
        "a value out of range or not an integer is refused at its pointer, on create and on patch",
        arguments: [
            ("0", Expected.invalid("/retentionDays")), ("40000", .invalid("/retentionDays")),
            ("-1", .invalid("/retentionDays")), ("1.5", .invalid("/retentionDays")),
            (#""x""#, .shape("/retentionDays")), ("true", .shape("/retentionDays")),
        ])
    func refused(value: String, expected: Expected) throws {
        let created = try #require(Self.createFailure(#"{"id":"a","retentionDays":\#(value)}"#))
        #expect(created.status == expected.status)
        #expect(created.pointers == [expected.pointer])
        let patched = try #require(
            Self.patchFailure(AppDefinition(id: "a", name: "a"), #"{"retentionDays":\#(value)}"#))
        #expect(patched.status == expected.status)
        #expect(patched.pointers == [expected.pointer])
    }

    @Test("a patch sets retentionDays, leaves it when absent and clears it with null; other settings stay")
    func patch() throws {
        let app = AppDefinition(id: "a", name: "A", rateLimitPerSecond: 5)
        let set = try app.applyingPatch(json(#"{"retentionDays":14}"#)).app
        #expect(set.retentionDays == 14)
        #expect(set.rateLimitPerSecond == 5)
        let renamed = try set.applyingPatch(json(#"{"name":"B"}"#)).app
        #expect(renamed.retentionDays == 14)
        #expect(renamed.name == "B")
        let cleared = try renamed.applyingPatch(json(#"{"retentionDays":null}"#)).app
        #expect(cleared.retentionDays == nil)
        #expect(cleared.rateLimitPerSecond == 5)
    }
}
