import Foundation

/// A reply waiting in the on-device queue.
public struct QueuedReply: Sendable, Hashable {
    /// The position in the queue: microseconds since 1970 when it was queued, made unique and increasing.
    public var sequence: UInt64
    /// When it was queued (the time its sequence stands for, to the millisecond).
    public var queuedAt: Date
    /// The reply, with the `responseId` every retry carries.
    public var reply: Reply
    /// The file's name in the queue folder.
    public var fileName: String { ReplyQueue.fileName(of: sequence) }

    /// A queued reply.
    public init(sequence: UInt64, reply: Reply) {
        self.sequence = sequence
        self.queuedAt = Timestamp.milliseconds(Int64(sequence / 1_000))
        self.reply = reply
    }
}

/// The on-device queue: one file per reply in a folder, holding exactly the body of `POST /v1/responses`, so
/// the system can upload the file itself while the app is suspended.
///
/// A reply is written to a temporary file and then hard-linked under its name, which fails if the name is
/// taken: a crash leaves either the whole reply or none of it, and two processes never overwrite each other.
/// Names are the sequence, zero-padded, so their order is the queue's order.
///
/// The queue keeps an index of the names it knows (built from one listing when opened), so adding a reply,
/// counting and taking the oldest cost the same at any depth: no call lists or reads the whole folder. Another
/// process sharing the folder (a notification extension in the same App Group) is noticed through the folder's
/// modification time, checked before the oldest is taken, and the folder is listed (names only) again.
///
/// Whoever removes a reply's file reports what happened to it: removal is one `unlink`, which exactly one
/// process wins, so an app and its extension never both report the same reply.
public final class ReplyQueue: @unchecked Sendable {
    // @unchecked: `index` is the only mutable state and is read and written under `lock`.
    private let lock = NSLock()
    private var index = Index()
    /// The folder holding the queue.
    public let directory: URL
    /// Where damaged files are moved.
    public var damagedDirectory: URL { directory.appendingPathComponent("damaged", isDirectory: true) }

    private struct Index {
        /// Known names by sequence, oldest first, from `start` on.
        var sequences: [UInt64] = []
        var start = 0
        /// `responseId`s of replies this process queued, so dropping one at the cap needs no read.
        var responseIds: [UInt64: String] = [:]
        var lastSequence: UInt64 = 0
        /// The folder's modification time when it was last listed or changed by this process.
        var stamp: Date?

        var count: Int { sequences.count - start }
        var first: UInt64? { start < sequences.count ? sequences[start] : nil }

        mutating func append(_ sequence: UInt64) {
            if let last = sequences.last, last > sequence, count > 0 {
                // Only a sequence from another process can be older than the newest known one.
                let position = sequences[start...].firstIndex { $0 > sequence } ?? sequences.endIndex
                sequences.insert(sequence, at: position)
            } else {
                sequences.append(sequence)
            }
            lastSequence = max(lastSequence, sequence)
        }

        mutating func remove(_ sequence: UInt64) {
            if first == sequence {
                start += 1
                if start > 64 && start * 2 > sequences.count {
                    sequences.removeFirst(start)
                    start = 0
                }
            } else if let position = sequences[start...].firstIndex(of: sequence) {
                sequences.remove(at: position)
            }
            responseIds[sequence] = nil
        }

        mutating func replace(with listed: [UInt64]) {
            sequences = listed
            start = 0
            lastSequence = max(lastSequence, listed.last ?? 0)
            let known = Set(listed)
            responseIds = responseIds.filter { known.contains($0.key) }
        }
    }

    /// Opens (creating if needed) the queue in `directory` and lists it once.
    public init(directory: URL) throws {
        self.directory = directory
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        lock.withLock { relist() }
        removeLeftovers()
    }

    // MARK: Adding

