import ActionHookCore
import Foundation
import Synchronization
import Testing

@Suite("JSON reading and writing")
struct JSONTests {
    /// Strings with every kind of character the writer treats specially.
    static let awkward: [String] = [
        "", "plain", "quote \" and backslash \\", "line\nfeed\rreturn\ttab", "\u{0}\u{1}\u{1F}\u{7F}",
        "line separator \u{2028} paragraph \u{2029}", "\u{E2}\u{80}", "é ü ß 東京 🎉 👩‍👩‍👧", "\u{2027}\u{202A}",
        "end with escape\\", "zero\u{FEFF}width",
    ]

    @Test("written text parses back to the same value, and its size is counted without writing")
    func roundTrip() throws {
        for text in Self.awkward {
            let value = JSONValue.object(
                JSONObject([(key: text, value: .array([.string(text), .integer(-12), .null]))]))
            let bytes = value.jsonBytes
            #expect(bytes.count == value.jsonByteCount)
            #expect(try JSONParser.parse(bytes) == value)
            // Foundation agrees on what the text means.
            let decoded = try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: [Any]])
            #expect(decoded.count == 1 && decoded.values.first?.first as? String == text)
        }
    }

    @Test("control characters, U+2028 and U+2029 are written as escapes")
    func escapes() {
        #expect(JSONValue.string("a\u{1}b\u{1F}").jsonText == #""a\u0001b\u001f""#)
        #expect(JSONValue.string("\u{2028}\u{2029}").jsonText == #""\u2028\u2029""#)
        #expect(JSONValue.string("\"\\\n\r\t").jsonText == #""\"\\\n\r\t""#)
        #expect(JSONValue.string("é→").jsonText == "\"é→\"")
    }

    @Test("escaped strings decode: named escapes, \\u escapes and surrogate pairs")
    func escapedStrings() throws {
        #expect(try JSONParser.parse(#""a\"b\\c\/d\b\f\n\r\t""#) == .string("a\"b\\c/d\u{8}\u{C}\n\r\t"))
        #expect(try JSONParser.parse(#""\u00e9\u6771 \ud83c\udf89 x""#) == .string("é東 🎉 x"))
        #expect(try JSONParser.parse(#""\u0000""#) == .string("\u{0}"))
        #expect(throws: JSONParseError.self) { try JSONParser.parse(#""\ud83c""#) }
        #expect(throws: JSONParseError.self) { try JSONParser.parse(#""\udf89""#) }
        #expect(throws: JSONParseError.self) { try JSONParser.parse(#""\x""#) }
        #expect(throws: JSONParseError.self) { try JSONParser.parse("\"tab\there\"") }
    }

    @Test("a duplicate member name is refused in small and large objects")
    func duplicates() throws {
        for size in [2, 15, 16, 17, 40] {
            let members = (0..<size).map { "\"k\($0)\":\($0)" }
            #expect(try JSONParser.parse("{" + members.joined(separator: ",") + "}").objectValue?.keys.count == size)
            for position in [1, size - 1] {
                let duplicate = "\"k\(position - 1)\":true"
                let text = "{" + (members + [duplicate]).joined(separator: ",") + "}"
                let error = #expect(throws: JSONParseError.self) { try JSONParser.parse(text) }
                #expect(error?.reason == .duplicateKey)
                #expect(error?.offset == text.utf8.count - 1 - duplicate.utf8.count)
            }
        }
        // Names equal as Unicode text are the same name, however they are spelled.
        #expect(throws: JSONParseError.self) { try JSONParser.parse(#"{"é":1,"e\u0301":2}"#) }
    }

    @Test("dot paths step through members and array indexes; empty names are names")
    func paths() throws {
        let value = try JSONParser.parse(#"{"a":{"b":[10,{"c":"d"}],"":{"x":1}},"é":2,"a.b":3}"#)
        #expect(value.value(atPath: "a.b.0") == .integer(10))
        #expect(value.value(atPath: "a.b.1.c") == .string("d"))
        #expect(value.value(atPath: "a..x") == .integer(1))
        #expect(value.value(atPath: "e\u{301}") == .integer(2))
        #expect(value.value(atPath: "a.b") == value.objectValue?["a"]?.objectValue?["b"])
        for missing in ["", "a.b.2", "a.b.x", "a.b.-1", "a.b.0.c", "b", "a.b.", "a.b.1.c.d"] {
            #expect(value.value(atPath: missing) == nil, "\(missing)")
        }
    }

    @Test("equal values written canonically give equal bytes whatever their member order")
    func canonical() throws {
        let first = try JSONParser.parse(#"{"b":1,"a":{"y":[1,2],"x":"é"}}"#)
        let second = try JSONParser.parse(#"{"a":{"x":"\u00e9","y":[1,2]},"b":1}"#)
        #expect(first.canonicalBytes == second.canonicalBytes)
        #expect(first.canonicalText == #"{"a":{"x":"é","y":[1,2]},"b":1}"#)
        #expect(first.jsonText == #"{"b":1,"a":{"y":[1,2],"x":"é"}}"#)
    }

    /// Ingest skips measuring `userInfo` when the body is too short to hold one over the limit; that
    /// rests on this bound, met exactly by the escapes that grow most.
    @Test("compact JSON is at most three bytes for each byte of the text it was parsed from")
    func compactSizeBound() throws {
        let bound = JSONValue.maxCompactBytesPerSourceByte
        let escapes = [#"\b"#, #"\f"#, "\u{2028}", #"\u2029"#, #"\u0001"#, #"\n"#, #"\/"#, #"\ud83d\ude00"#, "é", "x"]
        for escape in escapes {
            let text = #"[""# + String(repeating: escape, count: 1_000) + #""]"#
            let value = try JSONParser.parse(text)
            #expect(value.jsonByteCount <= bound * text.utf8.count, "\(escape)")
            #expect(value.jsonByteCount == value.jsonBytes.count)
        }
        let worst = try JSONParser.parse(#"[""# + String(repeating: #"\b"#, count: 1_000) + #""]"#)
        #expect(worst.jsonByteCount == 2 + 2 + 6 * 1_000)
    }

    /// The parser reads its bytes unchecked in release builds; in this (debug) build every read past
    /// the end traps. Every prefix of a realistic body, and seeded random mutations of it (bytes
    /// replaced by ones the parser treats specially, dropped or doubled), must parse or be refused
    /// with a parse error, and whatever parses must write back to text that parses to the same value.
    @Test("truncated and mutated bodies parse or are refused, never read past their end")
    func mutatedBodies() {
        let body = Array(
            #"{"actionIdentifier":"comment","userText":"On my way \u00e9\ud83d\ude00","userInfo":{"aps":{"alert":{"title":"Rooftop","body":"Sat 8pm"},"category":"event-invite"},"eventId":-12.5e3,"ok":[true,false,null,{}],"s":"tab\t\"q\" é"},"deviceToken":"0a0b"}"#
                .utf8)
        func check(_ bytes: [UInt8]) {
            do {
                let value = try JSONParser.parse(bytes)
                #expect(try JSONParser.parse(value.jsonBytes) == value)
                #expect(value.jsonByteCount <= JSONValue.maxCompactBytesPerSourceByte * bytes.count)
            } catch {
                // Refused with its reason and position: what the parser is for.
            }
        }
        for end in 0...body.count { check(Array(body[..<end])) }
        let special =
            Array(#"{}[]",:\u0123456789eE+-.tfn "#.utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xC3, 0xE2, 0xED, 0xF0, 0xF4, 0xFF]
        var state: UInt64 = 0x5EED
        func random(_ bound: Int) -> Int {
            // SplitMix64: the same cases on every run.
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return Int((z ^ (z >> 31)) % UInt64(bound))
        }
        for _ in 0..<5_000 {
            var bytes = body
            for _ in 0..<(1 + random(3)) {
                let at = random(bytes.count)
                switch random(3) {
                case 0: bytes[at] = special[random(special.count)]
                case 1: bytes.remove(at: at)
                default: bytes.insert(bytes[at], at: at)
                }
            }
            check(bytes)
            check(Array(bytes[..<random(bytes.count + 1)]))
        }
    }
}

@Suite("White space and bearer tokens")
struct TextTests {
    @Test("a comment of only Unicode white space is blank; other text is not")
    func blank() {
        let comment = RuleHandler.comment(maxLength: 100)
        for text in ["", " ", "\t\n\r\u{0B}\u{0C}", "\u{A0}\u{3000}\u{2028}\u{85}\u{2003}"] {
            #expect(throws: ValidationFailure.self) { try RuleEngine.check(comment, response: Self.response(text)) }
        }
        for text in ["x", " \u{A0}ok ", "\u{200B}", "🎉"] {
            #expect(throws: Never.self) { try RuleEngine.check(comment, response: Self.response(text)) }
        }
    }

    @Test("the bearer scheme is case-insensitive and the token is trimmed")
    func bearer() {
        #expect(SecretToken.bearer("Bearer abc") == "abc")
        #expect(SecretToken.bearer("bEaReR   abc  ") == "abc")
        #expect(SecretToken.bearer("  Bearer abc") == "abc")
        #expect(SecretToken.bearer("Bearer \t abc\t") == "abc")
        #expect(SecretToken.bearer("Bearer abc\u{A0}") == "abc")
        #expect(SecretToken.bearer("BEARER ab c ") == "ab c")
        #expect(SecretToken.bearer("Bearer ahk_0123456789abcdef_XYZ") == "ahk_0123456789abcdef_XYZ")
        for refused in [
            nil, "", "Bearer", "Bearer ", "Bearer    ", "Bearerx abc", "Basic abc", "Beare abc",
            "Bearer " + String(repeating: "k", count: 513),
        ] as [String?] {
            #expect(SecretToken.bearer(refused) == nil)
        }
    }

    static func response(_ text: String) -> NotificationResponse {
        let body = JSONValue.object([
            "actionIdentifier": .string("comment"), "userText": .string(text), "notificationIdentifier": .string("n1"),
            "userInfo": .object([:]),
        ])
        return try! NotificationResponse.decode(body)
    }
}

@Suite("Typed JSON records")
struct JSONRecordsTests {
    @Test("records written member by member read back as the objects they describe")
    func records() throws {
        let id = UUID()
        let at = Date(timeIntervalSince1970: 1_795_168_800.123)
        var records = JSONRecords()
        #expect(try JSONParser.parse(records.text) == .array([]))
        records.beginRecord()
        records.add("text", "quote \" \u{2028} é")
        records.add("none", nil as String?)
        records.add("number", -42)
        records.add("flag", true)
        records.add("id", id)
        records.add("at", at)
        records.add("never", nil as Date?)
        records.add("nested", JSONValue.object(["a": .array([.null, .string("\n")])]))
        records.endRecord()
        records.beginRecord()
        records.endRecord()
        #expect(records.count == 2)
        let parsed = try JSONParser.parse(records.text)
        #expect(
            parsed
                == .array([
                    .object([
                        "text": .string("quote \" \u{2028} é"), "none": .null, "number": .integer(-42),
                        "flag": .bool(true),
                        "id": .string(id.uuidString.lowercased()), "at": .string("2026-11-20T10:00:00.123Z"),
                        "never": .null,
                        "nested": .object(["a": .array([.null, .string("\n")])]),
                    ]),
                    .object([:]),
                ]))
    }

    @Test("hex and UUID text match Foundation's")
    func hex() {
        for _ in 0..<100 {
            let id = UUID()
            #expect(id.lowercasedString == id.uuidString.lowercased())
        }
        let bytes = (0...255).map { UInt8($0) }
        var hex: [UInt8] = []
        Hex.append(bytes, to: &hex)
        #expect(String(decoding: hex, as: UTF8.self) == bytes.map { String(format: "%02x", $0) }.joined())
    }
}

@Suite("Time-ordered ids")
struct TimeOrderedIDTests {
    @Test("version 7 UUIDs carry their millisecond, sort by time and do not repeat")
    func version7() {
        let start = Date(timeIntervalSince1970: 1_795_168_800.123)
        let ids = (0..<1000).map {
            UUID.timeOrdered(at: Date(timeIntervalSince1970: Double(1_795_168_800_123 + $0) / 1000))
        }
        for id in ids {
            let text = id.lowercasedString
            #expect(text.wholeMatch(of: /[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}/) != nil)
        }
        let milliseconds = String(1_795_168_800_123, radix: 16)
        let timeDigits = String(repeating: "0", count: 12 - milliseconds.count) + milliseconds
        #expect(ids.first!.lowercasedString.hasPrefix(timeDigits.prefix(8) + "-" + timeDigits.dropFirst(8)))
        let texts = ids.map(\.lowercasedString)
        #expect(zip(texts, texts.dropFirst()).allSatisfy { $0 < $1 })
        let sameMillisecond = (0..<1000).map { _ in UUID.timeOrdered(at: start) }
        #expect(Set(sameMillisecond).count == 1000)
    }

    @Test("ids made on many threads at once do not repeat (the random bits come from a shared pool)")
    func concurrentIDsAreDistinct() {
        let start = Date(timeIntervalSince1970: 1_795_168_800.123)
        let made = Mutex<[UUID]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { _ in
            let ids = (0..<2000).map { _ in UUID.timeOrdered(at: start) }
            made.withLock { $0.append(contentsOf: ids) }
        }
        #expect(Set(made.withLock { $0 }).count == 16_000)
    }
}
