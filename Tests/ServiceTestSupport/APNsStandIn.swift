import ActionHookCore
import ActionHookServer
import Foundation
import TestSupport

/// One request the APNs stand-in (`Tests/Fixtures/apns_standin.py`) received, read from its log.
package struct APNsStandInRequest {
    /// Order of arrival, from 1.
    package let seq: Int
    /// The TCP connection it came on (numbered from 1 by the stand-in).
    package let connection: Int
    /// The HTTP/2 stream id.
    package let stream: Int
    /// When the request was complete at the stand-in (UNIX seconds).
    package let time: Double
    package let method: String?
    package let path: String?
    /// The device token from the path.
    package let token: String?
    /// Header fields, lower-case names, without pseudo-headers and `authorization`.
    package let headers: [String: String]
    /// The provider token (compact JWT), and what it said.
    package let jwt: String?
    package let alg: String?
    package let kid: String?
    package let iss: String?
    package let iat: Int?
    /// The stand-in's answer: 200, or an error status with APNs' `reason`.
    package let status: Int
    package let reason: String?
    /// The payload parsed as JSON (nil when it was not JSON), and its size.
    package let payload: Any?
    package let payloadBytes: Int

    package var apnsID: String? { headers["apns-id"] }
    package var payloadObject: [String: Any]? { payload as? [String: Any] }
    package var aps: [String: Any]? { payloadObject?["aps"] as? [String: Any] }
}

/// Why the stand-in could not be used. Never a skip: a missing tool fails the test.
package struct APNsStandInError: Error, CustomStringConvertible {
    package let description: String
}

