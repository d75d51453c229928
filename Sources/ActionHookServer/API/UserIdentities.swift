import ActionHookCore
import ActionHookStore
import Dispatch
import Foundation
import Locks
import MicroHTTPD

/// Who a phone's request speaks for: the user of its `ActionHook-User-Token`, checked against the app's
/// identity settings. One verifier per app, made again when the app's keys change (which also forgets the
/// tokens the old one had verified).
final class UserIdentities: Sendable {
    /// The header that carries the user token.
    static let header = "actionhook-user-token"

    private let verifiers = Locked([String: (settings: IdentitySettings, verifier: UserTokenVerifier)]())

    /// The verified user of `request`, nil when it carries no token and the app's mode lets it be anonymous.
    /// Identity `off` ignores any token. A token that does not verify is refused, in `optional` mode too.
    func user(of request: HTTPRequest, principal: IngestPrincipal, now: Date = Date()) throws -> VerifiedUser? {
        let settings = principal.identity
        guard settings.mode != .off else { return nil }
        guard let token = request.headers[Self.header], !token.isEmpty else {
            if settings.mode == .required { throw APIError.userTokenRequired }
            return nil
        }
        let verifier = try verifier(appID: principal.appID, settings: settings)
        do {
            return try verifier.verify(token, now: now)
        } catch {
            throw APIError.invalidUserToken(error)
        }
    }

    private func verifier(appID: String, settings: IdentitySettings) throws -> UserTokenVerifier {
        if let known = verifiers.withLock({ $0[appID] }), known.settings == settings { return known.verifier }
        let made = try Self.make(appID: appID, settings: settings)
        verifiers.withLock { $0[appID] = (settings, made) }
        return made
    }

    /// Where verifiers are made: not Swift's cooperative pool, which callers blocking on this thread (tests,
    /// synchronous code) may hold, and whose tasks this thread would then wait for forever.
    private static let executor = DispatchTaskExecutor(label: "actionhook.identity")

    /// jwt-kit hands out keys only asynchronously; request threads are plain threads (libmicrohttpd's), so
    /// the one-time making of a verifier waits for its task here.
    private static func make(appID: String, settings: IdentitySettings) throws -> UserTokenVerifier {
        try executor.wait { try await UserTokenVerifier.make(appID: appID, settings: settings) }
    }
}
