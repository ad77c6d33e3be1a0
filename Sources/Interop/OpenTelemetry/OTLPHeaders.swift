import Foundation

/// The headers an OTLP exporter sends with each request, from the environment variables the
/// OpenTelemetry SDKs read: `OTEL_EXPORTER_OTLP_TRACES_HEADERS`, else `OTEL_EXPORTER_OTLP_HEADERS`,
/// each `key=value` pairs separated by commas, values percent-encoded
/// (`api-key=abc,x-tenant=t%201`). Secrets such as API keys stay out of the command line.
public enum OTLPHeaders {
    /// The variables read, the first set one wins.
    public static let variables = ["OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"]

    /// The headers the environment sets; a malformed variable is an error naming it and the
    /// pair's position (never its value, which may be a secret).
    public static func from(environment: [String: String]) throws(ImportError) -> [(name: String, value: String)] {
        guard let variable = variables.first(where: { environment[$0] != nil }), let text = environment[variable] else { return [] }
        var headers: [(name: String, value: String)] = []
        for (index, pair) in text.split(separator: ",", omittingEmptySubsequences: true).enumerated() {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let name = parts[0].trimmingCharacters(in: .whitespaces)
            guard parts.count == 2, !name.isEmpty, name.utf8.allSatisfy(isTokenByte),
                let value = parts[1].trimmingCharacters(in: .whitespaces).removingPercentEncoding
            else {
                throw ImportError(
                    .badSetting, "\(variable): pair \(index + 1) is not key=value with a header name and a percent-encoded value",
                    hint: "for example \(variable)=api-key=abc123,x-tenant=team%201")
            }
            headers.append((name, value))
        }
        return headers
    }

    /// A byte of an HTTP header name (an RFC 9110 token).
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default: return Array("!#$%&'*+-.^_`|~".utf8).contains(byte)
        }
    }
}
