import AgentRuntime
import TraceCore

/// What a proxy asks of `agent-eval record`'s gateway (`POST /agent-eval/mcp`): the wire form of
/// `ProxyLog`'s operations, encoded by `RemoteProxyLog` and decoded by the recorder, so that both
/// sides read one definition. A JSON object whose `op` names the operation; every operation but
/// `register` carries the proxy's number (`proxy`) that `register` answered.
enum ProxyOperation: Sendable, Equatable {
    /// A proxy's settings, sent once: its policy file, who it gates for, its limits.
    struct Registration: Sendable, Equatable {
        var policy: String?
        var actor: String?
        var route: String?
        var maxToolCalls: Int?
        var preApproved: [String] = []
        var server: String
    }

    case register(Registration)
    /// The server's tools as the proxy last listed them.
    case tools(proxy: Int, [ServedTool])
    /// A call to judge; `refusal`, when the proxy itself refuses it (recorded as the verdict).
    case judge(proxy: Int, name: String, arguments: JSONValue, params: JSONValue, waiting: Int, refusal: PolicyDecision? = nil)
    case intend(proxy: Int, callId: String, tool: String, arguments: JSONValue)
    case settle(proxy: Int, callId: String, answer: MCPApprovals.Answer)
    case complete(proxy: Int, callId: String, tool: String, status: ToolStatus, output: JSONValue?, error: String?, durationUs: Int)
    /// What the proxy keeps as it came: a request the server sent the client (sampling,
    /// elicitation; `ProxyGate.serverRequestMediaType`, the default) or a round of a
    /// multi-round call (`ProxyGate.roundMediaType`), or a line that is no JSON
    /// (`ProxyGate.unreadableMediaType`): its bytes as they came, which need not be UTF-8.
    case store(proxy: Int, message: [UInt8], mediaType: String = ProxyGate.serverRequestMediaType)

    /// A body that is not an operation: what is wrong with it, in a sentence.
    struct Refused: Error, Equatable {
        var message: String
    }

    /// The proxy's number; nil for `register`.
    var proxy: Int? {
        switch self {
        case .register: nil
        case .tools(let proxy, _), .judge(let proxy, _, _, _, _, _), .intend(let proxy, _, _, _), .settle(let proxy, _, _),
            .complete(let proxy, _, _, _, _, _, _), .store(let proxy, _, _):
            proxy
        }
    }

    var json: JSONValue {
        var object = ObjectBuilder()
        object.set("proxy", proxy)
        switch self {
        case .register(let registration):
            object.set("op", "register")
            object.set("policy", registration.policy)
            object.set("actor", registration.actor)
            object.set("route", registration.route)
            object.set("max_tool_calls", registration.maxToolCalls)
            object.set("pre_approved", JSONValue.array(registration.preApproved.map { .string($0) }))
            object.set("server", registration.server)
        case .tools(_, let tools):
            object.set("op", "tools")
            object.set("tools", JSONValue.array(tools.map(\.proxyJSON)))
        case .judge(_, let name, let arguments, let params, let waiting, let refusal):
            object.set("op", "judge")
            object.set("name", name)
            object.set("arguments", arguments)
            object.set("params", params)
            object.set("waiting", waiting)
            if let refusal {
                var refused = ObjectBuilder()
                refused.set("reason", refusal.reason)
                refused.set("rule", refusal.rule)
                object.set("refusal", refused.json)
            }
        case .intend(_, let callId, let tool, let arguments):
            object.set("op", "intend")
            object.set("call_id", callId)
            object.set("tool", tool)
            object.set("arguments", arguments)
        case .settle(_, let callId, let answer):
            object.set("op", "settle")
            object.set("call_id", callId)
            object.set("granted", answer.isGranted)
            object.set("approver", answer.approver)
            object.set("reason", answer.reason)
        case .complete(_, let callId, let tool, let status, let output, let error, let durationUs):
            object.set("op", "complete")
            object.set("call_id", callId)
            object.set("tool", tool)
            object.set("status", status.rawValue)
            object.set("output", output)
            object.set("error", error)
            object.set("duration_us", durationUs)
        case .store(_, let message, let mediaType):
            object.set("op", "store")
            // Bytes that are not UTF-8 go as base64: a JSON string would hold U+FFFD in their place.
            if let text = String(validating: message, as: UTF8.self) {
                object.set("message", text)
            } else {
                object.set("message_base64", Base64.encode(message))
            }
            object.set("media_type", mediaType)
        }
        return object.json
    }

