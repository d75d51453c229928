// A stand-in for the part of Apple's Network framework that ActionHookKit's path glue uses, for Linux only
// (Package.swift declares it inside `#if os(Linux)`), with Apple's names and signatures (from the Network
// reference). The additions are named `standIn…`: tests use them to play the system's part; the glue must
// never call them.
import Dispatch
import Foundation

public struct NWPath: Equatable, Sendable {
    public enum Status: Equatable, Hashable, Sendable {
        case satisfied
        case unsatisfied
        case requiresConnection
    }

    public let status: NWPath.Status

    public init(standInStatus status: NWPath.Status) {
        self.status = status
    }
}

final public class NWPathMonitor: @unchecked Sendable {
    // @unchecked: every member is only touched under `lock`.
    private let lock = NSLock()
    private var handler: (@Sendable (_ newPath: NWPath) -> Void)?
    private var deliveryQueue: DispatchQueue?
    private var path = NWPath(standInStatus: .requiresConnection)
    nonisolated(unsafe) private static var monitors: [NWPathMonitor] = []
    private static let monitorsLock = NSLock()

    public init() {
        Self.monitorsLock.withLock { Self.monitors.append(self) }
    }

    final public var pathUpdateHandler: (@Sendable (_ newPath: NWPath) -> Void)? {
        get { lock.withLock { handler } }
        set { lock.withLock { handler = newValue } }
    }

    final public var currentPath: NWPath { lock.withLock { path } }

    final public var queue: DispatchQueue? { lock.withLock { deliveryQueue } }

    final public func start(queue: DispatchQueue) {
        lock.withLock { deliveryQueue = queue }
    }

    final public func cancel() {
        lock.withLock { deliveryQueue = nil }
    }

    /// Every monitor made, so tests find the one the glue made (stand-in only).
    public static var standInMonitors: [NWPathMonitor] { monitorsLock.withLock { monitors } }

    /// The path changes: the handler runs on the monitor's queue, as the system would (stand-in only).
    public func standInUpdate(_ status: NWPath.Status) {
        let newPath = NWPath(standInStatus: status)
        let (queue, handler) = lock.withLock { () -> (DispatchQueue?, (@Sendable (NWPath) -> Void)?) in
            path = newPath
            return (deliveryQueue, self.handler)
        }
        guard let queue, let handler else { return }
        queue.sync { handler(newPath) }
    }
}
