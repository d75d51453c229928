// The queue's cost (quality.md P9), run by `make bench-client` in the ActionHook repository, never as a test:
//
// 1. `forward` at queue depth 1,000 against depth 0: every forward is timed on its own (the caller's thread,
//    as the notification delegate calls it); the medians over BENCH_RUNS runs and their ratio. Goal ≤ 2.
// 2. Draining 1,000 queued replies through URLSession against a loopback HTTP server in this process that
//    answers 202: wall seconds and CPU seconds (user + system of the whole process, the server included),
//    medians over the runs.
//
// Exits 1 when the ratio is above 2; the last line is the figure.
import ActionHookKit
import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif
#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

let runs = Int(ProcessInfo.processInfo.environment["BENCH_RUNS"] ?? "") ?? 5
let depth = 1_000
let forwardsPerRun = 200

/// Seconds on a monotonic clock.
func now() -> Double {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
}

/// CPU seconds used by the process so far (user + system).
func cpuSeconds() -> Double {
    var usage = rusage()
    #if canImport(Glibc)
        getrusage(RUSAGE_SELF.rawValue, &usage)
    #else
        getrusage(RUSAGE_SELF, &usage)
    #endif
    func seconds(_ value: timeval) -> Double { Double(value.tv_sec) + Double(value.tv_usec) / 1e6 }
    return seconds(usage.ru_utime) + seconds(usage.ru_stime)
}

func median(_ values: [Double]) -> Double {
    let sorted = values.sorted()
    return sorted.isEmpty ? 0 : sorted[sorted.count / 2]
}

func temporaryFolder() -> URL {
    let url = FileManager.default.temporaryDirectory.appendingPathComponent("actionhookkit-bench-\(UUID().uuidString)")
    try? FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
    return url
}

func makeReply(_ index: Int) -> Reply {
    Reply(
        actionIdentifier: index % 2 == 0 ? "accept" : "decline", categoryIdentifier: "event-invite",
        notificationIdentifier: "n-\(index)",
        userInfo: ["aps": .object(["category": .string("event-invite")]), "eventId": .string("\(index)")],
        deviceToken: String(repeating: "ab", count: 32))
}

/// A server that never answers: the send loop sits in its first request, so what is timed is the caller's
/// share of `forward` alone.
struct SilentServer: HTTPTransport {
    func send(_ request: URLRequest) async throws -> (Data, HTTPURLResponse) {
        while !Task.isCancelled { try? await Task.sleep(nanoseconds: 50_000_000) }
        throw URLError(.cancelled)
    }
}

func configuration(_ folder: URL, port: Int = 9, maxQueuedReplies: Int = 1_000) -> ActionHookClient.Configuration {
    ActionHookClient.Configuration(
        serverURL: URL(string: "http://127.0.0.1:\(port)")!, ingestKey: "ahk_bench", directory: folder,
        maxQueuedReplies: maxQueuedReplies, retry: RetryPolicy(initialDelay: 0.01, maximumDelay: 0.1),
        requestTimeout: 10)
}

/// Times `forwardsPerRun` forwards into a queue already holding `depth` replies.
func forwardTimes(depth: Int, maxQueuedReplies: Int) throws -> [Double] {
    let folder = temporaryFolder()
    defer { try? FileManager.default.removeItem(at: folder) }
    let queue = try ReplyQueue(directory: folder.appendingPathComponent("queue"))
    for index in 0..<depth { try queue.append(makeReply(index)) }
    let client = try ActionHookClient(
        configuration: configuration(folder, maxQueuedReplies: maxQueuedReplies), transport: SilentServer())
    var times: [Double] = []
    for index in 0..<forwardsPerRun {
        let reply = makeReply(depth + index)
        let start = now()
        client.forward(reply) {}
        times.append(now() - start)
    }
    return times
}

// MARK: A loopback HTTP/1.1 server answering 202 to every request, keep-alive.

final class LoopbackServer: @unchecked Sendable {
    // @unchecked: `listener` and `port` are set in init and only read after; `requests` is under `lock`.
    let listener: Int32
    let port: Int
    private let lock = NSLock()
    private var count = 0

