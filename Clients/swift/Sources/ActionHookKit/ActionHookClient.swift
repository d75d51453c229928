import Foundation

#if canImport(FoundationNetworking)
    import FoundationNetworking
#endif

/// An error of the category fetch, the device registration or the sign-out.
public enum ActionHookClientError: Error, Sendable, Equatable {
    /// The server refused the request (for example 401: a wrong ingest key, or a user token refused twice).
    case refused(status: Int, problem: Problem)
    /// The server could not be reached or failed (and, for the category fetch, no categories were kept from
    /// an earlier fetch).
    case unavailable
}

/// The app side of ActionHook: forwards every notification reply to the server, exactly once stored, and
/// fetches the app's categories.
///
/// A reply is written to an on-device queue before `forward` returns (or calls its completion handler),
/// then sent in the background, oldest first, with its `responseId` as the `Idempotency-Key`: retried with
/// exponential backoff and jitter until the server answers 202 or 200, or refuses it for good. What stays
/// queued is sent again by `resume()` on the next launch. On Apple platforms each reply is also handed to a
/// background `URLSession` (`backgroundUploads`), so it reaches the server while the app is suspended.
///
/// With `Configuration.appID` set, replies are signed: the device registers a P-256 key of its own (in the
/// Secure Enclave where there is one), and each reply carries an `ActionHook-Reply-Signature` made when it is
/// queued.
public final class ActionHookClient: Sendable {
    /// Where the server is, the app's ingest key, and where and how long replies are kept.
    public struct Configuration: Sendable {
        /// The server's base URL, e.g. `https://actionhook.example.com`.
        public var serverURL: URL
        /// The app's ingest key (`ahk_…`) at launch; `updateIngestKey(_:)` replaces it.
        public var ingestKey: String
        /// The id of the ActionHook app the ingest key belongs to (as in `/v1/apps/{id}`, e.g. `calendar`). A
        /// reply's signature covers it, so it turns signing on; nil (the default) leaves signing off: no device
        /// key is made or registered, and replies are sent unsigned.
        public var appID: String?
        /// The folder for the queue, the cached categories and the device token. Choose a folder in an App
        /// Group container (`Configuration.appGroupDirectory`) to share the queue with an extension.
        public var directory: URL
        /// The most replies kept; when full, the oldest is dropped and reported.
        public var maxQueuedReplies: Int
        /// The longest a reply is kept unsent; older ones are dropped and reported.
        public var maxQueueAge: TimeInterval
        /// The backoff between attempts.
        public var retry: RetryPolicy
        /// The timeout of one request.
        public var requestTimeout: TimeInterval
        /// How long the system-run upload of a reply waits before it may start: the app's own send, under
        /// its background time, usually finishes first and cancels it.
        public var backgroundUploadDelay: TimeInterval
        /// The APNs environment device registrations name; nil (the default) reads it from the app's
        /// provisioning profile (`PushEnvironment(provisioningProfile:)`).
        public var pushEnvironment: PushEnvironment?

        /// A configuration; the folder defaults to `Application Support/ActionHook`.
        public init(
            serverURL: URL, ingestKey: String, appID: String? = nil, directory: URL? = nil,
            maxQueuedReplies: Int = 1_000,
            maxQueueAge: TimeInterval = 7 * 86_400, retry: RetryPolicy = RetryPolicy(),
            requestTimeout: TimeInterval = 30,
            backgroundUploadDelay: TimeInterval = 20, pushEnvironment: PushEnvironment? = nil
        ) {
            precondition(maxQueuedReplies > 0, "the queue must hold at least one reply")
            self.serverURL = serverURL
            self.ingestKey = ingestKey
            self.appID = appID
            self.directory =
                directory
                ?? FileManager.default.urls(for: .applicationSupportDirectory, in: .userDomainMask)[0]
                .appendingPathComponent("ActionHook", isDirectory: true)
            self.maxQueuedReplies = maxQueuedReplies
            self.maxQueueAge = maxQueueAge
            self.retry = retry
            self.requestTimeout = requestTimeout
            self.backgroundUploadDelay = backgroundUploadDelay
            self.pushEnvironment = pushEnvironment
        }

