import ActionHookServer
import Foundation
import Postgres
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// Quality R10: a database that stops answering is answered fast. These tests run a PostgreSQL cluster
/// of their own (the shared test cluster must not be stopped under the other suites).
@Suite("Database outages (R10)", .serialized)
struct OutageTests {
    /// A PostgreSQL cluster in a temporary folder, destroyed on `stop()`.
    final class Cluster {
        let folder: URL
        let port: Int
        let url: String

        init() throws {
            folder = FileManager.default.temporaryDirectory.appendingPathComponent(
                "actionhook-r10-\(UUID().uuidString)")
            port = try LoopbackListener.freePort()
            try Self.script(["start", folder.path, String(port), "fsync=off"])
            url = "postgresql://postgres@127.0.0.1:\(port)/actionhook"
        }

        func destroy() {
            signal(SIGCONT)
            _ = try? Self.script(["destroy", folder.path])
        }

        /// Sends `signal` to the postmaster and every process it started.
        func signal(_ signal: Int32) {
            guard let postmaster = try? postmasterPID() else { return }
            for pid in [postmaster] + Self.children(of: postmaster) { kill(pid, signal) }
        }

        private var cachedPostmaster: Int32?

        private func postmasterPID() throws -> Int32 {
            if let cachedPostmaster { return cachedPostmaster }
            let connection = try PostgresConnection(configuration: PostgresConfiguration(connectionString: url))
            let directory = try connection.query("SHOW data_directory")[0].decode("data_directory", as: String.self)
            let text = try String(contentsOfFile: directory + "/postmaster.pid", encoding: .utf8)
            guard let pid = text.split(separator: "\n").first.flatMap({ Int32($0) }) else {
                throw TestClientError(description: "no pid in postmaster.pid")
            }
            cachedPostmaster = pid
            return pid
        }

        private static func children(of parent: Int32) -> [Int32] {
            let entries = (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []
            return entries.compactMap { entry in
                guard let pid = Int32(entry),
                    let stat = try? String(contentsOfFile: "/proc/\(entry)/stat", encoding: .utf8),
                    let close = stat.lastIndex(of: ")")
                else { return nil }
                let fields = stat[stat.index(after: close)...].split(separator: " ")
                return fields.count > 2 && Int32(fields[1]) == parent ? pid : nil
            }
        }

        /// Runs `scripts/pg-local.sh` with `arguments` and waits for it with `waitpid`. (Foundation's
        /// `Process.waitUntilExit` never returned here: the script leaves a daemon behind, and the child
        /// stayed a zombie no one reaped.)
        private static func script(_ arguments: [String]) throws {
            let path = Repository.root.appendingPathComponent("scripts/pg-local.sh").path
            let argv = ["/bin/bash", path] + arguments
            var actions = posix_spawn_file_actions_t()
            posix_spawn_file_actions_init(&actions)
            defer { posix_spawn_file_actions_destroy(&actions) }
            posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
            posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
            var pid: pid_t = 0
            var cArguments = argv.map { strdup($0) } + [nil]
            defer { for argument in cArguments { free(argument) } }
            let spawned = posix_spawn(&pid, "/bin/bash", &actions, nil, &cArguments, environ)
            guard spawned == 0 else { throw TestClientError(description: "could not run pg-local.sh (\(spawned))") }
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            // WIFEXITED and WEXITSTATUS, which Swift does not import.
            guard status & 0x7F == 0, (status >> 8) & 0xFF == 0 else {
                throw TestClientError(description: "pg-local.sh \(arguments[0]) failed (status \(status))")
            }
        }
    }

