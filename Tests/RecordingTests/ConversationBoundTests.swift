import AgentRuntime
import Foundation
import ModelClients
import Recording
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// The gateway's bookkeeping of conversations stays bounded over a long run: past
/// `maxConversations` (1,024 by default; 8 here), the one answered longest ago with no call open
/// is forgotten, and one answered lately is still continued.
@Suite("the gateway's conversations over a long run", .ownThread)
struct ConversationBoundTests {
    /// A Chat Completions request of the conversation opened by `user`, with `extra` messages
    /// after the two tool exchanges the local server answers with text.
    static func body(user: String, extra: [JSONValue] = []) -> [UInt8] {
        let exchange: (String, String) -> [JSONValue] = { id, tool in
            [
                [
                    "role": "assistant", "content": .null,
                    "tool_calls": [["id": .string(id), "type": "function", "function": ["name": .string(tool), "arguments": "{}"]]],
                ],
                ["role": "tool", "tool_call_id": .string(id), "content": "{\"ok\": true}"],
            ]
        }
        let messages: [JSONValue] =
            [["role": "system", "content": "You are a support agent."], ["role": "user", "content": .string(user)]]
            + exchange("call_a", "lookup_order") + exchange("call_b", "refund_order") + extra
        return JSONWriter.encode(["model": "gpt-test", "messages": .array(messages)] as JSONValue)
    }

    @Test("past the bound the oldest finished conversation is forgotten; a recent one is still continued")
    func boundedConversations() async throws {
        let directory = try TemporaryDirectory()
        defer { directory.remove() }
        let server = try LocalModelServer()
        defer { server.stop() }
        let log = directory.path("run.jsonl.gz")
        let recorder = ExchangeRecorder(
            logPath: log, runId: "run-bound", goal: nil, agentName: "bound", command: ["bound"], limits: .init(), keys: nil,
            maxConversations: 8, onStop: { _ in })
        let gateway = try await ModelGateway(
            handler: GatewayHandler(
                upstreams: Upstreams(openAI: server.baseURL("refund")),
                forwarder: ModelForwarder(transport: ModelTransports.live, limits: RequestLimits(timeoutMs: 30_000)),
                recorder: recorder))
        let limits = RequestLimits(timeoutMs: 30_000)
        func send(_ body: [UInt8]) async throws {
            var status = 0
            try await ModelTransports.live.exchange(
                TransportRequest(
                    url: gateway.openAIBaseURL + "/chat/completions",
                    headers: [HTTPHeader(name: "content-type", value: "application/json")],
                    body: body, limits: limits)
            ) { parts in
                for case .head(let code, _) in parts { status = code }
            }
            #expect(status == 200)
        }
        let count = 8 + 6
        for index in 1...count { try await send(Self.body(user: "Order \(index)")) }
        let more: [JSONValue] = [["role": "assistant", "content": "Done."], ["role": "user", "content": "Thanks."]]
        // The first conversation was forgotten: its continuation starts a new one.
        try await send(Self.body(user: "Order 1", extra: more))
        // The last one is kept: its continuation is its second request.
        try await send(Self.body(user: "Order \(count)", extra: more))
        await gateway.stop()
        let stop = try recorder.finish(.exited(0))
        #expect(stop.reason == .success)

        var summaries: [String] = []
        _ = try LogReader(path: log).forEachEvent { record in
            if case .contextBuilt(let packet) = record.event.payload { summaries.append(packet.stateSummary) }
        }
        #expect(summaries.count == count + 2)
        #expect(summaries[count].hasPrefix("conversation \(count + 1), request 1:"), "\(summaries[count])")
        #expect(summaries[count + 1].hasPrefix("conversation \(count), request 2:"), "\(summaries[count + 1])")
    }
}
