import ModelClients
import Testing
import TraceCore

@testable import Recording

/// What a fork of a recorded run sends the model past its fork point (`RecordedFork`): a replaced
/// result where each of the three APIs carries it back, and the model; the rest as it was.
@Suite struct RecordedForkRewriteTests {
    static let results: [String: (text: String, isError: Bool)] = ["call_1": (#"{"status":"lost"}"#, false), "toolu_2": ("down", true)]

    @Test func chatToolMessages() {
        let body: JSONValue = [
            "model": "gpt-4o-mini",
            "messages": [
                ["role": "user", "content": "where is A-1?"],
                ["role": "assistant", "content": .null, "tool_calls": [["id": "call_1", "type": "function"]]],
                ["role": "tool", "tool_call_id": "call_1", "content": #"{"status":"shipped"}"#],
                ["role": "tool", "tool_call_id": "call_9", "content": "untouched"],
            ],
        ]
        let rewritten = RecordedFork.rewritten(body, api: .openAIChat, results: Self.results, model: "gpt-5")
        let sent = rewritten?.body
        #expect(sent?["model"] == "gpt-5")
        #expect(rewritten?.shown == ["call_1"])
        #expect(sent?["messages"]?.arrayValue?[2]["content"] == #"{"status":"lost"}"#)
        #expect(sent?["messages"]?.arrayValue?[3] == body["messages"]?.arrayValue?[3])
        #expect(sent?["messages"]?.arrayValue?[0] == body["messages"]?.arrayValue?[0])
    }

    @Test func responsesFunctionCallOutputs() {
        let body: JSONValue = [
            "model": "gpt-4o-mini",
            "input": [
                ["role": "user", "content": "where is A-1?"], ["type": "function_call", "call_id": "call_1", "name": "lookup"],
                ["type": "function_call_output", "call_id": "call_1", "output": "shipped"],
            ],
        ]
        let rewritten = RecordedFork.rewritten(body, api: .openAIResponses, results: Self.results, model: nil)
        let sent = rewritten?.body
        #expect(sent?["input"]?.arrayValue?[2]["output"] == #"{"status":"lost"}"#)
        #expect(sent?["model"] == "gpt-4o-mini")
    }

    @Test func anthropicToolResultBlocksAndErrors() {
        let body: JSONValue = [
            "model": "claude-x",
            "messages": [
                ["role": "user", "content": "refund A-1"],
                ["role": "assistant", "content": [["type": "tool_use", "id": "toolu_2", "name": "refund", "input": [:]]]],
                [
                    "role": "user",
                    "content": [["type": "tool_result", "tool_use_id": "toolu_2", "content": "ok"], ["type": "text", "text": "go on"]],
                ],
            ],
        ]
        let rewritten = RecordedFork.rewritten(body, api: .anthropicMessages, results: Self.results, model: nil)
        let sent = rewritten?.body
        #expect(
            sent?["messages"]?.arrayValue?[2]["content"]?.arrayValue?[0] == [
                "type": "tool_result", "tool_use_id": "toolu_2", "content": "down", "is_error": true,
            ])
        #expect(sent?["messages"]?.arrayValue?[2]["content"]?.arrayValue?[1] == ["type": "text", "text": "go on"])
        #expect(rewritten?.shown == ["toolu_2"])
    }

    @Test func aFailureOnOpenAIIsShownAsAnErrorObject() {
        let body: JSONValue = ["model": "m", "messages": [["role": "tool", "tool_call_id": "toolu_2", "content": "ok"]]]
        let sent = RecordedFork.rewritten(body, api: .openAIChat, results: Self.results, model: nil)?.body
        #expect(sent?["messages"]?.arrayValue?[0]["content"] == #"{"error":"down"}"#)
    }

    @Test func aRequestNoEditTouchesIsSentAsItIs() {
        let body: JSONValue = ["model": "gpt-4o-mini", "messages": [["role": "user", "content": "hello"]]]
        #expect(RecordedFork.rewritten(body, api: .openAIChat, results: Self.results, model: nil)?.body == nil)
        #expect(RecordedFork.rewritten(body, api: .openAIChat, results: [:], model: "gpt-4o-mini")?.body == nil)
    }
}
