// A stand-in for the background URLSession API of Apple's Foundation, for Linux only (Package.swift declares
// it inside `#if os(Linux)`): corelibs Foundation marks `URLSessionConfiguration.background(withIdentifier:)`
// unavailable and lacks `sessionSendsLaunchEvents`, so ActionHookKit's URLSession glue is type-checked here
// instead, against these declarations with Apple's names and signatures (from the Foundation reference). The
// delegate protocols' optional methods are requirements with default implementations, as close as Swift
// without Objective-C gets. Additions are named `standIn…`: tests use them to play the system's part (run an
// upload, answer it); the glue must never call them.
import Foundation

public struct URLRequest: Sendable, Equatable {
    public var url: URL?
    public var httpMethod: String? = "GET"
    public private(set) var allHTTPHeaderFields: [String: String]? = nil

    public init(url: URL) {
        self.url = url
    }

    public mutating func setValue(_ value: String?, forHTTPHeaderField field: String) {
        var fields = allHTTPHeaderFields ?? [:]
        fields[field] = value
        allHTTPHeaderFields = fields
    }

    public func value(forHTTPHeaderField field: String) -> String? {
        allHTTPHeaderFields?.first { $0.key.caseInsensitiveCompare(field) == .orderedSame }?.value
    }
}

open class URLResponse: NSObject, @unchecked Sendable {}

open class HTTPURLResponse: URLResponse, @unchecked Sendable {
    open private(set) var statusCode: Int
    private let headers: [String: String]

    public init(standInStatus statusCode: Int, headers: [String: String] = [:]) {
        self.statusCode = statusCode
        self.headers = headers
    }

    open func value(forHTTPHeaderField field: String) -> String? {
        headers.first { $0.key.caseInsensitiveCompare(field) == .orderedSame }?.value
    }
}

open class URLSessionConfiguration: NSObject, @unchecked Sendable {
    public private(set) var standInIdentifier: String?
    open var sessionSendsLaunchEvents: Bool = false
    open var isDiscretionary: Bool = false
    open var sharedContainerIdentifier: String?

    open class func background(withIdentifier identifier: String) -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration()
        configuration.standInIdentifier = identifier
        return configuration
    }
}

open class URLSessionTask: NSObject, @unchecked Sendable {
    private let lock = NSLock()
    private var storedDescription: String?
    private var storedBegin: Date?
    private var storedResponse: URLResponse?
    public private(set) var standInResumed = false
    public private(set) var standInCancelled = false
    open private(set) var taskIdentifier: Int
    public let standInRequest: URLRequest
    public let standInFile: URL?

    init(standInIdentifier identifier: Int, request: URLRequest, file: URL?) {
        taskIdentifier = identifier
        standInRequest = request
        standInFile = file
    }

    open var taskDescription: String? {
        get { lock.withLock { storedDescription } }
        set { lock.withLock { storedDescription = newValue } }
    }

    open var earliestBeginDate: Date? {
        get { lock.withLock { storedBegin } }
        set { lock.withLock { storedBegin = newValue } }
    }

    open var response: URLResponse? { lock.withLock { storedResponse } }

    open func resume() {
        lock.withLock { standInResumed = true }
    }

    open func cancel() {
        lock.withLock { standInCancelled = true }
    }

    func standInSetResponse(_ response: URLResponse?) {
        lock.withLock { storedResponse = response }
    }
}

open class URLSessionDataTask: URLSessionTask, @unchecked Sendable {}

open class URLSessionUploadTask: URLSessionDataTask, @unchecked Sendable {}

public protocol URLSessionDelegate: NSObjectProtocol, Sendable {
    func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession)
}

extension URLSessionDelegate {
    public func urlSessionDidFinishEvents(forBackgroundURLSession session: URLSession) {}
}

public protocol URLSessionTaskDelegate: URLSessionDelegate {
    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?)
}

extension URLSessionTaskDelegate {
    public func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {}
}

public protocol URLSessionDataDelegate: URLSessionTaskDelegate {
    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data)
}

extension URLSessionDataDelegate {
    public func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {}
}

open class URLSession: NSObject, @unchecked Sendable {
    open private(set) var configuration: URLSessionConfiguration
    open private(set) var delegate: (any URLSessionDelegate)?
    private let lock = NSLock()
    private var tasks: [URLSessionTask] = []
    private var nextIdentifier = 1

    /// Every session made, so tests find the one the glue made (stand-in only).
    nonisolated(unsafe) public private(set) static var standInSessions: [URLSession] = []
    private static let sessionsLock = NSLock()

    public init(
        configuration: URLSessionConfiguration, delegate: (any URLSessionDelegate)?,
        delegateQueue queue: OperationQueue?
    ) {
        self.configuration = configuration
        self.delegate = delegate
        super.init()
        Self.sessionsLock.withLock { Self.standInSessions.append(self) }
    }

    open func uploadTask(with request: URLRequest, fromFile fileURL: URL) -> URLSessionUploadTask {
        lock.withLock {
            let task = URLSessionUploadTask(standInIdentifier: nextIdentifier, request: request, file: fileURL)
            nextIdentifier += 1
            tasks.append(task)
            return task
        }
    }

    open func getAllTasks(completionHandler: @escaping @Sendable ([URLSessionTask]) -> Void) {
        completionHandler(lock.withLock { tasks.filter { !$0.standInCancelled } })
    }

    /// The tasks made so far (stand-in only).
    public var standInTasks: [URLSessionTask] { lock.withLock { tasks } }

    /// The system finishes `task` with an answer, as it would while the app is suspended (stand-in only).
    public func standInAnswer(_ task: URLSessionTask, status: Int, body: Data = Data(), headers: [String: String] = [:])
    {
        task.standInSetResponse(HTTPURLResponse(standInStatus: status, headers: headers))
        if let delegate = delegate as? any URLSessionDataDelegate, let dataTask = task as? URLSessionDataTask,
            !body.isEmpty
        {
            delegate.urlSession(self, dataTask: dataTask, didReceive: body)
        }
        (delegate as? any URLSessionTaskDelegate)?.urlSession(self, task: task, didCompleteWithError: nil)
    }

    /// The system finishes `task` without an answer (stand-in only).
    public func standInFail(_ task: URLSessionTask) {
        (delegate as? any URLSessionTaskDelegate)?.urlSession(
            self, task: task, didCompleteWithError: URLError(.notConnectedToInternet))
    }

    /// Every event of the session was delivered (stand-in only).
    public func standInFinishEvents() {
        delegate?.urlSessionDidFinishEvents(forBackgroundURLSession: self)
    }
}
