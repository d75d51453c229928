import Dispatch
import Foundation

/// Blocks until SIGTERM or SIGINT arrives (both are taken from their default action first).
public func waitForStopSignal() {
    let stopRequested = DispatchSemaphore(value: 0)
    var sources: [DispatchSourceSignal] = []
    for signalNumber in [SIGTERM, SIGINT] {
        signal(signalNumber, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .global())
        source.setEventHandler { stopRequested.signal() }
        source.resume()
        sources.append(source)
    }
    stopRequested.wait()
    withExtendedLifetime(sources) {}
}