    /// Writes `reply` to disk and returns it queued. When this returns, the reply survives the app being
    /// killed. One file is written; nothing else in the folder is read.
    @discardableResult
    public func append(_ reply: Reply, now: Date = Date()) throws -> QueuedReply {
        let temporary = directory.appendingPathComponent(".tmp-\(UUID().uuidString)")
        try reply.ingestBody().write(to: temporary, options: Self.writingOptions)
        defer { try? FileManager.default.removeItem(at: temporary) }
        let micros = UInt64(max(0, now.timeIntervalSince1970) * 1_000_000)
        var sequence = lock.withLock { max(micros, index.lastSequence + 1) }
        // Another process may have taken the name in the same microsecond: the link fails, take the next.
        for _ in 0..<1_000 {
            let path = directory.appendingPathComponent(Self.fileName(of: sequence)).path
            do {
                try FileManager.default.linkItem(atPath: temporary.path, toPath: path)
                lock.withLock {
                    index.append(sequence)
                    index.responseIds[sequence] = reply.responseId
                    index.stamp = stamp()
                }
                return QueuedReply(sequence: sequence, reply: reply)
            } catch where FileManager.default.fileExists(atPath: path) {
                sequence += 1
            }
        }
        throw CocoaError(.fileWriteFileExists)
    }

    // MARK: Reading

    /// The number of queued replies.
    public var count: Int {
        lock.withLock {
            refreshIfChanged()
            return index.count
        }
    }

    /// Every queued reply, oldest first, read from disk: for inspection (it reads every file). Damaged files are
    /// left out here; sending moves them aside.
    public func entries() -> [QueuedReply] {
        let sequences = lock.withLock {
            refreshIfChanged()
            return Array(index.sequences[index.start...])
        }
        return sequences.compactMap { sequence in
            if case .reply(let entry, _) = load(sequence) { entry } else { nil }
        }
    }

    /// The names in the queue, oldest first (from the index, without reading the files).
    public var fileNames: [String] {
        lock.withLock {
            refreshIfChanged()
            return index.sequences[index.start...].map(Self.fileName(of:))
        }
    }

    /// The oldest queued sequence, after listing the folder again if another process changed it.
    func oldest() -> UInt64? {
        lock.withLock {
            refreshIfChanged()
            return index.first
        }
    }

    /// The sequence queued after `sequence`, if any (no refresh).
    func sequence(after sequence: UInt64) -> UInt64? {
        lock.withLock {
            guard let position = index.sequences[index.start...].firstIndex(where: { $0 > sequence }) else { return nil }
            return index.sequences[position]
        }
    }

    /// Lists the folder again (names only) and answers whether it holds no reply; for the send loop before it
    /// stops, so a reply another process queued unnoticed is not left behind.
    func isEmptyAfterListing() -> Bool {
        lock.withLock {
            relist()
            return index.count == 0
        }
    }

    /// The `responseId` of a queued reply when this process queued it (no read).
    func knownResponseId(_ sequence: UInt64) -> String? {
        lock.withLock { index.responseIds[sequence] }
    }

    enum Loaded {
        /// The reply and the request body to send: the file itself (re-encoded for a file of earlier versions).
        case reply(QueuedReply, body: Data)
        /// The file is gone: another process removed it.
        case gone
        /// The file holds no reply: empty, truncated, or not the JSON of a reply.
        case damaged
        /// The file exists but cannot be read now (data protection while the device is locked, permissions).
        case unreadable
    }

    /// Reads one queued reply.
    func load(_ sequence: UInt64) -> Loaded {
        let url = directory.appendingPathComponent(Self.fileName(of: sequence))
        let data: Data
        do {
            data = try Data(contentsOf: url)
        } catch {
            if FileManager.default.fileExists(atPath: url.path) { return .unreadable }
            lock.withLock { index.remove(sequence) }
            return .gone
        }
        if let reply = try? Reply(ingestBody: data) {
            return .reply(QueuedReply(sequence: sequence, reply: reply), body: data)
        }
        // A file of earlier versions: `{"sequence", "queuedAt", "reply"}`.
        struct Legacy: Decodable { var reply: Reply }
        guard let reply = (try? Timestamp.decoder.decode(Legacy.self, from: data))?.reply else { return .damaged }
        return .reply(QueuedReply(sequence: sequence, reply: reply), body: reply.ingestBody())
    }

    // MARK: Removing

    /// Removes a reply and answers whether this call removed it: false when it was already gone (sent or
    /// dropped by another process), which then reports it.
    @discardableResult
    public func remove(_ entry: QueuedReply) -> Bool {
        remove(entry.sequence)
    }

    @discardableResult
    func remove(_ sequence: UInt64) -> Bool {
        let removed = (try? FileManager.default.removeItem(at: url(of: sequence))) != nil
        lock.withLock {
            index.remove(sequence)
            index.stamp = stamp()
        }
        return removed
    }

