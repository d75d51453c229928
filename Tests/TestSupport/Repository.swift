import Foundation

/// The repository the tests run from.
package enum Repository {
    /// The repository's root, found from this file's path (Tests/TestSupport/Repository.swift).
    package static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent()
}
