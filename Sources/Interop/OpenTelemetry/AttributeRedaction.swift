public import TraceCore
import TraceLog

/// Keeps credentials in span attributes out of every file made from spans: `collect`'s journals
/// and logs, and `import`'s logs. An attribute is a `{"key": NAME, "value": {"stringValue": …}}`
/// pair in OTLP/JSON (a `{"key", "type", "value"}` tag in Jaeger's), so the log writer's
/// redaction by member name cannot see a secret's name beside its value: the value of an
/// attribute whose name holds a credential — an HTTP authentication header
/// (`http.request.header.authorization`, `…x-api-key`, `…cookie`), or a last segment that
/// looks secret (`api_key`, `db.password`, `client_secret`: `Redactor.looksSecret`,
/// `Redactor.defaultMemberNames`) — is replaced by the redactor's placeholder, wherever the
/// pair stands (the resource's, a span's, an event's, a link's, inside a `kvlistValue`).
public enum AttributeRedaction {
    /// `value` (an OTLP/JSON request, a Jaeger export) with every secret attribute's string value
    /// replaced; the same value when none is.
    public static func redact(_ value: JSONValue) -> JSONValue {
        switch value {
        case .array(let elements):
            return .array(elements.map(redact))
        case .object(var object):
            if let name = object["key"]?.stringValue, isSecret(name) {
                if let text = object["value"]?.stringValue {
                    // Jaeger: the tag's value is the string itself.
                    object["value"] = .string(Redactor.standard.redactedValue(text, rule: "attribute:\(name)"))
                    return .object(object)
                }
                if case .object(let typed)? = object["value"], let redacted = redactedValue(typed, name: name) {
                    object["value"] = .object(redacted)
                    return .object(object)
                }
            }
            var changed = object
            for member in object where member.value.objectValue != nil || member.value.arrayValue != nil {
                changed[member.key] = redact(member.value)
            }
            return .object(changed)
        default:
            return value
        }
    }

    /// A secret attribute's typed OTLP value with what could hold the secret replaced: a string;
    /// each string of an array (`http.request.header.*` is a `string[]` in the semantic
    /// conventions); bytes, as a string of the placeholder. Nil for a number or a flag (a count,
    /// never a credential) or a key-value list (whose own keys say which of its values are).
    private static func redactedValue(_ typed: JSONObject, name: String) -> JSONObject? {
        let rule = "attribute:\(name)"
        var typed = typed
        if let text = typed["stringValue"]?.stringValue {
            typed["stringValue"] = .string(Redactor.standard.redactedValue(text, rule: rule))
            return typed
        }
        if let bytes = typed["bytesValue"]?.stringValue {
            var replaced = JSONObject()
            replaced["stringValue"] = .string(Redactor.standard.redactedValue(bytes, rule: rule))
            return replaced
        }
        if case .object(var array)? = typed["arrayValue"], let values = array["values"]?.arrayValue {
            array["values"] = .array(
                values.map { element in
                    guard case .object(let item) = element, let redacted = redactedValue(item, name: name) else { return element }
                    return .object(redacted)
                })
            typed["arrayValue"] = .object(array)
            return typed
        }
        return nil
    }

    /// Header names whose values are credentials whatever their length.
    static let credentialHeaders: Set<String> = [
        "authorization", "proxy-authorization", "cookie", "set-cookie", "x-api-key", "api-key", "x-goog-api-key", "openai-api-key",
    ]

    /// Whether an attribute named `name` holds a credential: its last segment (after the last
    /// `.`) is an authentication header, one of the member names every redactor replaces, or looks
    /// secret. Token counts (`gen_ai.usage.*`, `llm.token_count.*`) are numbers, never replaced.
    public static func isSecret(_ name: String) -> Bool {
        let lower = name.lowercased()
        if lower.hasPrefix("gen_ai.usage.") || lower.hasPrefix("llm.token_count.") { return false }
        let last = String(lower.split(separator: ".").last ?? Substring(lower))
        // Counts of tokens (`max_tokens`, `input_tokens`), however an exporter types them.
        if last.hasSuffix("tokens") || last.hasSuffix("_count") { return false }
        return credentialHeaders.contains(last) || Redactor.defaultMemberNames.map { $0.lowercased() }.contains(last)
            || Redactor.looksSecret(last)
    }
}
