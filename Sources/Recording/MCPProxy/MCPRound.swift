import AgentRuntime
import TraceCore

extension ServerInfo {
    /// Who a 2026-07-28 server says it is in a result's `_meta` (`MCPEra.serverInfo(of:)`),
    /// `name` when it does not say.
    init(result: JSONValue, name: String, protocolVersion: String?) {
        let info = MCPEra.serverInfo(of: result)
        self.init(name: info?.name ?? name, version: info?.version ?? "", protocolVersion: protocolVersion)
    }
}

/// One round of a multi-round call as the log keeps it (`content_stored`, media type
/// `ProxyGate.roundMediaType`): the server's `input_required` answer, or the client's retry,
/// whole as it passed — `inputRequests`, `inputResponses` and `requestState` (its string exactly
/// as sent) — with the call it belongs to and its round (the first request is round 1; the
/// server's answer to round N, and the client's retry that makes round N + 1).
struct MCPRound {
    /// The most rounds a call may take through the proxy: the server asking for input an eighth
    /// time ends the call with an error.
    static let limit = 8

    var callId: String
    var round: Int
    /// `server` (its answer asked for input) or `client` (its retry).
    var from: String
    var message: JSONValue

    var bytes: [UInt8] {
        JSONWriter.encode(["call_id": .string(callId), "round": .int(round), "from": .string(from), "message": message] as JSONValue)
    }
}
