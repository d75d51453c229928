import Foundation
import TestSupport

/// JSON helpers the admin, isolation and secret suites share (each keeps its own helper namespace).
package protocol ResponseHelpers {}

extension ResponseHelpers {
    /// Compact JSON text with sorted keys, for request bodies written as dictionaries.
    package static func json(_ value: Any) -> String {
        // Bodies here are literals in the tests: one that is not JSON is a mistake in the test itself.
        guard let data = try? JSONSerialization.data(withJSONObject: value, options: [.sortedKeys]) else {
            preconditionFailure("a test body is not serialisable as JSON: \(value)")
        }
        return String(decoding: data, as: UTF8.self)
    }

    /// The `items` of a list answer.
    package static func items(_ response: TestResponse) -> [[String: Any]] {
        response.json["items"] as? [[String: Any]] ?? []
    }

    /// The JSON pointers of a problem's field errors.
    package static func pointers(_ response: TestResponse) -> [String] {
        (response.json["errors"] as? [[String: Any]] ?? []).compactMap { $0["pointer"] as? String }
    }
}
