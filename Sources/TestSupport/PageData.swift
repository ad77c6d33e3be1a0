import Foundation
public import TraceCore
import TraceLog

/// The data a page of the viewer or of `agent-eval serve` embeds (`HTMLPage`): the
/// `agent-eval-data` element's encoding and text, and the JSON it stands for.
public enum PageData {
    public struct Missing: Error, CustomStringConvertible {
        public var description: String { "the page embeds no agent-eval-data element" }
    }

    /// The embedded data element's encoding (`json` or `gzip+base64`) and text, as the page holds them.
    public static func embedded(_ page: [UInt8]) throws -> (encoding: String, text: String) {
        let html = String(decoding: page, as: UTF8.self)
        let marker = "<script type=\"application/json\" id=\"agent-eval-data\" data-encoding=\""
        guard let start = html.range(of: marker), let quote = html[start.upperBound...].firstIndex(of: "\""),
            let open = html[quote...].firstIndex(of: ">"), let close = html[open...].range(of: "</script>")
        else { throw Missing() }
        return (String(html[start.upperBound..<quote]), String(html[html.index(after: open)..<close.lowerBound]))
    }

    /// The embedded data, decoded as the page's script decodes it.
    public static func json(_ page: [UInt8]) throws -> JSONValue {
        let (encoding, text) = try embedded(page)
        guard encoding == "gzip+base64" else { return try JSONParser.parse(Array(text.utf8)) }
        guard let compressed = Base64.decode(text) else { throw Missing() }
        return try JSONParser.parse(try GzipData.decompress(compressed, path: "the page's data"))
    }
}
