import Foundation
import TestSupport

/// A running `actionhook serve` of the built binary, and the pid a test may kill.
package final class ServeProcess {
    /// The built `actionhook` binary, next to the test bundle.
    package static func binary() throws -> URL {
        var directories: [URL] = []
        if let first = CommandLine.arguments.first {
            directories.append(URL(fileURLWithPath: first).resolvingSymlinksInPath().deletingLastPathComponent())
        }
        directories.append(Bundle.main.bundleURL)
        directories.append(Bundle.main.bundleURL.deletingLastPathComponent())
        directories.append(Bundle.main.executableURL?.deletingLastPathComponent() ?? Bundle.main.bundleURL)
        for directory in directories {
            for candidate in [directory, directory.deletingLastPathComponent()] {
                let url = candidate.appendingPathComponent("actionhook")
                var isDirectory: ObjCBool = false
                if FileManager.default.fileExists(atPath: url.path, isDirectory: &isDirectory), !isDirectory.boolValue,
                    FileManager.default.isExecutableFile(atPath: url.path)
                {
                    return url
                }
            }
        }
        throw TestClientError(
            description:
                "the actionhook binary was not found next to the tests (looked in \(directories.map(\.path))); "
                + "build it with `swift build --build-tests` before running this test")
    }

    package let process = Process()
    package let log: URL

    package init(binary: URL, environment: [String: String], log: URL) throws {
        self.log = log
        process.executableURL = binary
        process.arguments = ["serve"]
        process.environment = environment
        if !FileManager.default.fileExists(atPath: log.path) {
            _ = FileManager.default.createFile(atPath: log.path, contents: nil)
        }
        let handle = try FileHandle(forWritingTo: log)
        handle.seekToEndOfFile()
        process.standardOutput = handle
        process.standardError = handle
        try process.run()
    }

    package var pid: Int32 { process.processIdentifier }
}
