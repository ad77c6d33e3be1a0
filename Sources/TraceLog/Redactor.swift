import Crypto
public import Foundation
import TraceCore

/// Keeps secrets out of logs: before an event is written, every secret in its line is replaced
/// by a stable, keyed placeholder — `[redacted:<rule>:<8 hex>]`, the same for the same secret
/// throughout (so replay, diff and evals still compare runs) and naming the rule that fired, so
/// the log records that redaction happened and why. The writer applies it to every event, so
/// it covers tool output and stderr, arguments, model replies, answers and errors alike.
///
/// Rules: the values of declared environment variables; the values of declared member names
/// (`api_key`, `password`, …) wherever they appear in event data; and common key patterns
/// (`sk-…` API keys, AWS access key ids, GitHub and Slack tokens, `Bearer` tokens, PEM private
/// keys), always on.
public struct Redactor: Sendable, Hashable {
    /// Secrets known by value, with the rule that names them.
    private var values: [(rule: String, secret: String)]
    /// Member names whose string values are secret wherever they appear.
    public var memberNames: [String]
    private let key: [UInt8]
    /// Byte strings at least one of which a line with a secret contains: the writer's fast test,
    /// so the hot path only scans bytes.
    private let needles: [[UInt8]]

    public static func == (a: Redactor, b: Redactor) -> Bool {
        a.memberNames == b.memberNames && a.values.map(\.secret) == b.values.map(\.secret) && a.key == b.key
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(memberNames)
        hasher.combine(values.count)
    }

    /// A redactor for the values of `environmentNames` (read from `environment` now) and the
    /// string values of `memberNames`. The placeholder's key is `AGENT_EVAL_REDACTION_KEY` when
    /// set, else a fixed one: secrets worth redacting are long and random, so 32 bits of a keyed
    /// hash identify one without revealing it.
    public init(
        environmentNames: [String] = [], memberNames: [String] = [],
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) {
        values = environmentNames.compactMap { name in
            environment[name].flatMap { $0.count >= 4 ? ("env:\(name)", $0) : nil }
        }
        self.memberNames = memberNames
        key = Array((environment["AGENT_EVAL_REDACTION_KEY"] ?? "agent-eval-redaction-v1").utf8)
        needles =
            values.map { Array(JSONWriter.encodeString(.string($0.secret)).dropFirst().dropLast().utf8) }
            + memberNames.map { Array("\(JSONWriter.encodeString(.string($0))):".utf8) }
            + memberNames.map { Array("\\\"\($0)\\\":".utf8) }
            + Self.patterns.flatMap { $0.literals.map { Array($0.utf8) } }
    }

    /// Whether `line` may hold a secret (it holds one of the needles): a byte search (libc's
    /// `memchr` for a needle's first byte, `memcmp` for the rest), no text.
    func mayRedact(_ line: [UInt8]) -> Bool {
        line.withUnsafeBytes { haystack in
            needles.contains { needle in
                guard let first = needle.first else { return true }
                guard let base = haystack.baseAddress, needle.count <= haystack.count else { return false }
                return needle.withUnsafeBytes { needleBytes in
                    guard let needleBase = needleBytes.baseAddress else { return true }
                    let last = haystack.count - needle.count  // the last offset a needle can start at
                    var start = 0
                    while start <= last, let hit = memchr(base + start, Int32(first), last - start + 1) {
                        if memcmp(hit, needleBase, needle.count) == 0 { return true }
                        start = base.distance(to: UnsafeRawPointer(hit)) + 1
                    }
                    return false
                }
            }
        }
    }

    /// The placeholder for `secret` found by `rule`.
    func placeholder(_ secret: String, rule: String) -> String {
        let code = HMAC<SHA256>.authenticationCode(for: Array(secret.utf8), using: SymmetricKey(data: key))
        return "[redacted:\(rule):\(Data(code).prefix(4).map { String(format: "%02x", $0) }.joined())]"
    }

