import ActionHookCLI
import ActionHookCore
import ActionHookServer
import Foundation
import ServiceTestSupport
import TestSupport
import Testing

/// `actionhook users` (list, show, erase, token) and identity in configuration files, against the real
/// service: tokens the CLI mints are verified by the service, and what `apply` writes is what `export` reads.
@Suite("Users, devices and identity: users list/show/erase/token, identity in apply and export")
struct UsersCommandTests {
    typealias Output = ApplyCommandTests.Output

    static func device(_ n: Int) -> String { String(format: "%064x", n) }

    static func register(
        _ api: TestAPI, app: String, _ token: String, user: String?, environment: String = "production",
        model: String = "iPhone17,1"
    ) throws {
        var body: [String: Any] = ["environment": environment, "model": model, "locale": "en_GB"]
        if let user { body["user"] = user }
        let json = String(decoding: try JSONSerialization.data(withJSONObject: body), as: UTF8.self)
        let answer = try api.admin("PUT", "/v1/apps/\(app)/devices/\(token)", json: json)
        try #require(answer.status == 200, "register: \(answer.status) \(answer.text)")
    }

    static func lines(_ output: Output) -> [String] {
        output.out.split(separator: "\n", omittingEmptySubsequences: false).dropLast().map(String.init)
    }

    @Test("users list pages through devices, by app and by user; show gives one user's; erase removes them")
    func listShowErase() throws {
        let api = try TestAPI()
        let client = ApplyCommandTests.client(api)
        _ = try api.createApp("people")
        _ = try api.createApp("other")
        try Self.register(api, app: "people", Self.device(1), user: "alice")
        try Self.register(api, app: "people", Self.device(2), user: "alice", environment: "sandbox", model: "iPad16,3")
        try Self.register(api, app: "people", Self.device(3), user: "bob")
        try Self.register(api, app: "people", Self.device(4), user: nil)
        try Self.register(api, app: "other", Self.device(5), user: "alice")

        let all = Output()
        try UserCommands.listDevices(appID: "people", user: nil, pageSize: 2, client: client, terminal: all.terminal)
        let rows = Self.lines(all).map { $0.split(separator: "\t", omittingEmptySubsequences: false).map(String.init) }
        #expect(rows.count == 4, "\(all.out)")
        #expect(rows.allSatisfy { $0.count == 7 && $0[0] == "people" }, "\(all.out)")
        #expect(Set(rows.map { $0[1] }) == Set((1...4).map(Self.device)))
        let anonymous = try #require(rows.first { $0[1] == Self.device(4) })
        #expect(
            anonymous[2] == "-" && anonymous[3] == "ios" && anonymous[4] == "production" && anonymous[5] == "active")
        let sandbox = try #require(rows.first { $0[1] == Self.device(2) })
        #expect(sandbox[2] == "alice" && sandbox[4] == "sandbox")

        let alice = Output()
        try UserCommands.listDevices(appID: "people", user: "alice", client: client, terminal: alice.terminal)
        #expect(Self.lines(alice).count == 2)
        #expect(Self.lines(alice).allSatisfy { $0.hasPrefix("people\t") && $0.contains("\talice\t") })

        // Without --app: every app's devices of the user.
        let everywhere = Output()
        try UserCommands.listDevices(appID: nil, user: "alice", client: client, terminal: everywhere.terminal)
        #expect(Self.lines(everywhere).count == 3, "\(everywhere.out)")
        #expect(Self.lines(everywhere).filter { $0.hasPrefix("other\t\(Self.device(5))\talice") }.count == 1)

