import Foundation

/// Polls `condition` every 10 ms until it holds or `seconds` pass; returns whether it held.
///
/// For what arrives asynchronously (a NOTIFY, a writer reaching a lock), never to time the code.
package func eventually(within seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        Thread.sleep(forTimeInterval: 0.01)
    }
    return try condition()
}

/// Polls `condition` every 10 ms until it holds or `seconds` pass, suspending between polls.
///
/// Async tests use this one: the blocking form holds a thread of the concurrency pool while it waits,
/// and on a machine with few cores the tasks it waits for (a client's send loop) may need that thread.
package func eventually(within seconds: Double, _ condition: () throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + .milliseconds(Int(seconds * 1000))
    while ContinuousClock.now < deadline {
        if try condition() { return true }
        try? await Task.sleep(for: .milliseconds(10))
    }
    return try condition()
}
