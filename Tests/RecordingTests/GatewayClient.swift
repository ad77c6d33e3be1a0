import AgentRuntime
import ModelClients
import Recording
import TraceCore

/// What a test's agent does through a gateway: ask its model (Chat Completions, whole answers)
/// and post an `agent-eval mcp-proxy` operation.
extension ModelGateway {
    /// The assistant message the model answers `messages` with; `headers` are sent besides the
    /// content type.
    func chatMessage(_ messages: [JSONValue], headers: [HTTPHeader] = []) async throws -> JSONValue {
        var body: [UInt8] = []
        try await ModelTransports.live.exchange(
            TransportRequest(
                url: openAIBaseURL + "/chat/completions", headers: [HTTPHeader(name: "content-type", value: "application/json")] + headers,
                body: JSONWriter.encode(["model": "gpt-test", "messages": .array(messages)] as JSONValue),
                limits: RequestLimits(timeoutMs: 30_000))
        ) { parts in
            for case .chunk(let bytes) in parts { body += bytes }
        }
        return try JSONParser.parse(body)["choices"]?.arrayValue?.first?["message"] ?? .null
    }

    /// Asks for a streamed answer and reads it as a streaming SDK does: up to the `[DONE]` end
    /// marker, then closes the connection without waiting for the end of the HTTP body. The
    /// assistant message assembled from the chunks read.
    func streamedChatMessageToDone(_ messages: [JSONValue]) async throws -> JSONValue {
        struct SawDone: Error {}
        var text: [UInt8] = []
        do {
            try await ModelTransports.live.exchange(
                TransportRequest(
                    url: openAIBaseURL + "/chat/completions", headers: [HTTPHeader(name: "content-type", value: "application/json")],
                    body: JSONWriter.encode(["model": "gpt-test", "stream": true, "messages": .array(messages)] as JSONValue),
                    limits: RequestLimits(timeoutMs: 30_000))
            ) { parts in
                for case .chunk(let bytes) in parts { text += bytes }
                if String(decoding: text, as: UTF8.self).contains("data: [DONE]\n\n") { throw SawDone() }
            }
        } catch is SawDone {}
        var content = ""
        var call: (id: String, name: String, arguments: String)?
        for line in String(decoding: text, as: UTF8.self).split(separator: "\n") where line.hasPrefix("data: {") {
            let chunk = try JSONParser.parse(Array(line.dropFirst(6).utf8))
            guard let delta = chunk["choices"]?.arrayValue?.first?["delta"] else { continue }
            content += delta["content"]?.stringValue ?? ""
            if let piece = delta["tool_calls"]?.arrayValue?.first {
                var current = call ?? ("", "", "")
                if let id = piece["id"]?.stringValue { current.id = id }
                if let name = piece["function"]?["name"]?.stringValue { current.name = name }
                current.arguments += piece["function"]?["arguments"]?.stringValue ?? ""
                call = current
            }
        }
        guard let call else { return ["role": "assistant", "content": .string(content)] }
        return [
            "role": "assistant", "content": .null,
            "tool_calls": [
                [
                    "id": .string(call.id), "type": "function",
                    "function": ["name": .string(call.name), "arguments": .string(call.arguments)],
                ]
            ],
        ]
    }

    /// One operation of a proxy, and the gateway's answer.
    func proxyOperation(_ operation: JSONValue) async throws -> JSONValue {
        let response = try await HTTPPoster(maxRetries: 0).post(JSONWriter.encode(operation), to: proxyURL)
        return try JSONParser.parse(response.body)
    }
}
