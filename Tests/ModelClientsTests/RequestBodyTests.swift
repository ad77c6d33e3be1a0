import AgentRuntime
import Testing
import TraceCore

@testable import ModelClients

@Suite("What a request shows the model of earlier tool results")
struct RequestBodyTests {
    static let observations = [
        Observation(
            callId: "call-1", tool: "lookup_order", step: 1, arguments: ["order_id": "A-1042"], status: "ok",
            output: ["total_cents": 4999, "note": "Lieferung \"beschädigt\"\n", "items": [1.5, -2]], error: nil),
        Observation(
            callId: "call-2", tool: "refund_order", step: 2, arguments: ["order_id": "A-1042"], status: "error", output: nil,
            error: "the service timed out"),
    ]

    /// Every string under a `content` key, anywhere in `body`.
    static func contents(_ body: JSONValue) -> [String] {
        switch body {
        case .object(let object):
            object.flatMap { member -> [String] in
                if member.key == "content", let text = member.value.stringValue { return [text] }
                return contents(member.value)
            }
        case .array(let items): items.flatMap(contents)
        default: []
        }
    }

    @Test(
        "each result reaches the model as canonical JSON of its error, output and status, the output as the log holds it",
        arguments: [ModelSettings.Provider.openai, .anthropic])
    func toolResults(provider: ModelSettings.Provider) {
        let request = ModelRequest(
            instructions: "Be brief.", packet: ContextBuilt(goal: "Refund order A-1042.", stateSummary: "step 3", tokenEstimate: 40),
            tools: [], observations: Self.observations, feedback: nil, decisionIndex: 2, step: 3)
        let client = HTTPModelClient(
            settings: ModelSettings(provider: provider, name: "local-model", baseURL: "http://127.0.0.1:9"), transport: HTTPTransport(),
            apiKey: nil, limiter: nil, sleep: { _ in })
        let contents = Self.contents(client.requestBody(for: request))
        #expect(contents.contains(#"{"output":{"items":[1.5,-2],"note":"Lieferung \"beschädigt\"\n","total_cents":4999},"status":"ok"}"#))
        #expect(contents.contains(#"{"error":"the service timed out","status":"error"}"#))
    }
}
