import AgentRuntime
import TraceCore

/// The MCP proxies that record their gates into a run `agent-eval record` writes
/// (`ExchangeRecorder+Proxy`), as a value of its own.
struct ProxyRoster {
    /// The MCP proxies recording their gates into this run (`agent-eval mcp-proxy` under
    /// `record`), by number, and the tools they serve: the gateway leaves those tools'
    /// intents and results to the proxy, which sees them as they happen.
    var proxies: [Int: ProxyGate] = [:]
    var proxiedTools: Set<String> = []
    /// Calls a proxy judged (by log id): their results come from the proxy, not from the
    /// next request, and a model call is matched to one proxy call only.
    var proxiedCalls: Set<String> = []
    /// Calls a proxy made that no model decision proposed (`mcp-N`).
    var unproposedCalls = 0
    /// Requests the proxies' servers sent their clients before the run began: stored once it does.
    var earlyServerRequests: [[UInt8]] = []

    /// The log id of a call a proxy judged: the model's call it matched (`proposed`), else the
    /// next `mcp-N`; either is the proxy's from now on.
    mutating func judgedCall(proposed: String?) -> String {
        let callId: String
        if let proposed {
            callId = proposed
        } else {
            unproposedCalls += 1
            callId = "mcp-\(unproposedCalls)"
        }
        proxiedCalls.insert(callId)
        return callId
    }
}
