/// Rows bound as one binary array per column (each column one parameter, which the server reads
/// without parsing text; see ``PostgresBinaryArray``), each column named once, beside its value:
///
/// ```swift
/// var rows = PostgresColumns(devices)
/// rows.add("token", .text) { $0.append($1.token) }
/// rows.add("seen_at", .timestamptz) { $0.append($1.seenAt) }
/// let insert: PostgresQuery = """
///     INSERT INTO devices (\(columns: rows)) SELECT \(columns: rows, of: "d") FROM \(unnest: rows, as: "d")
///     """
/// ```
///
/// A statement reads them as `\(unnest: rows, as: "d")` — `unnest($1::text[], $2::timestamptz[]) AS
/// d(token, seen_at)` — and lists them as `\(columns: rows)`, both written from the list the arrays were
/// filled from, so a column's name, type and value cannot drift apart. Names are `StaticString`s: only
/// literals of the source reach the SQL text.
public struct PostgresColumns<Rows: Collection> {
    /// The rows, each giving one element of every column.
    public let rows: Rows
    /// The columns' names, in the order they were added.
    public private(set) var names: [StaticString] = []
    /// Each column's values, in the same order.
    private(set) var arrays: [PostgresBinaryArray] = []

    /// No columns yet over `rows`.
    public init(_ rows: Rows) {
        self.rows = rows
    }

    /// Adds a column `name` of `element`s, one per row, each appended by `value` (`bytesPerRow` is the
    /// room reserved for each).
    public mutating func add(
        _ name: StaticString, _ element: PostgresBinaryArray.Element, bytesPerRow: Int = 16,
        _ value: (inout PostgresBinaryArray, Rows.Element) -> Void
    ) {
        var array = PostgresBinaryArray(element, capacity: rows.count * bytesPerRow)
        for row in rows { value(&array, row) }
        precondition(array.count == rows.count, "column \(name) has \(array.count) values for \(rows.count) rows")
        names.append(name)
        arrays.append(array)
    }

    /// The names except `excluded`, each prefixed with `alias.` when there is one, joined by commas.
    func list(except excluded: [StaticString], of alias: StaticString?) -> String {
        let excluded = Set(excluded.map(\.description))
        let prefix = alias.map { "\($0)." } ?? ""
        return names.map(\.description).filter { !excluded.contains($0) }.map { prefix + $0 }
            .joined(separator: ", ")
    }
}

extension PostgresQuery.StringInterpolation {
    /// Binds each column as the next parameter and reads them as rows: `unnest($1::uuid[], …) AS
    /// alias(id, …)`, with `ordinality` (the row's 1-based position) as a last column when named.
    public mutating func appendInterpolation<Rows>(
        unnest columns: PostgresColumns<Rows>, as alias: StaticString, ordinality: StaticString? = nil
    ) {
        appendLiteral("unnest(")
        for (index, array) in columns.arrays.enumerated() {
            if index > 0 { appendLiteral(", ") }
            appendInterpolation(array)
            appendLiteral("::\(array.element.typeName)[]")
        }
        appendLiteral(")")
        if let ordinality {
            appendLiteral(" WITH ORDINALITY AS \(alias)(\(columns.list(except: [], of: nil)), \(ordinality))")
        } else {
            appendLiteral(" AS \(alias)(\(columns.list(except: [], of: nil)))")
        }
    }

    /// The columns' names but `except`, as `alias.name` when `of` names an alias, joined by commas.
    public mutating func appendInterpolation<Rows>(
        columns: PostgresColumns<Rows>, except excluded: [StaticString] = [], of alias: StaticString? = nil
    ) {
        appendLiteral(columns.list(except: excluded, of: alias))
    }
}
