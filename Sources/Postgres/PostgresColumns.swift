import Locks

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
    /// The columns as the statement reads them (not generic: the interpolations below take it as it is).
    @usableFromInline internal var list = ColumnList()

    /// The columns' names, in the order they were added.
    public var names: [StaticString] { list.names }

    /// No columns yet over `rows`.
    @inlinable
    public init(_ rows: Rows) {
        self.rows = rows
    }

    /// Adds a column `name` of `element`s, one per row, each appended by `value` (`bytesPerRow` is the
    /// room reserved for each).
    ///
    /// Inlinable, so that it is specialised for the caller's rows; the rest is not generic. Left generic
    /// across the module boundary, every row was copied for every column and the statement's text made
    /// through the types' metadata at run time: a durable ingest cost 350,000 instructions more
    /// (`bench/instructions.sh`).
    @inlinable
    public mutating func add(
        _ name: StaticString, _ element: PostgresBinaryArray.Element, bytesPerRow: Int = 16,
        _ value: (inout PostgresBinaryArray, Rows.Element) -> Void
    ) {
        var array = PostgresBinaryArray(element, capacity: rows.count * bytesPerRow)
        // By index: the subscript lends each row to `value`, where iterating would copy it.
        var index = rows.startIndex
        while index != rows.endIndex {
            value(&array, rows[index])
            rows.formIndex(after: &index)
        }
        precondition(array.count == rows.count, "column \(name) has \(array.count) values for \(rows.count) rows")
        list.append(name, array)
    }
}

/// The columns of a ``PostgresColumns``: names, values and their shape.
@usableFromInline
struct ColumnList: Sendable {
    var names: [StaticString] = []
    var arrays: [PostgresBinaryArray] = []
    /// The names' and types' identity, for ``ColumnTexts``.
    var shape = Hasher()

    @usableFromInline
    init() {}

    @usableFromInline
    mutating func append(_ name: StaticString, _ array: PostgresBinaryArray) {
        names.append(name)
        arrays.append(array)
        shape.combine(ColumnTexts.address(name))
        shape.combine(array.element.oid)
    }

    /// The names but `excluded`, each as `alias.name` when there is an alias, joined by commas.
    func list(except excluded: [StaticString], of alias: StaticString?) -> String {
        var text = ""
        for name in names where !excluded.contains(where: { ColumnTexts.same($0, name) }) {
            if !text.isEmpty { text += ", " }
            if let alias { text += "\(alias)." }
            text += name.description
        }
        return text
    }
}

/// The texts the interpolations below write, made once per statement shape and kept: made afresh for
/// each batch (names turned into strings, lists joined), they cost a durable ingest more than the rest
/// of its statement (`bench/instructions.sh`). A shape is the column names and types of the call site
/// (`StaticString`s, told apart by where their literals are), the alias, the names left out and the
/// number of the first parameter, so there are as many as there are call sites.
enum ColumnTexts {
    struct Key: Hashable {
        var kind: UInt8
        /// The columns' names and types (``ColumnList/shape``), with the names left out and the
        /// ordinality: hashes, checked against ``Entry`` on each use (two shapes with one hash are
        /// each made afresh, never given the other's text).
        var shape: Int
        var other: Int
        var alias: UInt
        var first: Int
    }

    /// A text and exactly what it was made from.
    struct Entry {
        var names: [UInt]
        var types: [UInt32]
        var other: [UInt]
        var text: String

        init(_ columns: ColumnList, other: [UInt], text: String) {
            names = columns.names.map(ColumnTexts.address)
            types = columns.arrays.map(\.element.oid)
            self.other = other
            self.text = text
        }

        /// Whether it was made from `columns` and `other` (compared without allocating).
        func matches(_ columns: ColumnList, other: [UInt]) -> Bool {
            guard names.count == columns.names.count, self.other == other else { return false }
            for index in names.indices
            where names[index] != ColumnTexts.address(columns.names[index])
                || types[index] != columns.arrays[index].element.oid
            {
                return false
            }
            return true
        }
    }

    private static let cache = Locked<[Key: Entry]>([:])

    static func text(_ key: Key, _ columns: ColumnList, other: [UInt], _ make: () -> String) -> String {
        if let entry = cache.withLock({ $0[key] }), entry.matches(columns, other: other) { return entry.text }
        let text = make()
        cache.withLock { cache in
            if cache[key] == nil { cache[key] = Entry(columns, other: other, text: text) }
        }
        return text
    }

    static func address(_ name: StaticString?) -> UInt {
        guard let name, name.hasPointerRepresentation else { return 0 }
        return UInt(bitPattern: name.utf8Start)
    }

    /// Whether two names are the same text.
    static func same(_ a: StaticString, _ b: StaticString) -> Bool {
        a.utf8CodeUnitCount == b.utf8CodeUnitCount
            && a.withUTF8Buffer { a in b.withUTF8Buffer { b in a.elementsEqual(b) } }
    }
}

extension PostgresQuery.StringInterpolation {
    /// Binds each column as the next parameter and reads them as rows: `unnest($1::uuid[], …) AS
    /// alias(id, …)`, with `ordinality` (the row's 1-based position) as a last column when named.
    @inlinable
    public mutating func appendInterpolation<Rows>(
        unnest columns: PostgresColumns<Rows>, as alias: StaticString, ordinality: StaticString? = nil
    ) {
        appendUnnest(columns.list, as: alias, ordinality: ordinality)
    }

    /// The columns' names but `except`, as `alias.name` when `of` names an alias, joined by commas.
    @inlinable
    public mutating func appendInterpolation<Rows>(
        columns: PostgresColumns<Rows>, except excluded: [StaticString] = [], of alias: StaticString? = nil
    ) {
        appendColumns(columns.list, except: excluded, of: alias)
    }

    @usableFromInline
    mutating func appendUnnest(_ columns: ColumnList, as alias: StaticString, ordinality: StaticString?) {
        let first = parameters.count + 1
        for array in columns.arrays { parameters.append(array.parameter) }
        var shape = columns.shape
        shape.combine(ColumnTexts.address(ordinality))
        let key = ColumnTexts.Key(
            kind: 0, shape: shape.finalize(), other: 0, alias: ColumnTexts.address(alias), first: first)
        sql += ColumnTexts.text(key, columns, other: [ColumnTexts.address(ordinality)]) {
            let casts = columns.arrays.enumerated().map { "$\(first + $0)::\($1.element.typeName)[]" }
            let names = columns.list(except: [], of: nil) + (ordinality.map { ", \($0)" } ?? "")
            return "unnest(\(casts.joined(separator: ", ")))"
                + (ordinality == nil ? " AS " : " WITH ORDINALITY AS ") + "\(alias)(\(names))"
        }
    }

    @usableFromInline
    mutating func appendColumns(_ columns: ColumnList, except excluded: [StaticString], of alias: StaticString?) {
        var other = Hasher()
        for name in excluded { other.combine(ColumnTexts.address(name)) }
        let key = ColumnTexts.Key(
            kind: 1, shape: columns.shape.finalize(), other: other.finalize(), alias: ColumnTexts.address(alias),
            first: 0)
        sql += ColumnTexts.text(key, columns, other: excluded.map(ColumnTexts.address)) {
            columns.list(except: excluded, of: alias)
        }
    }
}
