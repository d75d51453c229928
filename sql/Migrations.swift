import Foundation

/// One forward-only schema migration from `sql/migrations`.
public struct Migration: Sendable, Equatable {
    /// The number that orders migrations, from the file name (`001_init.sql` → 1).
    public let version: Int
    /// The file name, e.g. `001_init.sql`.
    public let name: String
    /// The SQL text, run in one transaction.
    public let sql: String

    /// A migration (the shipped ones come from ``Migrations/all``).
    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
    }
}

/// The migrations shipped with this build, in order.
public enum Migrations {
    /// Every migration in `sql/migrations`, ordered by version.
    ///
    /// A missing or malformed resource means a broken build, which is a programming error.
    public static let all: [Migration] = {
        guard let directory = Bundle.module.url(forResource: "migrations", withExtension: nil),
            let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path)
        else { preconditionFailure("the migrations resource is missing from the build") }
        let migrations = names.filter { $0.hasSuffix(".sql") }.sorted().map { name -> Migration in
            guard let version = Int(name.prefix { $0.isNumber }),
                let sql = try? String(contentsOf: directory.appendingPathComponent(name), encoding: .utf8)
            else { preconditionFailure("migration \(name) has no number or is not UTF-8") }
            return Migration(version: version, name: name, sql: sql)
        }
        precondition(Set(migrations.map(\.version)).count == migrations.count, "two migrations share a number")
        return migrations
    }()

    /// The highest version shipped: the schema version this build expects.
    public static var latestVersion: Int { all.last?.version ?? 0 }
}
