import Foundation

/// Syntax checks for webhook URLs.
public enum WebhookURL {
    /// Whether `text` is an absolute `http`/`https` URL with a host and no credentials, ≤ 2048 characters.
    public static func isWellFormed(_ text: String) -> Bool {
        guard text.count <= 2048, let components = URLComponents(string: text),
            let scheme = components.scheme?.lowercased(), scheme == "http" || scheme == "https",
            let host = components.host, !host.isEmpty,
            components.user == nil, components.password == nil
        else { return false }
        return true
    }
}

extension WebhookURL {
    /// What a refused target's error says; never the URL itself.
    public static let refusedTargetDetail = "must not target a loopback, private or link-local address"

    /// Whether `text` is on the origin of `base`: the same scheme, host (letter case and a trailing dot aside)
    /// and port (an absent port being the scheme's default). Both must be well-formed.
    public static func isSameOrigin(_ text: String, as base: String) -> Bool {
        guard let own = origin(text), let other = origin(base) else { return false }
        return own == other
    }

    static func origin(_ text: String) -> String? {
        guard isWellFormed(text), let components = URLComponents(string: text),
            let scheme = components.scheme?.lowercased(), var host = components.host?.lowercased()
        else { return nil }
        if host.hasSuffix(".") { host.removeLast() }
        let port = components.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(host):\(port)"
    }

    /// Whether a URL may be saved: its host must not be a local name or a literal non-public
    /// address (names are checked again, resolved, when connecting), unless `allowPrivate`.
    public static func isAllowedTarget(_ text: String, allowPrivate: Bool) -> Bool {
        guard isWellFormed(text), var host = URLComponents(string: text)?.host else { return false }
        if allowPrivate { return true }
        // A trailing dot names the same host: "127.0.0.1." is loopback too.
        if host.hasSuffix(".") { host.removeLast() }
        if AddressPolicy.isLocalName(host) { return false }
        if let literal = AddressPolicy.parseLiteral(host) { return AddressPolicy.isPublic(literal) }
        // A host with a colon is an IPv6 literal that did not parse (a zone id, say), never a public name.
        return !host.contains(":")
    }
}
