import Foundation
import Logging

/// A notification received through `LISTEN`.
public struct PostgresNotification: Sendable, Equatable {
    /// The channel it was sent on.
    public let channel: String
    /// The text sent with it, `""` when there was none.
    public let payload: String

    /// Creates a notification value, as a test double would.
    public init(channel: String, payload: String) {
        self.channel = channel
        self.payload = payload
    }
}

/// Listens for notifications on a thread and a connection of its own, reconnecting when the
/// connection is lost.
///
/// After a reconnection `onReconnect` is called, since notifications sent while no connection was
/// listening are lost: use it to reload whatever the notifications would have invalidated. It is
/// also called when listening first succeeds after failed attempts. Both callbacks run on the
/// listener's thread; keep them short.
public final class PostgresListener: @unchecked Sendable {
    // @unchecked Sendable: the mutable state (`state`, `thread`) is guarded by `condition`; the connection lives
    // on the listener's thread alone.
    private enum State {
        case created, running, stopping, stopped
    }

    private static let pollMilliseconds: Int32 = 200
    private static let firstRetryDelay: TimeInterval = 0.1
    private static let longestRetryDelay: TimeInterval = 5

    private let configuration: PostgresConfiguration
    private let channels: [String]
    private let logger: Logger?
    private let onNotification: @Sendable (PostgresNotification) -> Void
    private let onReconnect: @Sendable () -> Void

    private let condition = NSCondition()
    private var state = State.created
    private var thread: Thread?

    /// Creates a listener; nothing happens until ``start()``.
    ///
    /// - Parameters:
    ///   - configuration: How to open the listening connection.
    ///   - channels: The channels to listen on; each must match `[a-z_0-9]+` and be at most 63 bytes.
    ///   - logger: Receives a warning when the connection is lost or cannot be opened (never the connection string).
    ///   - onNotification: Called on the listener's thread for each notification.
    ///   - onReconnect: Called on the listener's thread after listening resumed, when notifications may
    ///     have been missed.
    public init(
        configuration: PostgresConfiguration,
        channels: [String],
        logger: Logger? = nil,
        onNotification: @escaping @Sendable (PostgresNotification) -> Void,
        onReconnect: @escaping @Sendable () -> Void = {}
    ) {
        for channel in channels {
            // The names go into LISTEN as identifiers, which cannot be bound as parameters; this
            // alphabet needs no escaping, and 63 bytes is the server's identifier limit.
            precondition(
                !channel.isEmpty && channel.utf8.count <= 63
                    && channel.utf8.allSatisfy { byte in
                        (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                            || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "_")
                    },
                "a channel name must match [a-z_0-9]+ and be at most 63 bytes"
            )
        }
        self.configuration = configuration
        self.channels = channels
        self.logger = logger
        self.onNotification = onNotification
        self.onReconnect = onReconnect
    }

    /// Starts the listener's thread. Call it once, and call ``stop()`` when done.
    public func start() {
        condition.lock()
        precondition(state == .created, "a listener can be started only once")
        state = .running
        condition.unlock()
        // The thread keeps the listener alive until stop(), so dropping the last reference does not stop it.
        let thread = Thread { [self] in
            self.run()
        }
        thread.name = "PostgresListener"
        condition.lock()
        self.thread = thread
        condition.unlock()
        thread.start()
    }

    /// Stops listening and waits for the listener's thread to end, which takes at most a poll
    /// interval (200 ms) plus any callback in progress or connection attempt under way.
    ///
    /// Called from a callback, on the listener's own thread, it only asks the thread to end.
    public func stop() {
        condition.lock()
        defer { condition.unlock() }
        switch state {
        case .created:
            state = .stopped
            return
        case .running:
            state = .stopping
            condition.broadcast()
        case .stopping, .stopped:
            break
        }
        // Waiting on the listener's own thread would wait for ourselves.
        if let thread, Thread.current === thread { return }
        while state != .stopped {
            condition.wait()
        }
    }

    private var isRunning: Bool {
        condition.lock()
        defer { condition.unlock() }
        return state == .running
    }

    private func run() {
        var connection: PostgresConnection?
        var retryDelay = Self.firstRetryDelay
        // Set after any failure, so the next successful LISTEN tells the owner it may have missed something.
        var mayHaveMissed = false
        while isRunning {
            guard let listening = connection else {
                do {
                    connection = try openAndListen()
                    retryDelay = Self.firstRetryDelay
                    if mayHaveMissed {
                        mayHaveMissed = false
                        onReconnect()
                    }
                } catch {
                    mayHaveMissed = true
                    logger?.warning(
                        "PostgreSQL listener could not listen; retrying",
                        metadata: ["error": "\(error)", "retry_ms": "\(Int(retryDelay * 1000))"]
                    )
                    pause(retryDelay)
                    retryDelay = min(retryDelay * 2, Self.longestRetryDelay)
                }
                continue
            }
            guard let notifications = listening.waitForNotifications(timeoutMilliseconds: Self.pollMilliseconds)
            else {
                logger?.warning("PostgreSQL listener lost its connection; reconnecting")
                connection = nil
                mayHaveMissed = true
                pause(retryDelay)
                retryDelay = min(retryDelay * 2, Self.longestRetryDelay)
                continue
            }
            for notification in notifications {
                onNotification(notification)
            }
        }
        // The connection is finished before stop() returns.
        connection = nil
        condition.lock()
        // The thread's closure holds the listener: drop the listener's hold on the thread, or neither is freed.
        thread = nil
        state = .stopped
        condition.broadcast()
        condition.unlock()
    }

    private func openAndListen() throws -> PostgresConnection {
        let connection = try PostgresConnection(configuration: configuration)
        for channel in channels {
            try connection.execute(PostgresQuery(unsafeSQL: "LISTEN \"\(channel)\""))
        }
        return connection
    }

    /// Sleeps for `interval`, or less if stop() is called meanwhile.
    private func pause(_ interval: TimeInterval) {
        let deadline = Date(timeIntervalSinceNow: interval)
        condition.lock()
        defer { condition.unlock() }
        while state == .running {
            if !condition.wait(until: deadline) { return }
        }
    }
}
