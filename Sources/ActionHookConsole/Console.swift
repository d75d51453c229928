import Foundation
import MicroHTTPD

/// The operator's console: static HTML, CSS and JavaScript modules served under `/console` by the
/// service itself, with no build step and nothing fetched from elsewhere. The pages call the admin API
/// with the token the operator types in; the files themselves hold no data and no secret.
public struct Console: Sendable {
    /// One file of the console.
    struct Asset: Sendable {
        let contentType: String
        let body: [UInt8]
    }

    /// The files by name, read once from the resource bundle.
    let assets: [String: Asset]

    /// Content types by file extension; a file of any other kind is not served.
    static let contentTypes = [
        "html": "text/html; charset=utf-8",
        "js": "text/javascript; charset=utf-8",
        "css": "text/css; charset=utf-8",
        "svg": "image/svg+xml",
    ]

    /// Headers on every console answer. Reply text and `userInfo` come from people's phones and are
    /// hostile: the pages only ever insert them as text, and this policy is the second line: no inline
    /// or foreign script or style, no plugins, no framing (clickjacking), no referrer leaving the page.
    public static let securityHeaders: HTTPHeaders = [
        "Content-Security-Policy":
            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
            + "object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
        "X-Frame-Options": "DENY",
        "Referrer-Policy": "no-referrer",
        "X-Content-Type-Options": "nosniff",
        "Cross-Origin-Opener-Policy": "same-origin",
        "Cross-Origin-Resource-Policy": "same-origin",
        // Small files, and a stale module beside a fresh one would break the page after an upgrade.
        "Cache-Control": "no-cache",
    ]

    /// Loads the console's files from the module's resources.
    ///
    /// A missing bundle means a broken build, which is a programming error.
    public init() {
        guard let directory = Bundle.module.url(forResource: "Assets", withExtension: nil),
            let names = try? FileManager.default.contentsOfDirectory(atPath: directory.path)
        else { preconditionFailure("the console's assets are missing from the build") }
        var assets: [String: Asset] = [:]
        for name in names {
            guard let type = Self.contentTypes[URL(fileURLWithPath: name).pathExtension],
                let data = FileManager.default.contents(atPath: directory.appendingPathComponent(name).path)
            else { continue }
            assets[name] = Asset(contentType: type, body: Array(data))
        }
        precondition(assets["index.html"] != nil, "the console has no index.html")
        self.assets = assets
    }

    /// The names of the files served under `/console/`.
    public var fileNames: [String] { assets.keys.sorted() }

    /// Adds `GET /console` (the page) and `GET /console/{asset}` (its scripts and styles).
    public func register(in router: inout Router) {
        router.add(.get, "/console") { _ in response(for: "index.html") }
        router.add(.get, "/console/{asset}") { request in response(for: request.parameter("asset")) }
    }

    /// The file's answer, or a 404 problem; either carries the security headers.
    func response(for name: String) -> HTTPResponse {
        guard let asset = assets[name] else {
            return .problem(.notFound("The console has no file of this name."), headers: Self.securityHeaders)
        }
        var headers = Self.securityHeaders
        headers.set("Content-Type", asset.contentType)
        return HTTPResponse(status: 200, headers: headers, body: asset.body)
    }
}