    static func seconds(since start: ContinuousClock.Instant) -> Double {
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    static func body(_ index: Int) -> String {
        #"{"actionIdentifier":"accept","userInfo":{"aps":{"category":"event-invite"},"eventId":"\#(index)"}}"#
    }

    @Test(
        "PostgreSQL stopped (SIGSTOP): ingest and admin answer 503 with Retry-After without waiting for it, /healthz answers, /readyz says not ready; after SIGCONT all recover, nothing lost or doubled, the worker resumes (the timings are faults R10's)"
    )
    func stoppedDatabase() async throws {
        let cluster = try Cluster()
        defer { cluster.destroy() }
        let database = try TestDatabase.create(baseConnectionString: cluster.url)
        defer { database.drop() }
        let receiver = try WebhookReceiver(listeners: 1, threads: 4)
        let service = TestService.make(database: database) {
            $0.database.responseDeadlineMilliseconds = 1000
            $0.ingestDeadlineMilliseconds = 1500
            $0.workerEnabled = true
            $0.allowPrivateWebhooks = true
            $0.worker.pollInterval = .milliseconds(200)
        }
        try service.start()
        defer { service.stop() }
        let port = service.port
        @Sendable func call(_ method: String, _ path: String, token: String?, json: String? = nil, key: String? = nil)
            throws -> TestResponse
        {
            var headers: [(String, String)] = []
            if let token { headers.append(("Authorization", "Bearer \(token)")) }
            if let key { headers.append(("Idempotency-Key", key)) }
            let client = try HTTPTestClient(port: port, timeoutSeconds: 20)
            if let json { return try client.request(method, path, headers: headers, json: json) }
            return try client.request(method, path, headers: headers)
        }

        let created = try call(
            "POST", "/v1/apps", token: TestService.adminToken,
            json: #"{"id":"r10","name":"r10","webhook":{"url":"\#(receiver.url("/r10"))"}}"#)
        let key = try #require((created.json["ingestKey"] as? [String: Any])?["secret"] as? String)
        let rule =
            #"{"id":"hook","match":{"action":"accept"},"handler":{"type":"accept"},"followUps":[{"channel":"webhook"}]}"#
        #expect(try call("POST", "/v1/apps/r10/rules", token: TestService.adminToken, json: rule).status == 201)
        for index in 0..<10 {
            #expect(
                try call("POST", "/v1/responses", token: key, json: Self.body(index), key: "before-\(index)").status
                    == 202)
        }

        cluster.signal(SIGSTOP)
        // Ten ingests and an admin read at once, while nothing answers.
        typealias Answer = (status: Int, retryAfter: String?, seconds: Double)
        let during = await withTaskGroup(of: Answer.self) { group -> [Answer] in
            for index in 0..<11 {
                group.addTask {
                    let start = ContinuousClock.now
                    let response =
                        index < 10
                        ? try? call(
                            "POST", "/v1/responses", token: key, json: Self.body(100 + index), key: "during-\(index)")
                        : try? call("GET", "/v1/apps/r10", token: TestService.adminToken)
                    return (response?.status ?? 0, response?.headers["retry-after"], Self.seconds(since: start))
                }
            }
            var all: [Answer] = []
            for await answer in group { all.append(answer) }
            return all
        }
        // Every request was answered while PostgreSQL was still stopped (SIGCONT comes only after all of
        // them): none waited for the database. How fast (503 within 2 s, /healthz p99 within 100 ms,
        // recovery within 5 s) is a figure of `bench/faults.sh` R10, which CI runs, not a wall-clock gap
        // asserted here, where a busy machine stretches it.
        #expect(during.count == 11)
        for answer in during {
            #expect(answer.status == 503, "answered \(answer.status) after \(answer.seconds) s")
            #expect(answer.retryAfter == "1")
        }
        #expect(try call("GET", "/healthz", token: nil).status == 200)
        #expect(try call("GET", "/readyz", token: nil).status == 503)

        cluster.signal(SIGCONT)
        let resumed = ContinuousClock.now
        // Clients retry with the same keys until answered; all within 5 s of SIGCONT.
        var pending = Set(0..<10)
        while !pending.isEmpty && Self.seconds(since: resumed) < 10 {
            for index in pending {
                let status =
                    (try? call(
                        "POST", "/v1/responses", token: key, json: Self.body(100 + index), key: "during-\(index)"))?
                    .status
                if status == 202 || status == 200 { pending.remove(index) }
            }
            if !pending.isEmpty { try await Task.sleep(for: .milliseconds(100)) }
        }
        #expect(pending.isEmpty, "not acknowledged \(Self.seconds(since: resumed)) s after SIGCONT: \(pending)")
        #expect(try call("GET", "/readyz", token: nil).status == 200)

        let pool = PostgresPool(configuration: database.configuration, size: 1)
        defer { pool.close() }
        let keys = try pool.withConnection { connection in
            try connection.query("SELECT idempotency_key FROM responses WHERE app_id = 'r10'")
                .map { try $0.decode("idempotency_key", as: String.self) }
        }
        #expect(keys.count == 20)
        #expect(Set(keys) == Set((0..<10).map { "before-\($0)" } + (0..<10).map { "during-\($0)" }))
        // The worker backed off while the database was stopped and delivered everything after: claims
        // whose answer was lost are given back by their lease token, attempts it could not record are
        // recorded, claims it could not plan are planned (none of them spends a step of the retry
        // schedule); the generous bound is for a loaded machine, where queries right after SIGCONT can miss the 1 s deadline.
        let delivered = await eventually(within: 60) {
            (try? pool.withConnection {
                try $0.query("SELECT count(*) AS n FROM followups WHERE status = 'delivered'")[0].decode(
                    "n", as: Int.self)
            }) == 20
        }
        let outbox = delivered ? [] : try Self.followUps(pool)
        #expect(delivered, "not all delivered after SIGCONT: \(outbox)")
    }

    /// Each follow-up of the test app as the outbox holds it: what a failure to deliver shows.
    static func followUps(_ pool: PostgresPool) throws -> [String] {
        try pool.withConnection { connection in
            try connection.query(
                """
                SELECT f.status || ' attempt=' || f.attempt || ' due_in=' || coalesce(
                        round(extract(epoch FROM f.due_at - now())::numeric, 1)::text, '-')
                    || ' lease_in=' || coalesce(round(extract(epoch FROM f.lease_until - now())::numeric, 1)::text, '-')
                    || ' last_error=' || coalesce(f.last_error, '-')
                    || ' attempts=' || coalesce((
                        SELECT string_agg(a.result || coalesce('/' || a.error_class, ''), ',' ORDER BY a.attempt)
                        FROM delivery_attempts a WHERE a.app_id = f.app_id AND a.followup_id = f.id), '-') AS line
                FROM followups f WHERE f.app_id = 'r10' ORDER BY f.created_at
                """
            ).map { try $0.decode("line", as: String.self) }
        }
    }

    @Test("a database that accepts connections and never answers, or refuses them: ingest answers 503 within 2 s")
    func silentAndRefusingDatabases() throws {
        let silent = try SilentListener()
        defer { silent.stop() }
        let refusing = try LoopbackListener.freePort()
        for url in [
            "postgresql://postgres@127.0.0.1:\(silent.port)/actionhook",
            "postgresql://postgres@127.0.0.1:\(refusing)/actionhook",
        ] {
            var configuration = Configuration(
                http: .init(host: "127.0.0.1", port: 0, threads: 4),
                database: PostgresConfiguration(connectionString: url, responseDeadlineMilliseconds: 1000),
                adminToken: TestService.adminToken, shutdownGraceSeconds: 1)
            configuration.workerEnabled = false
            configuration.ingestDeadlineMilliseconds = 1500
            let service = ActionHookService(configuration: configuration, logger: .init(label: "test"))
            try service.start()
            defer { service.stop() }
            for path in ["/v1/responses", "/v1/apps/any"] {
                let start = ContinuousClock.now
                let client = try HTTPTestClient(port: service.port, timeoutSeconds: 20)
                let response =
                    path == "/v1/responses"
                    ? try client.request(
                        "POST", path, headers: [("Authorization", "Bearer ahk_anything")], json: Self.body(1))
                    : try client.request("GET", path, headers: [("Authorization", "Bearer \(TestService.adminToken)")])
                #expect(response.status == 503, "\(path) answered \(response.status)")
                #expect(response.headers["retry-after"] != nil)
                #expect(Self.seconds(since: start) < 2.0, "\(path) answered after \(Self.seconds(since: start)) s")
            }
        }
    }
}

/// Accepts TCP connections and never reads or writes: a server that hangs.
final class SilentListener: Sendable {
    let port: Int
    private let held = Mutex<[Int32]>([])

    init() throws {
        // A listening socket that is never accepted from: the kernel completes each handshake into the
        // backlog, so a client connects and then waits for words that never come, as from a stopped server.
        let listener = try LoopbackListener()
        port = listener.port
        held.withLock { $0.append(contentsOf: listener.descriptors) }
    }

    func stop() {
        held.withLock { descriptors in
            for fd in descriptors { close(fd) }
            descriptors.removeAll()
        }
    }
}
