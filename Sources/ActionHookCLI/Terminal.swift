import ActionHookCore
import Foundation

/// Where a command writes: standard output for results, standard error for diagnostics.
public struct Terminal: Sendable {
    /// Writes to standard output.
    public let out: @Sendable (String) -> Void
    /// Writes to standard error.
    public let err: @Sendable (String) -> Void

    /// A terminal over two writers (tests pass collectors).
    public init(out: @escaping @Sendable (String) -> Void, err: @escaping @Sendable (String) -> Void) {
        self.out = out
        self.err = err
    }

    /// The process's standard output and standard error.
    public static let standard = Terminal(
        out: { FileHandle.standardOutput.write(Data($0.utf8)) },
        err: { FileHandle.standardError.write(Data($0.utf8)) })

    /// Writes one line to standard output, its control characters written out visibly: lines hold what
    /// a server sent (names, problem details), which must not reach the terminal as escape sequences.
    public func line(_ text: String = "") { out(TerminalText.escaped(text) + "\n") }

    /// Writes one line to standard error, escaped as ``line(_:)`` is.
    public func error(_ text: String) { err(TerminalText.escaped(text) + "\n") }
}

/// A failure the command line reports as it is and exits 1 for. Its message never holds a secret.
public struct CLIError: Error, CustomStringConvertible, Sendable {
    /// What went wrong, one line per problem.
    public var lines: [String]

    /// An error of one line.
    public init(_ message: String) {
        lines = [message]
    }

    /// An error of several lines (one per field error).
    public init(lines: [String]) {
        self.lines = lines
    }

    /// The lines joined.
    public var description: String { lines.joined(separator: "\n") }
}
