import Foundation

/// Asks the app's backend for a user token: a JWT it signed for ActionHook (claims `sub`, `aud`, `exp`), or
/// nil when nobody is signed in. The client calls it when it needs a token: when none is held, when the held
/// one expires within 60 seconds, and after the server refused the one it sent. Calls that overlap share one
/// call of the provider.
public typealias UserTokenProvider = @Sendable () async throws -> String?

/// The user token the app sends beside its ingest key (`ActionHook-User-Token`), read without verifying it:
/// only the server verifies the signature.
public enum UserToken {
    /// The request header the token is sent in.
    public static let headerName = "ActionHook-User-Token"
    /// A token expiring within this many seconds is replaced (through the provider) before it is sent.
    public static let refreshMargin: TimeInterval = 60

    /// The token's `exp` claim, read from its payload (the second base64url part, JSON) without verifying
    /// the signature; nil when the token is not a JWT or has no numeric `exp`.
    public static func expiry(of token: String) -> Date? {
        struct Claims: Decodable { var exp: Double? }
        let parts = token.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let payload = base64URLDecoded(parts[1]),
            let seconds = (try? JSONDecoder().decode(Claims.self, from: payload))?.exp, seconds.isFinite
        else { return nil }
        return Date(timeIntervalSince1970: seconds)
    }

    /// Whether `token` must be replaced before it is sent at `now`: its `exp` is within `refreshMargin`.
    /// A token whose `exp` cannot be read is kept until the server refuses it.
    static func expiresSoon(_ token: String, now: Date) -> Bool {
        guard let expiry = expiry(of: token) else { return false }
        return expiry.timeIntervalSince(now) <= refreshMargin
    }

    /// Whether `token`'s `exp` has passed at `now`.
    static func hasExpired(_ token: String, now: Date) -> Bool {
        guard let expiry = expiry(of: token) else { return false }
        return expiry <= now
    }

    private static func base64URLDecoded(_ text: Substring) -> Data? {
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}

extension Problem {
    /// The problem type of a 401 for a user token that is missing where the app requires one.
    public static let userTokenRequiredType = "https://actionhook.dev/problems/user-token-required"
    /// The problem type of a 401 for a user token that is invalid, expired, for another app, or of an
    /// unknown key.
    public static let invalidUserTokenType = "https://actionhook.dev/problems/invalid-user-token"

    /// Whether this problem refuses the user token (either type above) rather than the ingest key.
    public var refusesUserToken: Bool {
        type == Self.userTokenRequiredType || type == Self.invalidUserTokenType
    }
}

/// The user token the client holds, and the calls of the provider that replace it. Plain Swift, shared by
/// the client's requests and the reply sender.
final class UserIdentity: Sendable {
    private let provider: UserTokenProvider?
    private let state: Guarded<State>

    private struct State {
        var token: String?
        /// `signOut()` was called: the provider is not asked until `identify(userToken:)`.
        var signedOut = false
        /// Counts changes made by the app (`identify`, `signOut`): a provider's answer that began before
        /// one of them is not kept.
        var generation = 0
        var call: (generation: Int, task: Task<String?, Error>)?
    }

    /// What `refresh(after:)` came to.
    enum Refresh: Equatable {
        /// A token other than the refused one (or none, where one was refused) is to be sent now.
        case changed(String?)
        /// Nothing different to send: no provider, signed out, or the provider answered the same.
        case unchanged
        /// The provider failed (it threw): try again later.
        case failed
    }

    init(provider: UserTokenProvider?) {
        self.provider = provider
        state = Guarded(State())
    }

    /// The token held now, without asking the provider.
    var held: String? {
        state.withLock { $0.token }
    }

    /// Counts the app's changes of the user (`identify`, `signOut`).
    var generation: Int {
        state.withLock { $0.generation }
    }

    /// The app set a token (a user signed in, or the app refreshed it itself).
    func identify(_ token: String?) {
        state.withLock { state in
            state.token = token
            state.signedOut = false
            state.generation += 1
            state.call = nil
        }
    }

    /// Forgets the token; the provider is not asked again until `identify`.
    func signOut() {
        state.withLock { state in
            state.token = nil
            state.signedOut = true
            state.generation += 1
            state.call = nil
        }
    }

    /// The token to send now: the held one, or the provider's when none is held or the held one expires
    /// within `UserToken.refreshMargin`. When the provider fails, a held token that has not expired is
    /// answered; otherwise its error is thrown.
    func current(now: Date = Date()) async throws -> String? {
        let (token, generation, ask) = state.withLock { state in
            let ask =
                provider != nil && !state.signedOut
                && (state.token.map { UserToken.expiresSoon($0, now: now) } ?? true)
            return (state.token, state.generation, ask)
        }
        guard ask else { return token }
        do {
            return try await callProvider(generation)
        } catch {
            if let token, !UserToken.hasExpired(token, now: now) { return token }
            throw error
        }
    }

    /// The server refused `sent` (a user-token 401): asks the provider for a new token, unless the token was
    /// already replaced since `sent` was read (then that one is answered).
    func refresh(after sent: String?) async -> Refresh {
        let (held, generation, ask) = state.withLock { state in
            (state.token, state.generation, provider != nil && !state.signedOut)
        }
        if held != sent { return .changed(held) }
        guard ask else { return .unchanged }
        do {
            let token = try await callProvider(generation)
            return token == sent ? .unchanged : .changed(token)
        } catch {
            return .failed
        }
    }

    /// Calls the provider, or joins the call under way, and keeps its answer; when the app changed the user
    /// meanwhile, the token it set (or none, after `signOut`) is answered instead.
    private func callProvider(_ generation: Int) async throws -> String? {
        guard let provider else { return nil }
        let task = state.withLock { state -> Task<String?, Error> in
            if let call = state.call, call.generation == generation { return call.task }
            let task = Task { try await provider() }
            state.call = (generation, task)
            return task
        }
        let result: Result<String?, Error>
        do {
            result = .success(try await task.value)
        } catch {
            result = .failure(error)
        }
        return try state.withLock { state in
            if state.call?.task == task { state.call = nil }
            // The app set a token or signed out meanwhile: its choice is sent, not this answer.
            guard state.generation == generation else { return state.token }
            let token = try result.get()
            state.token = token
            return token
        }
    }
}
