import ArgumentParser
import Foundation

/// Runs a command's body, printing a ``CLIError`` as it is and exiting 1 for it.
func reporting(_ terminal: Terminal = .standard, _ body: () throws -> Void) throws {
    do {
        try body()
    } catch let error as CLIError {
        for line in error.lines { terminal.error("actionhook: \(line)") }
        throw ExitCode.failure
    }
}

/// Runs `body` with the admin client the environment names (`ACTIONHOOK_URL`, `ACTIONHOOK_ADMIN_TOKEN`),
/// reporting as ``reporting(_:_:)`` does.
func withAdminClient(_ body: (AdminClient) throws -> Void) throws {
    try reporting { try body(try AdminClient.fromEnvironment(ProcessInfo.processInfo.environment)) }
}
