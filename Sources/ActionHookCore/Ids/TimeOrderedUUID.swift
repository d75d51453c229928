import Foundation
import Locks

extension UUID {
    /// A version 7 UUID (RFC 9562): the Unix time in milliseconds in the first 48 bits, then 74
    /// random bits. Ids made later sort later, so the indexes they key grow at their right edge
    /// instead of splitting pages at random. The milliseconds are rounded down, so an id made at a
    /// time falls in the partition of that time (see sql/migrations/011).
    public static func timeOrdered(at date: Date = Date()) -> UUID {
        let milliseconds = UInt64(max(0, (date.timeIntervalSince1970 * 1000).rounded(.down)))
        var bytes = RandomPool.shared.withLock { $0.next() }
        return withUnsafeMutableBytes(of: &bytes) { raw in
            for index in 0..<6 { raw[index] = UInt8(truncatingIfNeeded: milliseconds >> (8 * (5 - index))) }
            raw[6] = (raw[6] & 0x0F) | 0x70
            raw[8] = (raw[8] & 0x3F) | 0x80
            return UUID(uuid: raw.load(as: uuid_t.self))
        }
    }
}

/// Random 128-bit values from the system's generator, fetched 4 KiB at a time: one system call
/// per 256 ids instead of two per id.
struct RandomPool: Sendable {
    static let shared = Locked(RandomPool())

    private var buffer = [(UInt64, UInt64)](repeating: (0, 0), count: 256)
    private var used = 256

    mutating func next() -> (UInt64, UInt64) {
        if used == buffer.count {
            // glibc's arc4random_buf: the kernel's generator, one getrandom call for the lot.
            buffer.withUnsafeMutableBytes { arc4random_buf($0.baseAddress!, $0.count) }
            used = 0
        }
        used += 1
        return buffer[used - 1]
    }
}
