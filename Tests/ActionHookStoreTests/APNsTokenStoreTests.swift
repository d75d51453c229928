import ActionHookCore
import Crypto
import Dispatch
import Foundation
import Postgres
import ServiceTestSupport
import Synchronization
import TestSupport
import Testing

@testable import ActionHookStore

/// The shared provider token in `apns_provider_tokens`: kept while fresh, replaced once when stale or
/// refused (only while the refused token is still the stored one), one row per signing key.
@Suite("APNs provider tokens in the database")
struct APNsTokenStoreTests {
    static func key(privateKey: String = P256.Signing.PrivateKey().pemRepresentation) throws -> APNsSigningKey {
        try APNsSigningKey(teamId: "TEAM123456", keyId: "KEYID12345", privateKey: privateKey)
    }

    @Test("kept while fresh, replaced when 40 minutes old, and a refused token is replaced once")
    func freshStaleRefused() throws {
        let api = try TestAPI()
        let writes = try APNsTokenWrites(api)
        let store = APNsTokenStore(pool: api.pool)
        let key = try Self.key()
        let start = 1_700_000_000

        let first = try store.token(for: key, at: start, refused: nil)
        #expect(first.signed)
        #expect(first.token.issuedAt == start)
        // Fresh: read, not signed, whoever asks (another instance's store over another pool).
        let otherPool = PostgresPool(configuration: api.database.configuration, size: 1)
        defer { otherPool.close() }
        let other = APNsTokenStore(pool: otherPool)
        for minutes in [0, 10, 39] {
            let again = try other.token(for: key, at: start + minutes * 60 + 59, refused: nil)
            #expect(!again.signed && again.token == first.token, "at \(minutes) min")
        }
        // Stale at 40 minutes: one new token.
        let stale = try store.token(for: key, at: start + 40 * 60, refused: nil)
        #expect(stale.signed)
        #expect(stale.token.issuedAt == start + 40 * 60 && stale.token.jwt != first.token.jwt)
        // Refused by APNs: replaced once; a second instance that saw the same token refused gets the
        // replacement, and a late refusal of the first token changes nothing.
        let replaced = try store.token(for: key, at: start + 41 * 60, refused: stale.token.jwt)
        #expect(replaced.signed && replaced.token.jwt != stale.token.jwt)
        let second = try other.token(for: key, at: start + 41 * 60, refused: stale.token.jwt)
        #expect(!second.signed && second.token == replaced.token)
        let late = try other.token(for: key, at: start + 42 * 60, refused: first.token.jwt)
        #expect(!late.signed && late.token == replaced.token)

        #expect(
            try writes.all().map { "\($0.op) \($0.issuedAt)" } == [
                "INSERT \(start)", "UPDATE \(start + 40 * 60)", "UPDATE \(start + 41 * 60)",
            ])
        #expect(try writes.all().map(\.token) == [first.token.jwt, stale.token.jwt, replaced.token.jwt])
        #expect(try api.count("SELECT count(*) AS n FROM apns_provider_tokens") == 1)
    }

    @Test("eight instances asking at once for a stale or refused token: exactly one signs, all get its token")
    func concurrentRefreshSignsOnce() throws {
        let api = try TestAPI()
        let writes = try APNsTokenWrites(api)
        let key = try Self.key()
        let start = 1_700_000_000
        let pools = (0..<8).map { _ in PostgresPool(configuration: api.database.configuration, size: 1) }
        defer { for pool in pools { pool.close() } }
        let stores = pools.map { APNsTokenStore(pool: $0) }
        /// Every store asks at once, each on a thread of its own released together; returns what each got.
        func askAtOnce(at now: Int, refused: String?) throws -> [(token: APNsProviderToken, signed: Bool)] {
            let answers = Mutex<[Result<(token: APNsProviderToken, signed: Bool), any Error>]>([])
            let (gate, done) = (DispatchSemaphore(value: 0), DispatchGroup())
            for store in stores {
                done.enter()
                Thread {
                    gate.wait()
                    let answer = Result { try store.token(for: key, at: now, refused: refused) }
                    answers.withLock { $0.append(answer) }
                    done.leave()
                }.start()
            }
            for _ in stores { gate.signal() }
            done.wait()
            return try answers.withLock { $0 }.map { try $0.get() }
        }
        let first = try stores[0].token(for: key, at: start, refused: nil).token

        let stale = try askAtOnce(at: start + 41 * 60, refused: nil)
        #expect(stale.count == 8)
        #expect(stale.filter(\.signed).count == 1)
        #expect(Set(stale.map(\.token.jwt)).count == 1)
        let second = try #require(stale.first?.token)
        #expect(second.jwt != first.jwt && second.issuedAt == start + 41 * 60)

        let refused = try askAtOnce(at: start + 42 * 60, refused: second.jwt)
        #expect(refused.count == 8)
        #expect(refused.filter(\.signed).count == 1)
        #expect(Set(refused.map(\.token.jwt)).count == 1)
        let third = try #require(refused.first?.token)
        #expect(third.jwt != second.jwt && third.issuedAt == start + 42 * 60)

        #expect(
            try writes.all().map { "\($0.op) \($0.issuedAt)" } == [
                "INSERT \(start)", "UPDATE \(start + 41 * 60)", "UPDATE \(start + 42 * 60)",
            ])
        #expect(try writes.all().map(\.token) == [first.jwt, second.jwt, third.jwt])
    }

    @Test("another private key under the same team and key id has a row of its own, never the other's token")
    func keyedByTheKeyItself() throws {
        let api = try TestAPI()
        let store = APNsTokenStore(pool: api.pool)
        let pem = P256.Signing.PrivateKey().pemRepresentation
        let (genuine, forged) = (try Self.key(privateKey: pem), try Self.key())
        #expect(try Self.key(privateKey: pem) == genuine)
        #expect(genuine != forged)
        let start = 1_700_000_000
        let mine = try store.token(for: genuine, at: start, refused: nil)
        let theirs = try store.token(for: forged, at: start + 60, refused: nil)
        #expect(mine.signed && theirs.signed && mine.token.jwt != theirs.token.jwt)
        #expect(try store.token(for: genuine, at: start + 120, refused: nil).token == mine.token)
        #expect(try api.count("SELECT count(*) AS n FROM apns_provider_tokens") == 2)
        // Its description names the team and key id, never the key; a token's never shows the JWT.
        #expect(!"\(genuine)".contains("PRIVATE") && "\(genuine)".contains("KEYID12345"))
        #expect(!"\(mine.token)".contains(mine.token.jwt))
    }
}