        #if canImport(Darwin)
            /// `ActionHook` in the App Group container `identifier`, shared by the app and its extensions;
            /// nil when the app lacks the App Group entitlement.
            public static func appGroupDirectory(_ identifier: String) -> URL? {
                FileManager.default.containerURL(forSecurityApplicationGroupIdentifier: identifier)?
                    .appendingPathComponent("ActionHook", isDirectory: true)
            }
        #endif
    }

    /// The configuration.
    public let configuration: Configuration
    /// The on-device queue.
    public let queue: ReplyQueue
    private let sender: ReplySender
    private let identity: UserIdentity
    private let state: Guarded<State>
    private let categoriesFile: URL
    private let deviceTokenFile: URL
    /// Where the device key is kept; nil when signing is off (no app id).
    private let deviceKeys: (any DeviceKeyStore)?

    private struct State {
        var deviceToken: String?
        var categories: CategorySet?
        /// The key replies are signed with: the one kept, which the server confirmed at registration.
        var signingKey: SigningKey?
    }

    /// The device key with its fingerprint, taken once.
    private struct SigningKey {
        var key: any DeviceSigningKey
        var fingerprint: String

        init(_ key: any DeviceSigningKey) {
            self.key = key
            fingerprint = ReplySignature.fingerprint(x963: key.publicKeyX963)
        }
    }

    /// Opens the queue in the configured folder (creating it) and reads what earlier launches kept. Call
    /// `resume()` once the app has launched to send what is still queued.
    ///
    /// - Parameters:
    ///   - backgroundUploads: the system's background transfers (`BackgroundURLSessionUploads` on Apple
    ///     platforms); each queued reply is also scheduled there, and finished uploads reconcile with the queue.
    ///   - backgroundActivity: background time while sending (`ApplicationBackgroundTasks` on iOS).
    ///   - userTokenProvider: asked for the signed-in user's token when the client needs one (see
    ///     `identify(userToken:)`); nil for an app without users.
    ///   - deviceKeys: where the device key for reply signatures is kept, when `configuration.appID` is set; nil
    ///     (the default) keeps it in the Keychain on Apple platforms (`KeychainDeviceKeyStore`, in the Secure
    ///     Enclave where there is one) and in the file `device-key` of the configured folder elsewhere
    ///     (`SoftwareDeviceKeyStore`). Not used without an app id.
    public init(
        configuration: Configuration, transport: any HTTPTransport = URLSessionTransport(),
        backgroundUploads: (any BackgroundUploading)? = nil, backgroundActivity: (any BackgroundActivity)? = nil,
        onEvent: @escaping @Sendable (ActionHookEvent) -> Void = { _ in },
        userTokenProvider: UserTokenProvider? = nil, deviceKeys: (any DeviceKeyStore)? = nil
    ) throws {
        self.configuration = configuration
        let keys: (any DeviceKeyStore)?
        if let appID = configuration.appID {
            #if canImport(CryptoKit) && canImport(Security) && canImport(Darwin)
                keys = deviceKeys ?? KeychainDeviceKeyStore(account: appID)
            #else
                _ = appID
                keys =
                    deviceKeys
                    ?? SoftwareDeviceKeyStore(file: configuration.directory.appendingPathComponent("device-key"))
            #endif
        } else {
            keys = nil
        }
        self.deviceKeys = keys
        let identity = UserIdentity(provider: userTokenProvider)
        self.identity = identity
        queue = try ReplyQueue(directory: configuration.directory.appendingPathComponent("queue", isDirectory: true))
        categoriesFile = configuration.directory.appendingPathComponent("categories.json")
        deviceTokenFile = configuration.directory.appendingPathComponent("device-token")
        let decoder = JSONDecoder()
        let categories = (try? Data(contentsOf: categoriesFile)).flatMap {
            try? decoder.decode(CategorySet.self, from: $0)
        }
        let token = (try? String(contentsOf: deviceTokenFile, encoding: .utf8)).flatMap { $0.isEmpty ? nil : $0 }
        // An unreadable key is as none: the next registration makes and registers a new one.
        let kept = (try? keys?.load()).flatMap { $0 }.map(SigningKey.init)
        let state = Guarded(State(deviceToken: token, categories: categories, signingKey: kept))
        self.state = state
        sender = ReplySender(
            configuration: configuration, queue: queue, transport: transport, uploads: backgroundUploads,
            activity: backgroundActivity, identity: identity, onEvent: onEvent,
            replyAgeLimit: { category in state.withLock { $0.categories?.category(category)?.maxReplyAgeSeconds } })
        backgroundUploads?.start { [sender] result in sender.reconcile(result) }
    }

