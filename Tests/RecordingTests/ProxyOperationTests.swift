import AgentRuntime
import Testing
import TraceCore

@testable import Recording

/// The proxy's operations on `agent-eval record`'s gateway: one definition that the proxy
/// encodes and the recorder decodes, so the two sides cannot drift apart.
@Suite("Proxy operations")
struct ProxyOperationTests {
    static let operations: [ProxyOperation] = [
        .register(
            .init(policy: "/p/policy.yaml", actor: "support", route: "web", maxToolCalls: 3, preApproved: ["get_*"], server: "shop")),
        .register(.init(server: "server")),
        .tools(
            proxy: 1,
            [ServedTool(name: "refund", description: "Refund an order", inputSchema: ["type": "object"], sideEffect: .write)]),
        .judge(proxy: 2, name: "refund", arguments: ["order": "A-1"], params: ["name": "refund"], waiting: 1),
        .intend(proxy: 1, callId: "call_1", tool: "refund", arguments: ["order": "A-1"]),
        .settle(proxy: 1, callId: "call_1", answer: .init(isGranted: false, approver: "ana", reason: "not today")),
        .settle(proxy: 1, callId: "call_2", answer: .init(isGranted: true)),
        .complete(proxy: 1, callId: "call_1", tool: "refund", status: .ok, output: ["ok": true], error: nil, durationUs: 1_200),
        .complete(proxy: 1, callId: "call_3", tool: "refund", status: .error, output: nil, error: "no such order", durationUs: 0),
        .judge(
            proxy: 2, name: "refund", arguments: [:], params: ["name": "refund", "requestState": "s"], waiting: 0,
            refusal: PolicyDecision(.deny, reason: "continues no call", rule: "mcp.continuation")),
        .store(proxy: 3, message: Array(#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage"}"#.utf8)),
        .store(proxy: 3, message: Array(#"{"call_id":"mcp-1","round":1}"#.utf8), mediaType: ProxyGate.roundMediaType),
        // A client's line that is not UTF-8 (refused, kept as it came): byte for byte, not U+FFFD.
        .store(proxy: 3, message: [0x7B, 0x22, 0xFF, 0xFE, 0x22, 0x7D, 0xC3], mediaType: ProxyGate.unreadableMediaType),
    ]

    @Test("every operation reads back from its JSON as it was sent")
    func roundTrip() throws {
        for operation in Self.operations {
            // Through the JSON text the gateway's HTTP body is, as the proxy sends it.
            let body = JSONWriter.encode(operation.json)
            #expect(try ProxyOperation(json: JSONParser.parse(body)) == operation, "\(String(decoding: body, as: UTF8.self))")
        }
    }

    @Test("a body that is not an operation is refused with a sentence naming what is missing")
    func refusals() {
        let cases: [(JSONValue, String)] = [
            (["op": "judge", "name": "refund"], "agent-eval record's gateway knows no proxy null"),
            (["op": "judge", "proxy": 1], "judge needs name"),
            (["op": "intend", "proxy": 1, "call_id": "c"], "intend needs tool"),
            (["op": "settle", "proxy": 1, "call_id": "c"], "settle needs granted"),
            (
                ["op": "complete", "proxy": 1, "call_id": "c", "tool": "t", "status": "fine"],
                "complete needs status (ok, refused or error)"
            ),
            (["op": "forget", "proxy": 1], "agent-eval record's gateway does not know the proxy operation \"forget\""),
            (["op": "store", "proxy": 1, "message_base64": "not base64!"], "store's message_base64 is not base64"),
            (["op": "store", "proxy": 1], "store needs message or message_base64"),
        ]
        for (body, message) in cases {
            #expect(throws: ProxyOperation.Refused(message: message)) { try ProxyOperation(json: body) }
        }
    }
}

@Suite("The proxy's forwarded calls")
struct ProxyForwardedCallTests {
    @Test("a 2025-11-25 client's task augmentation is taken off a call before the server sees it, so the result comes back whole")
    func taskAugmentationTakenOff() throws {
        let asked = Array(
            #"{"jsonrpc":"2.0","id":6,"method":"tools/call","params":{"arguments":{"name":"cy"},"name":"greet","task":{"ttl":60000}}}"#.utf8
        )
        let sent = try JSONParser.parse(MCPProxySession.withoutTaskAugmentation(asked))
        #expect(sent["params"]?["task"] == nil)
        #expect(sent["params"]?["name"] == "greet" && sent["params"]?["arguments"] == ["name": "cy"] && sent["id"] == 6)
        // A call without one is sent byte for byte as it came.
        let plain = Array(#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"greet", "arguments":{}}}"#.utf8)
        #expect(MCPProxySession.withoutTaskAugmentation(plain) == plain)
    }
}
