import AgentRuntime
import Foundation
import ModelClients
import Recording
import Replay
import TestSupport
import TestTags
import Testing
import TraceCore
import TraceLog

/// The gateway's side of `agent-eval mcp-proxy` under `agent-eval record`, driven as a proxy and
/// an agent drive it: real HTTP to a real gateway, the local model server's refund agent as the
/// model, the proxy's operations posted to `/agent-eval/mcp` in the orders that go wrong.
@Suite("the gateway records a proxy's gate into the run", .ownThread)
struct ProxyInRecordTests {
    struct Harness {
        let directory: TemporaryDirectory
        let server: LocalModelServer
        let recorder: ExchangeRecorder
        let gateway: ModelGateway
        let log: String
        var messages: [JSONValue] = [
            ["role": "system", "content": "You are a support agent."], ["role": "user", "content": "Refund A-1042."],
        ]

        init() async throws {
            directory = try TemporaryDirectory()
            server = try LocalModelServer()
            log = directory.path("run.jsonl.gz")
            recorder = ExchangeRecorder(
                logPath: log, runId: "run-proxy", goal: nil, agentName: "agent", command: ["agent"], limits: .init(), keys: nil,
                onStop: { _ in })
            gateway = try await ModelGateway(
                handler: GatewayHandler(
                    upstreams: Upstreams(openAI: server.baseURL("refund")),
                    forwarder: ModelForwarder(transport: ModelTransports.live, limits: RequestLimits(timeoutMs: 30_000)),
                    recorder: recorder))
        }

        /// One model request with the conversation so far; the call the model proposes, if any.
        mutating func ask() async throws -> (id: String, name: String, arguments: String)? {
            let message: JSONValue? = try await gateway.chatMessage(messages)
            guard let call = message?["tool_calls"]?.arrayValue?.first, let id = call["id"]?.stringValue,
                let name = call["function"]?["name"]?.stringValue
            else { return nil }
            let arguments = call["function"]?["arguments"]?.stringValue ?? "{}"
            messages.append([
                "role": "assistant", "content": .null,
                "tool_calls": [
                    ["id": .string(id), "type": "function", "function": ["name": .string(name), "arguments": .string(arguments)]]
                ],
            ])
            return (id, name, arguments)
        }

        /// The agent sends a tool's result back (in its next model request).
        mutating func answer(_ callId: String, _ text: String) {
            messages.append(["role": "tool", "tool_call_id": .string(callId), "content": .string(text)])
        }

        /// One operation of a proxy.
        func proxy(_ operation: JSONValue) async throws -> JSONValue { try await gateway.proxyOperation(operation) }

        func finish() async throws -> [Event] {
            await gateway.stop()
            _ = try recorder.finish(.exited(0))
            var events: [Event] = []
            _ = try LogReader(path: log).forEachEvent { events.append($0.event) }
            return events
        }

        func stop() {
            server.stop()
            directory.remove()
        }
    }

    static func fold(_ events: [Event]) -> RunState {
        var state = RunState()
        for event in events { RunState.reduce(into: &state, event) }
        return state
    }

