public import ConfigFile
import Foundation
public import TraceCore

/// What an MCP server may ask its client through `agent-eval mcp-proxy` (the policy file's
/// `input_requests:`): sampling (the client's model), roots, and elicitation (a form, or a URL the
/// user is sent to). Judged on every question a server asks, in either era: a 2025 server's request
/// to the client (`sampling/createMessage`, `roots/list`, `elicitation/create`), and each of the
/// `inputRequests` of a 2026-07-28 `input_required` answer.
///
/// ```yaml
/// input_requests:
///   sampling: deny                  # allow (the default) or deny
///   roots: allow
///   elicitation:                    # allow, deny, or per mode:
///     form: allow
///     url: [auth.example.com, "*.example.org"]   # allow, deny, or the hosts a URL may name
/// ```
public struct InputRequestPolicy: Sendable, Hashable {
    public enum Permission: String, Sendable, Hashable, CaseIterable {
        case allow, deny
    }

    public var sampling: Permission = .allow
    public var roots: Permission = .allow
    public var formElicitation: Permission = .allow
    /// The hosts a URL elicitation may send the user to; nil allows any, empty none.
    public var urlHosts: [Glob]?

    public init() {}

    /// Why a question is refused, and the setting that refuses it.
    public struct Refusal: Sendable, Hashable {
        /// `input_requests.sampling`, `input_requests.elicitation.url`…
        public var rule: String
        public var reason: String

        public init(rule: String, reason: String) {
            self.rule = rule
            self.reason = reason
        }
    }

    /// Whether every question is allowed (the file says nothing, or allows all).
    public var allowsAll: Bool { sampling == .allow && roots == .allow && formElicitation == .allow && urlHosts == nil }

    /// The questions this policy knows how to judge.
    public static let methods: Set<String> = ["sampling/createMessage", "roots/list", "elicitation/create"]

    /// The refusal of a question (its method and params), or nil when it may be asked.
    public func refusal(method: String, params: JSONValue?) -> Refusal? {
        switch method {
        case "sampling/createMessage":
            return sampling == .deny ? Refusal(rule: "input_requests.sampling", reason: "the policy file allows no sampling") : nil
        case "roots/list":
            return roots == .deny ? Refusal(rule: "input_requests.roots", reason: "the policy file allows no roots request") : nil
        case "elicitation/create":
            // A URL elicitation is one that says so, or names a URL without saying a mode.
            let mode = params?["mode"]?.stringValue?.lowercased()
            if mode == "url" || (mode == nil && params?["url"] != nil) {
                guard let hosts = urlHosts else { return nil }
                let url = params?["url"]?.stringValue ?? ""
                let host = Self.browserHost(of: url) ?? ""
                if !host.isEmpty, hosts.contains(where: { $0.matches(host) }) { return nil }
                return Refusal(
                    rule: "input_requests.elicitation.url",
                    reason: hosts.isEmpty
                        ? "the policy file allows no URL elicitation"
                        : "the policy file allows URL elicitation only to \(hosts.map(\.pattern).joined(separator: ", ")), "
                            + "and this one sends the user to \(host.isEmpty ? "no host (\(url))" : host)")
            }
            return formElicitation == .deny
                ? Refusal(rule: "input_requests.elicitation.form", reason: "the policy file allows no form elicitation") : nil
        default:
            return nil
        }
    }

    /// The host a browser opens for `url`, when every reader of URLs agrees on it: an `https` or
    /// `http` URL with no user name or password, no backslash, white space or control character.
    /// Else nil (refused): `https://evil.com\\@good.com/` is `good.com` to RFC 3986 and `evil.com`
    /// to a browser (WHATWG), and a `javascript:` URL opens no host at all.
    static func browserHost(of url: String) -> String? {
        guard !url.unicodeScalars.contains(where: { $0 == "\\" || $0.value <= 0x20 || $0.value == 0x7F }),
            let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            scheme == "https" || scheme == "http", components.user == nil, components.password == nil,
            let host = components.host?.lowercased(), !host.isEmpty
        else { return nil }
        return host
    }

    /// Reads `input_requests:`; errors go to `errors`, each at its place.
    static func read(_ node: ConfigNode, errors: inout ConfigErrors) -> InputRequestPolicy {
        var policy = InputRequestPolicy()
        guard var fields = errors.collect({ () throws(ConfigError) in try node.mapping("input_requests") }) else { return policy }
        func permission(_ key: String, _ what: String) -> Permission? {
            guard let value = fields.optional(key) else { return nil }
            return errors.collect { () throws(ConfigError) in try value.choice(what, as: Permission.self) }
        }
        if let value = permission("sampling", "input_requests.sampling") { policy.sampling = value }
        if let value = permission("roots", "input_requests.roots") { policy.roots = value }
        if let elicitation = fields.optional("elicitation") {
            if case .scalar = elicitation.content {
                if let value = errors.collect({ () throws(ConfigError) in
                    try elicitation.choice("input_requests.elicitation", as: Permission.self)
                }) {
                    policy.formElicitation = value
                    policy.urlHosts = value == .allow ? nil : []
                }
            } else if var modes = errors.collect({ () throws(ConfigError) in try elicitation.mapping("input_requests.elicitation") }) {
                if let form = modes.optional("form"),
                    let value = errors.collect({ () throws(ConfigError) in
                        try form.choice("input_requests.elicitation.form", as: Permission.self)
                    })
                {
                    policy.formElicitation = value
                }
                if let url = modes.optional("url") {
                    if case .scalar = url.content {
                        if let value = errors.collect({ () throws(ConfigError) in
                            try url.choice("input_requests.elicitation.url (allow, deny or a list of hosts)", as: Permission.self)
                        }) {
                            policy.urlHosts = value == .allow ? nil : []
                        }
                    } else if let hosts = errors.collect({ () throws(ConfigError) in
                        try url.strings("input_requests.elicitation.url")
                    }) {
                        policy.urlHosts = hosts.map { Glob($0.lowercased()) }
                    }
                }
                errors.errors.append(contentsOf: modes.unknownKeys(in: "input_requests.elicitation"))
            }
        }
        errors.errors.append(contentsOf: fields.unknownKeys(in: "input_requests"))
        return policy
    }
}
