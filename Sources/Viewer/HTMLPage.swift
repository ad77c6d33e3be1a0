import Crypto
import Foundation
public import TraceCore
import TraceLog

/// One self-contained HTML page: the page template with the viewer's style and script inlined
/// and the view's data embedded as JSON. Nothing is fetched: the page works from `file://` and
/// as a downloaded CI artifact, and its Content-Security-Policy forbids every network request
/// and every script but the viewer's own (by hash), so planted markup cannot run.
public struct HTMLPage: Sendable {
    /// Data larger than this is embedded gzip-compressed and base64-encoded; the page inflates it
    /// with the browser's DecompressionStream.
    public static let compressionThreshold = 1 << 20

    public var title: String
    /// The view's document: `{"view": "run" | "report" | "diff", ...}` (docs/viewer.md).
    public var data: JSONValue

    public init(title: String, data: JSONValue) {
        self.title = title
        self.data = data
    }

    /// The page's bytes. A page `agent-eval serve` serves (`servedBy`) may also ask its own
    /// origin for more (the next page of runs, a run's live events) and post forms there; a file
    /// page asks nothing of anyone.
    public func render(
        with assets: ViewerAssets, compressionThreshold: Int = HTMLPage.compressionThreshold, servedBy origin: Bool = false
    ) throws -> [UInt8] {
        let json = Self.scriptSafe(JSONWriter.encode(data))
        let encoding: String
        let embedded: [UInt8]
        if json.count > compressionThreshold {
            encoding = "gzip+base64"
            embedded = Array(Base64.encode(try GzipData.compress(json)).utf8)
        } else {
            encoding = "json"
            embedded = json
        }
        let values: [String: [UInt8]] = [
            "title": Array(Self.escape(title).utf8),
            "style": Array(assets.style.utf8),
            "script": Array(assets.script.utf8),
            "policy": Array(Self.contentSecurityPolicy(script: assets.script, servedBy: origin).utf8),
            "encoding": Array(encoding.utf8),
            "data": embedded,
        ]
        return try Self.fill(assets.page, with: values)
    }

    /// Replaces each `{{name}}` of `template` in one pass, so a value that itself holds
    /// `{{...}}` (a tool's output, say) is never expanded.
    static func fill(_ template: String, with values: [String: [UInt8]]) throws -> [UInt8] {
        var output: [UInt8] = []
        var rest = Substring(template)
        while let open = rest.range(of: "{{") {
            output += Array(rest[..<open.lowerBound].utf8)
            guard let close = rest[open.upperBound...].range(of: "}}") else {
                throw ViewerError.template("an unclosed {{ in the page template")
            }
            let name = String(rest[open.upperBound..<close.lowerBound])
            guard let value = values[name] else { throw ViewerError.template("the page template names {{\(name)}}, which is not known") }
            output += value
            rest = rest[close.upperBound...]
        }
        output += Array(rest.utf8)
        return output
    }

    /// JSON that can sit inside a `<script>` element: `<` only occurs inside JSON strings, where
    /// `\u003c` means the same, so no `</script>` or `<!--` can end or change the element.
    static func scriptSafe(_ json: [UInt8]) -> [UInt8] {
        guard json.contains(UInt8(ascii: "<")) else { return json }
        var output: [UInt8] = []
        output.reserveCapacity(json.count + 64)
        for byte in json {
            if byte == UInt8(ascii: "<") {
                output += Array("\\u003c".utf8)
            } else {
                output.append(byte)
            }
        }
        return output
    }

    /// Text for HTML element content or a quoted attribute.
    public static func escape(_ text: String) -> String {
        var result = ""
        result.reserveCapacity(text.utf8.count)
        for character in text {
            switch character {
            case "&": result += "&amp;"
            case "<": result += "&lt;"
            case ">": result += "&gt;"
            case "\"": result += "&quot;"
            case "'": result += "&#39;"
            default: result.append(character)
            }
        }
        return result
    }

    /// The page's Content-Security-Policy: nothing but its own script (by hash) and inline
    /// style; a served page may also connect to and post to the origin that served it.
    public static func contentSecurityPolicy(script: String, servedBy origin: Bool) -> String {
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; script-src \(cspHash(script))"
            + (origin ? "; connect-src 'self'; form-action 'self'; base-uri 'none'" : "")
    }

    /// The CSP source that allows exactly this inline script: `'sha256-<base64>'`.
    static func cspHash(_ script: String) -> String {
        let digest = SHA256.hash(data: Array(script.utf8))
        return "'sha256-" + Base64.encode(Array(digest)) + "'"
    }
}
