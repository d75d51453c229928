import Foundation

#if canImport(Darwin)
    import Darwin
#elseif canImport(Glibc)
    import Glibc
#elseif canImport(Musl)
    import Musl
#endif

/// A reply waiting in the on-device queue.
public struct QueuedReply: Sendable, Hashable {
    /// The position in the queue: microseconds since 1970 when it was queued, made unique and increasing.
    public var sequence: UInt64
    /// When it was queued (the time its sequence stands for, to the millisecond).
    public var queuedAt: Date
    /// The reply, with the `responseId` every retry carries.
    public var reply: Reply
    /// The `ActionHook-Reply-Signature` header every attempt carries: made by the device key when the reply was
    /// queued, and kept with it, so a key changed since does not change it. Nil for an unsigned reply.
    public var signature: String?
    /// The file's name in the queue folder.
    public var fileName: String { ReplyQueue.fileName(of: sequence) }

    /// A queued reply.
    public init(sequence: UInt64, reply: Reply, signature: String? = nil) {
        self.sequence = sequence
        self.queuedAt = Timestamp.milliseconds(Int64(sequence / 1_000))
        self.reply = reply
        self.signature = signature
    }
}

/// The on-device queue: one file per reply in a folder, holding exactly the body of `POST /v1/responses`, so
/// the system can upload the file itself while the app is suspended.
///
/// A reply is written to a temporary file and then hard-linked under its name, which fails if the name is
/// taken: a crash leaves either the whole reply or none of it, and two processes never overwrite each other.
/// Names are the sequence, zero-padded, so their order is the queue's order.
///
/// A signed reply's signature header is kept beside it, in `signatures/<sequence>.sig` (the reply's file must stay
/// exactly the request body): written before the reply's file is linked, so a reply is never seen without it,
/// and removed after the reply's file. The side file names the `responseId` it signs, and a reply is sent with it
/// only when that is its own.
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

    struct Index {
        /// Known names by sequence, oldest first, from `start` on.
        var sequences: [UInt64] = []
        var start = 0
        /// `responseId`s of replies this process queued, so dropping one at the cap needs no read.
        var responseIds: [UInt64: String] = [:]
        var lastSequence: UInt64 = 0
        /// The folder's modification time when it was last listed or changed by this process.
        var stamp: Stamp?

        var count: Int { sequences.count - start }
        var first: UInt64? { start < sequences.count ? sequences[start] : nil }

        mutating func append(_ sequence: UInt64) {
            if let last = sequences.last, last >= sequence, count > 0 {
                // Only a sequence from another process can be older than the newest known one; and the folder
                // may have been listed again between this process's link and this call (another thread saw it
                // changed), with the new name in it already.
                let position = sequences[start...].firstIndex { $0 >= sequence } ?? sequences.endIndex
                if position < sequences.endIndex && sequences[position] == sequence { return }
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
        for folder in [
            directory, directory.appendingPathComponent("claims", isDirectory: true),
            directory.appendingPathComponent("signatures", isDirectory: true),
        ] {
            try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
            #if os(iOS) || os(watchOS) || os(visionOS)
                // Files made in the folder take its class: readable after the first unlock even while the device
                // is locked again, as a reply tapped on the lock screen must be written and sent then.
                try? FileManager.default.setAttributes(
                    [.protectionKey: FileProtectionType.completeUntilFirstUserAuthentication], ofItemAtPath: folder.path
                )
            #endif
        }
        lock.withLock { relist() }
        removeLeftovers()
    }

    // MARK: Adding

    /// Writes `reply` to disk, with its `signature` header when it is signed, and returns it queued. When this
    /// returns, the reply survives the app being killed. One file is written (two for a signed reply); nothing
    /// else in the folder is read.
    @discardableResult
    public func append(_ reply: Reply, signature: String? = nil, now: Date = Date()) throws -> QueuedReply {
        let temporary = directory.appendingPathComponent(".tmp-\(UUID().uuidString)").path
        try Self.create(temporary, reply.ingestBody(), exclusive: true)
        var linked = false
        defer { if !linked { unlink(temporary) } }
        let micros = UInt64(max(0, now.timeIntervalSince1970) * 1_000_000)
        var sequence = lock.withLock { max(micros, index.lastSequence + 1) }
        let sidecar = signature.map { Sidecar(responseId: reply.responseId, header: $0).encoded() }
        // Another process may have taken the name in the same microsecond: the link fails, take the next.
        for _ in 0..<1_000 {
            if let sidecar {
                // The signature first, created only if its name is free: it reserves the sequence.
                do {
                    try Self.create(signaturePath(of: sequence), sidecar, exclusive: true)
                } catch let error as POSIXError where error.code == .EEXIST {
                    sequence += 1
                    continue
                } catch {
                    unlink(signaturePath(of: sequence))
                    throw error
                }
            }
            if link(temporary, directory.appendingPathComponent(Self.fileName(of: sequence)).path) == 0 {
                linked = true
                // Before the folder's time is noted: this change is ours, not another process's.
                unlink(temporary)
                lock.withLock {
                    index.append(sequence)
                    index.responseIds[sequence] = reply.responseId
                    index.stamp = stamp()
                }
                return QueuedReply(sequence: sequence, reply: reply, signature: signature)
            }
            let error = Self.posixError()
            if sidecar != nil { unlink(signaturePath(of: sequence)) }
            guard error.code == .EEXIST else { throw error }
            sequence += 1
        }
        throw POSIXError(.EEXIST)
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
            guard let position = index.sequences[index.start...].firstIndex(where: { $0 > sequence }) else {
                return nil
            }
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
            return .reply(
                QueuedReply(sequence: sequence, reply: reply, signature: signature(of: sequence, for: reply)),
                body: data)
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
        let removed = unlink(url(of: sequence).path) == 0
        unlink(signaturePath(of: sequence))
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
        // rename(2): of two processes moving one file, one finds it gone.
        let moved = rename(url(of: sequence).path, target.path) == 0
        unlink(signaturePath(of: sequence))
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

    /// Claims a reply for one send: a `claims/<sequence>.claim` file created only if none exists (`O_EXCL`), holding
    /// the end of its lease. A claim whose lease ran out (its process was killed mid-send) is broken. Two
    /// processes breaking one claim at once may both send, which the server stores once; the report still
    /// goes to whoever removes the reply's file.
    func claim(_ sequence: UInt64, lease: TimeInterval, now: Date = Date()) -> Claim {
        let path = claimPath(of: sequence)
        let content = Data(String(Timestamp.milliseconds(now.addingTimeInterval(lease))).utf8)
        for _ in 0..<2 {
            if (try? Self.create(path, content, exclusive: true)) != nil { return .claimed }
            guard let data = FileManager.default.contents(atPath: path) else { continue }  // released meanwhile
            if let millis = Int64(String(decoding: data, as: UTF8.self)), Timestamp.milliseconds(millis) > now {
                return .heldElsewhere(until: Timestamp.milliseconds(millis))
            }
            unlink(path)
        }
        return .heldElsewhere(until: now)
    }

    /// Gives up a claim (after the reply's file is removed, when it was sent).
    func release(_ sequence: UInt64) {
        unlink(claimPath(of: sequence))
    }

    // MARK: Files

    /// Writes `data` to a new file; with `exclusive`, fails if the name exists (`O_EXCL`). One `open`, `write`
    /// and `close`: corelibs Foundation's `Data.write` took milliseconds a file here.
    static func create(_ path: String, _ data: Data, exclusive: Bool) throws {
        let descriptor = open(path, O_CREAT | O_WRONLY | O_CLOEXEC | (exclusive ? O_EXCL : O_TRUNC), 0o600)
        guard descriptor >= 0 else { throw posixError() }
        defer { close(descriptor) }
        try data.withUnsafeBytes { (buffer: UnsafeRawBufferPointer) in
            var offset = 0
            while offset < buffer.count {
                let written = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
                if written < 0 {
                    if errno == EINTR { continue }
                    throw posixError()
                }
                offset += written
            }
        }
    }

    static func posixError() -> POSIXError {
        POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO)
    }

    // MARK: Names

    /// The name of the file holding the reply queued as `sequence`.
    public static func fileName(of sequence: UInt64) -> String {
        String(format: "%020llu", sequence) + ".reply.json"
    }

    static func sequence(of name: String) -> UInt64? {
        guard name.hasSuffix(".reply.json"), name.utf8.count == 31 else { return nil }
        return UInt64(name.prefix(20))
    }

    func url(of sequence: UInt64) -> URL {
        directory.appendingPathComponent(Self.fileName(of: sequence))
    }

    /// Signatures live in `signatures/`, so writing one does not change the queue folder's modification time.
    private func signaturePath(of sequence: UInt64) -> String {
        directory.appendingPathComponent("signatures", isDirectory: true)
            .appendingPathComponent(String(format: "%020llu", sequence) + ".sig").path
    }

    /// What `signatures/<sequence>.sig` holds: the header and the `responseId` it signs.
    struct Sidecar: Codable {
        var responseId: String
        var header: String

        func encoded() -> Data {
            // Two strings: encoding cannot fail.
            guard let data = try? JSONEncoder().encode(self) else { preconditionFailure("a sidecar always encodes") }
            return data
        }
    }

    /// The signature header kept for the reply queued as `sequence`, when it names `reply`'s `responseId`.
    private func signature(of sequence: UInt64, for reply: Reply) -> String? {
        guard let data = FileManager.default.contents(atPath: signaturePath(of: sequence)),
            let sidecar = try? JSONDecoder().decode(Sidecar.self, from: data), sidecar.responseId == reply.responseId
        else { return nil }
        return sidecar.header
    }

    /// Claims live in `claims/`, so taking one does not change the queue folder's modification time.
    private func claimPath(of sequence: UInt64) -> String {
        directory.appendingPathComponent("claims", isDirectory: true)
            .appendingPathComponent(String(format: "%020llu", sequence) + ".claim").path
    }

    // MARK: Listing (under `lock`)

    /// A folder's modification time, to the nanosecond.
    struct Stamp: Equatable {
        var seconds: Int
        var nanoseconds: Int
    }

    /// The folder's modification time: one `stat` (FileManager's attributes also look up the owner's name).
    private func stamp() -> Stamp? {
        var info = stat()
        guard stat(directory.path, &info) == 0 else { return nil }
        #if canImport(Darwin)
            return Stamp(seconds: Int(info.st_mtimespec.tv_sec), nanoseconds: Int(info.st_mtimespec.tv_nsec))
        #else
            return Stamp(seconds: Int(info.st_mtim.tv_sec), nanoseconds: Int(info.st_mtim.tv_nsec))
        #endif
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

    /// Temporary files, claims and signatures without a reply that a killed process left behind, once they are
    /// old enough not to be in use.
    private func removeLeftovers(now: Date = Date()) {
        let manager = FileManager.default
        let claims = directory.appendingPathComponent("claims", isDirectory: true)
        let signatures = directory.appendingPathComponent("signatures", isDirectory: true)
        let queued = Set(lock.withLock { index.sequences[index.start...] })
        let names =
            ((try? manager.contentsOfDirectory(atPath: directory.path)) ?? []).filter { $0.hasPrefix(".tmp-") }
            .map { directory.appendingPathComponent($0).path }
            + ((try? manager.contentsOfDirectory(atPath: claims.path)) ?? []).map {
                claims.appendingPathComponent($0).path
            }
            + ((try? manager.contentsOfDirectory(atPath: signatures.path)) ?? []).filter { name in
                UInt64(name.prefix(20)).map { !queued.contains($0) } ?? true
            }.map { signatures.appendingPathComponent($0).path }
        for path in names {
            let modified = (try? manager.attributesOfItem(atPath: path))?[.modificationDate] as? Date ?? now
            if now.timeIntervalSince(modified) > 3_600 { try? manager.removeItem(atPath: path) }
        }
    }
}
