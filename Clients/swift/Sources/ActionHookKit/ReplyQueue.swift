import Foundation

/// A reply waiting in the on-device queue.
public struct QueuedReply: Sendable, Hashable, Codable {
    /// The position in the queue: microseconds since 1970 when it was queued, made unique and increasing.
    public var sequence: UInt64
    /// When it was queued.
    public var queuedAt: Date
    /// The reply, with the `responseId` every retry carries.
    public var reply: Reply
}

/// The on-device queue: one JSON file per reply in a folder, each written atomically (a temporary file
/// renamed over the name), so a crash leaves either the whole reply or none of it.
///
/// Files are named by their sequence, so the folder itself is the order. Every read lists the folder, so a
/// notification extension and the app can share one queue in an App Group container: neither keeps an
/// index the other could overwrite. A reply sent by both at once is stored once by the server, which
/// deduplicates on `responseId`.
public final class ReplyQueue: @unchecked Sendable {
    // @unchecked: `lastSequence` is the only mutable state and is read and written under `lock`.
    private let lock = NSLock()
    private var lastSequence: UInt64 = 0
    /// The folder holding the queue.
    public let directory: URL

    /// Opens (creating if needed) the queue in `directory`.
    public init(directory: URL) throws {
        self.directory = directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
    }

    /// Writes `reply` to disk and returns it queued. When this returns, the reply survives the app being
    /// killed.
    @discardableResult
    public func append(_ reply: Reply, now: Date = Date()) throws -> QueuedReply {
        let entry = lock.withLock {
            let micros = UInt64(max(0, now.timeIntervalSince1970) * 1_000_000)
            // Across processes the clock orders entries; within one, the sequence never repeats or goes back.
            let onDisk = (try? fileNames().last.flatMap(Self.sequence(of:))) ?? 0
            lastSequence = max(micros, lastSequence + 1, onDisk + 1)
            return QueuedReply(
                sequence: lastSequence, queuedAt: Timestamp.milliseconds(Timestamp.milliseconds(now)), reply: reply)
        }
        try Timestamp.encoder.encode(entry).write(to: url(of: entry), options: .atomic)
        return entry
    }

    /// Every queued reply, oldest first. Files that cannot be read (a foreign or damaged file) are skipped.
    public func entries() -> [QueuedReply] {
        let decoder = Timestamp.decoder
        return ((try? fileNames()) ?? []).compactMap { name in
            guard let data = try? Data(contentsOf: directory.appendingPathComponent(name)) else { return nil }
            return try? decoder.decode(QueuedReply.self, from: data)
        }
    }

    /// The number of queued replies.
    public var count: Int { ((try? fileNames()) ?? []).count }

    /// Removes a reply; removing one that is already gone (sent by another process) is not an error.
    public func remove(_ entry: QueuedReply) {
        try? FileManager.default.removeItem(at: url(of: entry))
    }

    private func url(of entry: QueuedReply) -> URL {
        directory.appendingPathComponent(String(format: "%020llu", entry.sequence) + ".reply.json")
    }

    private func fileNames() throws -> [String] {
        try FileManager.default.contentsOfDirectory(atPath: directory.path)
            .filter { $0.hasSuffix(".reply.json") && Self.sequence(of: $0) != nil }
            .sorted()
    }

    private static func sequence(of name: String) -> UInt64? {
        UInt64(name.prefix { $0 != "." })
    }
}
