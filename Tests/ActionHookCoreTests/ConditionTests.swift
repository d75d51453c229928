import ActionHookCore
import Testing

@Suite("Conditions and matches")
struct ConditionTests {
    static let userInfo = json(
        """
        {"aps": {"category": "event-invite"}, "kind": "party", "count": 5, "price": 9.5,
         "big": 12345678901234567890, "tags": ["a", "b"], "nested": {"id": "x1"}, "nothing": null, "flag": true}
        """
    ).objectValue!

    struct Case: Sendable, CustomTestStringConvertible {
        var path: String
        var op: ConditionOperator
        var value: JSONValue?
        var holds: Bool
        var testDescription: String {
            "\(path) \(op.rawValue) \(value?.jsonText ?? "") → \(holds)"
        }
    }

    static let cases: [Case] = [
        Case(path: "kind", op: .eq, value: .string("party"), holds: true),
        Case(path: "kind", op: .eq, value: .string("Party"), holds: false),
        Case(path: "missing", op: .eq, value: .string("party"), holds: false),
        Case(path: "count", op: .eq, value: .number("5.0"), holds: true),
        Case(path: "count", op: .eq, value: .string("5"), holds: false),
        Case(path: "big", op: .eq, value: .number("12345678901234567891"), holds: false),
        Case(path: "nested.id", op: .eq, value: .string("x1"), holds: true),
        Case(path: "tags.1", op: .eq, value: .string("b"), holds: true),
        Case(path: "tags", op: .eq, value: json(#"["a", "b"]"#), holds: true),
        Case(path: "nothing", op: .eq, value: .null, holds: true),
        Case(path: "aps.category", op: .eq, value: .string("event-invite"), holds: true),
        Case(path: "kind", op: .ne, value: .string("party"), holds: false),
        Case(path: "kind", op: .ne, value: .string("wedding"), holds: true),
        Case(path: "missing", op: .ne, value: .string("party"), holds: true),
        Case(path: "kind", op: .in, value: json(#"["wedding", "party"]"#), holds: true),
        Case(path: "kind", op: .in, value: json(#"["wedding"]"#), holds: false),
        Case(path: "missing", op: .in, value: json(#"["party"]"#), holds: false),
        Case(path: "count", op: .in, value: json("[1, 5e0]"), holds: true),
        Case(path: "kind", op: .exists, holds: true),
        Case(path: "nothing", op: .exists, holds: true),
        Case(path: "missing", op: .exists, holds: false),
        Case(path: "tags.5", op: .exists, holds: false),
        Case(path: "kind.deeper", op: .exists, holds: false),
        Case(path: "missing", op: .absent, holds: true),
        Case(path: "kind", op: .absent, holds: false),
        Case(path: "kind", op: .prefix, value: .string("pa"), holds: true),
        Case(path: "kind", op: .prefix, value: .string("x"), holds: false),
        Case(path: "count", op: .prefix, value: .string("5"), holds: false),
        Case(path: "missing", op: .prefix, value: .string(""), holds: false),
        Case(path: "count", op: .gt, value: .integer(4), holds: true),
        Case(path: "count", op: .gt, value: .integer(5), holds: false),
        Case(path: "price", op: .gt, value: .number("9.25"), holds: true),
        Case(path: "big", op: .gt, value: .number("12345678901234567889"), holds: true),
        Case(path: "kind", op: .gt, value: .integer(1), holds: false),
        Case(path: "missing", op: .gt, value: .integer(1), holds: false),
        Case(path: "count", op: .lt, value: .integer(6), holds: true),
        Case(path: "count", op: .lt, value: .number("5"), holds: false),
        Case(path: "price", op: .lt, value: .number("1e1"), holds: true),
        Case(path: "flag", op: .lt, value: .integer(2), holds: false),
        Case(path: "missing", op: .lt, value: .integer(1), holds: false),
    ]

    @Test(arguments: cases)
    func holds(_ testCase: Case) {
        let condition = Condition(path: testCase.path, op: testCase.op, value: testCase.value)
        #expect(condition.holds(in: Self.userInfo) == testCase.holds)
    }

    @Test func everyOperatorIsCovered() {
        #expect(Set(Self.cases.map(\.op)) == Set(ConditionOperator.allCases))
        for op in ConditionOperator.allCases {
            #expect(Self.cases.contains { $0.op == op && $0.holds })
            #expect(Self.cases.contains { $0.op == op && !$0.holds })
            #expect(Self.cases.contains { $0.op == op && $0.path == "missing" })
        }
    }

    static let invite = NotificationResponse(
        actionIdentifier: "accept", userText: "  ", categoryIdentifier: "event-invite", userInfo: userInfo)

    @Test(arguments: [
        (RuleMatch(), true),
        (RuleMatch(category: "event-invite"), true),
        (RuleMatch(category: "reply"), false),
        (RuleMatch(actions: ["accept", "ACCEPT"]), true),
        (RuleMatch(actions: ["decline"]), false),
        (RuleMatch(userTextRequired: false), true),
        (RuleMatch(userTextRequired: true), false),
        (RuleMatch(userInfo: [Condition(path: "kind", op: .eq, value: .string("party"))]), true),
        (
            RuleMatch(userInfo: [
                Condition(path: "kind", op: .eq, value: .string("party")),
                Condition(path: "count", op: .gt, value: .integer(9)),
            ]), false
        ),
        (
            RuleMatch(
                category: "event-invite", actions: ["accept"],
                userInfo: [Condition(path: "nested.id", op: .exists)]), true
        ),
    ])
    func matches(match: RuleMatch, expected: Bool) {
        #expect(match.matches(Self.invite) == expected)
    }

    @Test(arguments: [(nil, false), ("", false), (" \n", false), ("ok", true)] as [(String?, Bool)])
    func userTextRequiredNeedsNonBlankText(text: String?, expected: Bool) {
        var response = Self.invite
        response.userText = text
        #expect(RuleMatch(userTextRequired: true).matches(response) == expected)
    }
}
