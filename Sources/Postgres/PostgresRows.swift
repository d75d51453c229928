/// The rows a statement returned, copied out of libpq's result.
///
/// Everything is plain Swift values, so rows can be kept and passed between threads after the
/// connection has gone back to its pool.
public struct PostgresRows: Sendable, RandomAccessCollection {
    /// The result's column names, in order.
    public let columns: [String]

    /// The number of rows the statement affected (`PQcmdTuples`), or 0 when it reports none.
    public let affectedRows: Int

    private let layout: ColumnLayout
    private let values: [String?]
    private let rowCount: Int

    init(columns: [String], values: [String?], rowCount: Int, affectedRows: Int) {
        self.columns = columns
        self.layout = ColumnLayout(names: columns)
        self.values = values
        self.rowCount = rowCount
        self.affectedRows = affectedRows
    }

    /// The index of the first row, 0.
    public var startIndex: Int { 0 }

    /// One past the index of the last row.
    public var endIndex: Int { rowCount }

    /// The row at `position`.
    public subscript(position: Int) -> PostgresRow {
        precondition(position >= 0 && position < rowCount, "row index out of range")
        let start = position * columns.count
        return PostgresRow(layout: layout, values: values[start..<start + columns.count])
    }
}

/// The `NULL`-as-`nil` variants of ``PostgresRow``'s `decode` methods.
///
/// They live in a protocol extension rather than on ``PostgresRow`` because Swift prefers a type's
/// own method over a protocol extension's when both fit equally well: so a call with no contextual
/// type, `try row.decode("id", as: UUID.self)`, picks the non-optional variant instead of being
/// ambiguous, while `let note: String? = try row.decode("note")` still picks the optional one.
public protocol PostgresRowDecoding {
    /// Decodes the named column; SQL `NULL` is `nil`.
    func decode<T: PostgresDecodable>(_ column: String, as type: T?.Type) throws -> T?

    /// Decodes the column at a zero-based position; SQL `NULL` is `nil`.
    func decode<T: PostgresDecodable>(_ index: Int, as type: T?.Type) throws -> T?
}

extension PostgresRowDecoding {
    /// Decodes the named column; SQL `NULL` is `nil`.
    ///
    /// - Throws: ``PostgresError`` of kind `.decoding` naming the column, when it is missing or not a valid `T`.
    public func decode<T: PostgresDecodable>(_ column: String, as type: T.Type = T.self) throws -> T? {
        try decode(column, as: T?.self)
    }

    /// Decodes the column at a zero-based position; SQL `NULL` is `nil`.
    ///
    /// - Throws: ``PostgresError`` of kind `.decoding` when there is no such column, or it is not a valid `T`.
    public func decode<T: PostgresDecodable>(_ index: Int, as type: T.Type = T.self) throws -> T? {
        try decode(index, as: T?.self)
    }
}

/// Column names and their positions, shared by all rows of one result.
final class ColumnLayout: Sendable {
    let names: [String]
    let indexByName: [String: Int]

    init(names: [String]) {
        self.names = names
        var indexByName: [String: Int] = [:]
        // With duplicate names (a join selecting two "id" columns) the first one wins, as in psql's \gset.
        for (index, name) in names.enumerated() where indexByName[name] == nil {
            indexByName[name] = index
        }
        self.indexByName = indexByName
    }
}

/// One row of a result.
///
/// `decode` returns what the call site asks for: `let id: UUID = try row.decode("id")` throws on
/// `NULL`, `let note: String? = try row.decode("note")` (or `as: String?.self`) gives `nil`, and
/// without a contextual type `decode("id", as: UUID.self)` is the non-optional variant.
public struct PostgresRow: Sendable, PostgresRowDecoding {
    private let layout: ColumnLayout
    private let values: ArraySlice<String?>

    init(layout: ColumnLayout, values: ArraySlice<String?>) {
        self.layout = layout
        self.values = values
    }

    /// Decodes the named column; SQL `NULL` is an error.
    ///
    /// - Throws: ``PostgresError`` of kind `.decoding` naming the column, when it is missing, `NULL`
    ///   or not a valid `T`.
    public func decode<T: PostgresDecodable>(_ column: String, as type: T.Type = T.self) throws -> T {
        let index = try position(of: column)
        return try decodeValue(at: index, column: column, as: T.self)
    }

    /// Decodes the named column as an optional, `decode("deleted_at", as: Date?.self)`; SQL `NULL` is `nil`.
    ///
    /// - Throws: ``PostgresError`` of kind `.decoding` naming the column, when it is missing or not a valid `T`.
    public func decode<T: PostgresDecodable>(_ column: String, as type: T?.Type) throws -> T? {
        let index = try position(of: column)
        guard text(at: index) != nil else { return nil }
        return try decodeValue(at: index, column: column, as: T.self)
    }

    /// Decodes the column at a zero-based position; SQL `NULL` is an error.
    ///
    /// - Throws: ``PostgresError`` of kind `.decoding` when there is no such column, or it is `NULL` or
    ///   not a valid `T`.
    public func decode<T: PostgresDecodable>(_ index: Int, as type: T.Type = T.self) throws -> T {
        try checkPosition(index)
        return try decodeValue(at: index, column: layout.names[index], as: T.self)
    }

    /// Decodes the column at a zero-based position as an optional, `decode(0, as: Int?.self)`; SQL `NULL` is `nil`.
    ///
    /// - Throws: ``PostgresError`` of kind `.decoding` when there is no such column, or it is not a valid `T`.
    public func decode<T: PostgresDecodable>(_ index: Int, as type: T?.Type) throws -> T? {
        try checkPosition(index)
        guard text(at: index) != nil else { return nil }
        return try decodeValue(at: index, column: layout.names[index], as: T.self)
    }

    /// Whether the named column is SQL `NULL`; also `true` when the row has no such column.
    public func isNull(_ column: String) -> Bool {
        guard let index = layout.indexByName[column] else { return true }
        return text(at: index) == nil
    }

    private func text(at index: Int) -> String? {
        values[values.startIndex + index]
    }

    private func position(of column: String) throws -> Int {
        guard let index = layout.indexByName[column] else {
            throw PostgresError(kind: .decoding, column: column, message: "the result has no such column")
        }
        return index
    }

    private func checkPosition(_ index: Int) throws {
        guard index >= 0 && index < layout.names.count else {
            throw PostgresError(kind: .decoding, column: "#\(index)", message: "the result has no such column")
        }
    }

    private func decodeValue<T: PostgresDecodable>(at index: Int, column: String, as type: T.Type) throws -> T {
        guard let text = text(at: index) else {
            throw PostgresError(kind: .decoding, column: column, message: "NULL where \(T.self) was expected")
        }
        do {
            return try T(postgresText: text)
        } catch {
            // The decoders never put the text in their errors, and neither does this: values stay out.
            let reason = (error as? PostgresError)?.message ?? "not a valid \(T.self)"
            throw PostgresError(kind: .decoding, column: column, message: reason)
        }
    }
}
