/// A SQL statement and its bound parameters.
///
/// Write queries as string literals with interpolations; every interpolated value becomes a
/// parameter (`$1`, `$2`, …) sent apart from the SQL text, so only the literal segments are SQL:
///
/// ```swift
/// let rows = try connection.query("SELECT name FROM apps WHERE id = \(appID) AND deleted_at IS NULL")
/// ```
///
/// An interpolated `nil` optional is bound as SQL `NULL`. SQL assembled at run time needs the
/// explicit ``init(unsafeSQL:binds:)``.
public struct PostgresQuery: Sendable, ExpressibleByStringInterpolation {
    /// The SQL text with `$n` placeholders.
    public let sql: String

    /// The parameters, in placeholder order.
    public let parameters: [PostgresParameter]

    /// The number of bound parameters.
    public var bindCount: Int { parameters.count }

    /// Whether a pipeline keeps this statement prepared on its connection; see ``prepared``.
    public private(set) var isPrepared = false

    /// This statement, to be parsed and planned once per connection by
    /// ``PostgresConnection/pipeline(_:)`` and kept as a named prepared statement.
    ///
    /// For statements that run over and over and whose best plan does not depend on the data, such
    /// as inserts from parameters: the plan is made once, possibly while a table is still empty, and
    /// kept until the server invalidates it. A lookup or a join keeps its plan fresh unprepared.
    public var prepared: PostgresQuery {
        var copy = self
        copy.isPrepared = true
        return copy
    }

    /// Creates a query from SQL text assembled by the caller, with parameters for its `$n` placeholders.
    ///
    /// Nothing here keeps values out of the SQL text: never build `unsafeSQL` from input.
    ///
    /// - Parameters:
    ///   - unsafeSQL: The SQL text, with `$1`, `$2`, … where the binds go.
    ///   - binds: The parameters in placeholder order; `nil` binds `NULL`.
    public init(unsafeSQL: String, binds: [(any PostgresEncodable)?] = []) {
        self.sql = unsafeSQL
        self.parameters = binds.map { PostgresParameter(text: $0?.postgresText) }
    }

    /// Creates a query from SQL text assembled by the caller and parameters already bound, such as
    /// another query's (to run it under `EXPLAIN`). The same caution as ``init(unsafeSQL:binds:)``.
    public init(unsafeSQL: String, parameters: [PostgresParameter]) {
        self.sql = unsafeSQL
        self.parameters = parameters
    }

    /// Creates a query from a string literal without interpolations.
    public init(stringLiteral value: String) {
        self.sql = value
        self.parameters = []
    }

    /// Creates a query from an interpolated string literal, turning each interpolation into a parameter.
    public init(stringInterpolation: StringInterpolation) {
        self.sql = stringInterpolation.sql
        self.parameters = stringInterpolation.parameters
    }

    /// Collects the literal segments as SQL and the interpolated values as parameters.
    public struct StringInterpolation: StringInterpolationProtocol {
        var sql: String
        var parameters: [PostgresParameter]

        /// Creates an empty interpolation with room for the expected text and values.
        public init(literalCapacity: Int, interpolationCount: Int) {
            sql = ""
            sql.reserveCapacity(literalCapacity + 3 * interpolationCount)
            parameters = []
            parameters.reserveCapacity(interpolationCount)
        }

        /// Appends a literal segment to the SQL text.
        public mutating func appendLiteral(_ literal: String) {
            sql += literal
        }

        /// Binds a value as the next parameter.
        public mutating func appendInterpolation<Value: PostgresEncodable>(_ value: Value) {
            parameters.append(PostgresParameter(text: value.postgresText))
            sql += "$\(parameters.count)"
        }

        /// Binds an array in PostgreSQL's binary form as the next parameter.
        public mutating func appendInterpolation(_ array: PostgresBinaryArray) {
            parameters.append(array.parameter)
            sql += "$\(parameters.count)"
        }

        /// Appends SQL text that is a compile-time constant, such as a column list several queries
        /// share. A `StaticString` can only come from a literal in the source, never from input.
        public mutating func appendInterpolation(unsafeSQL fragment: StaticString) {
            sql += fragment.description
        }

        /// Binds an optional value as the next parameter; `nil` binds `NULL`.
        public mutating func appendInterpolation<Value: PostgresEncodable>(_ value: Value?) {
            parameters.append(PostgresParameter(text: value?.postgresText))
            sql += "$\(parameters.count)"
        }
    }
}

/// One bound parameter: text (the server parses it as the type the statement gives it), `NULL`, or
/// bytes in a type's binary form.
public struct PostgresParameter: Sendable {
    enum Value: Sendable {
        case text(String?)
        case binary([UInt8], typeOID: UInt32)
    }
    let value: Value

    /// A parameter in text form; `nil` is `NULL`.
    public init(text: String?) { value = .text(text) }

    /// A parameter in the binary form of the type `typeOID`.
    init(binary bytes: [UInt8], typeOID: UInt32) { value = .binary(bytes, typeOID: typeOID) }

    /// The text of a text parameter, nil for `NULL` or a binary one.
    var text: String? {
        if case .text(let text) = value { return text }
        return nil
    }
}
