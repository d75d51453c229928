// A stand-in for the part of Apple's UIKit that ActionHookKit's background-time and device-registration glue
// uses, for Linux only (Package.swift declares it inside `#if os(Linux)`), with Apple's names and signatures (from
// the UIKit reference: `UIApplication` and `UIDevice` are main-actor isolated, the background-task methods are
// `nonisolated`). The additions are named `standIn…`: tests use them to play the system's part; the glue must
// never call them.
import Foundation

public struct UIBackgroundTaskIdentifier: RawRepresentable, Hashable, Sendable {
    public let rawValue: Int
    public init(rawValue: Int) {
        self.rawValue = rawValue
    }
    public static let invalid = UIBackgroundTaskIdentifier(rawValue: 0)
}

@MainActor
open class UIResponder: NSObject {}

@MainActor
open class UIApplication: UIResponder {
    private static let application = UIApplication()
    nonisolated private let standIn = StandInTasks()

    open class var shared: UIApplication { application }

    nonisolated open func beginBackgroundTask(
        withName taskName: String?, expirationHandler handler: (@MainActor @Sendable () -> Void)? = nil
    ) -> UIBackgroundTaskIdentifier {
        standIn.begin(handler)
    }

    nonisolated open func endBackgroundTask(_ identifier: UIBackgroundTaskIdentifier) {
        standIn.end(identifier)
    }

    /// Background tasks begun and not ended (stand-in only).
    nonisolated public var standInOpenTasks: [UIBackgroundTaskIdentifier] { standIn.open }
    /// How many were begun (stand-in only).
    nonisolated public var standInBegun: Int { standIn.begun }
    /// The time runs out: every open task's expiration handler runs, as the system would (stand-in only).
    public func standInExpire() {
        for handler in standIn.handlers { handler() }
    }
}

@MainActor
open class UIDevice: NSObject {
    private static let device = UIDevice()

    open class var current: UIDevice { device }

    /// The stand-in device is an iPhone.
    open var model: String { "iPhone" }

    /// The stand-in's system version.
    open var systemVersion: String { "18.1" }
}

private final class StandInTasks: @unchecked Sendable {
    // @unchecked: every member is only touched under `lock`.
    private let lock = NSLock()
    private var tasks: [UIBackgroundTaskIdentifier: (@MainActor @Sendable () -> Void)?] = [:]
    private var count = 0

    func begin(_ handler: (@MainActor @Sendable () -> Void)?) -> UIBackgroundTaskIdentifier {
        lock.withLock {
            count += 1
            let identifier = UIBackgroundTaskIdentifier(rawValue: count)
            tasks[identifier] = handler
            return identifier
        }
    }

    func end(_ identifier: UIBackgroundTaskIdentifier) {
        lock.withLock { _ = tasks.removeValue(forKey: identifier) }
    }

    var open: [UIBackgroundTaskIdentifier] { lock.withLock { tasks.keys.sorted { $0.rawValue < $1.rawValue } } }
    var begun: Int { lock.withLock { count } }
    var handlers: [@MainActor @Sendable () -> Void] { lock.withLock { tasks.values.compactMap { $0 } } }
}