        let shown = Output()
        try UserCommands.showUser(appID: "people", user: "alice", client: client, terminal: shown.terminal)
        #expect(shown.out.hasPrefix("user alice of app people\ndevices: 2 (2 active)\n"), "\(shown.out)")
        #expect(shown.out.contains("model iPad16,3"))
        #expect(shown.out.contains("locale en_GB"))
        // A device that signs its replies shows its key's fingerprint.
        let signer = DeviceSigner()
        let keyed = try api.admin(
            "PUT", "/v1/apps/people/devices/\(Self.device(1))",
            json: #"{"user": "alice", "environment": "production", "publicKey": "\#(signer.publicKey)"}"#)
        #expect(keyed.status == 200)
        let withKey = Output()
        try UserCommands.showUser(appID: "people", user: "alice", client: client, terminal: withKey.terminal)
        #expect(withKey.out.components(separatedBy: "key \(signer.fingerprint)").count == 2, "\(withKey.out)")

        let nobody = try #require(throws: CLIError.self) {
            try UserCommands.showUser(appID: "people", user: "nobody", client: client, terminal: Output().terminal)
        }
        #expect(nobody.description == "user nobody has no device registered in app people")
        let noApp = try #require(throws: CLIError.self) {
            try UserCommands.showUser(appID: "nope", user: "alice", client: client, terminal: Output().terminal)
        }
        #expect(noApp.description == "app nope does not exist")

        let erased = Output()
        try UserCommands.eraseUser(appID: "people", user: "alice", client: client, terminal: erased.terminal)
        #expect(erased.out.hasPrefix("erased user alice of app people: 2 devices, 0 replies"), "\(erased.out)")
        let after = Output()
        try UserCommands.listDevices(appID: "people", user: nil, client: client, terminal: after.terminal)
        #expect(
            Set(Self.lines(after).map { String($0.split(separator: "\t")[1]) }) == [Self.device(3), Self.device(4)])
        #expect(throws: CLIError.self) {
            try UserCommands.eraseUser(appID: "people", user: "alice", client: client, terminal: Output().terminal)
        }
        // The same user id in another app is another user.
        #expect(try api.count("SELECT count(*) AS n FROM devices WHERE app_id = 'other'") == 1)
    }

    @Test("user ids and device details with escape sequences, tabs and line breaks are written out, one device a line")
    func hostileText() throws {
        let api = try TestAPI()
        let client = ApplyCommandTests.client(api)
        _ = try api.createApp("people")
        let user = "mal\u{1B}]0;owned\u{07}\tfake\ncolumn\u{9B}2J"
        try Self.register(api, app: "people", Self.device(7), user: user, model: "x\u{1B}[2J\ty")

        func clean(_ text: String) -> Bool {
            !text.unicodeScalars.contains { [0x1B, 0x07, 0x9B, 0x0D].contains($0.value) }
        }
        let listed = Output()
        try UserCommands.listDevices(appID: "people", user: user, client: client, terminal: listed.terminal)
        #expect(clean(listed.out))
        #expect(Self.lines(listed).count == 1, "\(listed.out)")
        #expect(listed.out.contains("mal\\x1b]0;owned\\x07\\tfake\\ncolumn\\u009b2J"), "\(listed.out)")
        #expect(listed.out.split(separator: "\t").count == 7)

        let shown = Output()
        try UserCommands.showUser(appID: "people", user: user, client: client, terminal: shown.terminal)
        #expect(clean(shown.out))
        #expect(shown.out.contains("model x\\x1b[2J\\ty"), "\(shown.out)")

        let missing = try #require(throws: CLIError.self) {
            try UserCommands.showUser(
                appID: "people", user: "a\u{1B}[2J\nb", client: client, terminal: Output().terminal)
        }
        let reported = Output()
        reported.terminal.error(missing.description)
        #expect(clean(reported.err))

        let erased = Output()
        try UserCommands.eraseUser(appID: "people", user: user, client: client, terminal: erased.terminal)
        #expect(clean(erased.out))
        #expect(Self.lines(erased).count == 1)
        #expect(try api.count("SELECT count(*) AS n FROM devices") == 0)
    }

    @Test(
        "users token: ES256, RS256 and HS256 tokens are verified by the service; a reply is stored as the verified user"
    )
    func mintedTokens() throws {
        let api = try TestAPI()
        let es256 = UserTokenMint.es256(kid: "backend-es")
        let rs256 = try UserTokenMint.rs256(kid: "backend-rs")
        let created = try api.admin(
            "POST", "/v1/apps",
            json: #"""
                {"id": "id-app", "identity": {"mode": "required", "keys": [\#(es256.keyJSON), \#(rs256.keyJSON),
                    {"kid": "shared", "algorithm": "HS256"}]}}
                """#)
        try #require(created.status == 201, "\(created.text)")
        let ingestKey = try #require((created.json["ingestKey"] as? [String: Any])?["secret"] as? String)
        let secret = try #require((created.json["identitySecrets"] as? [String: Any])?["shared"] as? String)

        func reply(_ token: String?) throws -> TestResponse {
            try api.ingest(
                key: ingestKey, json: #"{"actionIdentifier": "OK"}"#,
                headers: token.map { [("ActionHook-User-Token", $0)] } ?? [])
        }
        let cases: [(user: String, kid: String, algorithm: String?, material: UserTokenMinter.Material)] = [
            ("alice", "backend-es", nil, .privateKey(es256.privateKeyPEM)),
            ("bob", "backend-rs", "RS256", .privateKey(rs256.privateKeyPEM)),
            ("carol", "shared", nil, .secret(secret)),
        ]
        for test in cases {
            let token = try UserTokenMinter.mint(
                appID: "id-app", user: test.user, kid: test.kid, algorithm: test.algorithm, material: test.material,
                lifetime: 600)
            let answer = try reply(token)
            #expect(answer.status == 202, "\(test.user): \(answer.text)")
            let user = answer.json["user"] as? [String: Any]
            #expect(user?["id"] as? String == test.user)
            #expect(user?["verified"] as? Bool == true)
        }
        #expect(try reply(nil).status == 401)
        let stored = try api.query("SELECT user_id, user_verified FROM responses ORDER BY received_at, id").map {
            (try $0.decode("user_id", as: String?.self), try $0.decode("user_verified", as: Bool.self))
        }
        #expect(stored.map(\.0) == ["alice", "bob", "carol"])
        #expect(stored.allSatisfy { $0.1 })

        // Its claims: sub, aud (the app), iat and exp `lifetime` apart, in whole seconds; kid in the header.
        let token = try UserTokenMinter.mint(
            appID: "id-app", user: "dave", kid: "shared", algorithm: "HS256", material: .secret(secret), lifetime: 90)
        let parts = token.split(separator: ".").map(String.init)
        func decoded(_ part: String) throws -> JSONObject {
            var text = part.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
            text += String(repeating: "=", count: (4 - text.utf8.count % 4) % 4)
            let data = try #require(Data(base64Encoded: text))
            return try #require(try JSONParser.parse(String(decoding: data, as: UTF8.self)).objectValue)
        }
        let header = try decoded(parts[0])
        #expect(header["alg"]?.stringValue == "HS256" && header["kid"]?.stringValue == "shared")
        let claims = try decoded(parts[1])
        #expect(claims["sub"]?.stringValue == "dave")
        #expect(claims["aud"]?.stringValue == "id-app" || claims["aud"]?.arrayValue == [.string("id-app")])
        let issued = try #require(claims["iat"]?.intValue)
        #expect(claims["exp"]?.intValue == issued + 90)

        // Refused before signing: the material does not fit the algorithm, or the key is not a key.
        let refusals: [(String, UserTokenMinter.Material)] = [
            ("HS256", .privateKey(es256.privateKeyPEM)),
            ("ES256", .secret(secret)),
            ("RS256", .privateKey(es256.privateKeyPEM)),
            ("ES256", .privateKey("not a key")),
            ("PS256", .privateKey(es256.privateKeyPEM)),
        ]
        for (algorithm, material) in refusals {
            #expect(throws: CLIError.self) {
                try UserTokenMinter.mint(
                    appID: "id-app", user: "x", kid: "k", algorithm: algorithm, material: material, lifetime: 60)
            }
        }
    }

    @Test("the binary: users token --key mints a token the service takes; users erase needs --yes; users list prints")
    func binary() throws {
        let api = try TestAPI()
        let es256 = UserTokenMint.es256(kid: "backend-es")
        let created = try api.admin(
            "POST", "/v1/apps",
            json: #"{"id": "id-app", "identity": {"mode": "required", "keys": [\#(es256.keyJSON)]}}"#)
        try #require(created.status == 201, "\(created.text)")
        let ingestKey = try #require((created.json["ingestKey"] as? [String: Any])?["secret"] as? String)
        try Self.register(api, app: "id-app", Self.device(9), user: "erin")
        let folder = try ApplyCommandTests.Folder()
        let keyPath = try folder.write("es256.pem", es256.privateKeyPEM)

        let binary = try ServeProcess.binary()
        func run(_ arguments: [String]) throws -> (status: Int32, out: String, err: String) {
            let process = Process()
            process.executableURL = binary
            process.arguments = arguments
            process.environment = [
                "ACTIONHOOK_URL": "http://127.0.0.1:\(api.port)", "ACTIONHOOK_ADMIN_TOKEN": TestService.adminToken,
            ]
            let out = Pipe()
            let err = Pipe()
            process.standardOutput = out
            process.standardError = err
            try process.run()
            let outData = out.fileHandleForReading.readDataToEndOfFile()
            let errData = err.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (
                process.terminationStatus, String(decoding: outData, as: UTF8.self),
                String(decoding: errData, as: UTF8.self)
            )
        }

        let minted = try run([
            "users", "token", "--app", "id-app", "--user", "erin", "--kid", "backend-es", "--key", keyPath,
        ])
        #expect(minted.status == 0, "\(minted)")
        let token = minted.out.trimmingCharacters(in: .whitespacesAndNewlines)
        let answer = try api.ingest(
            key: ingestKey, json: #"{"actionIdentifier": "OK"}"#, headers: [("ActionHook-User-Token", token)])
        #expect(answer.status == 202, "\(answer.text)")
        #expect((answer.json["user"] as? [String: Any])?["verified"] as? Bool == true)

        let help = try run(["users", "token", "--help"])
        #expect(help.out.contains("mint_user_token.py"), "\(help.out)")

        let listed = try run(["users", "list", "--app", "id-app"])
        #expect(listed.status == 0)
        #expect(listed.out.hasPrefix("id-app\t\(Self.device(9))\terin\t"), "\(listed.out)")

        let unconfirmed = try run(["users", "erase", "--app", "id-app", "erin"])
        #expect(unconfirmed.status != 0)
        #expect(unconfirmed.err.contains("--yes"), "\(unconfirmed.err)")
        #expect(try api.count("SELECT count(*) AS n FROM devices") == 1)
        let confirmed = try run(["users", "erase", "--app", "id-app", "erin", "--yes"])
        #expect(confirmed.status == 0, "\(confirmed)")
        #expect(try api.count("SELECT count(*) AS n FROM devices") == 0)
        #expect(try run(["users", "show", "--app", "id-app", "erin"]).status == 1)
    }

    @Test(
        "identity in files: an ES256 public key and an HS256 key; the secret is printed once, never exported; export round-trips"
    )
    func identityApplyExport() throws {
        let api = try TestAPI()
        let client = ApplyCommandTests.client(api)
        let folder = try ApplyCommandTests.Folder()
        let es256 = UserTokenMint.es256(kid: "backend-es")
        let pem = try #require(es256.publicKeyPEM)
        func file(mode: String, keys: String) -> String {
            ApplyCommandTests.file(
                app: "ident", rules: [ApplyCommandTests.rule("a")],
                extra: "identity:\n  mode: \(mode)\n  keys:\n" + keys)
        }
        let esKey =
            "    - kid: backend-es\n      algorithm: ES256\n      publicKey: |\n"
            + pem.split(separator: "\n").map { "        " + $0 + "\n" }.joined()
        let hsKey = "    - kid: shared\n      algorithm: HS256\n"
        let path = try folder.write("ident.yaml", file(mode: "required", keys: esKey + hsKey))

        let first = try ApplyCommandTests.apply(api, [path])
        #expect(first.output.out.contains("+ setting identity.mode: off → required"), "\(first.output.out)")
        #expect(first.output.out.contains("+ setting identity.keys: + backend-es (ES256)"))
        #expect(first.output.out.contains("+ setting identity.keys: + shared (HS256; the server generates its secret)"))
        let prefix = "an HS256 secret was generated for the identity key shared (shown only now): "
        let secretLines = ApplyCommandTests.Output.lines(first.output).filter { $0.hasPrefix(prefix) }
        #expect(secretLines.count == 1, "\(first.output.out)")
        let secret = try #require(secretLines.first.map { String($0.dropFirst(prefix.count)) })
        #expect(secret.hasPrefix("ahu_"))
        let ingestKey = try #require(
            ApplyCommandTests.Output.lines(first.output).first { $0.hasPrefix("created app ident") }?.split(
                separator: " "
            ).last.map(String.init))

        // Both keys verify: the public key as written, the secret as printed.
        func verifies(_ token: String) throws -> Bool {
            try api.ingest(
                key: ingestKey, json: #"{"actionIdentifier": "a"}"#, headers: [("ActionHook-User-Token", token)]
            ).status == 202
        }
        #expect(try verifies(try es256.token(user: "alice", app: "ident")))
        let hsToken = {
            try UserTokenMinter.mint(
                appID: "ident", user: "bob", kid: "shared", algorithm: nil, material: .secret(secret), lifetime: 60)
        }
        #expect(try verifies(try hsToken()))

        // Again: nothing changes, no secret is printed.
        let again = try ApplyCommandTests.apply(api, [path])
        #expect(!again.changed, "\(again.output.out)")
        #expect(!again.output.out.contains("ahu_"))

        let exported = try ConfigurationFiles.exportText(appID: "ident", client: client)
        #expect(exported.contains("identity:"), "\(exported)")
        #expect(exported.contains("mode: required"))
        #expect(exported.contains("kid: shared"))
        #expect(exported.contains("algorithm: HS256"))
        #expect(exported.contains("BEGIN PUBLIC KEY"))
        #expect(!exported.contains(secret) && !exported.contains("secretConfigured") && !exported.contains("ahu_"))
        let exportedPath = try folder.write("exported.yaml", exported)
        let roundTrip = try ApplyCommandTests.apply(api, [exportedPath], prune: true)
        #expect(!roundTrip.changed, "\(roundTrip.output.out)")
        #expect(try ConfigurationFiles.exportText(appID: "ident", client: client) == exported)

        // A changed mode and a second HS256 key: only the new key's secret is printed; the old one still works.
        let edited = try folder.write(
            "ident.yaml", file(mode: "optional", keys: esKey + hsKey + "    - kid: shared-2\n      algorithm: HS256\n"))
        let changed = try ApplyCommandTests.apply(api, [edited])
        #expect(changed.output.out.contains("~ setting identity.mode: required → optional"), "\(changed.output.out)")
        #expect(changed.output.out.contains("~ setting identity.keys: + shared-2 (HS256"))
        #expect(
            ApplyCommandTests.Output.lines(changed.output).filter { $0.contains("(shown only now)") }.map {
                $0.contains("identity key shared-2 ")
            } == [true], "\(changed.output.out)")
        #expect(try verifies(try hsToken()))

        // A key dropped from the file is dropped from the server.
        let fewer = try ApplyCommandTests.apply(
            api, [try folder.write("ident.yaml", file(mode: "optional", keys: hsKey))])
        #expect(fewer.output.out.contains("~ setting identity.keys: - backend-es (ES256)"), "\(fewer.output.out)")
        #expect(!(try verifies(try es256.token(user: "alice", app: "ident"))))

        // A secret written in the file is refused before anything is sent.
        let literal = try folder.write(
            "literal.yaml", file(mode: "optional", keys: hsKey + "      secret: \(secret)\n"))
        let refused = try #require(throws: CLIError.self) { try ApplyCommandTests.apply(api, [literal]) }
        #expect(refused.description.contains("identity/keys/0/secret: an HS256 secret is never written in the file"))
        #expect(!refused.description.contains(secret))

        // A bad public key is named at its line by the server.
        let badText = file(mode: "optional", keys: "    - kid: bad\n      algorithm: ES256\n      publicKey: nope\n")
        let bad = try folder.write("bad.yaml", badText)
        let line =
            try #require(
                badText.split(separator: "\n", omittingEmptySubsequences: false).firstIndex { $0.contains("nope") }
            ) + 1
        let badKey = try #require(throws: CLIError.self) { try ApplyCommandTests.apply(api, [bad]) }
        #expect(badKey.description.hasPrefix("\(bad):\(line): identity/keys/0/publicKey: must be"), "\(badKey)")

        // identity: null turns it off; the export then has no identity.
        let off = try ApplyCommandTests.apply(
            api,
            [
                try folder.write(
                    "ident.yaml",
                    ApplyCommandTests.file(app: "ident", rules: [ApplyCommandTests.rule("a")], extra: "identity: null"))
            ])
        #expect(off.output.out.contains("~ setting identity: removed"), "\(off.output.out)")
        #expect(!(try ConfigurationFiles.exportText(appID: "ident", client: client)).contains("\nidentity:"))
    }
}

extension ApplyCommandTests.Output {
    /// The lines written to standard output.
    static func lines(_ output: ApplyCommandTests.Output) -> [String] {
        output.out.split(separator: "\n").map(String.init)
    }
}