/// An APNs stand-in for one test: a self-signed CA and a server certificate for 127.0.0.1 and an
/// ES256 `.p8` provider key, all made with `openssl` in a temporary directory, and the Python HTTP/2
/// server started on a free port with `.build-tools/venv/bin/python3` (which must have `h2`:
/// `scripts/install-deps.sh` installs it). Stopped by ``stop()`` or when released.
package final class APNsStandIn {
    /// The provider key's team, key id and the app's bundle id, as the stand-in expects them.
    package static let teamID = "TEAM123456"
    package static let keyID = "KEYID12345"
    package static let topic = "com.example.actionhook"

    package let directory: URL
    package let port: Int
    /// The CA file to trust (`ACTIONHOOK_APNS_CA_FILE`).
    package let caFile: String
    /// The provider key, PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), as an app's `apns.privateKey`.
    package let privateKeyPEM: String
    /// The JSON-lines log the stand-in writes.
    package let logFile: URL
    private let process: Process
    private let stdin: Pipe
    private let stderrFile: URL

    /// `https://127.0.0.1:<port>` (`ACTIONHOOK_APNS_URL`).
    package var baseURL: String { "https://127.0.0.1:\(port)" }

    /// Makes the keys and certificates and starts the stand-in; with `other`, a second stand-in (another
    /// APNs environment) that uses its keys and certificates, so one CA and one provider key serve both.
    package init(sharingKeysOf other: APNsStandIn? = nil) throws {
        let root = Repository.root
        let python = root.appendingPathComponent(".build-tools/venv/bin/python3").path
        let script = root.appendingPathComponent("Tests/Fixtures/apns_standin.py").path
        guard FileManager.default.isExecutableFile(atPath: python) else {
            throw APNsStandInError(
                description: "the APNs stand-in needs \(python) with the Python package h2: run scripts/install-deps.sh"
            )
        }
        directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "actionhook-apns-" + UUID().uuidString.lowercased())
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        let dir = other?.directory.path ?? directory.path

        // A CA, a server certificate for 127.0.0.1 signed by it, and the provider's .p8 key.
        if other == nil { try Self.makeKeys(in: dir) }
        caFile = dir + "/ca.pem"
        privateKeyPEM = try String(contentsOfFile: dir + "/authkey.p8", encoding: .utf8)
        logFile = directory.appendingPathComponent("requests.jsonl")
        stderrFile = directory.appendingPathComponent("standin.stderr")
        FileManager.default.createFile(atPath: logFile.path, contents: nil)
        FileManager.default.createFile(atPath: stderrFile.path, contents: nil)

        let process = Process()
        process.executableURL = URL(fileURLWithPath: python)
        process.arguments = [
            script, "--cert", dir + "/server.pem", "--key", dir + "/server.key",
            "--auth-key", "\(Self.keyID):\(Self.teamID):\(dir)/authkey.pub", "--topic", Self.topic,
            "--log", logFile.path,
        ]
        let stdout = Pipe()
        let stdin = Pipe()
        process.standardOutput = stdout
        process.standardInput = stdin
        process.standardError = try FileHandle(forWritingTo: stderrFile)
        try process.run()
        self.process = process
        self.stdin = stdin

        // The first line of stdout is the port.
        let line = Self.readLine(stdout.fileHandleForReading, timeoutSeconds: 30)
        guard let line, let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines)), port > 0 else {
            Self.end(process)
            let errors = (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? ""
            throw APNsStandInError(
                description: "the APNs stand-in did not start (exit \(process.terminationStatus)): \(errors)"
                    + " — scripts/install-deps.sh installs h2 and cryptography into .build-tools/venv")
        }
        self.port = port
    }

    /// A CA, a server certificate for 127.0.0.1 signed by it, and the provider's .p8 key, in `dir`.
    private static func makeKeys(in dir: String) throws {
        try Self.write(
            "basicConstraints=CA:FALSE\nkeyUsage=critical,digitalSignature\nextendedKeyUsage=serverAuth\n"
                + "subjectAltName=IP:127.0.0.1\n", to: dir + "/server.ext")
        try Self.openssl(
            [
                "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                dir + "/ca.key", "-out", dir + "/ca.pem", "-days", "2", "-subj", "/CN=ActionHook test CA",
                "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            ])
        try Self.openssl(
            [
                "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                dir + "/server.key", "-out", dir + "/server.csr", "-subj", "/CN=127.0.0.1",
            ])
        try Self.openssl(
            [
                "x509", "-req", "-in", dir + "/server.csr", "-CA", dir + "/ca.pem", "-CAkey", dir + "/ca.key",
                "-CAcreateserial", "-out", dir + "/server.pem", "-days", "2", "-extfile", dir + "/server.ext",
            ])
        try Self.openssl(
            ["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", dir + "/authkey.p8"])
        try Self.openssl(["pkey", "-in", dir + "/authkey.p8", "-pubout", "-out", dir + "/authkey.pub"])
    }

    deinit {
        stop()
        try? FileManager.default.removeItem(at: directory)
    }

    /// Stops the stand-in (idempotent): SIGTERM, then SIGKILL if it is still running after 5 s.
    package func stop() {
        try? stdin.fileHandleForWriting.close()
        Self.end(process)
    }

    private static func end(_ process: Process) {
        guard process.isRunning else { return }
        process.terminate()
        let deadline = Date().addingTimeInterval(5)
        while process.isRunning && Date() < deadline {
            Thread.sleep(forTimeInterval: 0.02)
        }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            while process.isRunning { Thread.sleep(forTimeInterval: 0.02) }
        }
    }

    /// Whether the stand-in is still running.
    package var isRunning: Bool { process.isRunning }

    /// What the stand-in wrote to stderr (for failure messages).
    package var errors: String { (try? String(contentsOf: stderrFile, encoding: .utf8)) ?? "" }

    /// Every request so far, in order of arrival.
    package func requests() throws -> [APNsStandInRequest] {
        try lines().compactMap { object in
            guard object["kind"] as? String == "request" else { return nil }
            return APNsStandInRequest(
                seq: object["seq"] as? Int ?? 0, connection: object["conn"] as? Int ?? 0,
                stream: object["stream"] as? Int ?? 0, time: (object["time"] as? NSNumber)?.doubleValue ?? 0,
                method: object["method"] as? String, path: object["path"] as? String,
                token: object["token"] as? String, headers: object["headers"] as? [String: String] ?? [:],
                jwt: object["jwt"] as? String, alg: object["alg"] as? String, kid: object["kid"] as? String,
                iss: object["iss"] as? String, iat: object["iat"] as? Int, status: object["status"] as? Int ?? 0,
                reason: object["reason"] as? String,
                payload: object["payload"].flatMap { $0 is NSNull ? nil : $0 },
                payloadBytes: object["payloadBytes"] as? Int ?? 0)
        }
    }

    /// The requests for one device token.
    package func requests(token: String) throws -> [APNsStandInRequest] {
        try requests().filter { $0.token == token }
    }

    /// The requests carrying one `apns-id` (a follow-up id).
    package func requests(apnsID: String) throws -> [APNsStandInRequest] {
        try requests().filter { $0.apnsID?.lowercased() == apnsID.lowercased() }
    }

    /// The TCP connections accepted so far: their numbers and the ALPN protocol chosen.
    package func connections() throws -> [(id: Int, alpn: String?)] {
        try lines().compactMap { object in
            guard object["kind"] as? String == "connection" else { return nil }
            return (object["conn"] as? Int ?? 0, object["alpn"] as? String)
        }
    }

    private func lines() throws -> [[String: Any]] {
        let data = try Data(contentsOf: logFile)
        return try data.split(separator: UInt8(ascii: "\n")).map { line in
            guard let object = try JSONSerialization.jsonObject(with: Data(line)) as? [String: Any] else {
                throw APNsStandInError(description: "a log line of the stand-in is not an object")
            }
            return object
        }
    }

    /// The app's `apns` settings for `POST /v1/apps`, as the `extra` of ``TestAPI/createApp(_:extra:)``.
    package var appSettingsJSON: String {
        let settings: [String: Any] = [
            "teamId": Self.teamID, "keyId": Self.keyID, "privateKey": privateKeyPEM, "topic": Self.topic,
            "environment": "sandbox",
        ]
        let data = try! JSONSerialization.data(withJSONObject: settings, options: [.sortedKeys])
        return #""apns": "# + String(decoding: data, as: UTF8.self)
    }

    /// The credentials for driving `APNsSender` directly.
    package var credentials: APNsCredentials {
        APNsCredentials(
            teamId: Self.teamID, keyId: Self.keyID, privateKey: privateKeyPEM, topic: Self.topic,
            environment: "sandbox")
    }

    /// Points a service at the stand-in, with the worker on, polling every 200 ms and retrying after
    /// about a second (three times).
    package func configure(_ configuration: inout Configuration) {
        configuration.workerEnabled = true
        configuration.apnsURL = baseURL
        configuration.apnsCAFile = caFile
        configuration.worker.pollInterval = .milliseconds(200)
        configuration.worker.retryPolicy = RetryPolicy(schedule: [1, 1, 1], jitter: 0.1)
    }

    /// A 64-digit hex device token starting with `marker` (a stand-in behaviour, or none), unique.
    package static func deviceToken(_ marker: String = "") -> String {
        var token = marker
        while token.count < 64 {
            token += String(format: "%08x", UInt32.random(in: 0...UInt32.max))
        }
        // Plain tokens must not start with a marker by chance.
        if marker.isEmpty { token = "0" + token.dropFirst() }
        return String(token.prefix(64))
    }

    // MARK: - Helpers

    private static func write(_ text: String, to path: String) throws {
        try text.write(toFile: path, atomically: true, encoding: .utf8)
    }

    private static func openssl(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
        process.arguments = ["openssl"] + arguments
        let errors = Pipe()
        process.standardError = errors
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let output = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw APNsStandInError(
                description: "openssl \(arguments.first ?? "") failed (exit \(process.terminationStatus)): "
                    + String(decoding: output, as: UTF8.self))
        }
    }

    /// Reads up to the first newline, or nil at end of file or after `timeoutSeconds`.
    private static func readLine(_ handle: FileHandle, timeoutSeconds: Int) -> String? {
        final class Box: @unchecked Sendable {
            let lock = NSLock()
            var line: String?
        }
        let box = Box()
        let done = DispatchSemaphore(value: 0)
        let reader = Thread {
            var data = Data()
            while !data.contains(UInt8(ascii: "\n")) {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                data.append(chunk)
            }
            if let end = data.firstIndex(of: UInt8(ascii: "\n")) {
                box.lock.lock()
                box.line = String(decoding: data[..<end], as: UTF8.self)
                box.lock.unlock()
            }
            done.signal()
        }
        reader.start()
        guard done.wait(timeout: .now() + .seconds(timeoutSeconds)) == .success else { return nil }
        box.lock.lock()
        defer { box.lock.unlock() }
        return box.line
    }
}
