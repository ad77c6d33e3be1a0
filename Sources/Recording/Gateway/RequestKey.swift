import Foundation
import ModelClients
import TraceCore
import TraceLog

/// How the gateway's cassette matches a request (docs/record.md, "Matching requests").
///
/// The key is `sha256` of the API, the request's canonical body and, from the second time the
/// same request is asked in one recording on, how many times it was asked before. The canonical
/// body is the JSON body (members sorted, as the log writes JSON) with:
/// - the members that change from run to run without changing the answer left out
///   (`volatileMembers`: `user`, `metadata`, `prompt_cache_key`…);
/// - tool call ids replaced by `call#1`, `call#2`… in order of first appearance: providers and
///   frameworks make new ids on every run, so a recorded conversation would otherwise never
///   match itself. Ids are the values of `tool_call_id`, `tool_use_id` and `call_id`, and the
///   `id` of an object whose `type` is `function`, `tool_use` or `function_call`;
/// - every key pattern and secret-named member redacted, and each placeholder (one found now or
///   one already in the request) written `[redacted:secret]`: a secret of an answer the cassette keeps
///   redacted comes back in the agent's next request as its placeholder, which must key as the
///   secret did when it was recorded (a key in a tool call's arguments is found by its member's
///   name there, and by its pattern in the replayed answer). The redaction is this machine's
///   in nothing: no environment's values, no redaction key, so the key is the same wherever the
///   cassette is replayed.
///
/// Headers are never part of the key: the key is the same with any API key, or none.
enum RequestKey {
    static let volatileMembers: Set<String> = [
        "user", "metadata", "prompt_cache_key", "safety_identifier", "service_tier", "store",
    ]
    private static let idMembers: Set<String> = ["tool_call_id", "tool_use_id", "call_id"]
    private static let callTypes: Set<String> = ["function", "tool_use", "function_call"]

    /// The request as the key sees it.
    static func canonical(_ body: JSONValue) -> JSONValue {
        guard var object = body.objectValue else { return body }
        for member in volatileMembers { object[member] = nil }
        var ids: [String: String] = [:]
        return redacted(renumber(.object(object), ids: &ids))
    }

    /// The redaction of keys: the patterns and member names alone, with the fixed placeholder key.
    private static let redactor = Redactor(childEnvironments: [], environment: [:])

    /// `value` with its secrets redacted and every placeholder `placeholder`.
    private static func redacted(_ value: JSONValue) -> JSONValue {
        let text = JSONWriter.encodeString(value)
        var result = redactor.redactEncoded(text)
        guard result.contains("[redacted:") else { return value }
        result = withoutCodes(result)
        return (try? JSONParser.parse(Array(result.utf8))) ?? value
    }

    /// What every placeholder is written as: of no rule and no code, and begun as a placeholder
    /// is (`[redacted:`), so that no redactor takes it for a secret in its turn.
    static let placeholder = "[redacted:secret]"

    /// Each placeholder, `[redacted:<rule>:<8 hex digits>]`, written `placeholder`.
    static func withoutCodes(_ text: String) -> String {
        var output = ""
        var rest = Substring(text)
        while let open = rest.range(of: "[redacted:") {
            output += rest[..<open.lowerBound]
            let inside = rest[open.upperBound...]
            guard let close = inside.firstIndex(of: "]") else { break }
            let body = inside[..<close]
            let code = body.split(separator: ":").last ?? ""
            if body.contains(":"), code.count == 8, code.allSatisfy(\.isHexDigit) {
                output += placeholder
            } else {
                output += rest[open.lowerBound...close]
            }
            rest = inside[inside.index(after: close)...]
        }
        return output + rest
    }

    /// The key of the `occurrence`-th (1-based) identical request to `api`.
    static func key(api: ModelAPI, canonical: JSONValue, occurrence: Int) -> String {
        Cassette.key(provider: "gateway \(api.rawValue)" + (occurrence > 1 ? " #\(occurrence)" : ""), body: canonical)
    }

    private static func renumber(_ value: JSONValue, ids: inout [String: String]) -> JSONValue {
        switch value {
        case .array(let items):
            return .array(items.map { renumber($0, ids: &ids) })
        case .object(let object):
            let isCall = object["type"]?.stringValue.map(callTypes.contains) ?? false
            var result = JSONObject()
            for member in object {
                if let id = member.value.stringValue, idMembers.contains(member.key) || (isCall && member.key == "id") {
                    if ids[id] == nil { ids[id] = "call#\(ids.count + 1)" }
                    result[member.key] = .string(ids[id] ?? id)
                } else {
                    result[member.key] = renumber(member.value, ids: &ids)
                }
            }
            return .object(result)
        default:
            return value
        }
    }
}