    /// Reads a request's body.
    init(json: JSONValue) throws(Refused) {
        let op = json["op"]?.stringValue ?? ""
        if op == "register" {
            self = .register(
                Registration(
                    policy: json["policy"]?.stringValue, actor: json["actor"]?.stringValue, route: json["route"]?.stringValue,
                    maxToolCalls: json["max_tool_calls"]?.intValue,
                    preApproved: (json["pre_approved"]?.arrayValue ?? []).compactMap(\.stringValue),
                    server: json["server"]?.stringValue ?? "server"))
            return
        }
        guard let proxy = json["proxy"]?.intValue else {
            throw Refused(message: "agent-eval record's gateway knows no proxy \(JSONWriter.encodeString(json["proxy"] ?? .null))")
        }
        func string(_ key: String) throws(Refused) -> String {
            guard let value = json[key]?.stringValue else { throw Refused(message: "\(op) needs \(key)") }
            return value
        }
        switch op {
        case "tools":
            self = .tools(proxy: proxy, (json["tools"]?.arrayValue ?? []).compactMap(ServedTool.init(proxyJSON:)))
        case "judge":
            // How many of the proxy's calls wait for their answer: counted against the run's
            // --max-tool-calls, so a negative (or absurd) count would walk around the limit.
            let waiting = json["waiting"]?.intValue ?? 0
            guard JSONScanner.isMeasure(waiting) else {
                throw Refused(message: "judge's waiting must be a count of calls, not \(waiting)")
            }
            self = .judge(
                proxy: proxy, name: try string("name"), arguments: json["arguments"] ?? [:], params: json["params"] ?? [:],
                waiting: waiting,
                refusal: json["refusal"].map { PolicyDecision(.deny, reason: $0["reason"]?.stringValue, rule: $0["rule"]?.stringValue) })
        case "intend":
            self = .intend(proxy: proxy, callId: try string("call_id"), tool: try string("tool"), arguments: json["arguments"] ?? [:])
        case "settle":
            guard let granted = json["granted"]?.boolValue else { throw Refused(message: "settle needs granted") }
            self = .settle(
                proxy: proxy, callId: try string("call_id"),
                answer: MCPApprovals.Answer(
                    isGranted: granted, approver: json["approver"]?.stringValue, reason: json["reason"]?.stringValue))
        case "complete":
            let (callId, tool) = (try string("call_id"), try string("tool"))
            guard let status = json["status"]?.stringValue.flatMap(ToolStatus.init(rawValue:)) else {
                throw Refused(message: "complete needs status (ok, refused or error)")
            }
            self = .complete(
                proxy: proxy, callId: callId, tool: tool, status: status, output: json["output"], error: json["error"]?.stringValue,
                durationUs: json["duration_us"]?.intValue ?? 0)
        case "store":
            let message: [UInt8]
            if let encoded = json["message_base64"] {
                guard let text = encoded.stringValue, let bytes = Base64.decode(text) else {
                    throw Refused(message: "store's message_base64 is not base64")
                }
                message = bytes
            } else if let text = json["message"]?.stringValue {
                message = Array(text.utf8)
            } else {
                throw Refused(message: "store needs message or message_base64")
            }
            self = .store(proxy: proxy, message: message, mediaType: json["media_type"]?.stringValue ?? ProxyGate.serverRequestMediaType)
        default:
            throw Refused(message: "agent-eval record's gateway does not know the proxy operation \"\(op)\"")
        }
    }
}