    // MARK: Device token

    /// The device token (hex) sent with each reply; kept on disk for the next launch.
    public var deviceToken: String? {
        state.withLock { $0.deviceToken }
    }

    /// Sets the device token from `didRegisterForRemoteNotificationsWithDeviceToken`.
    public func setDeviceToken(_ token: Data) {
        setDeviceToken(DeviceToken.hex(token))
    }

    /// Sets the device token as hex (nil forgets it).
    public func setDeviceToken(_ hex: String?) {
        state.withLock { $0.deviceToken = hex }
        try? Data((hex ?? "").utf8).write(to: deviceTokenFile, options: .atomic)
    }

    // MARK: Ingest key

    /// The ingest key requests carry now.
    public var ingestKey: String {
        sender.ingestKey
    }

    /// Replaces the ingest key (after a rotation, or when `.paused` reported the key refused) and sends what
    /// waits with it. Uploads the system was given with the old key are cancelled; the app sends them now.
    public func updateIngestKey(_ key: String) {
        sender.updateIngestKey(key)
    }

    // MARK: Users

    /// The user token held now (`ActionHook-User-Token`), if any.
    public var userToken: String? {
        identity.held
    }

    /// Sets the signed-in user's token, a JWT the app's backend signed (claims `sub`, `aud`, `exp`). Every
    /// reply sent from now on, the device registration and the sign-out carry it. Before it expires (within 60
    /// seconds of its `exp`, read without verifying it) and after the server refuses it, the client asks the
    /// `userTokenProvider` for a new one. Ends a pause a refused user token caused.
    public func identify(userToken: String) {
        identity.identify(userToken)
        sender.identityChanged()
    }

    /// Registers this device for the current user (anonymous without a token): `PUT /v1/devices/{hex}` with
    /// the environment (`Configuration.pushEnvironment`, else the one `provisioningProfile` grants: see
    /// `PushEnvironment(provisioningProfile:)`), the platform and `device`'s facts, and the user token. Keeps
    /// the device token for the replies (`setDeviceToken`). A user-token 401 asks the provider for a new token
    /// and tries once more.
    ///
    /// On iOS call `register(deviceToken:)` instead, which reads the facts and the profile itself.
    ///
    /// With signing on (`Configuration.appID`), the registration also sends the device key's public half
    /// (`publicKey`): the key kept, or a new one when there is none or `rotatingKey` is true. A new key is kept,
    /// and signs the replies queued from then on, only once the server's answer shows it registered (the
    /// device's `publicKey.fingerprint`); until then the key kept before, if any, signs them, and the server
    /// still takes that one for a day after the new one replaced it.
    ///
    /// - Parameter rotatingKey: make a new device key and register it in place of the current one.
    /// - Throws: `ActionHookClientError.refused` when the server refuses the registration,
    ///   `.unavailable` when it cannot be reached or fails, the provider's error, or the key store's
    ///   (`DeviceKeyError`) when it cannot make a key.
    public func register(
        deviceToken: Data, device: DeviceInfo, provisioningProfile: Data?, rotatingKey: Bool = false
    ) async throws {
        let hex = DeviceToken.hex(deviceToken)
        setDeviceToken(hex)
        let environment = configuration.pushEnvironment ?? PushEnvironment(provisioningProfile: provisioningProfile)
        var key: SigningKey?
        if let deviceKeys {
            let kept = state.withLock { $0.signingKey }
            key = try kept.flatMap { rotatingKey ? nil : $0 } ?? SigningKey(deviceKeys.generate())
        }
        let (data, response) = try await deviceRequest(
            "PUT", hex: hex,
            body: device.registrationBody(environment: environment, publicKey: key?.key.publicKeyX963))
        try check(response, data, accepting: [200, 201])
        if let key, let deviceKeys, registeredFingerprint(in: data) == key.fingerprint {
            try deviceKeys.keep(key.key)
            state.withLock { $0.signingKey = key }
        }
    }

    /// The fingerprint of the device key a registration's answer (the device) shows, if any.
    private func registeredFingerprint(in data: Data) -> String? {
        struct Device: Decodable {
            struct PublicKey: Decodable { var fingerprint: String }
            var publicKey: PublicKey?
        }
        return (try? JSONDecoder().decode(Device.self, from: data))?.publicKey?.fingerprint
    }

