import TraceCore

/// What the proxy reads of MCP's two eras (docs/mcp.md, "Protocol eras"): the 2025 era, whose
/// connections begin with `initialize`, and the stateless 2026-07-28 revision, whose every request
/// carries its protocol version, client and capabilities in `params._meta` (the envelope), whose
/// results carry `resultType`, and whose `tools/call` may answer `input_required` and be retried
/// by the client with `inputResponses` and the server's `requestState` (a multi-round call).
enum MCPEra {
    static let protocolVersionKey = "io.modelcontextprotocol/protocolVersion"
    static let clientInfoKey = "io.modelcontextprotocol/clientInfo"
    static let serverInfoKey = "io.modelcontextprotocol/serverInfo"
    /// The most rounds a multi-round call may take through the proxy: the server asking for
    /// input an eighth time ends the call with an error.
    static let roundLimit = 8

    /// A request's envelope: its `_meta` when it names a protocol version (a 2026-07-28 request);
    /// nil for a 2025-era request.
    static func envelope(of params: JSONValue?) -> JSONValue? {
        guard let meta = params?["_meta"], meta[protocolVersionKey]?.stringValue != nil else { return nil }
        return meta
    }

    /// Whether a result asks the client for input before the request can complete.
    static func asksForInput(_ result: JSONValue?) -> Bool {
        result?["resultType"]?.stringValue == "input_required"
    }

    /// Whether a request's params continue an earlier round (`inputResponses` or `requestState`).
    static func continues(_ params: JSONValue) -> Bool {
        (params["requestState"].map { $0 != .null } ?? false) || (params["inputResponses"].map { $0 != .null } ?? false)
    }

    /// Who a 2026-07-28 server says it is, from a result's `_meta`.
    static func serverInfo(of result: JSONValue, name: String, protocolVersion: String?) -> ServerInfo {
        let info = result["_meta"]?[serverInfoKey]
        return ServerInfo(
            name: info?["name"]?.stringValue ?? name, version: info?["version"]?.stringValue ?? "", protocolVersion: protocolVersion)
    }
}

/// One round of a multi-round call as the log keeps it (`content_stored`, media type
/// `ProxyGate.roundMediaType`): the server's `input_required` answer, or the client's retry,
/// whole as it passed — `inputRequests`, `inputResponses` and `requestState` (its string exactly
/// as sent) — with the call it belongs to and its round (the first request is round 1; the
/// server's answer to round N, and the client's retry that makes round N + 1).
struct MCPRound {
    var callId: String
    var round: Int
    /// `server` (its answer asked for input) or `client` (its retry).
    var from: String
    var message: JSONValue

    var bytes: [UInt8] {
        JSONWriter.encode(["call_id": .string(callId), "round": .int(round), "from": .string(from), "message": message] as JSONValue)
    }
}