    /// Moves a damaged file to `damaged/` and answers whether this call moved it (so it is reported once).
    func moveAside(_ sequence: UInt64) -> Bool {
        let manager = FileManager.default
        try? manager.createDirectory(at: damagedDirectory, withIntermediateDirectories: true)
        var target = damagedDirectory.appendingPathComponent(Self.fileName(of: sequence))
        if manager.fileExists(atPath: target.path) {
            target = damagedDirectory.appendingPathComponent(Self.fileName(of: sequence) + "-" + UUID().uuidString)
        }
        let moved = (try? manager.moveItem(at: url(of: sequence), to: target)) != nil
        lock.withLock {
            index.remove(sequence)
            index.stamp = stamp()
        }
        return moved
    }

    // MARK: Claims

    enum Claim: Equatable {
        case claimed
        /// Another process is sending it until `until` (its lease).
        case heldElsewhere(until: Date)
    }

    /// Claims a reply for one send: a `<sequence>.claim` file created only if none exists (`O_EXCL`), holding
    /// the end of its lease. A claim whose lease ran out (its process was killed mid-send) is broken. Two
    /// processes breaking one claim at once may both send, which the server stores once; the report still
    /// goes to whoever removes the reply's file.
    func claim(_ sequence: UInt64, lease: TimeInterval, now: Date = Date()) -> Claim {
        let url = claimURL(of: sequence)
        let content = Data(String(Timestamp.milliseconds(now.addingTimeInterval(lease))).utf8)
        for _ in 0..<2 {
            if (try? content.write(to: url, options: .withoutOverwriting)) != nil { return .claimed }
            guard let data = try? Data(contentsOf: url) else { continue }  // released meanwhile: try again
            if let millis = Int64(String(decoding: data, as: UTF8.self)), Timestamp.milliseconds(millis) > now {
                return .heldElsewhere(until: Timestamp.milliseconds(millis))
            }
            try? FileManager.default.removeItem(at: url)
        }
        return .heldElsewhere(until: now)
    }

    /// Gives up a claim (after the reply's file is removed, when it was sent).
    func release(_ sequence: UInt64) {
        try? FileManager.default.removeItem(at: claimURL(of: sequence))
    }

    // MARK: Names

    static func fileName(of sequence: UInt64) -> String {
        String(format: "%020llu", sequence) + ".reply.json"
    }

    static func sequence(of name: String) -> UInt64? {
        guard name.hasSuffix(".reply.json"), name.utf8.count == 31 else { return nil }
        return UInt64(name.prefix(20))
    }

    func url(of sequence: UInt64) -> URL {
        directory.appendingPathComponent(Self.fileName(of: sequence))
    }

    private func claimURL(of sequence: UInt64) -> URL {
        directory.appendingPathComponent(String(format: "%020llu", sequence) + ".claim")
    }

    private static var writingOptions: Data.WritingOptions {
        #if os(iOS) || os(watchOS) || os(visionOS)
            // Readable after the first unlock even while the device is locked again: a reply tapped on the lock
            // screen must be written and sent then.
            [.completeFileProtectionUntilFirstUserAuthentication]
        #else
            []
        #endif
    }

    // MARK: Listing (under `lock`)

    private func stamp() -> Date? {
        (try? FileManager.default.attributesOfItem(atPath: directory.path))?[.modificationDate] as? Date
    }

    private func refreshIfChanged() {
        if stamp() != index.stamp { relist() }
    }

    private func relist() {
        let stampBefore = stamp()
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        index.replace(with: names.compactMap(Self.sequence(of:)).sorted())
        index.stamp = stampBefore
    }

    /// Temporary files and claims a killed process left behind, once they are old enough not to be in use.
    private func removeLeftovers(now: Date = Date()) {
        let manager = FileManager.default
        for name in (try? manager.contentsOfDirectory(atPath: directory.path)) ?? [] {
            let isTemporary = name.hasPrefix(".tmp-")
            let isClaim = name.hasSuffix(".claim")
            guard isTemporary || isClaim else { continue }
            let path = directory.appendingPathComponent(name).path
            let modified = (try? manager.attributesOfItem(atPath: path))?[.modificationDate] as? Date ?? now
            if now.timeIntervalSince(modified) > 3_600 { try? manager.removeItem(atPath: path) }
        }
    }
}
