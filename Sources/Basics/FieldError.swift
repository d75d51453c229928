/// One problem with one field of a request body.
///
/// The field is named by an RFC 6901 JSON pointer (`/match/userInfo/0/op`); the detail says what
/// is wrong without ever quoting the value that was sent. The domain's validation reports these and
/// problem+json bodies carry them, so both use this one type.
public struct FieldError: Sendable, Equatable {
    /// The RFC 6901 pointer to the field (`""` is the whole body).
    public var pointer: String
    /// What is wrong, in words that never repeat the submitted value.
    public var detail: String

    /// Creates a field error.
    public init(pointer: String, detail: String) {
        self.pointer = pointer
        self.detail = detail
    }
}