    /// The fingerprint of the device key replies are signed with (the server's `publicKey.fingerprint` of this
    /// device, and the `key` of each reply's signature); nil while there is none: signing is off, or the device
    /// has not registered a key yet.
    public var deviceKeyFingerprint: String? {
        state.withLock { $0.signingKey?.fingerprint }
    }

    /// Signs the user out on this device: `DELETE /v1/devices/{hex}` with the current user token (the device
    /// stops receiving the user's notifications), then forgets the token, also when the request failed. The
    /// provider is not asked again until `identify(userToken:)`; replies sent from now on carry no user token.
    /// Without a device token only the token is forgotten.
    ///
    /// The device key is forgotten too (the server revoked it with the device): replies queued from now on are
    /// unsigned until the next registration makes and registers a new key.
    ///
    /// - Throws: `ActionHookClientError.refused` or `.unavailable` when the server did not remove the device
    ///   (a 404, the device already gone or not this user's, is not an error), or the provider's error.
    public func signOut() async throws {
        defer {
            identity.signOut()
            if let deviceKeys {
                state.withLock { $0.signingKey = nil }
                try? deviceKeys.remove()
            }
            sender.identityChanged()
        }
        guard let hex = deviceToken else { return }
        let (data, response) = try await deviceRequest("DELETE", hex: hex, body: nil)
        try check(response, data, accepting: [200, 204, 404])
    }

    /// Sends a request to `/v1/devices/{hex}` with the ingest key and the current user token; a user-token 401
    /// asks the provider for a new token and sends once more with it.
    private func deviceRequest(_ method: String, hex: String, body: Data?) async throws -> (Data, HTTPURLResponse) {
        var token = try await identity.current()
        var refreshed = false
        while true {
            var request = URLRequest(url: configuration.serverURL.appendingPathComponent("v1/devices/\(hex)"))
            request.httpMethod = method
            request.timeoutInterval = configuration.requestTimeout
            request.setValue("Bearer " + ingestKey, forHTTPHeaderField: "Authorization")
            request.setValue("application/json", forHTTPHeaderField: "Accept")
            if let token { request.setValue(token, forHTTPHeaderField: UserToken.headerName) }
            if let body {
                request.setValue("application/json", forHTTPHeaderField: "Content-Type")
                request.httpBody = body
            }
            let answer: (Data, HTTPURLResponse)
            do {
                answer = try await sender.transport.send(request)
            } catch {
                throw ActionHookClientError.unavailable
            }
            guard answer.1.statusCode == 401, !refreshed, problem(in: answer.0).refusesUserToken,
                case .changed(let next) = await identity.refresh(after: token)
            else { return answer }
            token = next
            refreshed = true
        }
    }

    private func check(_ response: HTTPURLResponse, _ data: Data, accepting statuses: Set<Int>) throws {
        let status = response.statusCode
        if statuses.contains(status) { return }
        if (400..<500).contains(status) && status != 408 && status != 429 {
            throw ActionHookClientError.refused(status: status, problem: problem(in: data))
        }
        throw ActionHookClientError.unavailable
    }

    private func problem(in data: Data) -> Problem {
        (try? JSONDecoder().decode(Problem.self, from: data)) ?? Problem()
    }

    // MARK: Forwarding

    /// Queues `reply` on disk and starts sending it; returns once it is on disk. A reply without a device
    /// token gets the one set with `setDeviceToken`. On the caller's thread this writes one small file (and,
    /// with background uploads, schedules one); it never reads the queue.
    ///
    /// With a device key, the reply is signed here, on the caller's thread (one ECDSA signature; in the Secure
    /// Enclave some milliseconds), and its signature kept with it (`QueuedReply.signature`): every attempt
    /// carries the same one, also after the key changed. A reply without a device token, with a line feed in its
    /// `responseId` or action, or whose key fails to sign, is queued unsigned.
    @discardableResult
    public func enqueue(_ reply: Reply) throws -> QueuedReply {
        var reply = reply
        if reply.deviceToken == nil { reply.deviceToken = deviceToken }
        var signature: String?
        if let appID = configuration.appID, let key = state.withLock({ $0.signingKey }) {
            signature = ReplySignature.header(appID: appID, reply: reply, key: key.key, fingerprint: key.fingerprint)
        }
        let entry = try queue.append(reply, signature: signature)
        sender.queued(entry)
        return entry
    }

