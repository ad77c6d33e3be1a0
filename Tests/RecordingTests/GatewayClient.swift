import AgentRuntime
import ModelClients
import Recording
import TraceCore

/// What a test's agent does through a gateway: ask its model (Chat Completions, whole answers)
/// and post an `agent-eval mcp-proxy` operation.
extension ModelGateway {
    /// The assistant message the model answers `messages` with.
    func chatMessage(_ messages: [JSONValue]) async throws -> JSONValue {
        var body: [UInt8] = []
        try await ModelTransports.live.exchange(
            TransportRequest(
                url: openAIBaseURL + "/chat/completions", headers: [HTTPHeader(name: "content-type", value: "application/json")],
                body: JSONWriter.encode(["model": "gpt-test", "messages": .array(messages)] as JSONValue),
                limits: RequestLimits(timeoutMs: 30_000))
        ) { parts in
            for case .chunk(let bytes) in parts { body += bytes }
        }
        return try JSONParser.parse(body)["choices"]?.arrayValue?.first?["message"] ?? .null
    }

    /// One operation of a proxy, and the gateway's answer.
    func proxyOperation(_ operation: JSONValue) async throws -> JSONValue {
        let response = try await HTTPPoster(maxRetries: 0).post(JSONWriter.encode(operation), to: proxyURL)
        return try JSONParser.parse(response.body)
    }
}
