import Foundation
import NIOCore
import NIOHTTP1

/// One request as the pages' handler sees it: the method, the path, the query's pairs in order
/// (`+` read as a space, percent-escapes decoded), the headers and the body.
struct WebRequest: Sendable {
    var head: HTTPRequestHead
    var path: String
    var query: [(name: String, value: String)]
    var body: [UInt8]

    /// Nil for a target that is no path (`*`, an absolute form) or does not decode.
    init?(_ head: HTTPRequestHead, body: [UInt8]) {
        self.head = head
        self.body = body
        let target = head.uri
        guard target.hasPrefix("/") else { return nil }
        let parts = target.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false)
        guard let path = String(parts[0]).removingPercentEncoding else { return nil }
        self.path = path
        if parts.count > 1 {
            guard let pairs = Self.form(String(parts[1])) else { return nil }
            query = pairs
        } else {
            query = []
        }
    }

    /// `application/x-www-form-urlencoded` pairs, or nil when an escape does not decode.
    static func form(_ text: String) -> [(name: String, value: String)]? {
        var pairs: [(name: String, value: String)] = []
        for item in text.split(separator: "&", omittingEmptySubsequences: true) {
            let halves = item.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: Substring) -> String? { part.replacingOccurrences(of: "+", with: " ").removingPercentEncoding }
            guard let name = decode(halves[0]), let value = halves.count > 1 ? decode(halves[1]) : "" else { return nil }
            pairs.append((name, value))
        }
        return pairs
    }

    /// The first value of the query's `name`.
    func parameter(_ name: String) -> String? { query.first { $0.name == name }?.value }

    func header(_ name: String) -> String? { head.headers.first(name: name) }

    /// The value of cookie `name`.
    func cookie(_ name: String) -> String? {
        for header in head.headers[canonicalForm: "cookie"] {
            for item in header.split(separator: ";") {
                let pair = item.trimmingCharacters(in: .whitespaces).split(separator: "=", maxSplits: 1)
                if pair.count == 2, pair[0] == name { return String(pair[1]) }
            }
        }
        return nil
    }
}

/// Percent-escapes for a query value (everything but unreserved characters).
func queryEscaped(_ text: String) -> String {
    let allowed = CharacterSet(charactersIn: "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~/:")
    return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? ""
}
