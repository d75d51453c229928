import Basics

/// Why a request body was refused: its HTTP status, a problem title and every field error found.
public struct ValidationFailure: Error, Sendable, Equatable {
    /// 400 when the body has the wrong shape (JSON types, not an object, mixed shapes); 422 when it is
    /// well formed but breaks a rule of the API (limits, unknown or server-owned fields, bad values).
    public var status: Int
    /// The problem title (RFC 9457 `title`).
    public var title: String
    /// A sentence about the problem as a whole (RFC 9457 `detail`).
    public var detail: String
    /// The field errors, in the order they were found.
    public var errors: [FieldError]

    /// Creates a failure from its parts.
    public init(status: Int, title: String, detail: String, errors: [FieldError]) {
        self.status = status
        self.title = title
        self.detail = detail
        self.errors = errors
    }

    /// A 400 "Malformed Request": the body does not have the shape the API expects.
    public static func shape(_ errors: [FieldError]) -> ValidationFailure {
        ValidationFailure(
            status: 400,
            title: "Malformed Request",
            detail: "The request body does not have the expected shape.",
            errors: errors
        )
    }

    /// A 422 "Validation Failed": the body is well formed but breaks a rule of the API.
    public static func invalid(_ errors: [FieldError]) -> ValidationFailure {
        ValidationFailure(
            status: 422,
            title: "Validation Failed",
            detail: "The request body breaks one or more rules of the API.",
            errors: errors
        )
    }
}
