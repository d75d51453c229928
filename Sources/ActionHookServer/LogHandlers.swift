import ActionHookCore
import Foundation
import Logging

/// One JSON object per line on standard error: `ts`, `level`, `msg`, `label`, then metadata.
public struct JSONLogHandler: LogHandler {
    /// Metadata added to every line.
    public var metadata: Logger.Metadata = [:]
    /// The lowest level written.
    public var logLevel: Logger.Level
    let label: String

    /// Creates a handler for `label` at `level`.
    public init(label: String, level: Logger.Level) {
        self.label = label
        self.logLevel = level
    }

    /// Metadata by key.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Writes one line.
    public func log(event: LogEvent) {
        var line = "{\"ts\":"
        line += Self.quoted(Date.now.formatted(.iso8601.year().month().day().time(includingFractionalSeconds: true)))
        line += ",\"level\":" + Self.quoted(event.level.rawValue)
        line += ",\"msg\":" + Self.quoted(event.message.description)
        line += ",\"label\":" + Self.quoted(label)
        let merged = metadata.merging(event.metadata ?? [:]) { $1 }
        for key in merged.keys.sorted() {
            line += "," + Self.quoted(key) + ":" + Self.quoted(merged[key]!.description)
        }
        line += "}\n"
        FileHandle.standardError.write(Data(line.utf8))
    }

    static func quoted(_ text: String) -> String {
        var out = ""
        JSONValue.writeString(text, to: &out)
        return out
    }
}
