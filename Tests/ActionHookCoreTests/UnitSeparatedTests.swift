import ActionHookCore
import Testing

@Suite("Names joined by U+001F")
struct UnitSeparatedTests {
    @Test(
        "joined and split again, the names come back",
        arguments: [["app", "key"], ["snooze", "app", "n-1", "abcd"], ["one"], ["", "b"], ["a b", "c=d", "é"]])
    func roundTrip(_ names: [String]) {
        let joined = UnitSeparated.join(names)
        #expect(UnitSeparated.split(joined) == names)
        #expect(joined.unicodeScalars.filter { $0 == "\u{1F}" }.count == names.count - 1)
    }

    @Test("the variadic and array forms agree")
    func forms() {
        #expect(UnitSeparated.join("notifications", "k") == UnitSeparated.join(["notifications", "k"]))
        #expect(UnitSeparated.join("a", "b") == "a\u{1F}b")
    }
}