    @Test("a proxied call is judged as the model's call; what the agent sends back before the proxy's result is not a second result")
    func proxiedCall() async throws {
        var harness = try await Harness()
        defer { harness.stop() }
        let registered = try await harness.proxy(["op": "register", "server": "shop"])
        let proxy = try #require(registered["proxy"])
        #expect(registered["log"]?.stringValue == harness.log)
        let tools: JSONValue = ["op": "tools", "proxy": proxy, "tools": [["name": "lookup_order", "side_effect": "read"]]]
        #expect(try await harness.proxy(tools)["ok"] == true)

        let lookup = try #require(try await harness.ask())
        #expect(lookup.name == "lookup_order")
        let judged = try await harness.proxy([
            "op": "judge", "proxy": proxy, "name": "lookup_order", "arguments": try JSONParser.parse(Array(lookup.arguments.utf8)),
            "params": [:], "waiting": 0,
        ])
        #expect(judged["call_id"]?.stringValue == lookup.id, "the model's call, not one of the proxy's own")
        #expect(judged["judgement"] == "forward")
        let intent: JSONValue = [
            "op": "intend", "proxy": proxy, "call_id": .string(lookup.id), "tool": "lookup_order",
            "arguments": try JSONParser.parse(Array(lookup.arguments.utf8)),
        ]
        #expect(try await harness.proxy(intent)["ok"] == true)
        // The agent gives up on the slow call and tells the model so; then the server answers.
        harness.answer(lookup.id, "Error: timed out")
        let refund = try #require(try await harness.ask())
        #expect(refund.name == "refund_order")
        let completed: JSONValue = [
            "op": "complete", "proxy": proxy, "call_id": .string(lookup.id), "tool": "lookup_order", "status": "ok",
            "output": ["status": "delivered"], "duration_us": 1200,
        ]
        #expect(try await harness.proxy(completed)["ok"] == true)
        #expect(try await harness.proxy(completed)["ok"] == true, "a second report of the same end records nothing")
        // refund_order is not served by the proxy: the gateway records it as any call.
        harness.answer(refund.id, "{\"refund_id\": \"rf-9\"}")
        #expect(try await harness.ask() == nil)

        let events = try await harness.finish()
        let state = Self.fold(events)
        #expect(state.anomalies.isEmpty, "\(state.anomalies.map(\.message))")
        let calls = state.calls.map {
            "\($0.tool) \($0.verdict?.verdict.rawValue ?? "-") \($0.attempts) \($0.results.map(\.status.rawValue))"
        }
        #expect(calls == ["lookup_order allow 1 [\"ok\"]", "refund_order - 1 [\"ok\"]"])
        #expect(state.calls.first?.results.first?.durationUs == 1200, "the proxy's result, not the agent's message")
    }

