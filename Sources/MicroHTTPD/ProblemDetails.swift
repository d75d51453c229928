import Basics

/// An RFC 9457 problem: the body of every error response.
///
/// Texts here are written by the service, never copied from the request: a problem must not echo
/// submitted values or secrets.
public struct ProblemDetails: Sendable, Equatable {
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
        var out: [UInt8] = []
        out.reserveCapacity(160 + (detail?.utf8.count ?? 0) + errors.count * 80)
        out.append(contentsOf: #"{"type":"#.utf8)
        Self.appendQuoted(type, to: &out)
        out.append(contentsOf: #","title":"#.utf8)
        Self.appendQuoted(title, to: &out)
        out.append(contentsOf: #","status":"#.utf8)
        out.append(contentsOf: String(status).utf8)
        if let detail {
            out.append(contentsOf: #","detail":"#.utf8)
            Self.appendQuoted(detail, to: &out)
        }
        if !errors.isEmpty {
            out.append(contentsOf: #","errors":["#.utf8)
            for (index, error) in errors.enumerated() {
                out.append(contentsOf: (index == 0 ? #"{"pointer":"# : #",{"pointer":"#).utf8)
                Self.appendQuoted(error.pointer, to: &out)
                out.append(contentsOf: #","detail":"#.utf8)
                Self.appendQuoted(error.detail, to: &out)
                out.append(UInt8(ascii: "}"))
            }
            out.append(UInt8(ascii: "]"))
        }
        out.append(UInt8(ascii: "}"))
        return out
    }

    /// The title in lower case with every character other than a letter or digit as `-`.
    static func slug(_ title: String) -> String {
        guard title.utf8.allSatisfy({ $0 < 0x80 }) else {
            return String(title.lowercased().map { $0.isLetter || $0.isNumber ? $0 : "-" })
        }
        return title.mappingASCII { byte in
            switch byte {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): byte + 32
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"): byte
            default: UInt8(ascii: "-")
            }
        }
    }

    /// Appends `text` as a JSON string literal.
    static func appendQuoted(_ text: String, to out: inout [UInt8]) {
        JSONString.append(text, to: &out)
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
