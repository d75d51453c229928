/// An RFC 9457 problem: the body of every error response.
///
/// Texts here are written by the service, never copied from the request: a problem must not echo
/// submitted values or secrets.
public struct ProblemDetails: Sendable, Equatable {
    /// One invalid field: a JSON pointer into the request body and what is wrong with it.
    public struct FieldError: Sendable, Equatable {
        /// The JSON pointer (RFC 6901) of the field, e.g. `/userText`.
        public var pointer: String
        /// What is wrong, in words that do not repeat the value.
        public var detail: String

        /// Creates a field error.
        public init(pointer: String, detail: String) {
            self.pointer = pointer
            self.detail = detail
        }
    }

    /// A URI naming the problem type.
    public var type: String
    /// A short summary of the problem type.
    public var title: String
    /// The HTTP status code.
    public var status: Int
    /// An explanation of this occurrence.
    public var detail: String?
    /// The invalid fields, for validation problems.
    public var errors: [FieldError]

    /// Creates a problem. `type` defaults to a URI derived from the title.
    public init(status: Int, title: String, detail: String? = nil, type: String? = nil, errors: [FieldError] = []) {
        self.status = status
        self.title = title
        self.detail = detail
        self.errors = errors
        self.type = type ?? ("https://actionhook.dev/problems/" + Self.slug(title))
    }

    /// The problem as compact JSON bytes.
    public var jsonBytes: [UInt8] {
        var out = "{\"type\":" + Self.quoted(type) + ",\"title\":" + Self.quoted(title) + ",\"status\":\(status)"
        if let detail { out += ",\"detail\":" + Self.quoted(detail) }
        if !errors.isEmpty {
            out += ",\"errors\":["
            out += errors.map { "{\"pointer\":" + Self.quoted($0.pointer) + ",\"detail\":" + Self.quoted($0.detail) + "}" }
                .joined(separator: ",")
            out += "]"
        }
        out += "}"
        return Array(out.utf8)
    }

    static func slug(_ title: String) -> String {
        String(title.lowercased().map { $0.isLetter || $0.isNumber ? $0 : "-" })
    }

    /// A JSON string literal for `text`.
    static func quoted(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20:
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }
}

extension ProblemDetails {
    /// 404: no route or no such object.
    public static func notFound(_ detail: String = "No resource exists at this path.") -> ProblemDetails {
        ProblemDetails(status: 404, title: "Not Found", detail: detail)
    }

    /// 405: the path exists but not with this method.
    public static let methodNotAllowed = ProblemDetails(
        status: 405, title: "Method Not Allowed", detail: "This path does not accept this method.")

    /// 413: the body is over the route's limit.
    public static func payloadTooLarge(limit: Int) -> ProblemDetails {
        ProblemDetails(
            status: 413, title: "Payload Too Large", detail: "The request body exceeds the limit of \(limit) bytes.")
    }

    /// 500: an unexpected failure; the detail never says more.
    public static let internalError = ProblemDetails(
        status: 500, title: "Internal Server Error", detail: "The request could not be processed.")

    /// 503: the service cannot take the request now.
    public static func unavailable(_ detail: String) -> ProblemDetails {
        ProblemDetails(status: 503, title: "Service Unavailable", detail: detail)
    }
}
