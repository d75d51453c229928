import Foundation
import Locks
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
///
/// A listening connection that hears nothing for a heartbeat interval asks its server whether it is
/// still a primary (`SELECT pg_is_in_recovery()`), within the response deadline: a server that was lost
/// without the connection noticing (frozen, cut off) or that is now a standby (demoted after a
/// failover, where notifications no longer come from the writers) is left, and listening resumes on
/// whichever host the connection string finds, with `onReconnect` called.
public final class PostgresListener: Sendable {
    private static let firstRetryDelay: TimeInterval = 0.1
    private static let longestRetryDelay: TimeInterval = 5

    private let configuration: PostgresConfiguration
    private let heartbeatMilliseconds: Int32
    private let channels: [String]
    private let logger: Logger?
    private let onNotification: @Sendable (PostgresNotification) -> Void
    private let onReconnect: @Sendable () -> Void

    private let background = BackgroundLoop("PostgresListener", LoopState(), loop: \.self)
    private var state: Monitor<LoopState> { background.state }
    /// Wakes the thread from its wait on the connection when the listener stops.
    private let wake = WakeSignal()

    /// Creates a listener; nothing happens until ``start()``.
    ///
    /// - Parameters:
    ///   - configuration: How to open the listening connection.
    ///   - channels: The channels to listen on; each must match `[a-z_0-9]+` and be at most 63 bytes.
    ///   - logger: Receives a warning when the connection is lost or cannot be opened (never the connection string).
    ///   - onNotification: Called on the listener's thread for each notification.
    ///   - onReconnect: Called on the listener's thread after listening resumed, when notifications may
    ///     have been missed.
    ///   - heartbeatInterval: How long the connection may hear nothing before its server is asked.
    public init(
        configuration: PostgresConfiguration,
        channels: [String],
        heartbeatInterval: Duration = .seconds(5),
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
        // The heartbeat must not wait forever on a server that does not answer.
        var configuration = configuration
        configuration.responseDeadlineMilliseconds = configuration.responseDeadlineMilliseconds ?? 5000
        self.configuration = configuration
        let (seconds, attoseconds) = heartbeatInterval.components
        heartbeatMilliseconds = Int32(clamping: max(1, seconds * 1000 + attoseconds / 1_000_000_000_000_000))
        self.channels = channels
        self.logger = logger
        self.onNotification = onNotification
        self.onReconnect = onReconnect
    }

    /// Starts the listener's thread. Call it once, and call ``stop()`` when done.
    public func start() {
        // The thread keeps the listener alive until stop(), so dropping the last reference does not stop it.
        background.start { [self] _ in run() }
    }

    /// Stops listening and waits for the listener's thread to end: at once when it waits for
    /// notifications, after any callback in progress or connection attempt under way.
    ///
    /// Called from a callback, on the listener's own thread, it only asks the thread to end.
    public func stop() {
        // The thread may be waiting on the connection rather than on the state: `wake` gets it up. On the
        // listener's own thread the stop only asks (waiting would wait for itself).
        background.stop(asking: { wake.signal() })
    }

    private var isRunning: Bool {
        state.withLock { $0.isRunning }
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
            // Notifications, a stop (through `wake`) or the heartbeat interval end the wait.
            guard
                let notifications = listening.waitForNotifications(
                    timeoutMilliseconds: heartbeatMilliseconds, wake: wake),
                !notifications.isEmpty || !isRunning || stillOnPrimary(listening)
            else {
                logger?.warning("PostgreSQL listener lost its connection or its primary; reconnecting")
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
    }

    /// The heartbeat: whether the listening connection's server answers, within the response deadline,
    /// that it is a primary. Notifications that arrive meanwhile are kept for the next wait.
    private func stillOnPrimary(_ connection: PostgresConnection) -> Bool {
        do {
            return !(try connection.query("SELECT pg_is_in_recovery() AS standby")[0].decode("standby", as: Bool.self))
        } catch {
            return false
        }
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
        state.wait(until: .now + .milliseconds(Int(interval * 1000)), for: { !$0.isRunning }, then: { _ in })
    }
}