    /// Queues `reply`, starts sending it (holding background time, and scheduling its system-run upload),
    /// then calls `completionHandler`: it is never held for the network. A reply that cannot be written is
    /// reported as `.notQueued`.
    public func forward(_ reply: Reply, completionHandler: @escaping @Sendable () -> Void) {
        forward(reply)
        completionHandler()
    }

    /// Queues `reply` and starts sending it. A reply that cannot be written is reported as `.notQueued`.
    public func forward(_ reply: Reply) {
        do {
            try enqueue(reply)
        } catch {
            sender.report(.notQueued(responseId: reply.responseId))
        }
    }

    /// Sends what waits: what earlier launches left queued, or what waits for the network. Call it once the
    /// app has launched and whenever it comes to the foreground; it also cancels system-run uploads of
    /// replies no longer queued.
    public func resume() {
        sender.resume()
    }

    /// Tells the client whether the network can be reached (from `NWPathMonitor`, see
    /// `startNetworkPathMonitor()`): when it returns, what waits is sent at once, without counting the
    /// attempts made while it was gone; while it is gone, a new reply does not cut the wait short.
    public func networkPathChanged(isSatisfied: Bool) {
        sender.networkPathChanged(isSatisfied: isSatisfied)
    }

    /// Sends everything queued now, waiting through retries, and returns when the queue is empty, when the
    /// server refused the key (`.paused`), or when the calling task is cancelled: then sending stops (the
    /// request in flight is cancelled, the reply stays queued) until the next `forward` or `resume()`.
    public func drain() async {
        await sender.drain()
    }

    // MARK: Categories

    /// The categories from the last fetch kept on disk, if any.
    public var cachedCategories: CategorySet? {
        state.withLock { $0.categories }
    }

    /// Fetches `GET /v1/categories` with the ingest key, sending the kept set's `ETag` as `If-None-Match`.
    /// A new set is kept on disk. When the server cannot be reached or fails, the kept set is answered
    /// (origin `.cached`), so an app launched offline still has its buttons.
    public func fetchCategories() async throws -> CategorySet {
        let cached = cachedCategories
        var request = URLRequest(url: configuration.serverURL.appendingPathComponent("v1/categories"))
        request.timeoutInterval = configuration.requestTimeout
        request.setValue("Bearer " + ingestKey, forHTTPHeaderField: "Authorization")
        request.setValue("application/json", forHTTPHeaderField: "Accept")
        request.cachePolicy = .reloadIgnoringLocalCacheData
        if let etag = cached?.etag { request.setValue(etag, forHTTPHeaderField: "If-None-Match") }

        let data: Data
        let response: HTTPURLResponse
        do {
            (data, response) = try await sender.transport.send(request)
        } catch {
            return try fallback(cached)
        }
        switch response.statusCode {
        case 200:
            struct Page: Decodable { var items: [CategoryDefinition] }
            guard let page = try? JSONDecoder().decode(Page.self, from: data) else { return try fallback(cached) }
            let set = CategorySet(
                categories: page.items.sorted { $0.identifier < $1.identifier },
                etag: response.value(forHTTPHeaderField: "ETag"), origin: .fetched)
            state.withLock { $0.categories = set }
            if let encoded = try? JSONEncoder().encode(set) { try? encoded.write(to: categoriesFile, options: .atomic) }
            return set
        case 304 where cached != nil:
            var set = cached!
            set.origin = .notModified
            return set
        case 400..<500 where response.statusCode != 408 && response.statusCode != 429:
            let problem = (try? JSONDecoder().decode(Problem.self, from: data)) ?? Problem()
            throw ActionHookClientError.refused(status: response.statusCode, problem: problem)
        default:
            return try fallback(cached)
        }
    }

    private func fallback(_ cached: CategorySet?) throws -> CategorySet {
        guard var cached else { throw ActionHookClientError.unavailable }
        cached.origin = .cached
        return cached
    }
}

/// A value behind a lock.
final class Guarded<Value>: @unchecked Sendable {
    // @unchecked: `value` is only touched inside `withLock`, under `lock`.
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<Result>(_ body: (inout Value) throws -> Result) rethrows -> Result {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
