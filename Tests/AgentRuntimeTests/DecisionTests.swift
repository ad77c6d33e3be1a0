import AgentRuntime
import Foundation
import Synchronization
import TestSupport
import Testing
import TraceCore

@Suite("Typed decisions and invalid model output")
struct DecisionTests {
    let parser: DecisionParser

    init() throws {
        let refund = try Tool(
            spec: ToolSpec(
                name: "refund", description: "",
                inputSchema: ["type": "object", "required": ["amount"], "properties": ["amount": ["type": "integer", "minimum": 1]]],
                sideEffect: .write),
            host: ClosureToolHost { _ in nil })
        parser = DecisionParser(tools: ToolRegistry([refund]))
    }

    @Test(
        "valid replies parse into typed decisions, with runtime-assigned call ids",
        arguments: [
            (#"{"answer": "Done."}"#, Decision.answer("Done.")),
            (#"{"ask_human": "Which order?"}"#, .askHuman("Which order?")),
            (#"{"stop": "out of scope"}"#, .stop(reason: "out of scope")),
            (#"{"stop": {"reason": "out of scope"}}"#, .stop(reason: "out of scope")),
            (
                #"{"tool_calls": [{"name": "refund", "arguments": {"amount": 5}}, {"name": "refund", "arguments": {"amount": 6}}]}"#,
                .toolCalls([
                    ToolCall(id: "call-7", name: "refund", arguments: ["amount": 5]),
                    ToolCall(id: "call-8", name: "refund", arguments: ["amount": 6]),
                ])
            ),
            ("```json\n{\"answer\": \"fenced\"}\n```", .answer("fenced")),
        ])
    func valid(_ raw: String, _ expected: Decision) {
        #expect(parser.parse(raw, nextCallNumber: 7) == .valid(expected))
    }

    @Test(
        "every kind of invalid reply is rejected with a precise message",
        arguments: [
            (
                "Sure! I'll refund it.", InvalidDecisionKind.unparseable,
                #"the reply is not JSON (invalid JSON at byte 0: expected a value, found 'S'): "Sure! I'll refund it.""#
            ),
            ("[1, 2]", .unparseable, "the reply must be a JSON object, found an array"),
            (#"{"answr": "x"}"#, .unparseable, #"the reply has none of "answer", "tool_calls", "ask_human", "stop" (it has "answr")"#),
            (#"{"answer": "x", "note": 1}"#, .unparseable, #"the reply has an unexpected member "note" beside "answer""#),
            (
                #"{"tool_calls": [{"name": "delete_all"}]}"#, .unknownTool,
                #"tool_calls[0] calls "delete_all", which is not a tool of this agent (tools: "refund")"#
            ),
            (
                #"{"tool_calls": [{"name": "refund", "arguments": {"amount": "5"}}]}"#, .invalidArguments,
                #"tool_calls[0] (refund): arguments.amount must be an integer, found a string ("5")"#
            ),
            (
                #"{"tool_calls": [{"name": "refund", "arguments": {}}]}"#, .invalidArguments,
                #"tool_calls[0] (refund): arguments is missing the required field "amount""#
            ),
            (
                #"{"tool_calls": [{"name": "refund", "arguments": {"amount": 0}}]}"#, .invalidArguments,
                "tool_calls[0] (refund): arguments.amount must be at least 1, found an integer (0)"
            ),
            ("", .empty, "the reply is empty"),
            ("  \n", .empty, "the reply is empty"),
            ("{}", .empty, "the reply is an empty object"),
            (#"{"tool_calls": []}"#, .empty, #""tool_calls" is an empty list"#),
            (#"{"answer": "  "}"#, .empty, #""answer" is empty"#),
            (
                #"{"answer": "Done.", "tool_calls": [{"name": "refund", "arguments": {"amount": 1}}]}"#, .contradictory,
                #"the reply has "answer" and "tool_calls"; a decision is exactly one of them"#
            ),
        ])
    func invalid(_ raw: String, _ kind: InvalidDecisionKind, _ message: String) {
        #expect(parser.parse(raw, nextCallNumber: 1) == .invalid(InvalidDecision(kind: kind, message: message)))
    }

    @Test("a rejected reply is recorded, and the model is asked again with the reason, up to the configured number of times")
    func retriesWithFeedback() async throws {
        let feedback = Mutex<[String?]>([])
        let replies = [raw("not json"), ModelReply(decision: ["tool_calls": [["name": "nope"]]]), answer("fine")]
        let model = ClosureModel { request in
            feedback.withLock { $0.append(request.feedback) }
            return replies[request.decisionIndex]
        }
        try await TemporaryDirectory.with { directory in
            var agent = makeAgent(tools: [try echoTool()], handling: FailureHandling(invalidDecisionRetries: 2))
            agent.model = model
            let (outcome, folded, events) = try await record(agent, in: directory)
            #expect(outcome.stop.reason == .success)
            #expect(folded.invalidDecisionCount == 2)
            // All three decisions belong to one step, with one context packet.
            #expect(Set(folded.decisions.map(\.step)) == [1])
            #expect(events.filter { $0.kind == "context_built" }.count == 1)
            let seen = feedback.withLock { $0 }
            #expect(seen.count == 3)
            #expect(seen[0] == nil)
            #expect(seen[1]?.hasPrefix("Your reply was rejected (unparseable): the reply is not JSON") == true)
            #expect(seen[2]?.hasPrefix("Your reply was rejected (unknown_tool)") == true)
        }
    }

    @Test("with no retries left the run stops with invalid_decision and says why")
    func givesUp() async throws {
        try await TemporaryDirectory.with { directory in
            let agent = makeAgent(
                decisions: [raw("a"), ModelReply(decision: ["answer": "x", "stop": "y"])], tools: [try echoTool()],
                handling: FailureHandling(invalidDecisionRetries: 1))
            let (outcome, _, _) = try await record(agent, in: directory)
            #expect(outcome.stop.reason == .invalidDecision)
            #expect(
                outcome.stop.error
                    == #"the model's reply was rejected 2 times in a row; last: the reply has "answer" and "stop"; a decision is exactly one of them"#
            )
        }
    }

    @Test("a script's replies that its agent would reject are found before a run: unknown tools unless servers may add them")
    func rejectedScriptReplies() throws {
        let lookup = try tool("lookup", schema: ["type": "object", "required": ["id"]]) { _ in .ok([:]) }
        let script = ScriptedModel(
            name: "s", decisions: [calls(("lookpu", [:])), calls(("lookup", [:])), calls(("lookup", ["id": "a"])), raw("not json")],
            rules: [ScriptedModel.Rule(reply: calls(("lookup", ["x": 1])))])
        let tools = ToolRegistry([lookup])
        let rejected = script.rejectedReplies(tools: tools, toolsMayJoin: false)
        #expect(rejected.map(\.place) == ["decisions[0]", "decisions[1]", "rules[0].reply"])
        #expect(rejected.map(\.invalid.kind) == [.unknownTool, .invalidArguments, .invalidArguments])
        #expect(rejected.allSatisfy { $0.location == nil })
        // With MCP servers still to start, an unknown name may be one of theirs.
        #expect(script.rejectedReplies(tools: tools, toolsMayJoin: true).map(\.place) == ["decisions[1]", "rules[0].reply"])
    }
}
