public import TraceCore

/// What the project reads and writes of MCP's two eras, for MCP tools' client and the MCP proxy
/// alike (docs/mcp.md, "Both eras of MCP"): the 2025 era, whose connections begin with
/// `initialize`, and the stateless 2026-07-28 revision, whose every request carries its protocol
/// version, client and capabilities in `params._meta` (the envelope), whose results carry
/// `resultType`, and whose `tools/call` may answer `input_required` and be retried by the client
/// with `inputResponses` and the server's `requestState` (a multi-round call).
public enum MCPEra {
    /// The 2026-07-28 revision's version string.
    public static let statelessVersion = "2026-07-28"
    /// The versions of the handshake era (2025's `initialize`) this project speaks, oldest first.
    public static let handshakeVersions = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"]
    public static let protocolVersionKey = "io.modelcontextprotocol/protocolVersion"
    public static let clientInfoKey = "io.modelcontextprotocol/clientInfo"
    public static let clientCapabilitiesKey = "io.modelcontextprotocol/clientCapabilities"
    public static let serverInfoKey = "io.modelcontextprotocol/serverInfo"

    /// The tasks extension's name (a `tools/call` may be answered with a task to poll).
    public static let tasksExtension = "io.modelcontextprotocol/tasks"

    /// The envelope of a client that offers `capabilities` (none by default).
    public static func envelope(clientName: String, version: String, capabilities: JSONValue = [:]) -> JSONValue {
        .object(
            JSONObject([
                (protocolVersionKey, .string(statelessVersion)),
                (clientInfoKey, ["name": .string(clientName), "version": .string(version)]),
                (clientCapabilitiesKey, capabilities),
            ]))
    }

    /// A request's envelope: its `_meta` when it names a protocol version (a 2026-07-28 request);
    /// nil for a 2025-era request.
    public static func envelope(of params: JSONValue?) -> JSONValue? {
        guard let meta = params?["_meta"], meta[protocolVersionKey]?.stringValue != nil else { return nil }
        return meta
    }

    /// Who a 2026-07-28 server says it is, from a result's `_meta`; nil when it does not say.
    public static func serverInfo(of result: JSONValue) -> (name: String?, version: String?)? {
        guard let info = result["_meta"]?[serverInfoKey] else { return nil }
        return (info["name"]?.stringValue, info["version"]?.stringValue)
    }

    /// Whether a result asks the client for input before the request can complete.
    public static func asksForInput(_ result: JSONValue?) -> Bool {
        result?["resultType"]?.stringValue == "input_required"
    }

    /// A `tools/call` result as a tool outcome (`ServedTool.outcome(ofMCPResult:)`), read the one
    /// way agent-eval's MCP tools and `mcp-proxy` read it. A 2026-07-28 result that is not
    /// `complete` — the server asks for input (elicitation, sampling, roots), or answers with an
    /// extension's shape other than a task (which the caller follows) — is an error that says so.
    /// With `isStateless` (the call was made in the 2026-07-28 era, whose client refuses a result
    /// that does not say what it is), a result without `resultType` is not taken as complete.
    public static func outcome(ofCallResult result: JSONValue?, server: String, isStateless: Bool) -> ToolOutcome {
        switch result?["resultType"]?.stringValue {
        case nil where isStateless:
            return .failure(
                "MCP server \"\(server)\" answered tools/call without the resultType a 2026-07-28 result carries: "
                    + "whether it is complete is not said, so it is not taken as an answer")
        case nil, "complete"?:
            return ServedTool.outcome(ofMCPResult: result)
        case "input_required"?:
            let asked = (result?["inputRequests"]?.objectValue.map { Array($0) } ?? []).compactMap { $0.value["method"]?.stringValue }
            return .failure(
                "MCP server \"\(server)\" asked for input before it would answer (\(asked.isEmpty ? "input_required" : asked.joined(separator: ", "))), "
                    + "which agent-eval's MCP tools do not give: the call ends here")
        case let other?:
            return .failure("MCP server \"\(server)\" answered with resultType \"\(other)\", which agent-eval's MCP tools do not follow")
        }
    }

    /// Whether a request's params continue an earlier round (`inputResponses` or `requestState`).
    public static func continues(_ params: JSONValue) -> Bool {
        (params["requestState"].map { $0 != .null } ?? false) || (params["inputResponses"].map { $0 != .null } ?? false)
    }
}