    init() throws {
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) }
        }
        guard bound == 0, listen(listener, 64) == 0 else { throw POSIXError(.EADDRINUSE) }
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in
            while true {
                let connection = accept(listener, nil, nil)
                if connection < 0 { return }
                var noDelay: Int32 = 1
                setsockopt(connection, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
                Thread.detachNewThread { self.serve(connection) }
            }
        }
    }

    var requests: Int { lock.withLock { count } }

    private func serve(_ connection: Int32) {
        defer { close(connection) }
        var buffer: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16_384)
        let answer = Array("HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\nConnection: keep-alive\r\n\r\n".utf8)
        while true {
            // One request: headers up to the blank line, then Content-Length bytes of body.
            while true {
                if let end = headerEnd(buffer) {
                    let head = String(decoding: buffer[..<end], as: UTF8.self).lowercased()
                    let length =
                        head.split(separator: "\r\n").first { $0.hasPrefix("content-length:") }
                        .flatMap { Int($0.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) }
                        ?? 0
                    if buffer.count >= end + 4 + length {
                        buffer.removeFirst(end + 4 + length)
                        break
                    }
                }
                let read = recv(connection, &chunk, chunk.count, 0)
                if read <= 0 { return }
                buffer.append(contentsOf: chunk[..<read])
            }
            lock.withLock { count += 1 }
            if send(connection, answer, answer.count, Int32(MSG_NOSIGNAL)) < 0 { return }
        }
    }

    private func headerEnd(_ buffer: [UInt8]) -> Int? {
        guard buffer.count >= 4 else { return nil }
        for index in 0...(buffer.count - 4)
        where buffer[index] == 13 && buffer[index + 1] == 10 && buffer[index + 2] == 13 && buffer[index + 3] == 10 {
            return index
        }
        return nil
    }
}

/// Drains `depth` queued replies against the loopback server: (wall seconds, CPU seconds, requests).
func drainOnce(server: LoopbackServer) async throws -> (Double, Double, Int) {
    let folder = temporaryFolder()
    defer { try? FileManager.default.removeItem(at: folder) }
    let queue = try ReplyQueue(directory: folder.appendingPathComponent("queue"))
    for index in 0..<depth { try queue.append(makeReply(index)) }
    let delivered = Counter()
    let client = try ActionHookClient(
        configuration: configuration(folder, port: server.port),
        onEvent: { if case .delivered = $0 { delivered.add() } })
    let before = server.requests
    let (wall, cpu) = (now(), cpuSeconds())
    await client.drain()
    let figures = (now() - wall, cpuSeconds() - cpu, server.requests - before)
    guard delivered.value == depth, client.queue.count == 0 else {
        throw POSIXError(.EIO)
    }
    return figures
}

final class Counter: @unchecked Sendable {
    // @unchecked: `count` is only touched under `lock`.
    private let lock = NSLock()
    private var count = 0
    func add() { lock.withLock { count += 1 } }
    var value: Int { lock.withLock { count } }
}

// MARK: Run

print("ActionHookKit queue benchmark: \(runs) runs, \(forwardsPerRun) forwards per depth per run")
var atZero: [Double] = []
var atDepth: [Double] = []
var atDepthFull: [Double] = []
for run in 1...runs {
    // The order alternates between runs, so neither depth always runs first.
    var zero: [Double] = []
    var deep: [Double] = []
    var full: [Double] = []
    if run % 2 == 1 {
        zero = try forwardTimes(depth: 0, maxQueuedReplies: 2_000)
        deep = try forwardTimes(depth: depth, maxQueuedReplies: 2_000)
        full = try forwardTimes(depth: depth, maxQueuedReplies: depth)
    } else {
        full = try forwardTimes(depth: depth, maxQueuedReplies: depth)
        deep = try forwardTimes(depth: depth, maxQueuedReplies: 2_000)
        zero = try forwardTimes(depth: 0, maxQueuedReplies: 2_000)
    }
    atZero.append(median(zero))
    atDepth.append(median(deep))
    atDepthFull.append(median(full))
    print(
        String(
            format:
                "run %d: forward median %.3f ms at depth 0, %.3f ms at depth 1,000, %.3f ms at depth 1,000 with the queue full",
            run, median(zero) * 1e3, median(deep) * 1e3, median(full) * 1e3))
}

let server = try LoopbackServer()
var walls: [Double] = []
var cpus: [Double] = []
for run in 1...runs {
    let (wall, cpu, requests) = try await drainOnce(server: server)
    walls.append(wall)
    cpus.append(cpu)
    print(
        String(
            format: "run %d: drained %d replies in %.2f s wall, %.2f CPU-s (%d requests)", run, depth, wall, cpu,
            requests))
}

let ratio = median(atDepth) / median(atZero)
let fullRatio = median(atDepthFull) / median(atZero)
print(String(format: "drain of 1,000 queued replies: median %.2f s wall, %.2f CPU-s", median(walls), median(cpus)))
print(String(format: "forward at depth 1,000 with the queue full (dropping the oldest): %.2fx depth 0", fullRatio))
print(
    String(
        format: "P9 forward median: %.3f ms at depth 0, %.3f ms at depth 1,000: %.2fx (goal <= 2x) %@",
        median(atZero) * 1e3, median(atDepth) * 1e3, ratio, ratio <= 2 ? "PASS" : "FAIL"))
exit(ratio <= 2 ? 0 : 1)