    /// The always-on patterns, each with the literals one of which a match must contain (a
    /// cheap test that spares the matcher almost every line).
    static let patterns: [(rule: String, literals: [String], regex: LinearRegex)] = [
        ("api-key", ["sk-"], #"sk-[A-Za-z0-9_\-]{16,}"#), ("aws-key-id", ["AKIA"], "AKIA[0-9A-Z]{16}"),
        ("github-token", ["ghp_", "gho_", "ghu_", "ghs_", "ghr_"], "gh[pousr]_[A-Za-z0-9]{30,}"),
        ("slack-token", ["xoxa-", "xoxb-", "xoxp-", "xoxr-", "xoxs-"], #"xox[abprs]-[A-Za-z0-9\-]{10,}"#),
        ("bearer-token", ["Bearer "], #"Bearer [A-Za-z0-9._~+/\-]{12,}=*"#),
        ("private-key", ["-----BEGIN"], #"-----BEGIN [A-Z ]*PRIVATE KEY-----[A-Za-z0-9+/=\\ ]*-----END [A-Z ]*PRIVATE KEY-----"#),
    ].compactMap { rule, literals, pattern in (try? LinearRegex(pattern)).map { (rule, literals, $0) } }

    /// Plain text (not an encoded event) with every secret value and key pattern replaced: for
    /// what is shown as it happens, such as a model's streamed text. A secret split across two
    /// pieces of text is not seen; the log, written from whole events, still redacts it.
    public func redactText(_ text: String) -> String {
        var result = text
        for (rule, secret) in values where !secret.isEmpty && result.contains(secret) {
            result = result.replacingOccurrences(of: secret, with: placeholder(secret, rule: rule))
        }
        replacePatterns(in: &result)
        return result
    }

    /// Replaces what the always-on patterns find in `text`.
    private func replacePatterns(in text: inout String) {
        for (rule, literals, regex) in Self.patterns where literals.contains(where: { text.contains($0) }) {
            while let range = regex.firstRange(in: text) {
                let secret = String(text[range])
                text.replaceSubrange(range, with: placeholder(secret, rule: rule))
            }
        }
    }

    /// `line` (one encoded event) with every secret replaced, or nil when it holds none.
    func redact(_ line: String) -> String? {
        var text = line
        for (rule, secret) in values {
            // In the line the secret stands JSON-escaped, inside a string.
            let escaped = String(JSONWriter.encodeString(.string(secret)).dropFirst().dropLast())
            if text.contains(escaped) { text = text.replacingOccurrences(of: escaped, with: placeholder(secret, rule: rule)) }
        }
        for name in memberNames {
            text = redactMember(name, in: text)
        }
        replacePatterns(in: &text)
        return text == line ? nil : text
    }

    /// The string values of members called `name`: `"name":"value"` → `"name":"[redacted:…]"`,
    /// and the same inside JSON text kept in a string (a model's raw reply), where the quotes
    /// are escaped: `\"name\":\"value\"`.
    private func redactMember(_ name: String, in text: String) -> String {
        let plain = JSONWriter.encodeString(.string(name)) + ":\""
        let nested = "\\\"" + name + "\\\":\\\""
        return redactValues(
            after: nested, endingAt: "\\\"", in: redactValues(after: plain, endingAt: "\"", in: text, name: name), name: name)
    }

    /// Replaces what follows each `marker` up to the first unescaped `end`.
    private func redactValues(after marker: String, endingAt end: String, in text: String, name: String) -> String {
        guard text.contains(marker) else { return text }
        var result = ""
        var rest = Substring(text)
        while let start = rest.range(of: marker) {
            result += rest[..<start.upperBound]
            rest = rest[start.upperBound...]
            var cursor = rest.startIndex
            while cursor < rest.endIndex, !rest[cursor...].hasPrefix(end) {
                // A backslash escapes what follows (in the plain form), so `\"` does not end it.
                if end == "\"", rest[cursor] == "\\" { cursor = rest.index(after: cursor) }
                if cursor < rest.endIndex { cursor = rest.index(after: cursor) }
            }
            let value = String(rest[..<cursor])
            result += value.hasPrefix("[redacted:") ? value : placeholder(value, rule: "member:\(name)")
            rest = rest[cursor...]
        }
        return result + rest
    }
}
