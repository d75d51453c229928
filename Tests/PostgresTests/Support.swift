import Foundation
import Postgres
import TestSupport

/// A random lowercase hex string, for names and seeded values that must not collide between tests.
func randomHex(_ bytes: Int = 8) -> String {
    var generator = SystemRandomNumberGenerator()
    return (0..<bytes).map { _ in String(format: "%02x", generator.next() as UInt8) }.joined()
}

/// Terminates the given backends and waits until the server has let them go.
func terminateBackends(_ pids: [Int], using admin: PostgresConnection) throws -> Bool {
    _ = try admin.query("SELECT pg_terminate_backend(pid) FROM unnest(\(pids)::int[]) AS pid")
    return try eventually(within: 5) {
        let rows = try admin.query("SELECT count(*) AS n FROM pg_stat_activity WHERE pid = ANY(\(pids)::int[])")
        let remaining: Int = try rows[0].decode("n")
        return remaining == 0
    }
}

/// Where the test server listens, as `host` (a name, an address or a socket directory) and `port`,
/// read from a live session so tests can build connection strings of their own.
func serverAddress(_ connection: PostgresConnection) throws -> (host: String, port: Int) {
    let rows = try connection.query(
        """
        SELECT host(inet_server_addr()) AS address,
               split_part(current_setting('unix_socket_directories'), ',', 1) AS socket_directory,
               current_setting('port')::int AS port
        """
    )
    let address: String? = try rows[0].decode("address")
    let socketDirectory: String = try rows[0].decode("socket_directory")
    return (address ?? socketDirectory.trimmingCharacters(in: .whitespaces), try rows[0].decode("port"))
}

/// Percent-encodes everything but unreserved characters, for the parts of a libpq URI.
func uriComponent(_ text: String) -> String {
    text.addingPercentEncoding(
        withAllowedCharacters: CharacterSet(
            charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~")) ?? text
}