    @Test("a model call of a proxied tool's name that never reaches the proxy is recorded when its result comes back")
    func unproxiedCallOfProxiedName() async throws {
        var harness = try await Harness()
        defer { harness.stop() }
        let proxy = try #require(try await harness.proxy(["op": "register", "server": "shop"])["proxy"])
        _ = try await harness.proxy(["op": "tools", "proxy": proxy, "tools": [["name": "lookup_order"], ["name": "refund_order"]]])
        let lookup = try #require(try await harness.ask())
        // The proxy's server had failed: the agent ran nothing through it and says so.
        harness.answer(lookup.id, "Error: the MCP server is gone")
        let refund = try #require(try await harness.ask())
        harness.answer(refund.id, "Error: the MCP server is gone")
        #expect(try await harness.ask() == nil)
        let state = Self.fold(try await harness.finish())
        #expect(state.anomalies.isEmpty, "\(state.anomalies.map(\.message))")
        #expect(
            state.calls.map { "\($0.tool) \($0.attempts) \($0.results.map(\.status.rawValue))" } == [
                "lookup_order 1 [\"error\"]", "refund_order 1 [\"error\"]",
            ])
    }

    @Test("a judge's count of waiting calls is a count: a negative one, which would walk around --max-tool-calls, is refused")
    func waitingIsACount() async throws {
        var harness = try await Harness()
        defer { harness.stop() }
        let proxy = try #require(try await harness.proxy(["op": "register", "server": "shop"])["proxy"])
        _ = try await harness.proxy(["op": "tools", "proxy": proxy, "tools": [["name": "lookup_order", "side_effect": "read"]]])
        let call = try #require(try await harness.ask())
        for waiting in [-1_000_000, Int.min, Int.max] {
            let judged = try await harness.proxy([
                "op": "judge", "proxy": proxy, "name": .string(call.name), "arguments": [:], "params": [:], "waiting": .int(waiting),
            ])
            #expect(judged == ["error": .string("judge's waiting must be a count of calls, not \(waiting)")])
        }
        _ = try await harness.finish()
    }

    /// Records the refund agent through a proxy serving both tools under `policy` (YAML); a call
    /// the policy asks a person about is answered `approve`. Returns the log's path.
    static func recordRefund(in directory: TemporaryDirectory, named name: String, policy: String, approve: Bool) async throws -> String {
        var harness = try await Harness()
        defer { harness.stop() }
        let policyPath = directory.path("\(name).policy.yaml")
        try Data(policy.utf8).write(to: URL(fileURLWithPath: policyPath))
        let proxy = try #require(try await harness.proxy(["op": "register", "server": "shop", "policy": .string(policyPath)])["proxy"])
        _ = try await harness.proxy([
            "op": "tools", "proxy": proxy,
            "tools": [["name": "lookup_order", "side_effect": "read"], ["name": "refund_order", "side_effect": "write"]],
        ])
        while let call = try await harness.ask() {
            let arguments = try JSONParser.parse(Array(call.arguments.utf8))
            let judged = try await harness.proxy([
                "op": "judge", "proxy": proxy, "name": .string(call.name), "arguments": arguments, "params": [:], "waiting": 0,
            ])
            var runs = judged["judgement"] == "forward"
            if judged["judgement"] == "ask" {
                _ = try await harness.proxy([
                    "op": "settle", "proxy": proxy, "call_id": .string(call.id), "granted": .bool(approve), "approver": "ana",
                ])
                runs = approve
            }
            guard runs else {
                harness.answer(call.id, "Error: refused by the proxy's policy")
                continue
            }
            _ = try await harness.proxy([
                "op": "intend", "proxy": proxy, "call_id": .string(call.id), "tool": .string(call.name), "arguments": arguments,
            ])
            _ = try await harness.proxy([
                "op": "complete", "proxy": proxy, "call_id": .string(call.id), "tool": .string(call.name), "status": "ok",
                "output": ["done": true], "duration_us": 100,
            ])
            harness.answer(call.id, "{\"done\": true}")
        }
        _ = try await harness.finish()
        let kept = directory.path("\(name).jsonl.gz")
        try FileManager.default.copyItem(atPath: harness.log, toPath: kept)
        return kept
    }

    @Test("diff of two proxied runs says where one's refund ran and the other's was refused, by policy or by a person")
    func diffOfProxiedRuns() async throws {
        try await TemporaryDirectory.with { directory in
            let allowAll = "policy:\n  name: open\n  default: allow\n"
            let denyRefunds = allowAll + "  rules:\n    - id: no-refunds\n      when: {tool: refund_order}\n      verdict: deny\n"
            let askRefunds =
                allowAll + "  rules:\n    - id: refunds-need-a-person\n      when: {tool: refund_order}\n      verdict: approval_required\n"
            let ran = try await Self.recordRefund(in: directory, named: "ran", policy: allowAll, approve: true)
            let denied = try await Self.recordRefund(in: directory, named: "denied", policy: denyRefunds, approve: true)
            let granted = try await Self.recordRefund(in: directory, named: "granted", policy: askRefunds, approve: true)
            let refused = try await Self.recordRefund(in: directory, named: "refused", policy: askRefunds, approve: false)

            let byPolicy = try TrajectoryDiff.compare(left: ran, right: denied)
            let first = try #require(byPolicy.first, "a refund that ran and one the policy refused are not the same run")
            #expect(first.path.hasSuffix("refund_order verdict") && first.left == "allow" && first.right == "deny", "\(first)")
            #expect(try TrajectoryDiff.compare(left: ran, right: ran).isSame)

            let byPerson = try TrajectoryDiff.compare(left: granted, right: refused)
            let answered = try #require(byPerson.first, "a refund a person granted and one a person refused are not the same run")
            #expect(answered.path.contains("refund_order"), "\(answered)")
            #expect(byPerson.rows.contains { row in !row.isSame && row.left?.calls.contains { $0.tool == "refund_order" } == true })
        }
    }

    @Test("a proxy whose policy file does not read is refused at registration, saying which file")
    func badPolicy() async throws {
        let harness = try await Harness()
        defer { harness.stop() }
        let answer = try await harness.proxy(["op": "register", "policy": "/nonexistent/policy.yaml"])
        #expect(answer["error"]?.stringValue?.contains("/nonexistent/policy.yaml") == true, "\(answer)")
        let unknown = try await harness.proxy(["op": "judge", "proxy": 7, "name": "x"])
        #expect(unknown["error"]?.stringValue?.contains("knows no proxy 7") == true, "\(unknown)")
    }
}
