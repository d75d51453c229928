// The only file that touches Network: tells the client when the network comes back. It compiles on Apple
// platforms; on Linux the GlueTypeCheck test target compiles this same file (a symbolic link) against a
// stand-in module with Apple's signatures, where ACTIONHOOKKIT_GLUE_CHECK is set.
#if canImport(Network) && (canImport(Darwin) || ACTIONHOOKKIT_GLUE_CHECK)
    import Dispatch
    import Network
    #if ACTIONHOOKKIT_GLUE_CHECK
        import ActionHookKit
    #endif

    extension ActionHookClient {
        /// Starts an `NWPathMonitor` that tells this client when the network comes and goes
        /// (`networkPathChanged(isSatisfied:)`): what waits is sent as soon as a path is satisfied. Keep the
        /// monitor while the client lives; `cancel()` it to stop.
        @discardableResult
        public func startNetworkPathMonitor(queue: DispatchQueue = DispatchQueue(label: "ActionHookKit.path"))
            -> NWPathMonitor
        {
            let monitor = NWPathMonitor()
            monitor.pathUpdateHandler = { [weak self] path in
                self?.networkPathChanged(isSatisfied: path.status == .satisfied)
            }
            monitor.start(queue: queue)
            return monitor
        }
    }
#endif
