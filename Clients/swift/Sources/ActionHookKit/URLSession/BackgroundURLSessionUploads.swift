// The only file that uses a background URLSession: the system uploads queued replies while the app is
// suspended. It compiles on Apple platforms; on Linux, where corelibs Foundation has no background sessions,
// the GlueTypeCheck test target compiles this same file (a symbolic link) against a stand-in module with
// Apple's signatures, where ACTIONHOOKKIT_GLUE_CHECK is set. What to do with the results is ActionHookKit's
// plain Swift (`ReplySender.reconcile`), tested on Linux.
#if canImport(Darwin) || ACTIONHOOKKIT_GLUE_CHECK
    import Foundation
    #if ACTIONHOOKKIT_GLUE_CHECK
        import ActionHookKit
        import URLSessionStandIn
    #endif

    /// `BackgroundUploading` over a background `URLSession`: each queued reply is uploaded from its file by the
    /// system, also while the app is suspended or after it was killed, and the result reaches the client when
    /// the app next runs.
    ///
    /// Create one at launch with a fixed identifier and pass it to `ActionHookClient`, and hand the app
    /// delegate's `application(_:handleEventsForBackgroundURLSession:completionHandler:)` to
    /// `handleEvents(forBackgroundURLSession:completionHandler:)`.
    public final class BackgroundURLSessionUploads: NSObject, BackgroundUploading, URLSessionDataDelegate,
        @unchecked Sendable
    {
        // @unchecked: the mutable state (the session, the tasks this launch made, the answers received so
        // far, the result handler) is only touched under `lock`; the events' completion handler lives on the
        // main actor.
        /// The background session's identifier.
        public let identifier: String
        private let sharedContainerIdentifier: String?
        private let lock = NSLock()
        private var session: URLSession?
        private var report: (@Sendable (BackgroundUploadResult) -> Void)?
        private var tasks: [String: URLSessionTask] = [:]
        private var bodies: [Int: Data] = [:]
        private let finishEvents = EventsCompletion()

        /// The largest answer body kept for a result (a problem document is far smaller).
        private static let maximumBody = 64 * 1_024

        /// Uploads through the background session `identifier`. An app extension sharing the queue passes its
        /// App Group as `sharedContainerIdentifier`.
        public init(identifier: String, sharedContainerIdentifier: String? = nil) {
            self.identifier = identifier
            self.sharedContainerIdentifier = sharedContainerIdentifier
        }

        public func start(reporting report: @escaping @Sendable (BackgroundUploadResult) -> Void) {
            let configuration = URLSessionConfiguration.background(withIdentifier: identifier)
            configuration.sessionSendsLaunchEvents = true
            configuration.isDiscretionary = false
            configuration.sharedContainerIdentifier = sharedContainerIdentifier
            lock.withLock { self.report = report }
            // Creating the session reconnects to uploads of earlier launches; their results follow.
            let session = URLSession(configuration: configuration, delegate: self, delegateQueue: nil)
            lock.withLock { self.session = session }
        }

        public func schedule(_ upload: BackgroundUpload) {
            guard let session = lock.withLock({ session }) else { return }
            var request = URLRequest(url: upload.url)
            request.httpMethod = "POST"
            for (name, value) in upload.headers { request.setValue(value, forHTTPHeaderField: name) }
            let task = session.uploadTask(with: request, fromFile: upload.file)
            task.taskDescription = upload.name
            task.earliestBeginDate = upload.earliestBeginDate
            lock.withLock { tasks[upload.name] = task }
            task.resume()
        }

        public func cancel(name: String) {
            lock.withLock { tasks.removeValue(forKey: name) }?.cancel()
        }

        public func cancelAll(except names: Set<String>) {
            guard let session = lock.withLock({ session }) else { return }
            session.getAllTasks { tasks in
                for task in tasks where !names.contains(task.taskDescription ?? "") { task.cancel() }
            }
        }

        /// Call from the app delegate's `application(_:handleEventsForBackgroundURLSession:completionHandler:)`.
        /// Answers false for another session's identifier (the app calls its own handler then).
        @MainActor
        @discardableResult
        public func handleEvents(
            forBackgroundURLSession identifier: String, completionHandler: @escaping () -> Void
        ) -> Bool {
            guard identifier == self.identifier else { return false }
            finishEvents.handler = completionHandler
            return true
        }

        public func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
            lock.withLock {
                var body = bodies[dataTask.taskIdentifier] ?? Data()
                if body.count < Self.maximumBody { body.append(data.prefix(Self.maximumBody - body.count)) }
                bodies[dataTask.taskIdentifier] = body
            }
        }

        public func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
            guard let name = task.taskDescription else { return }
            let (body, report) = lock.withLock { () -> (Data, (@Sendable (BackgroundUploadResult) -> Void)?) in
                if tasks[name] === task { tasks[name] = nil }
                return (bodies.removeValue(forKey: task.taskIdentifier) ?? Data(), self.report)
            }
            if error == nil, let response = task.response as? HTTPURLResponse {
                let retryAfter = response.value(forHTTPHeaderField: "Retry-After")
                report?(
                    BackgroundUploadResult(
                        name: name, outcome: .answered(status: response.statusCode, body: body, retryAfter: retryAfter))
                )
            } else {
                report?(BackgroundUploadResult(name: name, outcome: .failed))
            }
        }

        public func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {
            // Every result was handed to the client above; the system may now snapshot and suspend the app.
            Task { @MainActor [finishEvents] in finishEvents.finish() }
        }
    }

    /// The completion handler of `handleEventsForBackgroundURLSession`, kept on the main actor.
    @MainActor
    private final class EventsCompletion {
        var handler: (() -> Void)?

        nonisolated init() {}

        func finish() {
            let handler = handler
            self.handler = nil
            handler?()
        }
    }
#endif
